# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""scripts/benchmark_minatar.py: its choices, summaries and a smoke run of
every stage (sweep, table, report) that resumes from its results."""

import json
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from smoke_env import fast_jax_env

SCRIPTS = pathlib.Path(__file__).resolve().parent.parent / 'scripts'
sys.path.insert(0, str(SCRIPTS))
import benchmark_minatar as bench  # pylint: disable=g-import-not-at-top,wrong-import-position
import comparison  # pylint: disable=g-import-not-at-top,wrong-import-position


def test_the_rate_with_the_best_mean_is_chosen_the_smaller_on_a_tie():
  assert (
    bench.choose_rate({1e-3: [1.0, 2.0], 3e-3: [3.0, 2.0], 1e-2: [0.0, 4.0]})
    == 3e-3
  )
  assert bench.choose_rate({1e-2: [2.0, 2.0], 1e-3: [1.0, 3.0]}) == 1e-3
  # A run without a final return never wins.
  assert bench.choose_rate({1e-3: [math.nan, 9.0], 3e-3: [0.5, 0.5]}) == 3e-3


def _metrics():
  """Two seeds' rows (alternating, as the eval job writes them): 2 warm-up
  iterations, then 10 updates; seed 7 ends episodes of return 1 at
  iterations 3 and 11, seed 8 of return 2 at iteration 4 only."""
  rows = []
  for step in range(12):
    for seed in (7, 8):
      ended = (seed == 7 and step in (3, 11)) or (seed == 8 and step == 4)
      rows.append(
        dict(
          step=step,
          seed=seed,
          env_steps=(step + 1) * 10,
          episodes=1.0 if ended else 0.0,
          avg_return=(1.0 if seed == 7 else 2.0) if ended else math.nan,
          learned=int(step >= 2),
          entropy=0.5 if step >= 2 else math.nan,
        )
      )
  table = pd.DataFrame(rows)
  return {k: table[k].to_numpy(float) for k in table.columns}


def test_final_returns_of_the_last_tenth_or_the_last_episodes_seen():
  # 10 updates: the last tenth is the last update (iteration 11). Seed 8
  # ended no episode there: its last ones count (iteration 4).
  assert bench.final_returns(_metrics(), 10) == [1.0, 2.0]


def test_compact_curves_bin_iterations_per_seed():
  rows = comparison.compact_curves(_metrics(), bin_size=5)
  assert [(r['seed'], r['step'], r['updates']) for r in rows] == [
    (7, 4, 3),
    (7, 9, 8),
    (7, 11, 10),
    (8, 4, 3),
    (8, 9, 8),
    (8, 11, 10),
  ]
  assert [r['episodes'] for r in rows] == [1, 0, 1, 1, 0, 0]
  assert rows[0]['avg_return'] == 1.0 and math.isnan(rows[1]['avg_return'])
  assert rows[3]['avg_return'] == 2.0
  assert rows[0]['entropy'] == 0.5 and rows[0]['env_steps'] == 50


def test_points_without_an_episode_end_carry_the_last_return():
  # Freeway: every point between its time-limit episode ends is NaN; the
  # curves draw the last return seen (NaN, or the IQM's 0, before any).
  values = np.array([np.nan, 1.0, np.nan, np.nan, 3.0, np.nan])
  np.testing.assert_array_equal(
    bench._filled(values, start=np.nan), [np.nan, 1, 1, 1, 3, 3]
  )
  np.testing.assert_array_equal(bench._filled(values), [0, 1, 1, 1, 3, 3])


def test_normalised_scores_from_random_play_to_the_published_reference():
  # Breakout: random play 0.5, gymnax's PPO 28: half way is 14.25.
  assert bench.normalise('Breakout', 14.25, 0.5) == 0.5
  assert bench.normalise('Breakout', 0.5, 0.5) == 0.0
  assert bench.normalise('SpaceInvaders', 131.0, 4.0) == 1.0
  # Below random play is below 0 (it used to read as a small positive).
  assert bench.normalise('Asterix', 0.0, 1.0) == pytest.approx(-1 / 14)
  # Seaquest has no published reference: never normalised.
  with pytest.raises(ValueError, match='Seaquest has no published reference'):
    bench.normalise('Seaquest', 1.0, 0.1)


def test_the_spread_of_three_seeds_is_their_range():
  summaries = {
    ('Breakout', 'disco_103'): dict(
      learning_rate=1e-3,
      seeds=[0, 1, 2],
      updates=10,
      env_steps=580,
      final_returns=[3.0, 9.0, 6.0],
      steps_per_second=1.0,
    )
  }
  (row,) = bench.game_rows(
    ['Breakout'], ['disco_103'], summaries, {'Breakout': 1.0}
  )
  assert (row['final_return'], row['min'], row['max']) == (6.0, 3.0, 9.0)
  assert row['normalised'] == pytest.approx((6.0 - 1.0) / (28.0 - 1.0))
  seaquest = dict(summaries[('Breakout', 'disco_103')])
  (row,) = bench.game_rows(
    ['Seaquest'],
    ['disco_103'],
    {('Seaquest', 'disco_103'): seaquest},
    {'Seaquest': 0.1},
  )
  assert math.isnan(row['normalised']) and math.isnan(row['reference'])


def _by_hand_iqm(values) -> float:
  """The mean of the sorted values with a quarter of them (rounded down) cut
  from each end."""
  values = sorted(np.ravel(values))
  quarter = len(values) // 4
  return float(np.mean(values[quarter : len(values) - quarter]))


def _by_hand_probability(x, y) -> float:
  """Per game, the share of seed pairs (x, y) with x > y (ties half)."""
  per_game = []
  for t in range(x.shape[1]):
    wins = [
      1.0 if a > b else 0.5 if a == b else 0.0 for a in x[:, t] for b in y[:, t]
    ]
    per_game.append(sum(wins) / len(wins))
  return float(np.mean(per_game))


# [seeds, games]: X ahead on game 0 (one big outlier, 0.9), behind on 1.
_X = np.array([[0.1, 0.2], [0.3, 0.1], [0.9, 0.0]])
_Y = np.array([[0.0, 0.4], [0.2, 0.3], [0.1, 0.5]])


def test_the_comparison_against_a_computation_by_hand():
  stats = bench.compare(_X, _Y, reps=300)
  # 6 scores each, one cut from each end: X 0.1, 0.1, 0.2, 0.3; Y 0.1-0.4.
  assert stats['iqm_x'] == pytest.approx(_by_hand_iqm(_X)) == 0.175
  assert stats['iqm_y'] == pytest.approx(_by_hand_iqm(_Y)) == 0.25
  assert stats['difference'] == pytest.approx(-0.075)
  # X wins 7 of 9 pairs of game 0 and ties one (0.1 = 0.1); none of game 1.
  assert stats['per_game'] == pytest.approx([7.5 / 9, 0.0])
  assert stats['probability'] == pytest.approx(_by_hand_probability(_X, _Y))
  for point, (low, high) in (
    (stats['difference'], stats['difference_ci']),
    (stats['probability'], stats['probability_ci']),
    (stats['iqm_x'], stats['iqm_x_ci']),
  ):
    assert low <= point <= high
  # The most extreme run is X's 0.9 (0.6 from its game's median, 0.3); set
  # to that median, X's IQM is that of the array with 0.3 in its place.
  sensitivity = stats['sensitivity']
  assert (sensitivity['side'], sensitivity['run'], sensitivity['task']) == (
    'x',
    2,
    0,
  )
  assert (sensitivity['score'], sensitivity['median']) == (0.9, 0.3)
  at_median = _X.copy()
  at_median[2, 0] = 0.3
  assert sensitivity['iqm_x'] == pytest.approx(_by_hand_iqm(at_median))
  assert sensitivity['iqm_y'] == pytest.approx(_by_hand_iqm(_Y))
  assert sensitivity['probability'] == pytest.approx(
    _by_hand_probability(at_median, _Y)
  )


def _write_run(results, game, rule, rate, finals, points=4):
  """A finished run's committed files: summary.json and curves.csv."""
  path = results / bench.run_name(game, rule, rate)
  path.mkdir(parents=True)
  (path / 'summary.json').write_text(
    json.dumps(
      dict(
        env=bench.env_name(game),
        rule=rule,
        learning_rate=rate,
        seeds=list(range(len(finals))),
        updates=40,
        env_steps=40 * 58,
        env_steps_per_update=58,
        final_returns=finals,
        steps_per_second=1.0,
      )
    )
  )
  rows = [
    dict(
      seed=s,
      step=i,
      env_steps=(i + 1) * 580,
      updates=(i + 1) * 10,
      episodes=1.0,
      avg_return=final * (i + 1) / points,
      entropy=1.0,
    )
    for s, final in enumerate(finals)
    for i in range(points)
  ]
  pd.DataFrame(rows).to_csv(path / 'curves.csv', index=False)


