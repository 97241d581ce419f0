# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""DiscoRL: the Disco103 meta-learned RL update rule in JAX/Haiku."""

__version__ = '0.1.0'

# The common case, importable from the package (loaded on first use):
#   from disco_rl import Trainer, EvalConfig
_EXPORTS = {
    'Trainer': 'disco_rl.loops.trainer',
    'stop_when': 'disco_rl.loops.run',
    'read_rule': 'disco_rl.loops.meta',
    'EvalConfig': 'disco_rl.loops.config',
    'MetaTrainConfig': 'disco_rl.loops.config',
    'make_eval': 'disco_rl.loops.eval',
    'make_meta_train': 'disco_rl.loops.meta',
}


def __getattr__(name):
  if name in _EXPORTS:
    import importlib  # pylint: disable=g-import-not-at-top
    return getattr(importlib.import_module(_EXPORTS[name]), name)
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__():
  return sorted(list(globals()) + list(_EXPORTS))
