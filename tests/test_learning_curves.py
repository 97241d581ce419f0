# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Full-size runs (slow: `make test-slow`; up to tens of minutes on a CPU).

The same targets as scripts/benchmark_*.py, for one seed each. (The first
meta-steps of the upstream notebook's own run are repeated in the default
suite: test_jobs_meta.py.)
"""

import pytest

import disco_rl

pytestmark = pytest.mark.slow


@pytest.mark.weights
def test_disco_103_solves_catch(tmp_path, disco_103_params):
  summary = disco_rl.Trainer(
    disco_rl.EvalConfig(seed=0),
    tmp_path,
    rule_params=disco_103_params,
    progress=False,
  ).fit()
  assert summary['final_avg_return'] >= 0.95, summary
  assert summary['rss_mb_final'] <= 1.3 * summary['rss_mb_at_100'], summary


def test_meta_training_from_scratch_learns_catch(tmp_path):
  summary = disco_rl.Trainer(
    disco_rl.MetaTrainConfig(), tmp_path, progress=False
  ).fit()
  assert summary['final_pos_rewards'] >= 243, summary