def test_report_from_the_committed_files_alone(tmp_path):
  """The report stage reads the per-run files and random_returns.json (no
  training, nothing compiled), leaves Seaquest out of the aggregate, and
  writes the statistics an independent computation gives."""
  results = tmp_path / 'results'
  finals = {
    ('Breakout', 'disco_103'): [3.0, 5.0, 4.0],
    ('Breakout', 'actor_critic'): [6.0, 8.0, 7.0],
    ('Freeway', 'disco_103'): [2.0, 20.0, 4.0],
    ('Freeway', 'actor_critic'): [1.0, 1.5, 0.5],
    ('Seaquest', 'disco_103'): [0.7, 0.8, 0.6],
    ('Seaquest', 'actor_critic'): [0.5, 0.4, 0.45],
  }
  rates = {'disco_103': 0.001, 'actor_critic': 0.003}
  for (game, rule), values in finals.items():
    _write_run(results, game, rule, rates[rule], values)
  randoms = {'Breakout': 0.4, 'Freeway': 0.3, 'Seaquest': 0.1}
  (results / 'random_returns.json').write_text(json.dumps(randoms))
  assert (
    bench.main(
      [
        '--stage',
        'report',
        '--games',
        'Breakout',
        'Freeway',
        'Seaquest',
        '--learning-rates',
        '0.001',
        '0.003',
        '--results',
        str(results),
        '--work',
        str(tmp_path / 'work'),
      ]
    )
    == 0
  )
  assert not (tmp_path / 'work').exists()  # Nothing trained or compiled.
  saved = json.loads((results / 'comparison.json').read_text())
  assert saved['games'] == ['Breakout', 'Freeway']  # Seaquest left out.
  normalised = {
    rule: np.array(
      [
        [
          (v - randoms[g]) / (bench.PPO_RETURNS[g] - randoms[g])
          for v in finals[g, rule]
        ]
        for g in ('Breakout', 'Freeway')
      ]
    ).T
    for rule in bench.RULES
  }
  x, y = normalised['disco_103'], normalised['actor_critic']
  # 6 scores per rule: the IQM trims one from each end.
  assert saved['iqm_x'] == pytest.approx(np.mean(sorted(x.ravel())[1:5]))
  assert saved['iqm_y'] == pytest.approx(np.mean(sorted(y.ravel())[1:5]))
  assert saved['probability'] == pytest.approx(_by_hand_probability(x, y))
  # Freeway's 20.0 is the farthest from its game's median (4.0).
  assert (saved['sensitivity']['task'], saved['sensitivity']['run']) == (1, 1)
  table = pd.read_csv(results / 'results.csv')
  assert (
    list(table['game']) == ['Breakout'] * 2 + ['Freeway'] * 2 + ['Seaquest'] * 2
  )
  assert list(table['min']) == [min(v) for v in finals.values()]
  assert list(table['max']) == [max(v) for v in finals.values()]
  text = (results / 'results.md').read_text()
  assert f'| IQM, Disco103 | {saved["iqm_x"]:.3f} [' in text
  assert 'P(Disco103 > actor-critic) | 0.500 [' in text
  assert '| Seaquest | Disco103 | 0.001 | 3 | 0.70 (0.60-0.80) |' in text
  assert (
    'Sensitivity, without the most extreme run (Disco103, Freeway, '
    'seed 1' in text
  )
  for png in ('curves_Breakout.png', 'curves_Seaquest.png', 'iqm.png'):
    assert (results / png).stat().st_size > 1000


