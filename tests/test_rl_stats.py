# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""scripts/rl_stats.py: IQM, probability of improvement, stratified
bootstrap intervals, each against an independent computation."""

import pathlib
import sys

import numpy as np
import pytest
from scipy import stats

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent
                       / 'scripts'))
import rl_stats  # pylint: disable=g-import-not-at-top,wrong-import-position


def test_iqm_is_the_mean_of_the_middle_half():
  # 8 scores over 2 runs x 4 tasks: the middle four are 3, 4, 5, 6.
  scores = np.array([[8., 1., 6., 3.], [2., 7., 4., 5.]])
  assert rl_stats.iqm(scores) == pytest.approx(4.5)
  assert rl_stats.mean(scores) == pytest.approx(4.5)
  assert rl_stats.iqm([[0., 0., 0., 100.]]) == pytest.approx(0.0)


def test_probability_of_improvement_is_the_mann_whitney_statistic():
  rng = np.random.default_rng(0)
  x = rng.integers(0, 5, size=(5, 3)).astype(float)  # Ties happen.
  y = rng.integers(0, 5, size=(4, 3)).astype(float)
  expected = np.mean([stats.mannwhitneyu(x[:, t], y[:, t]).statistic / 20
                      for t in range(3)])
  assert rl_stats.probability_of_improvement(x, y) == pytest.approx(expected)
  assert rl_stats.probability_of_improvement(x, x) == pytest.approx(0.5)
  assert rl_stats.probability_of_improvement(x + 10, x) == 1.0
  assert rl_stats.probability_of_improvement(x, x + 10) == 0.0


def test_task_probability_counts_the_seed_pairs():
  # 2 x 3 pairs: 3 > (2 > 1, 5 > 1, 5 > 2) and one tie (2 = 2).
  assert rl_stats.task_probability([2.0, 5.0], [1.0, 2.0, 6.0]) == (
      pytest.approx(3.5 / 6))


def test_iqm_difference_and_its_interval_resample_each_side():
  x = np.array([[1., 5.], [2., 6.], [3., 7.], [4., 8.]])
  assert rl_stats.iqm_difference(x, x - 1.0) == pytest.approx(1.0)
  # Every run equal within each task: no resample moves the difference.
  flat = np.ones((3, 2))
  assert rl_stats.interval((flat * 2, flat), rl_stats.iqm_difference,
                           reps=50) == (1.0, 1.0)
  low, high = rl_stats.interval((x, x - 1.0), rl_stats.iqm_difference,
                                reps=500)
  # Two independent resamples: the interval spreads around 1 on both sides.
  assert low < 1.0 < high


def test_the_most_extreme_run_and_taking_it_out_at_the_median():
  x = np.array([[0.0, 10.0], [1.0, 11.0], [2.0, 30.0]])
  y = np.array([[0.0, 0.0], [5.0, 0.0], [6.0, 0.0]])
  # x's 30 is 19 from its task's median (11); y's 0 is 5 from 5.
  assert rl_stats.most_extreme_run(x, y) == dict(
      side='x', run=2, task=1, score=30.0, median=11.0)
  assert rl_stats.most_extreme_run(y, x)['side'] == 'y'
  np.testing.assert_array_equal(rl_stats.at_median(x, 2, 1),
                                [[0, 10], [1, 11], [2, 11]])
  assert x[2, 1] == 30.0  # A copy.


def test_one_task_interval_is_the_percentile_bootstrap_of_the_mean():
  rng = np.random.default_rng(1)
  runs = rng.normal(3.0, 2.0, size=12)
  low, high = rl_stats.interval(runs[:, None], rl_stats.mean, reps=4000)
  reference = stats.bootstrap((runs,), np.mean, n_resamples=4000,
                              method='percentile', random_state=2)
  # Two Monte Carlo estimates of the same interval.
  assert low == pytest.approx(reference.confidence_interval.low, abs=0.15)
  assert high == pytest.approx(reference.confidence_interval.high, abs=0.15)
  assert low < runs.mean() < high


def test_resampling_is_stratified_by_task():
  scores = np.stack([np.arange(6.), 100 + np.arange(6.)], axis=1)
  seen = []

  def record(resampled):
    assert set(resampled[:, 0]) <= set(range(6))
    assert set(resampled[:, 1]) <= set(range(100, 106))
    seen.append(resampled.copy())
    return 0.0

  rl_stats.interval(scores, record, reps=50)
  # Each task's runs are drawn on their own: the two columns' picks differ.
  assert any((s[:, 1] - 100 != s[:, 0]).any() for s in seen)


def test_a_pair_is_resampled_independently_and_intervals_shrink():
  rng = np.random.default_rng(3)
  x, y = rng.normal(1, 1, (4, 5)), rng.normal(0, 1, (4, 5))
  low4, high4 = rl_stats.interval((x, y), rl_stats.probability_of_improvement)
  assert 0 <= low4 <= rl_stats.probability_of_improvement(x, y) <= high4 <= 1
  x, y = rng.normal(1, 1, (40, 5)), rng.normal(0, 1, (40, 5))
  low40, high40 = rl_stats.interval((x, y),
                                    rl_stats.probability_of_improvement)
  assert high40 - low40 < high4 - low4


def test_curve_intervals_at_each_point():
  rng = np.random.default_rng(4)
  curves = rng.normal(size=(3, 2, 5))
  value, low, high = rl_stats.curve_intervals(curves, rl_stats.iqm, reps=200)
  assert value.shape == low.shape == high.shape == (5,)
  for i in range(5):
    assert value[i] == pytest.approx(rl_stats.iqm(curves[:, :, i]))
  assert (low <= high).all()


def test_bad_scores_are_named():
  with pytest.raises(ValueError, match=r'scores must be finite, got '
                     r'\[\[1.0, nan\]\]'):
    rl_stats.iqm([[1.0, float('nan')]])
  with pytest.raises(ValueError, match=r'must be a \[runs, tasks\] array, got '
                     r'shape \(3,\)'):
    rl_stats.mean([1.0, 2.0, 3.0])
  with pytest.raises(ValueError, match='the same tasks, got 2 and 3'):
    rl_stats.probability_of_improvement(np.ones((2, 2)), np.ones((2, 3)))
  with pytest.raises(ValueError, match=r'confidence must be in \(0, 1\), got '
                     '95'):
    rl_stats.interval(np.ones((2, 2)), rl_stats.mean, confidence=95)
