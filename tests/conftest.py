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

import importlib.util
import os
import pathlib

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
  needed = {_MARKER_ENV[m.name] for m in item.iter_markers()
            if m.name in _MARKER_ENV}
  needed |= {_FIXTURE_ENV[f] for f in getattr(item, 'fixturenames', ())
             if f in _FIXTURE_ENV}
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


@pytest.fixture(scope='module')
def fast_compile():
  """`smoke_env.fast_compile` for a whole test module."""
  import smoke_env  # pylint: disable=g-import-not-at-top
  with smoke_env.fast_compile():
    yield


@pytest.fixture(scope='module')
def compilation_cache(tmp_path_factory):
  """JAX's persistent compilation cache in a fresh directory, for a module.

  Tests that build the same program several times (a run, its resumed
  continuation and a straight run) compile it once.
  """
  import jax  # pylint: disable=g-import-not-at-top
  names = ('jax_compilation_cache_dir',
           'jax_persistent_cache_min_compile_time_secs')
  previous = {name: jax.config.values[name] for name in names}
  jax.config.update(names[0], str(tmp_path_factory.mktemp('jax_cache')))
  jax.config.update(names[1], 0)
  try:
    yield
  finally:
    for name, value in previous.items():
      jax.config.update(name, value)


# ---------------------------------------------------------------------------
# Order: the longest test files first.

# The test files that take the longest in the default run (compiling
# meta-training programs, starting processes), longest first (per-file
# totals of a default run with --durations=0 on the 2-core machine: about
# 185, 165, 110, 95, 75 s for the first five). `make test` hands whole
# files to its two pytest-xdist processes in collection order (--dist
# loadfile --no-loadscope-reorder); starting these first keeps the two
# processes' shares even. With xdist's own order (files with more tests
# first) a three-minute file came last and ran alone.
LONGEST_FILES = (
    'test_loops_trainer.py',
    'test_notebooks.py',
    'test_examples.py',
    'test_environments_gymnax.py',
    'test_golden_agent.py',
    'test_multidevice.py',
    'test_loops_meta.py',
    'test_signals.py',
    'test_loops_eval.py',
    'test_benchmark_minatar.py',
    'test_nets.py',
    'test_agent.py',
    'test_golden_meta.py',
    'test_gpu_check.py',
    'test_readme.py',
    'test_environments_envpool.py',
    'test_loops_compiled.py',
    'test_golden_rules.py',
    'test_environments_jumanji.py',
    'test_loops_multiprocess.py',
)


def pytest_collection_modifyitems(config, items):
  """Runs the files of `LONGEST_FILES` first, in that order (a stable sort:
  within a file and among the other files, the order is pytest's)."""
  del config
  rank = {name: i for i, name in enumerate(LONGEST_FILES)}
  items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


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
