# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A run stopped early, resumed to its end, beside the same run straight:
the check of exact resume that several eval tests make."""

import dataclasses
import pathlib

import chex
import jax
import pandas as pd

from disco_rl.jobs import config as config_lib
from disco_rl.jobs import trainer as trainer_lib


def stopped_and_straight(
  config: config_lib.EvalConfig, stop_at: int, out: pathlib.Path
) -> tuple[trainer_lib.Trainer, trainer_lib.Trainer, pd.DataFrame]:
  """Runs `config` for `stop_at` steps in out/'a', resumes it to
  `config.num_steps`, and runs it straight in out/'b'; asserts that the
  two states and metrics rows (but wall-clock columns) are equal.

  Returns:
    (the resumed Trainer, the straight one, the straight run's rows).
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
  chex.assert_trees_all_equal(
    jax.device_get(resumed.state), jax.device_get(straight.state)
  )
  rows = [
    pd.read_csv(d / 'metrics.csv').drop(columns=['rss_mb', 'time_s'])
    for d in (out / 'a', out / 'b')
  ]
  pd.testing.assert_frame_equal(rows[0], rows[1])
  return resumed, straight, rows[1]
