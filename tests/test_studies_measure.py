# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl/studies/measure.py: the one final return, random play and its
cache, normalisation, compact curves."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from disco_rl.studies import measure


def _rows(episodes, returns, seed=0, per_iteration=10):
  """One run's rows: iteration i ends at (i + 1) * per_iteration env steps
  with episodes[i] episodes of mean return returns[i] (NaN if none)."""
  return [
    dict(
      step=i,
      seed=seed,
      env_steps=(i + 1) * per_iteration,
      episodes=float(e),
      avg_return=float(r) if e else math.nan,
      learned=int(i >= 2),
    )
    for i, (e, r) in enumerate(zip(episodes, returns, strict=True))
  ]


def test_final_return_weights_each_episode_of_the_last_tenth_of_env_steps():
  # 20 iterations of 10 env steps: the last 10% is env_steps > 180, the
  # iterations ending at 190 and 200. The row ending at 180 is out.
  episodes = [1] * 17 + [5, 2, 1]
  returns = [100.0] * 17 + [50.0, 1.0, 4.0]
  assert measure.final_return(_rows(episodes, returns)) == pytest.approx(
    (2 * 1.0 + 1 * 4.0) / 3
  )
  # Not the mean of the rows' means (2.5): the episodes weigh the same.
  assert measure.final_return(_rows(episodes, returns), fraction=0.15) == (
    pytest.approx((5 * 50.0 + 2 * 1.0 + 4.0) / 8)
  )
  # A DataFrame or a dict of columns reads the same.
  table = pd.DataFrame(_rows(episodes, returns))
  assert measure.final_return(table) == pytest.approx(2.0)
  assert measure.final_return({k: table[k].to_numpy() for k in table}) == (
    pytest.approx(2.0)
  )


def test_final_return_is_nan_when_no_episode_ended_in_the_last_tenth():
  # Episodes ended earlier (the old fallback took the last of them): NaN.
  rows = _rows([3] * 18 + [0, 0], [1.0] * 18 + [0.0, 0.0])
  assert math.isnan(measure.final_return(rows))
  assert measure.final_return(rows, fraction=0.2) == pytest.approx(1.0)


def test_final_returns_per_run():
  rows = _rows([0] * 9 + [2], [0.0] * 9 + [3.0], seed=1) + _rows(
    [0] * 10, [0.0] * 10, seed=0
  )
  finals = measure.final_returns(rows)
  assert finals.index.tolist() == [0, 1]
  assert math.isnan(finals[0]) and finals[1] == 3.0
  # Runs that differ in their learning rate too.
  both = pd.DataFrame(rows).assign(learning_rate=[1e-3] * 10 + [3e-3] * 10)
  finals = measure.final_returns(both)
  assert finals.index.names == ['seed', 'learning_rate']
  assert finals[(1, 1e-3)] == 3.0
  with pytest.raises(ValueError, match=r'one run, got seed \[0, 1\]'):
    measure.final_return(rows)


@pytest.mark.parametrize(
  'rows, fraction, match',
  [
    ([], 0.1, r'non-empty rows with columns .*got 0 rows'),
    ([dict(env_steps=1, episodes=1)], 0.1, r"missing \['avg_return'\]"),
    (
      _rows([-1], [1.0]),
      0.1,
      r'episodes must be finite and >= 0, got '
      r'\[-1.0\]',
    ),
    (
      [dict(env_steps=10, episodes=2, avg_return=math.nan)],
      0.1,
      r'avg_return must be finite where episodes > 0, got \[nan\]',
    ),
    (_rows([1], [1.0]), 0, r'fraction must be in \(0, 1\], got 0'),
    (_rows([1], [1.0]), 1.5, r'fraction must be in \(0, 1\], got 1.5'),
    ('rows', 0.1, r'rows must be rows .*got str'),
  ],
)
def test_final_return_names_bad_input(rows, fraction, match):
  with pytest.raises(ValueError, match=match):
    measure.final_return(rows, fraction)


