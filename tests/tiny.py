# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The tests' tiny settings, declared once per job.

Each job has one dict of tiny settings (`EVAL`, `META`), named by its config
fields, and three ways to use it with a test's changes:

- `eval_settings(**changes)`: the dict (for a Study's base, a notebook's
  parameters or `dataclasses.replace`);
- `eval_config(**changes)`: the `EvalConfig`;
- `eval_flags(**changes)`: the command's flags (`--field-name value`, with
  `--no-progress` unless `no_progress=None`).

A change of `None` drops a setting (the job's default then holds). The
`meta_*` functions do the same for meta-training. `AGENT` is the tiny agent
network both jobs use, `SMALL_AGENT` a smaller one and `SMALL` it on shorter
rollouts (for slow environments and image torsos), `RULE_SIZES` the tiny
learned rule (the LPG recipe's sizes). `flags(settings)` and
`source(settings)` write any settings dict as flags or as Python source.
"""

import functools
from typing import Any

from disco_rl.jobs import config as config_lib
from disco_rl.jobs.meta import config as meta_config_lib
from disco_rl.update_rules import disco

AGENT = dict(dense=(16,), model_lstm_size=8, model_head_hiddens=(8,))
SMALL_AGENT = dict(dense=(8,), model_lstm_size=4, model_head_hiddens=(4,))
# The small agent on shorter rollouts (a change to EVAL).
SMALL = dict(rollout_len=4, **SMALL_AGENT)
RULE_SIZES = disco.NAMED_SIZES['tiny']

# Two environments, a learner batch of 4: learning starts at the second
# iteration.
EVAL = dict(
  rule='actor_critic',
  batch_size=4,
  replay_ratio=2,
  buffer_capacity=8,
  rollout_len=5,
  **AGENT,
  steps_per_call=4,
)
META = dict(
  num_agents=2,
  batch_size_per_device=2,
  rollout_len=3,
  **AGENT,
  value_dense=(8,),
)


def _changed(settings: dict[str, Any], changes: dict[str, Any]):
  merged = {**settings, **changes}
  return {k: v for k, v in merged.items() if v is not None}


_FLAGS = {'num_steps': '--steps'}  # The commands' short names.


def flags(settings: dict[str, Any]) -> list[str]:
  """Settings as a command's flags: `--field-name value` (`--steps` for
  num_steps), sizes joined by
  commas, words (a tuple of text) one argument each, booleans as `--name` or
  `--no-name`."""
  out = []
  for name, value in settings.items():
    flag = _FLAGS.get(name, '--' + name.replace('_', '-'))
    if isinstance(value, bool):
      out.append(flag if value else '--no-' + flag[2:])
    elif isinstance(value, (tuple, list)) and all(
      isinstance(v, str) for v in value
    ):
      out += [flag, *value]
    elif isinstance(value, (tuple, list)):
      out += [flag, ','.join(str(v) for v in value)]
    else:
      out += [flag, str(value)]
  return out


def source(settings: dict[str, Any]) -> str:
  """Settings as Python source, `dict(name=value, ...)` (for a Study's
  spec file)."""
  items = ', '.join(f'{k}={v!r}' for k, v in settings.items())
  return f'dict({items})'


def _settings(base, **changes) -> dict[str, Any]:
  return _changed(base, changes)


def _config(config_cls, base, **changes):
  return config_cls(**_changed(base, changes))


def _flags(base, **changes) -> list[str]:
  return flags(_changed(base, {'no_progress': True, **changes}))


eval_settings = functools.partial(_settings, EVAL)
eval_config = functools.partial(_config, config_lib.EvalConfig, EVAL)
eval_flags = functools.partial(_flags, EVAL)
meta_settings = functools.partial(_settings, META)
meta_config = functools.partial(_config, meta_config_lib.MetaTrainConfig, META)
meta_flags = functools.partial(_flags, META)
