# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A run's recorded settings read as today's config of its job.

The runtime keeps a run's record (`run.json`, the checkpoints' settings)
without knowing the jobs; here the record meets the jobs' configs: older
records upgraded (`upgrade_settings`) and a resumed run's config made and
checked once (`resumed_config`).
"""

import dataclasses
from typing import Any

from disco_rl.jobs import config as config_lib
from disco_rl.jobs.meta import config as meta_config
from disco_rl.runtime import run_dir as run_dir_lib


def upgrade_settings(
  cls: type[config_lib.EvalConfig] | type[meta_config.MetaTrainConfig],
  settings: dict[str, Any],
) -> dict[str, Any]:
  """The settings of a run's record (`run.json`) as fields of `cls` (an
  `EvalConfig` or a `MetaTrainConfig`) today.

  Version 0.1 records name Catch's board in fields `rows` and `columns`:
  the eval job's `env_kwargs`, or each meta-training Catch task's board.

  Raises:
    ValueError: naming settings `cls` does not know.
  """
  settings = dict(settings)
  board: dict[str, Any] = {
    k: settings.pop(k) for k in ('rows', 'columns') if k in settings
  }
  if (
    board
    and cls is config_lib.EvalConfig
    and settings.get('env') in ('catch', 'jittable_catch')
  ):
    settings['env_kwargs'] = {**board, **dict(settings.get('env_kwargs') or {})}
  elif board and cls is meta_config.MetaTrainConfig:
    tasks: list[str] = []
    for text in tuple(settings.get('tasks') or ('catch',)):
      task = meta_config.parse_task(text)
      if task.name in ('catch', 'jittable_catch'):
        merged: dict[str, Any] = {**board, **dict(task.settings)}
        task = dataclasses.replace(task, settings=tuple(merged.items()))
      tasks.append(task.spec())
    settings['tasks'] = tuple(tasks)
  for field in dataclasses.fields(cls):  # Fields added since: defaults.
    if field.name in settings:
      continue
    if field.default is not dataclasses.MISSING:
      settings[field.name] = field.default
    elif field.default_factory is not dataclasses.MISSING:
      settings[field.name] = field.default_factory()
    else:
      raise ValueError(
        f'The record lacks setting {field.name!r}, which has no default.'
      )
  unknown = sorted(set(settings) - {f.name for f in dataclasses.fields(cls)})
  if unknown:
    raise ValueError(
      f'The run record has settings {unknown} that '
      f'{cls.__name__} does not know (written by another '
      'version?).'
    )
  return settings


def resumed_config(
  run_dir: run_dir_lib.RunDir, given: Any, configs: dict[str, Any]
) -> Any:
  """The resumed run's config: its saved settings (upgraded), checked
  once against those `given` (a config, or a dict of some); `configs`:
  the config class of each job name."""
  if isinstance(given, dict):
    name = run_dir.record()[0]
    if name not in configs:
      raise ValueError(
        f'{run_dir.path} holds a {name!r} run, which this version cannot '
        'resume.'
      )
    cls, given = configs[name], dict(given)
  else:
    cls, given = type(given), dataclasses.asdict(given)
    names = [n for n, c in configs.items() if c is cls]
    if not names:
      raise TypeError(
        f'A {cls.__name__} is not the config of a job '
        f'({", ".join(c.__name__ for c in configs.values())}).'
      )
    name = names[0]
  saved = upgrade_settings(cls, run_dir.saved_settings(name))
  run_dir.check_same_settings(saved, given)
  return cls(**{**saved, **given})