def test_compact_curve_bins_env_steps_and_weights_episodes():
  # 12 iterations (env steps 10..120) into 4 bins of 30 env steps.
  episodes = [1, 0, 3, 0, 0, 0, 2, 2, 0, 1, 1, 2]
  returns = [4.0, 0, 8.0, 0, 0, 0, 1.0, 3.0, 0, 5.0, 6.0, 7.0]
  curve = measure.compact_curve(_rows(episodes, returns), points=4)
  assert curve.columns.tolist() == [
    'step',
    'env_steps',
    'updates',
    'episodes',
    'avg_return',
  ]
  assert curve['env_steps'].tolist() == [30, 60, 90, 120]
  assert curve['step'].tolist() == [2, 5, 8, 11]
  assert curve['updates'].tolist() == [1, 4, 7, 10]
  assert curve['episodes'].tolist() == [4, 0, 4, 4]
  np.testing.assert_allclose(
    curve['avg_return'], [(4 + 24) / 4, np.nan, 2.0, (5 + 6 + 14) / 4]
  )
  # A final stretch that starts at a bin's edge: the same final return.
  rows = _rows(episodes, returns)
  assert measure.final_return(curve, 0.25) == measure.final_return(rows, 0.25)
  # More points than rows: one point per row.
  assert len(measure.compact_curve(rows, points=50)) == 12


def test_compact_curves_of_several_runs_and_bad_points():
  rows = _rows([1] * 6, [1.0] * 6, seed=3) + _rows([2] * 6, [2.0] * 6, seed=1)
  curves = measure.compact_curves(rows, points=2)
  assert curves.columns[0] == 'seed'
  assert curves['seed'].tolist() == [1, 1, 3, 3]
  assert curves['avg_return'].tolist() == [2.0, 2.0, 1.0, 1.0]
  assert curves['episodes'].tolist() == [6.0, 6.0, 3.0, 3.0]
  for points in (0, 2.5, True):
    with pytest.raises(ValueError, match='points must be an integer >= 1'):
      measure.compact_curve(_rows([1], [1.0]), points=points)
  with pytest.raises(ValueError, match='a column naming the run'):
    measure.compact_curves([dict(env_steps=1, episodes=0, avg_return=0)])


def test_random_return_is_measured_once_and_cached_with_its_settings(
  tmp_path, monkeypatch
):
  cache = tmp_path / 'study' / 'random_play.json'
  value = measure.random_return(
    cache, 'jittable_catch', num_envs=4, steps=60, seed=1
  )
  record = json.loads(cache.read_text())['jittable_catch']
  assert record['env'] == 'jittable_catch' and record['env_settings'] == {}
  assert (record['num_envs'], record['steps'], record['seed']) == (4, 60, 1)
  assert record['episodes'] > 0 and -1.0 <= value <= 1.0
  assert record['mean_return'] == value

  def fail(*args, **kwargs):
    raise AssertionError('measured again')

  monkeypatch.setattr(measure, 'random_play', fail)
  assert (
    measure.random_return(cache, 'jittable_catch', num_envs=4, steps=60, seed=1)
    == value
  )
  # Another setting is an error that names it, never the cached value.
  with pytest.raises(
    ValueError,
    match=r'jittable_catch was measured with '
    r'steps=60, asked for steps=5000',
  ):
    measure.random_return(cache, 'jittable_catch', num_envs=4, seed=1)
  with pytest.raises(
    ValueError,
    match=r'measured with seed=1, asked for '
    r'seed=0',
  ):
    measure.random_return(cache, 'jittable_catch', num_envs=4, steps=60)


def test_random_play_that_ends_no_episode_is_an_error(tmp_path):
  with pytest.raises(ValueError, match='ended no episode in steps=2 steps'):
    measure.random_return(
      tmp_path / 'r.json',
      'jittable_catch',
      {'rows': 5, 'columns': 5},
      num_envs=2,
      steps=2,
    )
  assert not (tmp_path / 'r.json').exists()


def test_random_play_names_bad_input(tmp_path):
  old = tmp_path / 'random_returns.json'
  old.write_text(json.dumps({'Breakout': 0.41}))  # The scripts' old files.
  with pytest.raises(ValueError, match=r"random-play records .*'Breakout'"):
    measure.random_return(old, 'jittable_catch')
  with pytest.raises(ValueError, match='one stepped on the host'):
    measure.random_play('catch', num_envs=1, steps=1)
  with pytest.raises(
    ValueError,
    match=r'steps must be an integer >= 1, got '
    '0',
  ):
    measure.random_play('jittable_catch', steps=0)
  with pytest.raises(ValueError, match='env_settings must be a mapping'):
    measure.random_play('jittable_catch', env_settings=[('rows', 5)])
  assert measure.env_key('gymnax:DeepSea-bsuite', {'size': 8}) == (
    'gymnax:DeepSea-bsuite[size=8]'
  )
  assert measure.env_key('jittable_catch', {'rows': 7, 'columns': 5}) == (
    'jittable_catch[columns=5,rows=7]'
  )


