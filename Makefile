# Entry points for users and CI. Everything runs in a local virtualenv.
#
#   make test        set up (if needed) and run the test suite
#   make eval        set up (if needed) and run the evaluation job
#   make test-slow   long-running tests (learning curves, benchmarks)
#   make meta-train  set up (if needed) and run meta-training
#   make bench-eval  Disco103 learning curves on Catch for 3 seeds (~1 h on 2 CPUs)
#   make bench-meta-train  meta-training from random parameters (800 steps)
#   make bench-loops step-per-call vs fused loops, side by side (~15 min)
#   make bench-minatar Disco103 vs actor-critic on the MinAtar games (hours)
#   make bench-meta-window meta-gradient windows K=2,5,20: speed and memory
#   make bench-meta-suite a rule meta-trained on a task suite, on held-out envs
#   make weights     download and verify the Disco103 weights
#
# Extra arguments: make eval ARGS='--flag=value', make test PYTEST_ARGS='-k x',
# make test TEST_WORKERS=1 (pytest-xdist processes; 0: none).
# XLA_FLAGS from the environment is ignored by the test targets (it changes
# the number of devices); to set it, pass it on the command line:
#   make test XLA_FLAGS=--xla_force_host_platform_device_count=2

PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
PIP_FLAGS ?= --quiet --disable-pip-version-check
ARGS ?=
PYTEST_ARGS ?=
# Test processes (pytest-xdist), each test file in one of them: compiling is
# mostly single-threaded, so two processes keep two cores busy.
TEST_WORKERS ?= 2

# Stamp written after a successful install; redone when pyproject.toml changes.
STAMP := $(VENV)/.disco_rl-installed

ifeq ($(origin XLA_FLAGS),command line)
TEST_ENV := XLA_FLAGS='$(XLA_FLAGS)'
else
TEST_ENV := -u XLA_FLAGS
endif

.PHONY: setup test test-slow eval meta-train weights bench-eval bench-meta-train bench-loops bench-minatar bench-meta-window bench-meta-suite

$(STAMP): pyproject.toml
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install $(PIP_FLAGS) -e '.[test]'
	touch $@

setup:
	rm -f $(STAMP)
	$(MAKE) --no-print-directory $(STAMP)

test: $(STAMP)
	env $(TEST_ENV) $(VPY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

test-slow: $(STAMP)
	env $(TEST_ENV) $(VPY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m slow $(PYTEST_ARGS)

eval: $(STAMP)
	$(VPY) -m disco_rl.examples.eval $(ARGS)

meta-train: $(STAMP)
	$(VPY) -m disco_rl.examples.meta_train $(ARGS)

weights: $(STAMP)
	$(VPY) -m disco_rl.weights $(ARGS)

bench-eval: $(STAMP)
	$(VPY) scripts/benchmark_eval.py $(ARGS)

bench-meta-train: $(STAMP)
	$(VPY) scripts/benchmark_meta_train.py $(ARGS)

bench-loops: $(STAMP)
	$(VPY) scripts/benchmark_loops.py $(ARGS)

bench-minatar: $(STAMP)
	$(VPY) scripts/benchmark_minatar.py $(ARGS)

bench-meta-window: $(STAMP)
	$(VPY) scripts/benchmark_meta_window.py $(ARGS)

bench-meta-suite: $(STAMP)
	$(VPY) scripts/benchmark_meta_suite.py $(ARGS)