def test_the_committed_comparison_matches_the_committed_runs():
  """docs/results/minatar: comparison.json's IQMs and probability are those
  of the committed per-seed final returns and random-play returns."""
  results = SCRIPTS.parent / 'docs/results/minatar'
  saved = json.loads((results / 'comparison.json').read_text())
  rates = json.loads((results / 'sweep.json').read_text())['chosen']
  scores = {}
  for rule in bench.RULES:
    scores[rule] = np.array(
      [
        [
          bench.normalise(g, v, saved['random_returns'][g])
          for v in json.loads(
            (
              results / bench.run_name(g, rule, rates[rule]) / 'summary.json'
            ).read_text()
          )['final_returns']
        ]
        for g in saved['games']
      ]
    ).T
  assert saved['iqm_x'] == pytest.approx(_by_hand_iqm(scores['disco_103']))
  assert saved['iqm_y'] == pytest.approx(_by_hand_iqm(scores['actor_critic']))
  assert saved['probability'] == pytest.approx(
    _by_hand_probability(scores['disco_103'], scores['actor_critic'])
  )


def test_seeds_of_a_program_must_be_consecutive():
  with pytest.raises(
    ValueError,
    match=r'seeds must be consecutive .* got '
    r'\[0, 2\]',
  ):
    bench.make_config('Breakout', 'disco_103', 1e-3, [0, 2], 10, bench.TINY)