def test_normalise_from_random_play_to_the_reference():
  assert measure.normalise(14.25, 0.5, 28.0) == 0.5
  assert measure.normalise(0.5, 0.5, 28.0) == 0.0
  np.testing.assert_allclose(
    measure.normalise([0.0, 131.0], 4.0, 131.0), [-4 / 127, 1.0]
  )
  with pytest.raises(
    ValueError,
    match=r'reference must be above random '
    r'\(1.0\).*got 1.0',
  ):
    measure.normalise(2.0, 1.0, 1.0)
  with pytest.raises(
    ValueError, match='random must be a finite number, got nan'
  ):
    measure.normalise(2.0, math.nan, 1.0)


def _results():
  rows = []
  for env, finals in (
    (
      'a',
      {
        ('x', 1e-3): [2.0, 4.0],
        ('x', 1e-2): [1.0, 1.0],
        ('y', 1e-3): [0.0, 1.0],
      },
    ),
    (
      'b',
      {
        ('x', 1e-3): [-1.0, -1.0],
        ('x', 1e-2): [-2.0, -1.0],
        ('y', 1e-3): [-3.0, -3.0],
      },
    ),
  ):
    for (rule, rate), values in finals.items():
      for seed, value in enumerate(values):
        rows.append(
          dict(
            study='s',
            stage='tune',
            env=env,
            rule=rule,
            learning_rate=rate,
            seed=seed,
            final_return=value,
          )
        )
  return pd.DataFrame(rows)


def test_normalised_scores_to_a_given_reference_or_the_best_mean():
  results = _results()
  best = measure.best_means(results)
  assert best[('s', 'tune', 'a')] == 3.0 and best[('s', 'tune', 'b')] == -1.0
  # The rate procedure's scale: random 0, the best mean 1; on b nothing
  # beat random play (-1): no span, so no score (NaN, not a silent 0).
  scored = measure.normalised_scores(results, {'a': 1.0, 'b': -1.0})
  on_a = scored[scored['env'] == 'a']
  np.testing.assert_allclose(
    on_a['normalised_score'], [0.5, 1.5, 0.0, 0.0, -0.5, 0.0]
  )
  assert (on_a['reference_return'] == 3.0).all()
  assert scored.loc[scored['env'] == 'b', 'normalised_score'].isna().all()
  # A run without a final return has no score, and its cell's mean (NaN)
  # is never the best.
  holed = results.copy()
  holed.loc[0, 'final_return'] = math.nan  # a, x at 1e-3 (the best).
  holed.loc[6, 'final_return'] = math.nan  # b, x at 1e-3.
  assert measure.best_means(holed)[('s', 'tune', 'a')] == 1.0
  scored = measure.normalised_scores(holed, {'a': 0.0, 'b': -1.0})
  assert scored['normalised_score'].isna().tolist() == (
    [True] + [False] * 5 + [True] * 6
  )
  # A given reference; an env without one is NaN (left out, by name).
  scored = measure.normalised_scores(results, {'a': 1.0, 'b': -1.0}, {'a': 5.0})
  np.testing.assert_allclose(
    scored.loc[scored['env'] == 'a', 'normalised_score'],
    [0.25, 0.75, 0.0, 0.0, -0.25, 0.0],
  )
  assert scored.loc[scored['env'] == 'b', 'normalised_score'].isna().all()
  assert results.columns.tolist() == [
    'study',
    'stage',
    'env',
    'rule',
    'learning_rate',
    'seed',
    'final_return',
  ]  # Not changed.
  with pytest.raises(ValueError, match=r"missing \['b'\]"):
    measure.normalised_scores(results, {'a': 1.0})
  with pytest.raises(ValueError, match=r"finite numbers, got \{'b': nan\}"):
    measure.normalised_scores(results, {'a': 1.0, 'b': math.nan})
  with pytest.raises(ValueError, match='reference must be above random'):
    measure.normalised_scores(results, {'a': 1.0, 'b': 0.0}, {'a': 0.5})
  with pytest.raises(ValueError, match='results must be a pandas DataFrame'):
    measure.normalised_scores(results.to_dict('records'), {})


