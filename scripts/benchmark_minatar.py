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
  report  from whatever is done: per game the mean final return with a
          stratified-bootstrap 95% interval, the interquartile mean of
          normalised scores and the probability that Disco103 improves on
          actor-critic (both with intervals), curves per game against
          learner updates and environment steps, and the aggregate IQM
          curve -> results.md, results.csv, curves_<game>.png, iqm.png

Final return: the mean return of the episodes that ended in the last 10% of
the updates (`final_returns`). Normalised score: final return / the published PPO return of
gymnax's baselines at 10M steps (Asterix 15, Breakout 28, Freeway 58,
SpaceInvaders 131); Seaquest has none published and is normalised by the
range from random play (measured here) to this benchmark's actor-critic
mean. An episode cut by a time limit (Freeway's only way to end, at 2,500
steps) ends it as a terminal step would, for both rules (the agents record
discount 0 at every episode end; MinAtar's own code does the same).

--results holds the small outputs meant for the repository: per run
`curves.csv` (per seed, `CURVE_POINTS` means over iterations) and
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

import numpy as np

import comparison  # scripts/comparison.py, beside this script
import rl_stats  # scripts/rl_stats.py

GAMES = ('Asterix', 'Breakout', 'Freeway', 'Seaquest', 'SpaceInvaders')
RULES = ('disco_103', 'actor_critic')
RULE_LABELS = {'disco_103': 'Disco103', 'actor_critic': 'actor-critic'}
# gymnax's PPO baselines at 10M steps (its README's MinAtar table).
PPO_RETURNS = {'Asterix': 15.0, 'Breakout': 28.0, 'Freeway': 58.0,
               'SpaceInvaders': 131.0}
SETTINGS = dict(net='conv', conv_channels=(16,), conv_kernel=3, dense=(128,),
                model_lstm_size=128, model_head_hiddens=(128,),
                rollout_len=29, batch_size=16, replay_ratio=8,
                buffer_capacity=256, steps_per_call=100, debug_checks=False)
UPDATES = 3000
SWEEP_GAME = 'Breakout'
SWEEP_SEEDS = (100, 101)
SWEEP_RATES = (1e-3, 3e-3, 1e-2)
# --tiny: a smoke run of every stage in a few minutes on a CPU.
TINY = dict(SETTINGS, conv_channels=(4,), dense=(16,), model_lstm_size=8,
            model_head_hiddens=(8,), rollout_len=8, batch_size=4,
            replay_ratio=2, buffer_capacity=16, steps_per_call=10)
TINY_UPDATES = 20
FINAL_FRACTION = 0.1  # The final return: the last 10% of the updates.
CURVE_POINTS = 120  # Points per seed of the committed curves.
RANDOM_STEPS = 5000  # Per environment, for the random-play returns.


def env_name(game: str) -> str:
  return f'gymnax:{game}-MinAtar'


def run_name(game: str, rule: str, learning_rate: float) -> str:
  return f'{game}/{rule}/lr_{learning_rate:g}'


def make_config(game: str, rule: str, learning_rate: float, seeds,
                updates: int, settings: dict):
  """The EvalConfig of one program: `seeds` (consecutive) in parallel."""
  from disco_rl import EvalConfig  # pylint: disable=g-import-not-at-top
  seeds = list(seeds)
  if seeds != list(range(seeds[0], seeds[0] + len(seeds))):
    raise ValueError(f'seeds must be consecutive (one program runs seed .. '
                     f'seed + n - 1), got {seeds}.')
  return EvalConfig(env=env_name(game), rule=rule, seed=seeds[0],
                    num_seeds=len(seeds), learning_rate=learning_rate,
                    num_steps=updates, **settings)


def compact_curves(metrics: dict[str, np.ndarray],
                   bin_size: int) -> list[dict]:
  """Per seed (in seed order), the metrics of every `bin_size` iterations: the iteration
  and environment steps at the bin's end, the learner updates so far, the
  episodes that ended in it, their mean return (NaN if none) and the mean
  policy entropy of its updates."""
  rows = []
  for seed in np.unique(metrics['seed']):
    seed_rows = metrics['seed'] == seed
    step = metrics['step'][seed_rows]
    env_steps = metrics['env_steps'][seed_rows]
    episodes = metrics['episodes'][seed_rows]
    returns = np.nan_to_num(metrics['avg_return'][seed_rows]) * episodes
    updates = np.cumsum(metrics['learned'][seed_rows])
    entropy = np.where(metrics['learned'][seed_rows] > 0,
                       metrics['entropy'][seed_rows], np.nan)
    for start in range(0, len(step), bin_size):
      part = slice(start, start + bin_size)
      count = episodes[part].sum()
      learned = np.isfinite(entropy[part])
      rows.append(dict(
          seed=int(seed), step=int(step[part][-1]),
          env_steps=int(env_steps[part][-1]),
          updates=int(updates[part][-1]), episodes=float(count),
          avg_return=float(returns[part].sum() / count) if count else math.nan,
          entropy=(float(entropy[part][learned].mean()) if learned.any()
                   else math.nan)))
  return rows


def final_returns(metrics: dict[str, np.ndarray],
                  updates: int) -> list[float]:
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
    finals.append(float(np.average(metrics['avg_return'][seed_rows][last],
                                   weights=metrics['episodes'][seed_rows][last]))
                  if last.any() else math.nan)
  return finals


def run_program(config, work: pathlib.Path, results: pathlib.Path,
                overwrite: bool = False) -> dict:
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
    if (summary['updates'] == config.num_steps
        and summary['seeds'] == list(range(config.seed, config.seed
                                           + config.num_seeds))):
      return summary
  start = time.time()
  run = comparison.run_or_resume(config, work, overwrite)
  if run.get('interrupted') or run.get('steps') != config.num_steps:
    # Stopped by a signal: nothing is recorded; the next call resumes it.
    raise comparison.Interrupted(
        f'{work} stopped at learner step {run.get("steps")} of '
        f'{config.num_steps} ({run.get("interrupted")}); run the same '
        'command again to resume it.')
  metrics = metrics_lib.read_metrics(work / 'metrics.csv')
  results.mkdir(parents=True, exist_ok=True)
  pd.DataFrame(compact_curves(
      metrics, max(1, config.num_steps // CURVE_POINTS))).to_csv(
      results / 'curves.csv', index=False, float_format='%.6g')
  per_iteration = config.num_envs * config.rollout_len
  summary = dict(
      env=config.env, rule=config.rule, learning_rate=config.learning_rate,
      seeds=list(range(config.seed, config.seed + config.num_seeds)),
      updates=config.num_steps,
      env_steps=int(metrics['env_steps'].max()),
      env_steps_per_update=per_iteration,
      final_returns=final_returns(metrics, config.num_steps),
      steps_per_second=run['steps_per_second'],
      first_call_s=run.get('compile_and_first_step_s'),
      wall_s=round(time.time() - start, 1))
  tmp = done.with_suffix('.tmp')
  tmp.write_text(json.dumps(summary, indent=1) + '\n')
  tmp.replace(done)
  return summary


def read_curves(results: pathlib.Path) -> dict[int, dict[str, np.ndarray]]:
  """{seed: {column: [points]}} of a run's curves.csv."""
  from disco_rl import metrics as metrics_lib  # pylint: disable=g-import-not-at-top
  table = metrics_lib.read_metrics(results / 'curves.csv')
  return {int(s): {k: v[table['seed'] == s] for k, v in table.items()}
          for s in np.unique(table['seed'])}


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
      summary = _run(args, name, make_config(
          SWEEP_GAME, rule, rate, args.sweep_seeds, updates, settings))
      finals_by_rate[rate] = summary['final_returns']
      rows.append(dict(rule=rule, learning_rate=rate,
                       mean=float(np.mean(summary['final_returns'])),
                       final_returns=summary['final_returns']))
    chosen[rule] = choose_rate(finals_by_rate)
  for row in rows:
    row['chosen'] = chosen[row['rule']] == row['learning_rate']
  out = pathlib.Path(args.results)
  pd.DataFrame(rows).to_csv(out / 'sweep.csv', index=False)
  (out / 'sweep.json').write_text(json.dumps(
      dict(game=SWEEP_GAME, seeds=list(args.sweep_seeds), updates=updates,
           chosen=chosen), indent=1) + '\n')
  lines = [f'Learning-rate sweep on {SWEEP_GAME}-MinAtar only, seeds '
           f'{", ".join(map(str, args.sweep_seeds))}, {updates:,} updates; '
           'final return per seed; the chosen rate (bold) has the highest '
           'mean.', '', '| rule | learning rate | mean | per seed |',
           '|---|---|---|---|']
  for row in rows:
    rate = f'{row["learning_rate"]:g}'
    lines.append(
        f'| {RULE_LABELS[row["rule"]]} | '
        f'{f"**{rate}**" if row["chosen"] else rate} | {row["mean"]:.2f} | '
        + ', '.join(f'{v:.2f}' for v in row['final_returns']) + ' |')
  (out / 'sweep.md').write_text('\n'.join(lines) + '\n')
  print('\n'.join(lines), flush=True)
  return chosen


def _run(args, name: str, config) -> dict:
  summary = run_program(config, pathlib.Path(args.work) / name,
                        pathlib.Path(args.results) / name, args.overwrite)
  print(f'{name} seeds {summary["seeds"]}: final returns '
        + ', '.join(f'{v:.2f}' for v in summary['final_returns'])
        + f' | {summary["steps_per_second"]:.2f} steps/s', flush=True)
  return summary


def random_returns(games, num_envs: int = 32, steps: int = RANDOM_STEPS,
                   seed: int = 0) -> dict[str, float]:
  """Mean return of the episodes uniform random play ends, per game."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from disco_rl import environments  # pylint: disable=g-import-not-at-top
  out = {}
  for game in games:
    env = environments.get_environment(env_name(game), batch_size=num_envs)
    num_actions = int(env.single_action_spec().maximum) + 1

    @jax.jit
    def play(key, env=env, num_actions=num_actions):
      state, _ = env.reset(key)

      def step(carry, key):
        state, acc = carry
        action = jax.random.randint(key, (num_envs,), 0, num_actions)
        state, timestep = env.step(state, action)
        acc = acc + timestep.reward
        last = timestep.step_type == 2  # dm_env.StepType.LAST
        return (state, jnp.where(last, 0.0, acc)), (
            jnp.sum(jnp.where(last, acc, 0.0)), jnp.sum(last))

      _, (total, ended) = jax.lax.scan(
          step, (state, jnp.zeros(num_envs)), jax.random.split(key, steps))
      return total.sum(), ended.sum()

    total, ended = play(jax.random.PRNGKey(seed))
    out[game] = float(total) / max(int(ended), 1)
  return out


def normalise(game: str, score: float, random_score: float,
              ac_mean: float) -> float:
  """PPO-normalised score; Seaquest: (score - random) / (AC - random)."""
  if game in PPO_RETURNS:
    return score / PPO_RETURNS[game]
  return (score - random_score) / (ac_mean - random_score)


def report(args, rates: dict[str, float], updates: int) -> None:
  """Statistics, tables and plots of the table's finished programs."""
  import pandas as pd  # pylint: disable=g-import-not-at-top
  out = pathlib.Path(args.results)
  summaries, curves = {}, {}
  for game in args.games:
    for rule in args.rules:
      path = out / run_name(game, rule, rates[rule])
      if (path / 'summary.json').is_file():
        summaries[game, rule] = json.loads(
            (path / 'summary.json').read_text())
        curves[game, rule] = read_curves(path)
  games = [g for g in args.games
           if all((g, r) in summaries for r in args.rules)]
  if not games:
    print('report: no game has finished runs of every rule yet')
    return
  random_path = out / 'random_returns.json'
  randoms = json.loads(random_path.read_text()) if random_path.is_file() else {}
  if set(games) - set(randoms):
    randoms.update(random_returns(sorted(set(games) - set(randoms))))
    random_path.write_text(json.dumps(randoms, indent=1) + '\n')
  scores = {rule: np.array([summaries[g, rule]['final_returns']
                            for g in games]).T for rule in args.rules}
  rows = []
  for i, game in enumerate(games):
    for rule in args.rules:
      low, high = rl_stats.interval(scores[rule][:, i:i + 1], rl_stats.mean)
      s = summaries[game, rule]
      rows.append(dict(
          game=game, rule=rule, learning_rate=s['learning_rate'],
          seeds=len(s['seeds']), updates=s['updates'],
          env_steps=s['env_steps'], final_return=float(
              scores[rule][:, i].mean()), ci_low=low, ci_high=high,
          per_seed=s['final_returns'], random=randoms[game],
          steps_per_second=s['steps_per_second']))
  pd.DataFrame(rows).to_csv(out / 'results.csv', index=False)
  env_steps = summaries[games[0], args.rules[0]]['env_steps']
  lines = [
      f'MinAtar (gymnax), {updates:,} learner updates per run '
      f'({env_steps:,} environment steps); final '
      f'return = mean return of the episodes that ended in the last '
      f'{FINAL_FRACTION:.0%} of the updates; mean over seeds with a '
      'stratified-bootstrap 95% interval.', '',
      '| game | rule | lr | seeds | final return [95% CI] | per seed | '
      'random play | learner steps/s |', '|---|---|---|---|---|---|---|---|']
  for r in rows:
    lines.append(
        f'| {r["game"]} | {RULE_LABELS[r["rule"]]} | {r["learning_rate"]:g} '
        f'| {r["seeds"]} | {r["final_return"]:.2f} [{r["ci_low"]:.2f}, '
        f'{r["ci_high"]:.2f}] | '
        + ', '.join(f'{v:.2f}' for v in r['per_seed'])
        + f' | {r["random"]:.2f} | {r["steps_per_second"]:.2f} |')
  if set(RULES) <= set(args.rules):
    ac_means = {g: float(scores['actor_critic'][:, i].mean())
                for i, g in enumerate(games)}
    normalised = {rule: np.array([[normalise(g, v, randoms[g], ac_means[g])
                                   for g, v in zip(games, run)]
                                  for run in scores[rule]])
                  for rule in RULES}
    lines += ['', f'Over {len(games)} game(s) ({", ".join(games)}):', '',
              '| rule | IQM of normalised scores [95% CI] |', '|---|---|']
    for rule in RULES:
      low, high = rl_stats.interval(normalised[rule], rl_stats.iqm)
      lines.append(f'| {RULE_LABELS[rule]} | '
                   f'{rl_stats.iqm(normalised[rule]):.3f} [{low:.3f}, '
                   f'{high:.3f}] |')
    pair = (normalised['disco_103'], normalised['actor_critic'])
    low, high = rl_stats.interval(pair, rl_stats.probability_of_improvement)
    lines += ['', 'P(Disco103 > actor-critic) = '
              f'{rl_stats.probability_of_improvement(*pair):.3f} '
              f'[{low:.3f}, {high:.3f}]']
    print(f'plot: {plot_iqm(out, games, curves, randoms, ac_means)}')
  lines += ['', 'Normalised score: final return / PPO return at 10M steps '
            '(gymnax baselines: ' + ', '.join(
                f'{g} {v:g}' for g, v in PPO_RETURNS.items())
            + '); Seaquest: (return - random) / (actor-critic mean - random).',
            '', f'Learning rates: {rates} (sweep.md).', '',
            f'Settings (every game and rule): `{args.settings}`', '',
            f'Command: `{args.command}`', '']
  (out / 'results.md').write_text('\n'.join(lines))
  for game in games:
    print(f'plot: {plot_game(out, game, {r: curves[game, r] for r in args.rules})}')
  print('\n'.join(lines), flush=True)


def plot_game(out: pathlib.Path, game: str, curves: dict) -> pathlib.Path:
  """curves_<game>.png: per rule the mean return over seeds and a 95%
  bootstrap band, against learner updates (left) and environment steps.

  A point where no episode ended carries the seed's last return (Freeway's
  episodes all end at its 2,500-step limit, every 3-4 points here: without
  it no line is drawn)."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, axes = plt.subplots(1, 2, figsize=(11, 4))
  for rule, runs in curves.items():
    length = min(len(c['updates']) for c in runs.values())
    ys = np.stack([_filled(c['avg_return'][:length], start=np.nan)
                   for c in runs.values()])
    first = next(iter(runs.values()))
    label = f'{RULE_LABELS[rule]} ({len(runs)} seeds)'
    comparison.draw_band(axes[0], first['updates'][:length], ys, label)
    comparison.draw_band(axes[1], first['env_steps'][:length], ys, label)
  for ax, xlabel in zip(axes, ('learner updates', 'environment steps')):
    ax.set_xlabel(xlabel)
    ax.set_ylabel('episode return')
    ax.grid(alpha=0.3)
    ax.legend()
  fig.suptitle(f'{game}-MinAtar: mean over seeds, 95% bootstrap band')
  fig.tight_layout()
  path = out / f'curves_{game}.png'
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path


def plot_iqm(out, games, curves, randoms, ac_means) -> pathlib.Path:
  """iqm.png: the IQM over games and seeds of normalised returns against
  learner updates, with stratified-bootstrap 95% intervals."""
  from disco_rl import plots  # pylint: disable=g-import-not-at-top
  fig, ax = plots.new_figure()
  for rule in RULES:
    runs = [list(curves[g, rule].values()) for g in games]
    length = min(len(c['updates']) for per_game in runs for c in per_game)
    seeds = min(len(per_game) for per_game in runs)
    # [seeds, games, points]; points without an episode end count as the
    # previous point (the return of the last episodes seen).
    data = np.array([[[normalise(g, v, randoms[g], ac_means[g])
                       for v in _filled(runs[i][s]['avg_return'][:length])]
                      for i, g in enumerate(games)] for s in range(seeds)])
    value, low, high = rl_stats.curve_intervals(data, rl_stats.iqm,
                                                reps=500)
    x = runs[0][0]['updates'][:length]
    ax.plot(x, value, label=RULE_LABELS[rule])
    ax.fill_between(x, low, high, alpha=0.25)
  return plots.save_figure(
      fig, ax, out / 'iqm.png', 'learner updates',
      'IQM of normalised return',
      f'MinAtar, {len(games)} game(s): IQM and 95% stratified-bootstrap CI')


def _filled(values: np.ndarray, start: float = 0.0) -> np.ndarray:
  """NaN points take the last finite value before them (`start` before the
  first)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top
  return pd.Series(values).ffill().fillna(start).to_numpy()


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--stage', choices=('all', 'sweep', 'table', 'report'),
                      default='all')
  parser.add_argument('--games', nargs='+', default=list(GAMES),
                      choices=GAMES)
  parser.add_argument('--rules', nargs='+', default=list(RULES),
                      choices=RULES)
  parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2],
                      help='consecutive seeds, run in one program')
  parser.add_argument('--updates', type=int, default=None,
                      help=f'learner updates per run (default {UPDATES:,}; '
                      f'--tiny: {TINY_UPDATES})')
  parser.add_argument('--sweep-seeds', type=int, nargs='+',
                      default=list(SWEEP_SEEDS))
  parser.add_argument('--sweep-rates', type=float, nargs='+',
                      default=list(SWEEP_RATES))
  parser.add_argument('--learning-rates', type=float, nargs=2, default=None,
                      metavar=('DISCO_103', 'ACTOR_CRITIC'),
                      help='skip the sweep and use these rates')
  parser.add_argument('--results', default='docs/results/minatar',
                      help='small outputs (curves, summaries, tables, plots)')
  parser.add_argument('--work', default='runs/bench_minatar',
                      help='full runs: metrics of every step, checkpoints')
  parser.add_argument('--overwrite', action='store_true',
                      help='run again the runs already done')
  parser.add_argument('--tiny', action='store_true',
                      help='smoke run: tiny networks, few updates')
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parser.parse_args(argv)
  try:
    updates = args.updates or (TINY_UPDATES if args.tiny else UPDATES)
    if updates < 1:
      raise ValueError(f'--updates must be >= 1, got {updates}.')
    args.settings = TINY if args.tiny else SETTINGS
    args.command = 'python scripts/benchmark_minatar.py ' + ' '.join(
        shlex.quote(a) for a in argv)
    pathlib.Path(args.results).mkdir(parents=True, exist_ok=True)
    import jax  # pylint: disable=g-import-not-at-top
    # The seeds of a program and the programs of a game and rule compile
    # the same; compile them once.
    jax.config.update('jax_compilation_cache_dir',
                      str(pathlib.Path(args.work) / 'jax_cache'))
    jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)
    if args.learning_rates is not None:
      rates = dict(zip(RULES, args.learning_rates))
    elif args.stage in ('all', 'sweep'):
      rates = sweep(args, args.settings, updates)
    else:
      path = pathlib.Path(args.results) / 'sweep.json'
      if not path.is_file():
        raise ValueError(f'{path} not found: run --stage sweep first or give '
                         '--learning-rates.')
      rates = json.loads(path.read_text())['chosen']
    if args.stage in ('all', 'table'):
      for game in args.games:
        for rule in args.rules:
          _run(args, run_name(game, rule, rates[rule]), make_config(
              game, rule, rates[rule], args.seeds, updates, args.settings))
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
