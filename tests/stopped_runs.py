# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Two runs compared: exact resume's checks, which several tests make.

`assert_same_run` compares two run directories and states; a run stopped
early and resumed to its end, beside the same run straight, is
`stopped_and_straight`.
"""

import dataclasses
import pathlib

import chex
import jax
import pandas as pd

from disco_rl.jobs import config as config_lib
from disco_rl.jobs import trainer as trainer_lib
from disco_rl.runtime import metrics as metrics_lib

TIMING = ('rss_mb', 'time_s')  # The wall-clock columns of metrics.csv.


def metrics_without_timing(path: pathlib.Path) -> pd.DataFrame:
  return metrics_lib.read_table(path).drop(columns=list(TIMING))


def assert_same_run(dir_a, dir_b, state_a, state_b) -> None:
  """Identical metrics rows (but wall-clock columns) and identical state."""
  a, b = (
    metrics_without_timing(dir_a / 'metrics.csv'),
    metrics_without_timing(dir_b / 'metrics.csv'),
  )
  # No gap; each step's rows (one per seed) together, no step repeated.
  steps = a['step'].drop_duplicates()
  assert list(steps) == list(range(len(steps)))
  assert len(set(a.groupby('step').size())) == 1
  assert a.equals(b), a.compare(b) if a.shape == b.shape else (a.shape, b.shape)
  chex.assert_trees_all_equal(jax.device_get(state_a), jax.device_get(state_b))


def stopped_and_straight(
  config: config_lib.EvalConfig, stop_at: int, out: pathlib.Path
) -> tuple[trainer_lib.Trainer, trainer_lib.Trainer, pd.DataFrame]:
  """Runs `config` for `stop_at` steps in out/'a', resumes it to
  `config.num_steps`, and runs it straight in out/'b'; asserts that the
  two are the same run (`assert_same_run`).

  Returns:
    (the resumed Trainer, the straight one, the straight run's rows but
    wall-clock columns).
  """
  first = trainer_lib.Trainer(
    dataclasses.replace(config, num_steps=stop_at), out / 'a', progress=False
  )
  first.fit()
  first.close()
  resumed = trainer_lib.Trainer(config, out / 'a', resume=True, progress=False)
  resumed.fit()
  straight = trainer_lib.Trainer(config, out / 'b', progress=False)
  straight.fit()
  assert_same_run(out / 'a', out / 'b', resumed.state, straight.state)
  return resumed, straight, metrics_without_timing(out / 'b' / 'metrics.csv')