def test_random_play_returns_on_catch():
  """Catch 5x5 ends every episode after 4 steps with +1 or -1: 32
  instances x 40 steps of uniform random play end 320 episodes, each worth
  +-1, both seen."""
  from disco_rl.jobs.meta import config as meta_config  # pylint: disable=g-import-not-at-top

  env = meta_config.parse_task('catch[rows=5,columns=5]').make_env(32)
  returns = measure.random_play_returns(env, steps=40, seed=1)
  assert returns.shape == (320,)
  assert set(np.unique(returns)) == {-1.0, 1.0}


def _plateau_rows(flat: int, total: int = 400, dip: bool = False):
  """A run at return -1 and a uniform policy (ln 3) for `flat` updates,
  then at return +1 with entropy 0.1; one update per iteration after 2
  acting-only ones (learned 0); with `dip`, an entropy dip of 10 updates
  at the start that comes back (as Disco103's does)."""
  learned = [0.0, 0.0] + [1.0] * total
  updates = np.cumsum(learned)
  returns = np.where(updates <= flat, -1.0, 1.0)
  entropy = np.where(updates <= flat, np.log(3), 0.1)
  if dip:
    entropy[2:12] = 0.5
  return pd.DataFrame(
    dict(
      learned=learned,
      avg_return=returns,
      entropy=entropy,
      seed=0,
      env_steps=np.arange(total + 2) * 10.0,
      episodes=1.0,
    )
  )


@pytest.mark.parametrize('dip', [False, True])
def test_the_plateau_is_where_the_moving_mean_is_half_way(dip):
  got = measure.plateau(_plateau_rows(100, dip=dip), num_actions=3)
  # Start -1, end +1: half way is 0, which the trailing 25-iteration mean
  # reaches with 13 iterations at +1: updates 101..113. The entropy's
  # mean of k iterations at 0.1 and 25 - k at ln 3 is below 0.9 ln 3 from
  # k = 3 (k > 0.1 * 25 ln 3 / (ln 3 - 0.1) = 2.75): update 103.
  assert got == dict(plateau=113.0, start=-1.0, end=1.0, leaves_uniform=103.0)


def test_a_run_that_does_not_leave_uniform_has_no_plateau_end():
  rows = _plateau_rows(100)
  rows['entropy'] = np.log(3)  # The return rose, the policy stayed uniform.
  got = measure.plateau(rows, num_actions=3)
  assert np.isnan(got['plateau']) and np.isnan(got['leaves_uniform'])
  flat = _plateau_rows(1000, total=400)  # The return never rose.
  assert np.isnan(measure.plateau(flat, num_actions=3)['plateau'])


def test_plateau_refuses_rows_of_several_runs_and_bad_arguments():
  rows = pd.concat([_plateau_rows(100), _plateau_rows(100).assign(seed=1)])
  with pytest.raises(ValueError, match='rows of one run'):
    measure.plateau(rows, num_actions=3)
  with pytest.raises(ValueError, match='num_actions must be an integer >= 2'):
    measure.plateau(_plateau_rows(100), num_actions=1)
  with pytest.raises(ValueError, match='entropy'):
    measure.plateau(_plateau_rows(100).drop(columns='entropy'), num_actions=3)


def test_an_early_crossing_that_falls_back_does_not_end_the_plateau():
  rows = _plateau_rows(100)
  # 30 iterations of return +1 at the start (noise), then back to -1.
  rows.loc[2:31, 'avg_return'] = 1.0
  got = measure.plateau(rows, num_actions=3)
  # The start: updates <= 20 (5% of 400), 2 iterations at -1 and 20 at
  # +1: 18/22. Half way to the end (+1): 20/22. The moving mean passes it
  # at once, falls back below the start after iteration 31, and passes it
  # for good with 24 of the last 25 at +1 ((24 - 1) / 25 >= 20/22): update
  # 124. Without the fall-back rule the plateau would be update 1.
  assert got == dict(
    plateau=124.0, start=18 / 22, end=1.0, leaves_uniform=103.0
  )
