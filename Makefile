# Entry points for users and CI. Everything runs in a local virtualenv.
#
#   make test        set up (if needed) and run the test suite
#   make lint        ruff: lint and format check (make format rewrites)
#   make typecheck   mypy: the types of disco_rl (settings: pyproject.toml)
#   make docs        the documentation site (mkdocs, strict) into site/
#   make eval        set up (if needed) and run the evaluation job
#   make test-slow   long-running tests (learning curves, benchmarks)
#   make coverage    the default suite with line coverage of disco_rl
#   make meta-train  set up (if needed) and run meta-training
#   make bench-eval  Disco103 learning curves on Catch for 3 seeds (~1 h on 2 CPUs)
#   make bench-meta-train  meta-training from random parameters (800 steps)
#   make bench-runs  a 3-seed x 3-rate sweep in one program vs nine (~30 min)
#   make bench-minatar the MinAtar study (studies/minatar.py) into runs/minatar: LR sweep, table, report (hours)
#   make bench-meta-window meta-gradient windows K=2,5,20 with and without remat: speed and memory
#   make bench-envs  training speed on Atari, Sokoban, Craftax pixels, MinAtar (~10 min)
#   make bench-learned-rule the learned-rule study (studies/learned_rule.py) into runs/learned_rule: rates tuned on the suite, held-out envs, both settings (hours)
#   make weights     download and verify the Disco103 weights
#   make test-py312  the Python 3.12 leg of CI: a fresh .venv312 (jax 0.11),
#                    the golden tests and a short training run
#   make gpu-wheels  the wheels the GPU machine lacks, into .gpu/wheels
#   make gpu-bundle  gpu-wheels, plus the golden files and the weights, in .gpu
#                    (then on the GPU: python3 scripts/gpu_check.py --bundle .gpu
#                    --out DIR)
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
# Test processes (pytest-xdist): compiling is mostly single-threaded, so two
# processes keep two cores busy. Tests go to them one at a time, longest
# first (tests/conftest.py; the files of SHARED_FIXTURE_FILES whole); the
# slowest 25 are listed at the end.
TEST_WORKERS ?= 2
# A test of the default run that takes longer than this many seconds (the
# longest take about 170 s here) is stopped with its stack printed and
# fails (pytest-timeout; its thread method also ends a test stuck in
# compiled code or a collective), instead of holding CI until its limit.
TEST_TIMEOUT ?= 900

# Stamp written after a successful install; redone when pyproject.toml changes.
STAMP := $(VENV)/.disco_rl-installed

ifeq ($(origin XLA_FLAGS),command line)
TEST_ENV := XLA_FLAGS='$(XLA_FLAGS)'
else
TEST_ENV := -u XLA_FLAGS
endif

.PHONY: setup lint format test test-slow coverage eval meta-train weights bench-eval bench-meta-train bench-runs bench-minatar bench-meta-window bench-learned-rule bench-envs test-py312 gpu-wheels gpu-bundle

# The optional extras (environments: craftax, jumanji, atari; live curves:
# tensorboard, wandb) too: their tests run in CI.
$(STAMP): pyproject.toml
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install $(PIP_FLAGS) -e '.[test,craftax,jumanji,atari,tensorboard,wandb]'
	touch $@

setup:
	rm -f $(STAMP)
	$(MAKE) --no-print-directory $(STAMP)

# Lint and format (the rules: pyproject.toml's [tool.ruff]).
LINTED := disco_rl tests scripts studies

lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)

format: $(STAMP)
	$(VENV)/bin/ruff check --fix $(LINTED)
	$(VENV)/bin/ruff format $(LINTED)

# Types: mypy over the package (its settings and files: pyproject.toml's
# [tool.mypy]; the test extra installs it).
.PHONY: typecheck
typecheck: $(STAMP)
	$(VENV)/bin/mypy

# The documentation site (mkdocs.yml): the pages and the API reference from
# the docstrings, built strict (any warning fails) into site/. The docs
# extra is installed once, beside the package's own install.
DOCS_STAMP := $(VENV)/.disco_rl-docs-installed

$(DOCS_STAMP): $(STAMP)
	$(VPY) -m pip install $(PIP_FLAGS) -e '.[docs]'
	touch $@

.PHONY: docs
docs: $(DOCS_STAMP)
	$(VENV)/bin/mkdocs build --strict

