# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl/studies/stats.py: IQM, probability of improvement, performance
profiles, stratified bootstrap intervals, each against an independent
computation and against the numbers rliable itself gave on the same scores
(tests/data/rliable_expected/expected.json, written by make_expected.py
beside it).

The intervals match rliable's exactly, not only statistically: `interval`
draws the resamples rliable draws after `np.random.seed(seed)` (stats.py's
docstring says how), so interval ends are compared as points are, at 1e-9
(a sum taken in another order moves the last bits; a different resample
would move an end by 1e-3 or more).
"""

import json
import pathlib

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from disco_rl.studies import stats as rl_stats


def test_iqm_is_the_mean_of_the_middle_half():
  # 8 scores over 2 runs x 4 tasks: the middle four are 3, 4, 5, 6.
  scores = np.array([[8.0, 1.0, 6.0, 3.0], [2.0, 7.0, 4.0, 5.0]])
  assert rl_stats.iqm(scores) == pytest.approx(4.5)
  assert rl_stats.mean(scores) == pytest.approx(4.5)
  assert rl_stats.iqm([[0.0, 0.0, 0.0, 100.0]]) == pytest.approx(0.0)


def test_probability_of_improvement_is_the_mann_whitney_statistic():
  rng = np.random.default_rng(0)
  x = rng.integers(0, 5, size=(5, 3)).astype(float)  # Ties happen.
  y = rng.integers(0, 5, size=(4, 3)).astype(float)
  expected = np.mean(
    [stats.mannwhitneyu(x[:, t], y[:, t]).statistic / 20 for t in range(3)]
  )
  assert rl_stats.probability_of_improvement(x, y) == pytest.approx(expected)
  assert rl_stats.probability_of_improvement(x, x) == pytest.approx(0.5)
  assert rl_stats.probability_of_improvement(x + 10, x) == 1.0
  assert rl_stats.probability_of_improvement(x, x + 10) == 0.0


def test_task_probability_counts_the_seed_pairs():
  # 2 x 3 pairs: 3 > (2 > 1, 5 > 1, 5 > 2) and one tie (2 = 2).
  assert rl_stats.task_probability([2.0, 5.0], [1.0, 2.0, 6.0]) == (
    pytest.approx(3.5 / 6)
  )


def test_iqm_difference_and_its_interval_resample_each_side():
  x = np.array([[1.0, 5.0], [2.0, 6.0], [3.0, 7.0], [4.0, 8.0]])
  assert rl_stats.iqm_difference(x, x - 1.0) == pytest.approx(1.0)
  # Every run equal within each task: no resample moves the difference.
  flat = np.ones((3, 2))
  assert rl_stats.interval(
    (flat * 2, flat), rl_stats.iqm_difference, reps=50
  ) == (1.0, 1.0)
  low, high = rl_stats.interval((x, x - 1.0), rl_stats.iqm_difference, reps=500)
  # Two independent resamples: the interval spreads around 1 on both sides.
  assert low < 1.0 < high


def test_the_most_extreme_run_and_taking_it_out_at_the_median():
  x = np.array([[0.0, 10.0], [1.0, 11.0], [2.0, 30.0]])
  y = np.array([[0.0, 0.0], [5.0, 0.0], [6.0, 0.0]])
  # x's 30 is 19 from its task's median (11); y's 0 is 5 from 5.
  assert rl_stats.most_extreme_run(x, y) == dict(
    side='x', run=2, task=1, score=30.0, median=11.0
  )
  assert rl_stats.most_extreme_run(y, x)['side'] == 'y'
  np.testing.assert_array_equal(
    rl_stats.at_median(x, 2, 1), [[0, 10], [1, 11], [2, 11]]
  )
  assert x[2, 1] == 30.0  # A copy.


def test_one_task_interval_is_the_percentile_bootstrap_of_the_mean():
  rng = np.random.default_rng(1)
  runs = rng.normal(3.0, 2.0, size=12)
  low, high = rl_stats.interval(runs[:, None], rl_stats.mean, reps=4000)
  reference = stats.bootstrap(
    (runs,), np.mean, n_resamples=4000, method='percentile', random_state=2
  )
  # Two Monte Carlo estimates of the same interval.
  assert low == pytest.approx(reference.confidence_interval.low, abs=0.15)
  assert high == pytest.approx(reference.confidence_interval.high, abs=0.15)
  assert low < runs.mean() < high


def test_resampling_is_stratified_by_task():
  scores = np.stack([np.arange(6.0), 100 + np.arange(6.0)], axis=1)
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
  low40, high40 = rl_stats.interval((x, y), rl_stats.probability_of_improvement)
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
  with pytest.raises(
    ValueError,
    match=r'scores must be finite, got '
    r'\[\[1.0, nan\]\]',
  ):
    rl_stats.iqm([[1.0, float('nan')]])
  with pytest.raises(
    ValueError,
    match=r'must be a \[runs, tasks\] array, got '
    r'shape \(3,\)',
  ):
    rl_stats.mean([1.0, 2.0, 3.0])
  with pytest.raises(ValueError, match='the same tasks, got 2 and 3'):
    rl_stats.probability_of_improvement(np.ones((2, 2)), np.ones((2, 3)))
  with pytest.raises(
    ValueError,
    match=r'confidence must be in \(0, 1\), got '
    '95',
  ):
    rl_stats.interval(np.ones((2, 2)), rl_stats.mean, confidence=95)
  with pytest.raises(
    ValueError,
    match=r'reps must be an integer >= 1, got '
    '0',
  ):
    rl_stats.interval(np.ones((2, 2)), rl_stats.mean, reps=0)
  with pytest.raises(
    ValueError,
    match=r'seed must be an integer in \[0, '
    r'2\*\*32\) or a np.random.RandomState, got -1',
  ):
    rl_stats.interval(np.ones((2, 2)), rl_stats.mean, seed=-1)
  with pytest.raises(
    ValueError,
    match=r'taus must be a non-empty \[taus\] '
    r'array of finite thresholds, got \[\]',
  ):
    rl_stats.performance_profile(np.ones((2, 2)), [])
  with pytest.raises(
    ValueError, match='gamma must be a finite number, got inf'
  ):
    rl_stats.optimality_gap(np.ones((2, 2)), gamma=float('inf'))
  with pytest.raises(
    ValueError,
    match=r'runs_y must be a non-empty \[runs\] '
    r'array, got shape \(0,\)',
  ):
    rl_stats.task_probability([1.0], [])
  with pytest.raises(
    ValueError,
    match=r'curves must be a \[runs, tasks, '
    r'points\] array, got shape \(2, 2\)',
  ):
    rl_stats.curve_intervals(np.ones((2, 2)), rl_stats.iqm)


def test_the_other_aggregates_and_the_profile_by_hand():
  # Task means 2, 5 and 8: their mean 5, median 5.
  scores = np.array([[1.0, 4.0, 9.0], [3.0, 6.0, 7.0]])
  assert rl_stats.mean(scores) == pytest.approx(5.0)
  assert rl_stats.median(scores) == pytest.approx(5.0)
  assert rl_stats.median([[0.0, 1.0, 10.0]]) == 1.0
  # Clipped at 5: 1, 4, 5, 3, 5, 5 (mean 23 / 6).
  assert rl_stats.optimality_gap(scores, gamma=5.0) == pytest.approx(
    5.0 - 23 / 6
  )
  # Strictly above: 6 of 6 scores above 0, 3 above 4 (6, 7, 9), none above 9.
  np.testing.assert_allclose(
    rl_stats.performance_profile(scores, [0, 4, 9]), [1.0, 0.5, 0.0]
  )
  np.testing.assert_allclose(
    rl_stats.performance_profile(scores, [0, 4, 5], task_means=True),
    [1.0, 2 / 3, 1 / 3],
  )


# ---------------------------------------------------------------------------
# rliable's own numbers (expected.json: rliable 1.2.0, arch 7.2.0; its
# `versions` says which numpy, pandas and Python).

EXPECTED = json.loads(
  (
    pathlib.Path(__file__).resolve().parent
    / 'data'
    / 'rliable_expected'
    / 'expected.json'
  ).read_text()
)
DATASETS = ('synthetic', 'minatar')
TOLERANCE = dict(rel=0, abs=1e-9)
AGGREGATES = dict(
  iqm=rl_stats.iqm,
  mean=rl_stats.mean,
  median=rl_stats.median,
  optimality_gap=rl_stats.optimality_gap,
)
PAIRWISE = dict(
  probability_of_improvement=rl_stats.probability_of_improvement,
  iqm_difference=rl_stats.iqm_difference,
)
SAME = dict(
  reps=EXPECTED['reps'],
  confidence=EXPECTED['confidence'],
  seed=EXPECTED['seed'],
)


def _scores(dataset: str) -> dict[str, np.ndarray]:
  return {
    name: np.array(s)
    for name, s in EXPECTED['datasets'][dataset]['scores'].items()
  }


def test_expected_records_what_produced_it():
  assert EXPECTED['versions']['rliable'] == '1.2.0'
  assert set(EXPECTED['versions']) >= {
    'rliable',
    'arch',
    'numpy',
    'pandas',
    'python',
  }
  assert (EXPECTED['seed'], EXPECTED['reps'], EXPECTED['confidence']) == (
    0,
    2000,
    0.95,
  )


@pytest.mark.parametrize('dataset', DATASETS)
def test_aggregates_and_their_intervals_are_rliables(dataset):
  results = EXPECTED['datasets'][dataset]['results']['aggregates']
  for name, scores in _scores(dataset).items():
    for key, statistic in AGGREGATES.items():
      expected = results[name][key]
      assert statistic(scores) == pytest.approx(
        expected['point'], **TOLERANCE
      ), (name, key)
      assert rl_stats.interval(scores, statistic, **SAME) == pytest.approx(
        expected['interval'], **TOLERANCE
      ), (name, key)


@pytest.mark.parametrize('dataset', DATASETS)
def test_pairwise_statistics_and_their_intervals_are_rliables(dataset):
  data = EXPECTED['datasets'][dataset]
  scores = _scores(dataset)
  for x, y in data['pairs']:
    pair = (scores[x], scores[y])
    for key, statistic in PAIRWISE.items():
      expected = data['results']['pairs'][f'{x}>{y}'][key]
      assert statistic(*pair) == pytest.approx(
        expected['point'], **TOLERANCE
      ), (x, y, key)
      assert rl_stats.interval(pair, statistic, **SAME) == pytest.approx(
        expected['interval'], **TOLERANCE
      ), (x, y, key)


@pytest.mark.parametrize('dataset', DATASETS)
def test_performance_profiles_and_their_bands_are_rliables(dataset):
  data = EXPECTED['datasets'][dataset]
  for name, scores in _scores(dataset).items():
    for kind, task_means in (('runs', False), ('task_means', True)):
      expected = data['results']['profiles'][name][kind]
      profile, low, high = rl_stats.profile_intervals(
        scores, data['taus'], task_means=task_means, **SAME
      )
      for got, key in ((profile, 'profile'), (low, 'low'), (high, 'high')):
        assert got.shape == (len(data['taus']),)
        np.testing.assert_allclose(
          got, expected[key], rtol=0, atol=1e-9, err_msg=f'{name} {kind} {key}'
        )


def test_iqm_at_another_level_is_rliables():
  scores = _scores('synthetic')['A']
  expected = EXPECTED['iqm_90']
  assert rl_stats.interval(
    scores,
    rl_stats.iqm,
    reps=EXPECTED['reps'],
    confidence=0.9,
    seed=EXPECTED['seed'],
  ) == (pytest.approx(expected['interval'], **TOLERANCE))


def test_one_stream_over_several_algorithms_is_rliables():
  # rliable's get_interval_estimates over A, B, C after one seed: each
  # algorithm drawn from where the previous one left the generator.
  rng = np.random.RandomState(EXPECTED['seed'])
  for name, scores in _scores('synthetic').items():
    assert rl_stats.interval(
      scores, rl_stats.iqm, reps=EXPECTED['reps'], seed=rng
    ) == pytest.approx(EXPECTED['iqm_stream'][name], **TOLERANCE)


def test_iqm_curves_are_rliables():
  expected = EXPECTED['iqm_curve']
  value, low, high = rl_stats.curve_intervals(
    expected['curves'], rl_stats.iqm, **SAME
  )
  for got, key in ((value, 'point'), (low, 'low'), (high, 'high')):
    np.testing.assert_allclose(
      got, expected[key], rtol=0, atol=1e-9, err_msg=key
    )


def test_the_minatar_scores_are_the_committed_runs():
  """expected.json's MinAtar scores are the normalised final returns of the
  MinAtar study's table (docs/results/minatar/results.csv, which keeps 10
  significant digits), and rliable's numbers on them are those the study
  reports: IQM 0.152 and 0.100, P(improvement) 0.50."""
  results = pd.read_csv(
    pathlib.Path(__file__).resolve().parent.parent
    / 'docs/results/minatar/results.csv'
  )
  table = results[
    (results['stage'] == 'table') & results['reference_return'].notna()
  ]
  scores = _scores('minatar')
  for rule in ('disco_103', 'actor_critic'):
    committed = table[table['rule'] == rule].pivot(
      index='seed', columns='env', values='normalised_score'
    )
    np.testing.assert_allclose(
      scores[rule], committed.to_numpy(), rtol=1e-9, atol=0
    )
  got = EXPECTED['datasets']['minatar']['results']
  assert round(got['aggregates']['disco_103']['iqm']['point'], 3) == 0.152
  assert round(got['aggregates']['actor_critic']['iqm']['point'], 3) == 0.100
  assert (
    got['pairs']['disco_103>actor_critic']['probability_of_improvement'][
      'point'
    ]
    == 0.5
  )


@pytest.mark.parametrize('shape', [(3, 1), (5, 4), (10, 7), (4, 3, 6)])
def test_the_batched_statistics_give_the_one_by_one_numbers_exactly(shape):
  """`interval` computes iqm, iqm_difference, probability_of_improvement
  and curves of iqm over all resamples at once: the same bits as one
  resample at a time (ties included: scores on a coarse grid)."""
  rng = np.random.default_rng(sum(shape))
  x = np.round(rng.normal(size=shape), 1)
  y = np.round(rng.normal(size=(shape[0] + 2, *shape[1:])), 1)
  kwargs = dict(confidence=0.9, reps=300, seed=3)
  if len(shape) == 3:
    got = rl_stats.curve_intervals(x, rl_stats.iqm, **kwargs)[1:]

    def one_by_one(c):
      return np.array([rl_stats.iqm(c[:, :, i]) for i in range(c.shape[2])])

    want = rl_stats._interval(x, one_by_one, None, **kwargs)  # pylint: disable=protected-access
    np.testing.assert_array_equal(got, want)
    return
  cases = [
    (x, rl_stats.iqm),
    ((x, y), rl_stats.iqm_difference),
    ((x, y), rl_stats.probability_of_improvement),
  ]
  for scores, statistic in cases:
    assert statistic in rl_stats._BATCHED  # pylint: disable=protected-access
    got = rl_stats.interval(scores, statistic, **kwargs)
    want = rl_stats._interval(scores, statistic, None, **kwargs)  # pylint: disable=protected-access
    assert got == want, statistic.__name__