# Slow: a minute of compiling; the default run tests the script's tables
# and statistics below, and the eval job it drives elsewhere.
@pytest.mark.slow
@pytest.mark.weights
def test_tiny_run_of_every_stage_then_read_back(tmp_path):
  """Sweep (one rate), table and report for Breakout with two seeds in one
  program per rule; run again, every run is read back from --results."""
  env = dict(
    os.environ, **fast_jax_env(), JAX_PLATFORMS='cpu', MPLBACKEND='Agg'
  )
  results, work = tmp_path / 'results', tmp_path / 'work'
  args = [
    sys.executable,
    str(SCRIPTS / 'benchmark_minatar.py'),
    '--tiny',
    '--games',
    'Breakout',
    '--seeds',
    '0',
    '1',
    '--sweep-seeds',
    '5',
    '--sweep-rates',
    '0.003',
    '--results',
    str(results),
    '--work',
    str(work),
  ]
  first = subprocess.run(
    args, env=env, capture_output=True, text=True, check=False, timeout=900
  )
  assert first.returncode == 0, first.stderr[-4000:]
  assert json.loads((results / 'sweep.json').read_text())['chosen'] == {
    'disco_103': 0.003,
    'actor_critic': 0.003,
  }
  table = pd.read_csv(results / 'results.csv')
  assert list(table['rule']) == ['disco_103', 'actor_critic']
  assert (table['seeds'] == 2).all() and (table['updates'] == 20).all()
  assert (table['min'] <= table['final_return']).all()
  assert (table['final_return'] <= table['max']).all()
  text = (results / 'results.md').read_text()
  assert '| IQM, Disco103 |' in text
  assert '| P(Disco103 > actor-critic) |' in text
  for png in ('curves_Breakout.png', 'iqm.png'):
    assert (results / png).stat().st_size > 1000
  summaries = sorted(results.glob('**/summary.json'))
  assert len(summaries) == 4  # Sweep and table, both rules.
  summary = json.loads(summaries[0].read_text())
  assert summary['updates'] == 20 and summary['env_steps_per_update'] == 16
  curves = pd.read_csv(results / 'Breakout/disco_103/lr_0.003/curves.csv')
  assert sorted(set(curves['seed'])) == [0, 1]
  assert curves.groupby('seed')['updates'].max().tolist() == [20, 20]
  # Nothing but small files in --results.
  assert not list(results.glob('**/checkpoints'))
  written = [p.stat().st_mtime_ns for p in summaries]
  again = subprocess.run(
    args, env=env, capture_output=True, text=True, check=False, timeout=600
  )
  assert again.returncode == 0, again.stderr[-4000:]
  assert [p.stat().st_mtime_ns for p in summaries] == written
  assert 'avg_return=' not in again.stderr + again.stdout  # Nothing trained.
  assert pd.read_csv(results / 'results.csv').equals(table)


def test_bad_input_is_one_error_line(tmp_path):
  proc = subprocess.run(
    [
      sys.executable,
      str(SCRIPTS / 'benchmark_minatar.py'),
      '--stage',
      'table',
      '--results',
      str(tmp_path / 'r'),
      '--work',
      str(tmp_path / 'w'),
    ],
    capture_output=True,
    text=True,
    check=False,
    timeout=300,
  )
  assert proc.returncode == 2
  assert proc.stderr.strip() == (
    f'error: {tmp_path / "r"}/sweep.json not found: run --stage sweep '
    'first or give --learning-rates.'
  )


# ----------------------------------------------------------------------------
# scripts/study_plateau.py: the plateau's measures.

import study_plateau  # pylint: disable=g-import-not-at-top,wrong-import-position


def test_plateau_is_where_the_return_is_half_way_from_start_to_end():
  updates = np.arange(1, 101, dtype=float)
  # -1 for 40 updates, then a ramp to +1 at update 60, then +1.
  returns = np.clip(-1 + (updates - 40) / 10, -1, 1)
  length, start, end = study_plateau.plateau_length(updates, returns, 1)
  assert (start, end) == (-1.0, 1.0)
  assert length == 50  # The ramp crosses 0 at update 50.
  # A 5-point trailing mean crosses later, by half its width.
  assert study_plateau.plateau_length(updates, returns, 5)[0] == 52
  # Nothing learned: no plateau to measure.
  assert math.isnan(study_plateau.plateau_length(updates, -returns, 1)[0])


