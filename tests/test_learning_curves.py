# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Full-size runs (slow: `make test-slow`; up to tens of minutes on a CPU).

The same targets as scripts/benchmark_*.py, for one seed each. (The first
meta-steps of the upstream notebook's own run are repeated in the default
suite: test_loops_meta.py.)
"""

import numpy as np
import pytest

from disco_rl import evaluation
from disco_rl import meta_train

pytestmark = pytest.mark.slow


@pytest.mark.weights
def test_disco_103_solves_catch(tmp_path, disco_103_params):
  summary = evaluation.run_eval(evaluation.EvalConfig(seed=0), tmp_path,
                                rule_params=disco_103_params, progress=False)
  assert summary['final_avg_return'] >= 0.95, summary
  assert summary['rss_mb_final'] <= 1.3 * summary['rss_mb_at_100'], summary


def test_meta_training_from_scratch_learns_catch(tmp_path):
  summary = meta_train.run_meta_train(meta_train.MetaTrainConfig(), tmp_path,
                                      progress=False)
  assert summary['final_pos_rewards'] >= 243, summary
