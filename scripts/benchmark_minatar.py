#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""MinAtar benchmark: Disco103 and actor-critic on the five games, in a replay
regime like the upstream eval's, with the statistics of Agarwal et al. 2021.

The regime (`SETTINGS`, every game and rule): MinAtar's reference network
(conv 16 3x3, ReLU, 128 hidden, ReLU) with the LSTM action model of 128;
2 environments act 29 steps per iteration into a FIFO buffer of 256
trajectories, and each learner step samples 16 of them uniformly with
replacement (replay ratio 8: 58 environment steps per learner update; the
upstream eval notebook: 2 environments, batch 64, replay ratio 32, buffer
1,024, also 58). The budget is counted in learner updates (`--updates`,
3,000 by default, six times the ~500-update plateau of Disco103 on Catch).

Stages, in order (`--stage`; each skips the runs whose results are in
--results, and an interrupted run resumes from its checkpoint in --work):

  sweep   each rule's Adam learning rate, chosen on Breakout only: seeds
          100.. (`--sweep-seeds`, apart from the table's), `--sweep-rates`;
          the rate with the highest mean final return over the seeds is
          kept (the smaller on a tie) -> sweep.csv, sweep.md, sweep.json
  table   the games x seeds 0.. (`--seeds` in one program each) x both rules
          at the chosen rates
  report  from the per-run files in --results alone (no training; random
          play is measured only for a game random_returns.json lacks): per
          game the mean final return over seeds and their range (min-max;
          with 3 seeds no interval is claimed); over the games with a
          published reference, each rule's interquartile mean (IQM) of
          normalised scores, the IQM difference and the probability that
          Disco103 improves on actor-critic, each with a stratified-bootstrap
          95% interval, and the same with the most extreme run (the farthest
          from its game's median) set to that median; curves per game with
          random play's return, and the aggregate IQM curve -> results.md,
          results.csv, comparison.json, curves_<game>.png, iqm.png

Final return: the mean return of the episodes that ended in the last 10% of
the updates (`final_returns`). Normalised score: (final return - random
play) / (reference - random play), random play measured here
(random_returns.json) and the reference gymnax's published PPO return
(`PPO_RETURNS`: Asterix 15, Breakout 28, Freeway 58, SpaceInvaders 131).
Seaquest has no published return there, nor in the MinAtar paper (whose
results are plots), so it is reported per game and left out of the
aggregate. An episode cut by a time limit (Freeway's only way to end, at
2,500 steps) ends it as a terminal step would, for both rules (the agents
record discount 0 at every episode end; MinAtar's own code does the same).

--results holds the small outputs meant for the repository: per run
`curves.csv` (per seed, `comparison.CURVE_POINTS` means over iterations) and
`summary.json`; --work holds the full runs (metrics of every step,
checkpoints).

  python scripts/benchmark_minatar.py                    # all stages
  python scripts/benchmark_minatar.py --stage sweep
  python scripts/benchmark_minatar.py --tiny --results /tmp/r --work /tmp/w
"""

import argparse
import json
import math
import pathlib
import shlex
import sys
import time

import comparison  # scripts/comparison.py, beside this script
import numpy as np

from disco_rl import plots
from disco_rl.studies import stats as rl_stats

GAMES = ('Asterix', 'Breakout', 'Freeway', 'Seaquest', 'SpaceInvaders')
RULES = ('disco_103', 'actor_critic')
RULE_LABELS = {rule: plots.RULE_NAMES[rule] for rule in RULES}
# The normalisation's reference: gymnax's PPO returns, from the table of
# environments in gymnax's README ("PPO (R: 15)", ...), trained for 10M
# environment steps (gymnax-blines' agents/<game>/ppo.yaml,
# num_train_steps). Seaquest has none published.
PPO_RETURNS = {
  'Asterix': 15.0,
  'Breakout': 28.0,
  'Freeway': 58.0,
  'SpaceInvaders': 131.0,
}
REFERENCE = (
  "gymnax's published PPO return after 10M environment steps "
  '(gymnax README; gymnax-blines ppo.yaml)'
)
SETTINGS = dict(
  net='conv',
  conv_channels=(16,),
  conv_kernel=3,
  dense=(128,),
  model_lstm_size=128,
  model_head_hiddens=(128,),
  rollout_len=29,
  batch_size=16,
  replay_ratio=8,
  buffer_capacity=256,
  steps_per_call=100,
  debug_checks=False,
)
UPDATES = 3000
SWEEP_GAME = 'Breakout'
SWEEP_SEEDS = (100, 101)
SWEEP_RATES = (1e-3, 3e-3, 1e-2)
# --tiny: a smoke run of every stage in a few minutes on a CPU.
TINY = dict(
  SETTINGS,
  conv_channels=(4,),
  dense=(16,),
  model_lstm_size=8,
  model_head_hiddens=(8,),
  rollout_len=8,
  batch_size=4,
  replay_ratio=2,
  buffer_capacity=16,
  steps_per_call=10,
)
TINY_UPDATES = 20
FINAL_FRACTION = 0.1  # The final return: the last 10% of the updates.
RANDOM_STEPS = 5000  # Per environment, for the random-play returns.


def env_name(game: str) -> str:
  return f'gymnax:{game}-MinAtar'


def run_name(game: str, rule: str, learning_rate: float) -> str:
  return f'{game}/{rule}/lr_{learning_rate:g}'


def make_config(
  game: str,
  rule: str,
  learning_rate: float,
  seeds,
  updates: int,
  settings: dict,
):
  """The EvalConfig of one program: `seeds` (consecutive) in parallel."""
  from disco_rl import EvalConfig  # pylint: disable=g-import-not-at-top

  seeds = list(seeds)
  if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
    raise ValueError(
      f'seeds must be consecutive (one program runs seed .. '
      f'seed + n - 1), got {seeds}.'
    )
  return EvalConfig(
    env=env_name(game),
    rule=rule,
    seed=seeds[0],
    num_seeds=len(seeds),
    learning_rate=learning_rate,
    num_steps=updates,
    **settings,
  )


def final_returns(metrics: dict[str, np.ndarray], updates: int) -> list[float]:
  """Per seed, the mean return of the episodes that ended during the last
  `FINAL_FRACTION` of the updates; if none ended there (very long episodes
  or a tiny run), of those that ended in the last iteration that had an
  episode end (NaN if no episode ended at all)."""
  finals = []
  for seed in np.unique(metrics['seed']):
    seed_rows = metrics['seed'] == seed
    done = np.cumsum(metrics['learned'][seed_rows])
    ended = metrics['episodes'][seed_rows] > 0
    last = (done > updates * (1 - FINAL_FRACTION)) & ended
    if not last.any() and ended.any():
      last = np.arange(len(ended)) == np.flatnonzero(ended)[-1]
    finals.append(
      float(
        np.average(
          metrics['avg_return'][seed_rows][last],
          weights=metrics['episodes'][seed_rows][last],
        )
      )
      if last.any()
      else math.nan
    )
  return finals


def run_program(
  config, work: pathlib.Path, results: pathlib.Path, overwrite: bool = False
) -> dict:
  """Trains one program unless its results are in `results`; its summary.

  The summary (written to results/summary.json with results/curves.csv):
  the settings that identify the run, the final return per seed, speed and
  budget.
  """
  import pandas as pd  # pylint: disable=g-import-not-at-top

  from disco_rl import metrics as metrics_lib  # pylint: disable=g-import-not-at-top

  done = results / 'summary.json'
  if done.is_file() and not overwrite:
    summary = json.loads(done.read_text())
    if summary['updates'] == config.num_steps and summary['seeds'] == list(
      range(config.seed, config.seed + config.num_seeds)
    ):
      return summary
  start = time.time()
  run = comparison.run_or_resume(config, work, overwrite)
  if run.get('interrupted') or run.get('steps') != config.num_steps:
    # Stopped by a signal: nothing is recorded; the next call resumes it.
    raise comparison.Interrupted(
      f'{work} stopped at learner step {run.get("steps")} of '
      f'{config.num_steps} ({run.get("interrupted")}); run the same '
      'command again to resume it.'
    )
  metrics = metrics_lib.read_metrics(work / 'metrics.csv')
  results.mkdir(parents=True, exist_ok=True)
  pd.DataFrame(
    comparison.compact_curves(
      metrics, max(1, config.num_steps // comparison.CURVE_POINTS)
    )
  ).to_csv(results / 'curves.csv', index=False, float_format='%.6g')
  per_iteration = config.num_envs * config.rollout_len
  summary = dict(
    env=config.env,
    rule=config.rule,
    learning_rate=config.learning_rate,
    seeds=list(range(config.seed, config.seed + config.num_seeds)),
    updates=config.num_steps,
    env_steps=int(metrics['env_steps'].max()),
    env_steps_per_update=per_iteration,
    final_returns=final_returns(metrics, config.num_steps),
    steps_per_second=run['steps_per_second'],
    first_call_s=run.get('compile_and_first_step_s'),
    wall_s=round(time.time() - start, 1),
  )
  tmp = done.with_suffix('.tmp')
  tmp.write_text(json.dumps(summary, indent=1) + '\n')
  tmp.replace(done)
  return summary


def choose_rate(finals_by_rate: dict[float, list[float]]) -> float:
  """The rate with the highest mean final return over seeds (NaN counts as
  the lowest); the smaller rate on a tie."""

  def score(rate):
    values = np.asarray(finals_by_rate[rate], float)
    return float(np.mean(values)) if np.isfinite(values).all() else -math.inf

  best = max(score(r) for r in finals_by_rate)
  return min(r for r in finals_by_rate if score(r) == best)


def sweep(args, settings, updates) -> dict[str, float]:
  """Runs the learning-rate sweep; {rule: chosen rate}; writes its table."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  rows, chosen = [], {}
  for rule in args.rules:
    finals_by_rate = {}
    for rate in args.sweep_rates:
      name = 'sweep/' + run_name(SWEEP_GAME, rule, rate)
      summary = _run(
        args,
        name,
        make_config(
          SWEEP_GAME, rule, rate, args.sweep_seeds, updates, settings
        ),
      )
      finals_by_rate[rate] = summary['final_returns']
      rows.append(
        dict(
          rule=rule,
          learning_rate=rate,
          mean=float(np.mean(summary['final_returns'])),
          final_returns=summary['final_returns'],
        )
      )
    chosen[rule] = choose_rate(finals_by_rate)
  for row in rows:
    row['chosen'] = chosen[row['rule']] == row['learning_rate']
  out = pathlib.Path(args.results)
  pd.DataFrame(rows).to_csv(out / 'sweep.csv', index=False)
  (out / 'sweep.json').write_text(
    json.dumps(
      dict(
        game=SWEEP_GAME,
        seeds=list(args.sweep_seeds),
        updates=updates,
        chosen=chosen,
      ),
      indent=1,
    )
    + '\n'
  )
  lines = [
    f'Learning-rate sweep on {SWEEP_GAME}-MinAtar only, seeds '
    f'{", ".join(map(str, args.sweep_seeds))}, {updates:,} updates; '
    'final return per seed; the chosen rate (bold) has the highest '
    'mean.',
    '',
    '| rule | learning rate | mean | per seed |',
    '|---|---|---|---|',
  ]
  for row in rows:
    rate = f'{row["learning_rate"]:g}'
    lines.append(
      f'| {RULE_LABELS[row["rule"]]} | '
      f'{f"**{rate}**" if row["chosen"] else rate} | {row["mean"]:.2f} | '
      + ', '.join(f'{v:.2f}' for v in row['final_returns'])
      + ' |'
    )
  (out / 'sweep.md').write_text('\n'.join(lines) + '\n')
  print('\n'.join(lines), flush=True)
  return chosen


def _run(args, name: str, config) -> dict:
  summary = run_program(
    config,
    pathlib.Path(args.work) / name,
    pathlib.Path(args.results) / name,
    args.overwrite,
  )
  print(
    f'{name} seeds {summary["seeds"]}: final returns '
    + ', '.join(f'{v:.2f}' for v in summary['final_returns'])
    + f' | {summary["steps_per_second"]:.2f} steps/s',
    flush=True,
  )
  return summary


def random_returns(
  games, num_envs: int = 32, steps: int = RANDOM_STEPS, seed: int = 0
) -> dict[str, float]:
  """Mean return of the episodes uniform random play ends, per game."""
  from disco_rl import environments  # pylint: disable=g-import-not-at-top

  return {
    game: comparison.random_return(
      environments.get_environment(env_name(game), batch_size=num_envs),
      steps,
      seed,
    )
    for game in games
  }


def normalise(game: str, score: float, random_score: float) -> float:
  """(score - random play) / (reference - random play), the reference being
  gymnax's published PPO return (`PPO_RETURNS`): 0 is random play, 1 PPO's
  return after 10M environment steps."""
  if game not in PPO_RETURNS:
    raise ValueError(
      f'{game} has no published reference return (the '
      f'aggregate covers {", ".join(PPO_RETURNS)}).'
    )
  return (score - random_score) / (PPO_RETURNS[game] - random_score)


def load_runs(
  out: pathlib.Path, games, rules, rates: dict[str, float]
) -> tuple[dict, dict]:
  """({(game, rule): summary}, {(game, rule): curves}) of the table's runs
  found in `out` (the committed per-seed result files)."""
  summaries, curves = {}, {}
  for game in games:
    for rule in rules:
      path = out / run_name(game, rule, rates[rule])
      if (path / 'summary.json').is_file():
        summaries[game, rule] = json.loads((path / 'summary.json').read_text())
        curves[game, rule] = comparison.read_curves(path)
  return summaries, curves


def read_randoms(out: pathlib.Path, games) -> dict[str, float]:
  """Random play's mean return per game: random_returns.json in `out`,
  measured (`random_returns`) and added there for a game it lacks."""
  path = out / 'random_returns.json'
  randoms = json.loads(path.read_text()) if path.is_file() else {}
  missing = sorted(set(games) - set(randoms))
  if missing:
    randoms.update(random_returns(missing))
    path.write_text(json.dumps(randoms, indent=1) + '\n')
  return randoms


def game_has_reference(game: str) -> bool:
  """Whether `game` has a published reference return (`PPO_RETURNS`)."""
  return game in PPO_RETURNS


def game_rows(games, rules, summaries, randoms) -> list[dict]:
  """Per game and rule: the final returns' mean, min and max over seeds (with
  3 seeds the range is the only honest spread), per seed, random play, the
  reference and the mean normalised score (NaN without a reference)."""
  rows = []
  for game in games:
    for rule in rules:
      s = summaries[game, rule]
      finals = np.asarray(s['final_returns'], float)
      rows.append(
        dict(
          game=game,
          rule=rule,
          learning_rate=s['learning_rate'],
          seeds=len(s['seeds']),
          updates=s['updates'],
          env_steps=s['env_steps'],
          final_return=float(finals.mean()),
          min=float(finals.min()),
          max=float(finals.max()),
          per_seed=s['final_returns'],
          random=randoms[game],
          reference=PPO_RETURNS.get(game, math.nan),
          normalised=(
            float(np.mean([normalise(game, v, randoms[game]) for v in finals]))
            if game_has_reference(game)
            else math.nan
          ),
          steps_per_second=s['steps_per_second'],
        )
      )
  return rows


def normalised_scores(games, rule: str, summaries, randoms) -> np.ndarray:
  """[seeds, games] normalised final returns of `rule`."""
  return np.array(
    [
      [normalise(g, v, randoms[g]) for v in summaries[g, rule]['final_returns']]
      for g in games
    ]
  ).T


def compare(x: np.ndarray, y: np.ndarray, reps: int = 2000) -> dict:
  """The aggregate comparison of rule X with rule Y from [seeds, games]
  normalised scores: `statistics` of the scores, and `sensitivity`: the
  same with the most extreme run (the farthest from its game's median) set
  to that median."""
  extreme = rl_stats.most_extreme_run(x, y)
  if extreme['side'] == 'x':
    x_at, y_at = rl_stats.at_median(x, extreme['run'], extreme['task']), y
  else:
    x_at, y_at = x, rl_stats.at_median(y, extreme['run'], extreme['task'])
  return dict(
    statistics(x, y, reps),
    sensitivity=dict(extreme, **statistics(x_at, y_at, reps)),
  )


def statistics(x: np.ndarray, y: np.ndarray, reps: int = 2000) -> dict:
  """Each rule's IQM, IQM(X) - IQM(Y) and P(X > Y), each with its
  stratified-bootstrap 95% interval, and P(X > Y) per game."""
  pair = (x, y)
  return dict(
    iqm_x=rl_stats.iqm(x),
    iqm_x_ci=rl_stats.interval(x, rl_stats.iqm, reps=reps),
    iqm_y=rl_stats.iqm(y),
    iqm_y_ci=rl_stats.interval(y, rl_stats.iqm, reps=reps),
    difference=rl_stats.iqm_difference(*pair),
    difference_ci=rl_stats.interval(pair, rl_stats.iqm_difference, reps=reps),
    probability=rl_stats.probability_of_improvement(*pair),
    probability_ci=rl_stats.interval(
      pair, rl_stats.probability_of_improvement, reps=reps
    ),
    per_game=[
      rl_stats.task_probability(x[:, t], y[:, t]) for t in range(x.shape[1])
    ],
  )


def _interval_reading(low: float, high: float) -> str:
  """Plain words for a difference's interval."""
  if low > 0:
    return 'the interval lies above 0: Disco103 ahead'
  if high < 0:
    return 'the interval lies below 0: actor-critic ahead'
  return 'the interval includes 0: no difference shown'


def _probability_reading(stats: dict, games) -> str:
  """Plain words for P(Disco103 > actor-critic)."""
  p = stats['probability']
  per_game = ', '.join(
    f'{g} {v:.2f}' for g, v in zip(games, stats['per_game'], strict=False)
  )
  settled = all(v in (0.0, 1.0) for v in stats['per_game'])
  return (
    f'on one of these games drawn at random, a Disco103 run beats an '
    f'actor-critic run of the same game with probability {p:.2f} '
    f'(per game: {per_game})'
    + (
      '; on every game one rule won every seed pair, so resampling '
      'seeds within games cannot move it: its interval is a point and '
      'carries no uncertainty about the games themselves'
      if settled
      else ''
    )
  )


def comparison_lines(stats: dict, games, seeds) -> list[str]:
  """results.md's aggregate section."""
  lo, hi = stats['difference_ci']
  return [
    f'Aggregate over the {len(games)} games with a published reference '
    f'({", ".join(games)}), {len(seeds)} seeds each: normalised score = '
    '(final return - random play) / (reference - random play), the '
    f'reference being {REFERENCE}. Seaquest has no published return there '
    'and is left out of the aggregate (per game above). Intervals: '
    'stratified bootstrap (seeds resampled within each game, each rule on '
    'its own; 2,000 resamples); with 3 seeds a game has 27 resamples of '
    'its seeds, so the intervals are coarse.',
    '',
    '| statistic | value [95% CI] |',
    '|---|---|',
    *_statistic_rows(stats),
    '',
    f'Reading: {_interval_reading(lo, hi)}; '
    + _probability_reading(stats, games)
    + '.',
    '',
    _sensitivity_line(stats['sensitivity'], games, seeds),
  ]


def _statistic_rows(stats: dict) -> list[str]:
  """The rows of the aggregate table: IQMs, difference, P(improvement)."""

  def row(name, value, ci, sign=''):
    return (
      f'| {name} | {value:{sign}.3f} [{ci[0]:{sign}.3f}, {ci[1]:{sign}.3f}] |'
    )

  return [
    row('IQM, Disco103', stats['iqm_x'], stats['iqm_x_ci']),
    row('IQM, actor-critic', stats['iqm_y'], stats['iqm_y_ci']),
    row(
      'IQM difference, Disco103 - actor-critic',
      stats['difference'],
      stats['difference_ci'],
      '+',
    ),
    row(
      'P(Disco103 > actor-critic)',
      stats['probability'],
      stats['probability_ci'],
    ),
  ]


def _sensitivity_line(s: dict, games, seeds) -> str:
  """The aggregate with the most extreme run at its game's median."""
  rule = RULES[0] if s['side'] == 'x' else RULES[1]
  lo, hi = s['difference_ci']
  return (
    f'Sensitivity, without the most extreme run ({RULE_LABELS[rule]}, '
    f'{games[s["task"]]}, seed {seeds[s["run"]]}: normalised '
    f"{s['score']:.3f}, the farthest of any run from its game's median) "
    f'- that run set to the median, {s["median"]:.3f}: IQM Disco103 '
    f'{s["iqm_x"]:.3f}, actor-critic {s["iqm_y"]:.3f}, difference '
    f'{s["difference"]:+.3f} [{lo:+.3f}, {hi:+.3f}] '
    f'({_interval_reading(lo, hi)}), P(Disco103 > actor-critic) '
    f'{s["probability"]:.3f}.'
  )


def game_lines(rows: list[dict], updates: int) -> list[str]:
  """results.md's per-game table."""
  lines = [
    f'MinAtar (gymnax), {updates:,} learner updates per run '
    f'({rows[0]["env_steps"]:,} environment steps); final return = mean '
    'return of the episodes that ended in the last '
    f'{FINAL_FRACTION:.0%} of the updates; per game and rule the mean over '
    'seeds and, with 3 seeds, their range (min-max), not an interval.',
    '',
    '| game | rule | lr | seeds | final return, mean (min-max) | per seed '
    '| random play | reference | normalised (mean) | learner steps/s |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ]
  for r in rows:
    reference = f'{r["reference"]:g}' if game_has_reference(r['game']) else '-'
    normalised = (
      f'{r["normalised"]:.3f}' if game_has_reference(r['game']) else '-'
    )
    lines.append(
      f'| {r["game"]} | {RULE_LABELS[r["rule"]]} | {r["learning_rate"]:g} '
      f'| {r["seeds"]} | {r["final_return"]:.2f} ({r["min"]:.2f}-'
      f'{r["max"]:.2f}) | '
      + ', '.join(f'{v:.2f}' for v in r['per_seed'])
      + f' | {r["random"]:.2f} | {reference} | {normalised} | '
      f'{r["steps_per_second"]:.2f} |'
    )
  return lines


def report(args, rates: dict[str, float], updates: int) -> None:
  """Statistics, tables and plots of the table's finished programs, from
  the per-run files in --results alone: results.md, results.csv,
  comparison.json, curves_<game>.png and iqm.png."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  out = pathlib.Path(args.results)
  summaries, curves = load_runs(out, args.games, args.rules, rates)
  games = [
    g for g in args.games if all((g, r) in summaries for r in args.rules)
  ]
  if not games:
    print('report: no game has finished runs of every rule yet')
    return
  randoms = read_randoms(out, games)
  rows = game_rows(games, args.rules, summaries, randoms)
  pd.DataFrame(rows).to_csv(out / 'results.csv', index=False)
  lines = game_lines(rows, updates)
  scored = [g for g in games if game_has_reference(g)]
  if set(RULES) <= set(args.rules) and scored:
    stats = compare(
      *(normalised_scores(scored, r, summaries, randoms) for r in RULES)
    )
    seeds = summaries[scored[0], RULES[0]]['seeds']
    lines += [''] + comparison_lines(stats, scored, seeds)
    (out / 'comparison.json').write_text(
      json.dumps(
        dict(
          x=RULES[0],
          y=RULES[1],
          games=scored,
          seeds=seeds,
          reference=REFERENCE,
          reference_returns={g: PPO_RETURNS[g] for g in scored},
          random_returns={g: randoms[g] for g in scored},
          **stats,
        ),
        indent=1,
      )
      + '\n'
    )
    print(f'plot: {plot_iqm(out, scored, curves, randoms)}')
  lines += [
    '',
    f'Learning rates: {rates} (sweep.md).',
    '',
    f'Settings (every game and rule): `{args.settings}`',
    '',
    f'Command: `{args.command}`',
    '',
  ]
  (out / 'results.md').write_text('\n'.join(lines))
  for game in games:
    by_rule = {r: curves[game, r] for r in args.rules}
    print(f'plot: {plot_game(out, game, by_rule, randoms[game])}')
  print('\n'.join(lines), flush=True)


def plot_game(
  out: pathlib.Path, game: str, curves: dict, random_return: float
) -> pathlib.Path:
  """curves_<game>.png: per rule the mean return over seeds and their range
  (min-max: with 3 seeds no interval is claimed) against learner updates,
  and random play's return, each in its colour (`plots.RULE_COLOURS`).

  Every update follows the same number of environment steps (the x label
  says how many), so a second panel against environment steps would be the
  same curve. A point where no episode ended carries the seed's last return
  (Freeway's episodes all end at its 2,500-step limit, every 3-4 points
  here: without it no line is drawn)."""
  fig, ax = plots.new_figure()
  per_update = None
  for rule, runs in curves.items():
    length = min(len(c['updates']) for c in runs.values())
    ys = np.stack(
      [_filled(c['avg_return'][:length], start=np.nan) for c in runs.values()]
    )
    first = next(iter(runs.values()))
    per_update = first['env_steps'][-1] / max(first['updates'][-1], 1)
    _draw_range(
      ax,
      first['updates'][:length],
      ys,
      f'{RULE_LABELS[rule]} ({len(runs)} seeds)',
      color=plots.rule_colour(rule),
    )
  plots.random_play_line(
    ax, random_return, f'random play ({random_return:.2f})'
  )
  return plots.save_figure(
    fig,
    ax,
    out / f'curves_{game}.png',
    f'learner updates ({per_update:.0f} environment steps each)',
    'episode return',
    f'{game}-MinAtar: mean over seeds, shaded: their range',
  )


def _draw_range(ax, x, runs: np.ndarray, label: str, **style) -> None:
  """The mean over [seeds, points] runs and the band from their minimum to
  their maximum (NaN points skipped)."""
  import warnings  # pylint: disable=g-import-not-at-top

  with warnings.catch_warnings():
    warnings.simplefilter('ignore', RuntimeWarning)  # All-NaN points.
    (line,) = ax.plot(x, np.nanmean(runs, axis=0), label=label, **style)
    ax.fill_between(
      x,
      np.nanmin(runs, axis=0),
      np.nanmax(runs, axis=0),
      alpha=0.25,
      color=line.get_color(),
    )


def plot_iqm(out, games, curves, randoms) -> pathlib.Path:
  """iqm.png: the IQM over games and seeds of normalised returns against
  learner updates, with stratified-bootstrap 95% intervals; random play is
  0 by construction."""
  fig, ax = plots.new_figure()
  for rule in RULES:
    runs = [list(curves[g, rule].values()) for g in games]
    length = min(len(c['updates']) for per_game in runs for c in per_game)
    seeds = min(len(per_game) for per_game in runs)
    # [seeds, games, points]; points without an episode end count as the
    # previous point (the return of the last episodes seen), random play's
    # before the first.
    data = np.array(
      [
        [
          [
            normalise(g, v, randoms[g])
            for v in _filled(
              runs[i][s]['avg_return'][:length], start=randoms[g]
            )
          ]
          for i, g in enumerate(games)
        ]
        for s in range(seeds)
      ]
    )
    value, low, high = rl_stats.curve_intervals(data, rl_stats.iqm, reps=500)
    x = runs[0][0]['updates'][:length]
    ax.plot(x, value, label=RULE_LABELS[rule], color=plots.rule_colour(rule))
    ax.fill_between(x, low, high, alpha=0.25, color=plots.rule_colour(rule))
  plots.random_play_line(ax, 0.0, 'random play (0)')
  return plots.save_figure(
    fig,
    ax,
    out / 'iqm.png',
    'learner updates',
    'IQM of normalised return',
    f'MinAtar, {len(games)} games: IQM, 95% stratified-bootstrap CI',
  )


def _filled(values: np.ndarray, start: float = 0.0) -> np.ndarray:
  """NaN points take the last finite value before them (`start` before the
  first)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  return pd.Series(values).ffill().fillna(start).to_numpy()


def _compile_once(work: str) -> None:
  """A compilation cache in --work: the seeds of a program and the programs
  of a game and rule compile the same; compile them once."""
  import jax  # pylint: disable=g-import-not-at-top

  jax.config.update(
    'jax_compilation_cache_dir', str(pathlib.Path(work) / 'jax_cache')
  )
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument(
    '--stage', choices=('all', 'sweep', 'table', 'report'), default='all'
  )
  parser.add_argument('--games', nargs='+', default=list(GAMES), choices=GAMES)
  parser.add_argument('--rules', nargs='+', default=list(RULES), choices=RULES)
  parser.add_argument(
    '--seeds',
    type=int,
    nargs='+',
    default=[0, 1, 2],
    help='consecutive seeds, run in one program',
  )
  parser.add_argument(
    '--updates',
    type=int,
    default=None,
    help=f'learner updates per run (default {UPDATES:,}; '
    f'--tiny: {TINY_UPDATES})',
  )
  parser.add_argument(
    '--sweep-seeds', type=int, nargs='+', default=list(SWEEP_SEEDS)
  )
  parser.add_argument(
    '--sweep-rates', type=float, nargs='+', default=list(SWEEP_RATES)
  )
  parser.add_argument(
    '--learning-rates',
    type=float,
    nargs=2,
    default=None,
    metavar=('DISCO_103', 'ACTOR_CRITIC'),
    help='skip the sweep and use these rates',
  )
  parser.add_argument(
    '--results',
    default='docs/results/minatar',
    help='small outputs (curves, summaries, tables, plots)',
  )
  parser.add_argument(
    '--work',
    default='runs/bench_minatar',
    help='full runs: metrics of every step, checkpoints',
  )
  parser.add_argument(
    '--overwrite', action='store_true', help='run again the runs already done'
  )
  parser.add_argument(
    '--tiny', action='store_true', help='smoke run: tiny networks, few updates'
  )
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parser.parse_args(argv)
  try:
    updates = args.updates or (TINY_UPDATES if args.tiny else UPDATES)
    if updates < 1:
      raise ValueError(f'--updates must be >= 1, got {updates}.')
    args.settings = TINY if args.tiny else SETTINGS
    args.command = 'python scripts/benchmark_minatar.py ' + ' '.join(
      shlex.quote(a) for a in argv
    )
    pathlib.Path(args.results).mkdir(parents=True, exist_ok=True)
    if args.stage != 'report':
      _compile_once(args.work)
    if args.learning_rates is not None:
      rates = dict(zip(RULES, args.learning_rates, strict=False))
    elif args.stage in ('all', 'sweep'):
      rates = sweep(args, args.settings, updates)
    else:
      path = pathlib.Path(args.results) / 'sweep.json'
      if not path.is_file():
        raise ValueError(
          f'{path} not found: run --stage sweep first or give --learning-rates.'
        )
      rates = json.loads(path.read_text())['chosen']
    if args.stage in ('all', 'table'):
      for game in args.games:
        for rule in args.rules:
          _run(
            args,
            run_name(game, rule, rates[rule]),
            make_config(
              game, rule, rates[rule], args.seeds, updates, args.settings
            ),
          )
    if args.stage in ('all', 'report', 'table'):
      report(args, rates, updates)
  except (ValueError, FileNotFoundError) as e:  # Settings; the weights.
    print(f'error: {str(e).splitlines()[0]}', file=sys.stderr)
    return 2
  except comparison.Interrupted as e:
    print(f'stopped: {e}', file=sys.stderr)
    return 130
  return 0


if __name__ == '__main__':
  sys.exit(main())