def test_the_policy_leaves_uniform_below_90_percent_of_its_entropy():
  updates = np.arange(1, 11, dtype=float)
  entropy = np.full(10, math.log(3))
  entropy[6:] = 0.5
  assert study_plateau.leaves_uniform(updates, entropy, 3, 1) == 7
  assert math.isnan(study_plateau.leaves_uniform(updates, entropy[:6], 3, 1))
  # An early dip that comes back up does not count.
  dip = np.array([math.log(3), 0.5, math.log(3), math.log(3), 0.5, 0.5])
  assert study_plateau.leaves_uniform(updates[:6], dip, 3, 1) == 5


def test_a_run_whose_policy_stays_uniform_has_no_plateau_end():
  """Noise that leaves the end a little above the start is no learning
  while the policy stays uniform (Catch at learning rate 3e-2)."""
  updates = np.arange(1, 101, dtype=float)
  returns = np.where(updates > 90, -0.7, -0.8)
  uniform = np.full(100, math.log(3))
  run = study_plateau.measure_run(updates, returns, uniform, 3, 1)
  assert math.isnan(run['plateau']) and math.isnan(run['leaves_uniform'])
  assert (run['start'], run['end']) == (-0.8, -0.7)
  learned = np.where(updates > 60, 0.2, math.log(3))
  run = study_plateau.measure_run(updates, returns, learned, 3, 1)
  assert (run['plateau'], run['leaves_uniform']) == (91, 61)


@pytest.mark.slow
@pytest.mark.weights
def test_plateau_study_tiny_run(tmp_path):
  """Every condition (the warm ones from base's final state), the tables
  (with the MinAtar runs of a tiny benchmark) and the plot; run again, each
  condition is read back."""
  env = dict(
    os.environ, **fast_jax_env(), JAX_PLATFORMS='cpu', MPLBACKEND='Agg'
  )
  minatar = tmp_path / 'minatar'
  bench_args = [
    sys.executable,
    str(SCRIPTS / 'benchmark_minatar.py'),
    '--tiny',
    '--games',
    'Breakout',
    '--seeds',
    '0',
    '1',
    '--sweep-rates',
    '0.003',
    '--rules',
    'disco_103',
    '--results',
    str(minatar),
    '--work',
    str(tmp_path / 'w'),
  ]
  assert (
    subprocess.run(
      bench_args,
      env=env,
      capture_output=True,
      text=True,
      check=False,
      timeout=900,
    ).returncode
    == 0
  )
  args = [
    sys.executable,
    str(SCRIPTS / 'study_plateau.py'),
    '--tiny',
    '--results',
    str(tmp_path / 'plateau'),
    '--minatar-results',
    str(minatar),
  ]
  first = subprocess.run(
    args, env=env, capture_output=True, text=True, check=False, timeout=1800
  )
  assert first.returncode == 0, first.stderr[-4000:]
  table = pd.read_csv(tmp_path / 'plateau/plateau.csv')
  settings = list(dict.fromkeys(table['setting']))
  assert settings[:6] == [f'Catch 8x8, {c}' for c in study_plateau.CONDITIONS]
  assert any(s.startswith('MinAtar Breakout, lr 0.003') for s in settings)
  assert (tmp_path / 'plateau/plateau.png').stat().st_size > 1000
  warm = json.loads((tmp_path / 'plateau/warm_rnn/summary.json').read_text())
  assert warm['carried'] == ['rnn_state']
  again = subprocess.run(
    args, env=env, capture_output=True, text=True, check=False, timeout=600
  )
  assert again.returncode == 0, again.stderr[-4000:]
  assert 'training' not in again.stdout
  assert pd.read_csv(tmp_path / 'plateau/plateau.csv').equals(table)


def test_an_interrupted_run_records_nothing(tmp_path, monkeypatch):
  """A run stopped by a signal leaves no curves or summary behind (they
  would read as finished next time); the next call resumes it."""
  monkeypatch.setattr(
    bench.comparison,
    'run_or_resume',
    lambda *a, **k: dict(steps=7, interrupted='SIGTERM'),
  )
  config = bench.make_config('Breakout', 'disco_103', 1e-3, [0], 20, bench.TINY)
  with pytest.raises(
    bench.comparison.Interrupted,
    match=(
      r'stopped at learner step 7 of 20 \(SIGTERM\); run the same command '
      'again to resume it'
    ),
  ):
    bench.run_program(config, tmp_path / 'work', tmp_path / 'results')
  assert not (tmp_path / 'results').exists()
