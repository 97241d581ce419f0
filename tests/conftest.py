# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Shared fixtures: golden files, the Disco103 weights, and the CI policy.

Golden files (the upstream's recorded results) live outside the repository,
in `$DISCO_RL_GOLDEN_DIR` (default: `<repo>/../shared/golden`), together with
the `golden.py` helper that reads them. The weights file is
`$DISCO_RL_WEIGHTS` (default: `<repo>/../shared/weights/disco_103.npz`).

Tests that need either skip when it is absent, except in CI (`CI=true` or
`CI=1`), where such a skip is reported as a failure: there, golden and
weights tests must run.
"""

import collections
import importlib.util
import json
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import tempfile

import pytest

from disco_rl import weights

pytest_plugins = ('pytester',)

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN_DIR_ENV = 'DISCO_RL_GOLDEN_DIR'
WEIGHTS_ENV = weights.ENV_WEIGHTS

# Markers and fixtures that make a test a golden or a weights test, and the
# environment variable that provides what such a test needs.
_MARKER_ENV = {'golden': GOLDEN_DIR_ENV, 'weights': WEIGHTS_ENV}
_FIXTURE_ENV = {
  'golden_dir': GOLDEN_DIR_ENV,
  'golden': GOLDEN_DIR_ENV,
  'load_golden': GOLDEN_DIR_ENV,
  'disco_103_path': WEIGHTS_ENV,
  'disco_103_params': WEIGHTS_ENV,
}


def in_ci() -> bool:
  return os.environ.get('CI', '').strip().lower() in ('true', '1')


def golden_dir_path() -> pathlib.Path:
  """Where the golden files are expected (they may be absent)."""
  default = REPO_ROOT.parent / 'shared' / 'golden'
  return pathlib.Path(os.environ.get(GOLDEN_DIR_ENV) or default)


def weights_path() -> pathlib.Path:
  """Where the Disco103 weights are expected (they may be absent)."""
  default = REPO_ROOT.parent / 'shared' / 'weights' / weights.FILENAME
  return pathlib.Path(os.environ.get(WEIGHTS_ENV) or default)


# ---------------------------------------------------------------------------
# Golden files.


@pytest.fixture(scope='session')
def golden_dir() -> pathlib.Path:
  """Directory of the golden files; skips the test when it is absent."""
  path = golden_dir_path()
  if not (path / 'golden.py').is_file():
    pytest.skip(
      f'golden files not found in {path}; set {GOLDEN_DIR_ENV} to the '
      'directory holding golden.py and the NAME.npz/NAME.json cases'
    )
  return path


@pytest.fixture(scope='session')
def golden(golden_dir):
  """The `golden.py` module from the golden directory (imported, not copied)."""
  spec = importlib.util.spec_from_file_location(
    'disco_rl_golden', golden_dir / 'golden.py'
  )
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.fixture(scope='session')
def load_golden(golden, golden_dir):
  """`load_golden(name)` -> golden.GoldenCase for `NAME.npz`/`NAME.json`.

  Each call reads the files afresh, so a test may modify what it gets.
  """

  def load(name):
    if not (golden_dir / f'{name}.npz').is_file():
      pytest.skip(f'golden case {name!r} not found in {golden_dir}')
    return golden.load(name, str(golden_dir))

  return load


# ---------------------------------------------------------------------------
# Weights.


@pytest.fixture(scope='session')
def disco_103_path() -> pathlib.Path:
  """Path of the real disco_103.npz; skips the test when it is absent."""
  path = weights_path()
  if not path.is_file():
    pytest.skip(
      f'Disco103 weights not found at {path}; set {WEIGHTS_ENV} to the '
      f'path of {weights.FILENAME} (or run `python -m disco_rl.weights`)'
    )
  return path


@pytest.fixture(scope='session')
def disco_103_params(disco_103_path):
  """Disco103 meta-parameters, `{MODULE: {'w': np.ndarray, 'b': ...}}`."""
  return weights.load_disco_103(disco_103_path, download=False)


# ---------------------------------------------------------------------------
# CI policy: golden and weights tests may not be skipped.


def _required_env(item) -> list[str]:
  """Env vars of the golden/weights inputs `item` needs ([] if none)."""
  needed = {
    _MARKER_ENV[m.name] for m in item.iter_markers() if m.name in _MARKER_ENV
  }
  needed |= {
    _FIXTURE_ENV[f]
    for f in getattr(item, 'fixturenames', ())
    if f in _FIXTURE_ENV
  }
  return sorted(needed)


def _skip_reason(report) -> str:
  longrepr = report.longrepr
  if isinstance(longrepr, tuple) and len(longrepr) == 3:
    return str(longrepr[2])
  return str(longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
  outcome = yield
  report = outcome.get_result()
  if not (in_ci() and report.skipped) or hasattr(report, 'wasxfail'):
    return
  needed = _required_env(item)
  if not needed:
    return
  report.outcome = 'failed'
  report.longrepr = (
    f'{item.nodeid} was skipped in CI ({_skip_reason(report)}), but golden '
    'and weights tests must run in CI. Set '
    + ' and '.join(needed)
    + ' (see .ci/run), or unset CI to allow the skip.'
  )


# ---------------------------------------------------------------------------
# Compilation.


# Every test compiles without XLA's expensive passes (same semantics,
# cheaper compiles: smoke_env.fast_compile), the golden tests too: their
# recorded numbers hold at their tolerances either way (measured
# 2026-12-04: every golden test passes both ways; the three golden files
# take about 170 s of test time instead of 330 s). With
# `$DISCO_RL_TEST_OPTIMISED_GOLDEN=1` (`make test-slow` sets it) the golden
# tests compile with XLA's optimisations, as the upstream recorded them and
# as users' runs compile. A test marked `optimised` compiles with them in
# every run: the meta-gradient, whose backward pass through the inner Adam
# steps amplifies one-ulp roundings up to 1e8 times (test_golden_meta.py),
# moved one leaf by 1.5-1.8% without them on an AVX-512 CPU (5e-6 with
# them; the leaf's tolerance is 5e-3), though not on an AVX2 one.
_GOLDEN_FILES = frozenset(
  ('test_golden_agent.py', 'test_golden_meta.py', 'test_golden_rules.py')
)


@pytest.fixture(autouse=True)
def _fast_compile_unless_golden(request):
  import smoke_env  # pylint: disable=g-import-not-at-top

  if request.node.get_closest_marker('optimised') or (
    smoke_env.optimised_golden()
    and (
      request.node.get_closest_marker('golden')
      or request.node.path.name in _GOLDEN_FILES
    )
  ):
    yield
    return
  with smoke_env.fast_compile():
    yield


@pytest.fixture(autouse=True)
def _no_signal_rule_left_behind():
  """A test that leaves SIGINT's or SIGTERM's handler changed has left a
  rule for signals active (`disco_rl.runtime.signals`): every later test
  in its process would see that rule's signals (a CLI's `main` called in
  process would report a signal that came for another test). Fails it."""
  before = {
    sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)
  }
  yield
  after = {sig: signal.getsignal(sig) for sig in before}
  changed = [sig.name for sig in before if after[sig] != before[sig]]
  if changed:
    for sig in before:  # The next tests start as this one did.
      signal.signal(sig, before[sig])
    pytest.fail(
      f'the test left the handler of {", ".join(changed)} changed (a rule '
      'for signals still active)',
      pytrace=False,
    )


@pytest.fixture(scope='module')
def fast_compile():
  """`smoke_env.fast_compile` for a whole test module."""
  import smoke_env  # pylint: disable=g-import-not-at-top

  with smoke_env.fast_compile():
    yield


# One persistent compilation cache for the whole session: the two xdist
# workers and every subprocess they start (CLIs, notebooks, processes of a
# multi-process run) read and write the same directory, so a program that
# several tests build (a run, its resumed continuation, the same tiny agent
# in a CLI and a notebook) is compiled once. `$DISCO_RL_TEST_JAX_CACHE`
# names a directory to keep across sessions ('off': no cache, to measure
# what it saves); otherwise the controlling process makes one and removes
# it at the end.
TEST_JAX_CACHE = 'DISCO_RL_TEST_JAX_CACHE'


# Tracing and lowering without source locations in the programs' MLIR
# (JAX writes up to 10 Python frames per operation by default, for XLA's
# error messages and profiles; no test reads them): the same programs,
# lowered in about a fifth less time. Set in the environment too, for every
# subprocess (CLIs, notebooks, multi-device and multi-process checks).
_NO_LOCATIONS = {'JAX_TRACEBACK_IN_LOCATIONS_LIMIT': '0'}


# A shell that starts a command in the background without job control
# (`make test &` in a script, `nohup ... &`) sets SIGINT to ignored, and
# every process it starts inherits that: Python then never raises
# KeyboardInterrupt, and the tests that interrupt a run with SIGINT (the
# run's own process or a CLI's) would wait for a stop that never comes.
# The tests restore Python's own handler, which a subprocess's Python
# installs again at start (a handler, unlike an ignored signal, is reset
# by exec).
def _restore_sigint() -> None:
  if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config):
  _restore_sigint()
  os.environ.update(_NO_LOCATIONS)
  import jax  # pylint: disable=g-import-not-at-top

  jax.config.update('jax_traceback_in_locations_limit', 0)
  if os.environ.get(TEST_JAX_CACHE) == 'off':
    return
  if not os.environ.get(TEST_JAX_CACHE):
    if hasattr(config, 'workerinput'):  # An xdist worker started by hand.
      return
    os.environ[TEST_JAX_CACHE] = tempfile.mkdtemp(prefix='disco_rl_jax_')
    config.stash[_OWNED_CACHE] = os.environ[TEST_JAX_CACHE]
  jax.config.update('jax_compilation_cache_dir', os.environ[TEST_JAX_CACHE])
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)
  jax.config.update('jax_persistent_cache_min_entry_size_bytes', -1)


def pytest_unconfigure(config):
  units_dir = config.stash.get(_UNITS_DIR, None)
  if units_dir:
    shutil.rmtree(units_dir, ignore_errors=True)
  owned = config.stash.get(_OWNED_CACHE, None)
  if owned:
    shutil.rmtree(owned, ignore_errors=True)
    del os.environ[TEST_JAX_CACHE]


_OWNED_CACHE = pytest.StashKey[str]()


# ---------------------------------------------------------------------------
# Order: the longest tests first, whichever file they are in.

# Seconds per test of a default run on the 2-core machine (`python
# tests/durations.py JUNIT_XML` writes it from a run's --junitxml). `make
# test` hands the tests to its two pytest-xdist workers one unit at a time
# (--dist loadgroup), in the order below: longest first, so that the last
# units to start are short and the two workers end together. A test not in
# the file counts as the median.
DURATIONS = pathlib.Path(__file__).with_name('durations.json')
# Files whose tests share a costly module-scoped fixture (a compiled golden
# program, a built agent): one unit, run by one worker.
SHARED_FIXTURE_FILES = frozenset(
  (
    'test_agent.py',
    'test_bad_inputs.py',
    'test_golden_agent.py',
    'test_golden_meta.py',
    'test_golden_rules.py',
    'test_jobs_eval.py',
  )
)


def _unit(item) -> str:
  """What one worker runs together: a test's own `xdist_group` (tests that
  share a module-scoped fixture), a file of SHARED_FIXTURE_FILES, or the
  test."""
  group = item.get_closest_marker('xdist_group')
  if group is not None:
    return group.args[0] if group.args else group.kwargs['name']
  name = item.path.name
  return name if name in SHARED_FIXTURE_FILES else item.nodeid.split('@')[0]


def pytest_collection_modifyitems(config, items):
  """Sorts the units (see `_unit`) by their recorded seconds, longest
  first; a unit's tests keep pytest's order. On an xdist worker, also
  writes each test's unit for the controller's scheduler (below)."""
  seconds = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
  median = statistics.median(seconds.values()) if seconds else 0.0
  totals = collections.Counter()
  for item in items:
    totals[_unit(item)] += seconds.get(item.nodeid.split('@')[0], median)
    if item.path.name in SHARED_FIXTURE_FILES:
      item.add_marker(pytest.mark.xdist_group(item.path.name))
  items.sort(key=lambda item: (-totals[_unit(item)], _unit(item)))
  units_dir = getattr(config, 'workerinput', {}).get(_UNITS_KEY)
  if units_dir:
    path = pathlib.Path(units_dir) / f'{config.workerinput["workerid"]}.json'
    path.write_text(json.dumps({item.nodeid: _unit(item) for item in items}))


# One worker per unit. pytest-xdist's own `--dist loadgroup` reads a test's
# group from a suffix it adds to the test's node id, which pytest 9.2 no
# longer lets it add (`Item.nodeid` is derived from `Item._id`, and xdist
# 3.8 sets `_nodeid`): every test became its own unit, and the tests that
# share a module-scoped fixture ran on both workers, each building it. So
# the workers write the unit of every test they collected (above) to a
# directory the controller made, and the controller's scheduler
# (pytest-xdist's LoadScopeScheduling, whose scope is the unit) reads it.
_UNITS_KEY = 'disco_rl_units_dir'
_UNITS_DIR = pytest.StashKey[str]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
  """Tells each worker where to write its units (controller side)."""
  config = node.config
  if _UNITS_DIR not in config.stash:
    config.stash[_UNITS_DIR] = tempfile.mkdtemp(prefix='disco_rl_units_')
  node.workerinput[_UNITS_KEY] = config.stash[_UNITS_DIR]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
  """`--dist loadgroup`: a unit (see `_unit`) at a time, longest first."""
  if config.getvalue('dist') != 'loadgroup':
    return None
  from xdist.scheduler import LoadScopeScheduling  # pylint: disable=g-import-not-at-top

  units_dir = pathlib.Path(config.stash[_UNITS_DIR])

  class ByUnit(LoadScopeScheduling):
    """Scopes are the units the workers wrote (read when the workers have
    all collected, i.e. when the scheduler first asks)."""

    units = None

    def _split_scope(self, nodeid: str) -> str:
      if self.units is None:
        self.units = {}
        for path in sorted(units_dir.glob('*.json')):
          self.units.update(json.loads(path.read_text()))
      return self.units.get(nodeid, nodeid)

  return ByUnit(config, log)


@pytest.fixture
def call_main(capsys):
  """`call_main(main, *args)` -> the `subprocess.CompletedProcess` (exit
  status, stdout, stderr) of a command's `main(args)` run in this process,
  as `subprocess.run` gives a process's: for the paths of a command whose
  process start-up (about 3 s) another test already runs."""

  def call(main, *args: str) -> subprocess.CompletedProcess:
    capsys.readouterr()
    try:
      code = main(list(args))
    except SystemExit as e:  # argparse's own errors.
      code = e.code
    out = capsys.readouterr()
    return subprocess.CompletedProcess(list(args), code, out.out, out.err)

  return call


@pytest.fixture
def hide_package(monkeypatch):
  """`hide_package(name)`: `importlib.import_module(name)` raises
  ImportError for the rest of the test, as if the package were missing."""
  import importlib  # pylint: disable=g-import-not-at-top

  real_import = importlib.import_module

  def hide(package: str) -> None:
    def import_module(name, *args):
      if name == package:
        raise ImportError(f'No module named {package!r}')
      return real_import(name, *args)

    monkeypatch.setattr(importlib, 'import_module', import_module)

  return hide