test: $(STAMP)
	env $(TEST_ENV) $(VPY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=25 --timeout=$(TEST_TIMEOUT) --timeout-method=thread $(PYTEST_ARGS)

# The slow tests, and the golden tests again compiled with XLA's
# optimisations as the upstream recorded them (the default run compiles
# them without its expensive passes, as every other test; tests/conftest.py).
test-slow: $(STAMP)
	env $(TEST_ENV) DISCO_RL_TEST_OPTIMISED_GOLDEN=1 $(VPY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=25 -m 'slow or golden' $(PYTEST_ARGS)

# The default suite with line coverage of disco_rl (about a third slower).
coverage: $(STAMP)
	env $(TEST_ENV) $(VPY) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --cov --cov-report=term --timeout=$(TEST_TIMEOUT) --timeout-method=thread $(PYTEST_ARGS)

eval: $(STAMP)
	$(VENV)/bin/disco-rl eval $(ARGS)

meta-train: $(STAMP)
	$(VENV)/bin/disco-rl meta-train $(ARGS)

weights: $(STAMP)
	$(VPY) -m disco_rl.weights $(ARGS)

bench-eval: $(STAMP)
	$(VPY) scripts/benchmark_eval.py $(ARGS)

bench-meta-train: $(STAMP)
	$(VPY) scripts/benchmark_meta_train.py $(ARGS)

bench-envs: $(STAMP)
	$(VPY) scripts/benchmark_envs.py --out runs/bench_envs $(ARGS)

bench-runs: $(STAMP)
	$(VPY) scripts/benchmark_runs.py $(ARGS)

bench-minatar: $(STAMP)
	$(VENV)/bin/disco-rl study studies/minatar.py --out runs/minatar $(ARGS)

bench-meta-window: $(STAMP)
	$(VPY) scripts/benchmark_meta_steps.py --vary num_inner_steps 2 5 20 --vary remat false true $(ARGS)

bench-learned-rule: $(STAMP)
	$(VENV)/bin/disco-rl study studies/learned_rule.py --out runs/learned_rule $(ARGS)

# ---------------------------------------------------------------------------
# Python 3.12, where pip installs jax 0.11 (on 3.11 it installs 0.10): the
# golden tests and one short training run, in a virtualenv of its own.
PY312 ?= $(shell pyenv prefix 3.12 2>/dev/null || true)/bin/python3.12
VENV312 ?= .venv312
STAMP312 := $(VENV312)/.disco_rl-installed

$(STAMP312): pyproject.toml
	@test -x $(PY312) || { echo "error: no Python 3.12 at $(PY312) (set PY312=/path/to/python3.12)" >&2; exit 2; }
	test -x $(VENV312)/bin/python || $(PY312) -m venv $(VENV312)
	$(VENV312)/bin/python -m pip install $(PIP_FLAGS) -e '.[test]'
	touch $@

# The golden tests on jax 0.11 compile with XLA's optimisations: without
# its expensive passes (and with only the fusion emitters there) one
# actor-critic element lands 2.9e-4 off, past 2e-4 (2026-12-04).
test-py312: $(STAMP312)
	$(VENV312)/bin/python -c "import sys, jax; print('Python', sys.version.split()[0], 'jax', jax.__version__)"
	env $(TEST_ENV) DISCO_RL_TEST_OPTIMISED_GOLDEN=1 $(VENV312)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile tests/test_golden_rules.py tests/test_golden_agent.py tests/test_golden_meta.py $(PYTEST_ARGS)
	out=$$(mktemp -d) && env $(TEST_ENV) $(VENV312)/bin/disco-rl eval --steps 20 --steps-per-call 10 --no-progress --out $$out/eval && rm -rf $$out

# ---------------------------------------------------------------------------
# What the GPU machine (no package index) needs, in the git-ignored .gpu:
# send it with the working tree (the device tool's carry: .gpu).
GPU_BUNDLE ?= .gpu
SHARED ?= ../shared
GPU_PLATFORMS := manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64
# The golden cases the one-GPU check compares (learner_disco_pmap2 needs two
# devices).
GPU_GOLDEN_CASES := disco_init envs learner_actor_critic learner_disco meta_gradient meta_net policy_gradient

gpu-wheels:
	rm -rf $(GPU_BUNDLE)/wheels
	mkdir -p $(GPU_BUNDLE)/wheels
	$(PYTHON) -m pip download $(PIP_FLAGS) --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 $(addprefix --platform ,$(GPU_PLATFORMS)) -d $(GPU_BUNDLE)/wheels -r scripts/gpu_wheels.txt
	@ls $(GPU_BUNDLE)/wheels | wc -l | xargs echo wheels:

gpu-bundle: gpu-wheels $(STAMP)
	@golden="$${DISCO_RL_GOLDEN_DIR:-$(SHARED)/golden}"; \
	weights="$${DISCO_RL_WEIGHTS:-$(SHARED)/weights/disco_103.npz}"; \
	test -f "$$golden/golden.py" || { echo "error: golden files not found in $$golden (set DISCO_RL_GOLDEN_DIR)" >&2; exit 2; }; \
	test -f "$$weights" || { echo "error: weights not found at $$weights (set DISCO_RL_WEIGHTS)" >&2; exit 2; }; \
	$(VPY) -m disco_rl.weights --verify "$$weights" || exit 2; \
	rm -rf $(GPU_BUNDLE)/golden $(GPU_BUNDLE)/weights; \
	mkdir -p $(GPU_BUNDLE)/golden/current_jax $(GPU_BUNDLE)/weights; \
	cp "$$golden/golden.py" $(GPU_BUNDLE)/golden/; \
	for case in $(GPU_GOLDEN_CASES); do \
	  cp "$$golden/current_jax/$$case.npz" "$$golden/current_jax/$$case.json" $(GPU_BUNDLE)/golden/current_jax/ || exit 2; \
	done; \
	cp "$$weights" $(GPU_BUNDLE)/weights/disco_103.npz; \
	du -sh $(GPU_BUNDLE)
