# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""DiscoRL: the Disco103 meta-learned RL update rule in JAX/Haiku."""


def _version() -> str:
  """The installed package's version, from its metadata (pyproject.toml's
  `version` is the one place it is written). A source tree that was never
  installed has no metadata: then pyproject.toml's, read beside the
  package, or '0+unknown'."""
  import importlib.metadata  # pylint: disable=g-import-not-at-top
  import pathlib  # pylint: disable=g-import-not-at-top
  import re  # pylint: disable=g-import-not-at-top

  try:
    return importlib.metadata.version('disco_rl')
  except importlib.metadata.PackageNotFoundError:
    root = pathlib.Path(__file__).resolve().parent.parent
    if (root / 'pyproject.toml').is_file():
      text = (root / 'pyproject.toml').read_text()
      found = re.search(r'^version = "([^"]+)"', text, re.M)
      if found:
        return found.group(1)
    return '0+unknown'


# `__version__` is read on first use (`__getattr__`): importing metadata at
# start-up would delay a command's signal rule (tests/test_runtime_signals.py).

# The common case, importable from the package (loaded on first use):
#   from disco_rl import Trainer, EvalConfig
_EXPORTS = {
  'Trainer': 'disco_rl.jobs.trainer',
  'stop_when': 'disco_rl.runtime.host_loop',
  'read_rule': 'disco_rl.jobs.meta.job',
  'EvalConfig': 'disco_rl.jobs.config',
  'MetaTrainConfig': 'disco_rl.jobs.meta.config',
  'make_eval': 'disco_rl.jobs.eval.job',
  'make_meta_train': 'disco_rl.jobs.meta.job',
}

# What a type checker sees of them (mypy and pyright take any name
# `TYPE_CHECKING` as true; this one spares importing `typing` before a
# command's signal rule).
TYPE_CHECKING = False
if TYPE_CHECKING:
  from disco_rl.jobs.config import EvalConfig as EvalConfig
  from disco_rl.jobs.eval.job import make_eval as make_eval
  from disco_rl.jobs.meta.config import MetaTrainConfig as MetaTrainConfig
  from disco_rl.jobs.meta.job import make_meta_train as make_meta_train
  from disco_rl.jobs.meta.job import read_rule as read_rule
  from disco_rl.jobs.trainer import Trainer as Trainer
  from disco_rl.runtime.host_loop import stop_when as stop_when

  __version__: str


# Hidden from type checkers, which then report a misspelt name.
if not TYPE_CHECKING:

  def __getattr__(name: str) -> object:
    if name == '__version__':
      globals()['__version__'] = version = _version()
      return version
    if name in _EXPORTS:
      import importlib  # pylint: disable=g-import-not-at-top

      return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> list[str]:
  return sorted(
    set(globals()) - {'TYPE_CHECKING'} | set(_EXPORTS) | {'__version__'}
  )
