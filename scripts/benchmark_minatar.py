#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""MinAtar benchmark: Disco103 and the actor-critic baseline, games x seeds.

Trains both rules on each MinAtar game (gymnax, conv torso) for a fixed
number of environment steps and several seeds, with one set of settings for
every game and rule (`SETTINGS`; nothing is tuned per game), then writes to
--out:

  <game>/<rule>/seed_<s>/   each run's metrics.csv, summary.json, run.json
  curves_<game>.png          mean return and 95% interval over seeds, both
                             rules, against environment steps
  results.csv, results.md    final return per game and rule (mean +- 95% CI
                             over seeds, t interval), steps per second, the
                             interquartile mean over games of Disco103's
                             final return normalised by the actor-critic
                             baseline's, and the exact command

A run that finished is not run again and an interrupted one resumes from its
last checkpoint, so an interrupted benchmark continues where it stopped
(--overwrite: run all afresh).

  python scripts/benchmark_minatar.py --env-steps 5000000 --seeds 0 1 2 \\
      --out runs/bench_minatar
  python scripts/benchmark_minatar.py --tiny --out runs/bench_minatar_tiny
"""

import argparse
import math
import pathlib
import shlex
import sys
import time

import numpy as np

import comparison  # scripts/comparison.py, beside this script

GAMES = ('Asterix', 'Breakout', 'Freeway', 'Seaquest', 'SpaceInvaders')
RULES = ('disco_103', 'actor_critic')
RULE_LABELS = {'disco_103': 'Disco103', 'actor_critic': 'actor-critic'}
# One setting for every game and both rules. The paper's Atari agents learn
# from trajectories of 29 steps; MinAtar's reference network is one 3x3
# conv layer of 16 channels and 128 hidden units (Young & Tian 2019). 16
# environments act per iteration into a buffer of 16 trajectories, and each
# learner step samples 16 from it (replay ratio 1: only the trajectories just
# acted, nearly on-policy as the usual MinAtar actor-critic baselines), with
# an Adam step size of 3e-3 (between the Catch notebook's 1e-2 and 3e-4, with
# which Disco103's policy had barely moved from uniform after 1,078 updates
# on Breakout). On a CPU the learner step is what costs, and it grows faster
# than its batch (64 trajectories: 1.1 steps/s, 16: 7.6 steps/s on 2 cores),
# so small batches buy both more updates and more environment steps. The
# debug checks are off (as the results in docs/benchmarks.md were measured):
# gymnax's rewards and the sampled actions cannot go out of range.
SETTINGS = dict(net='conv', conv_channels=(16,), conv_kernel=3, dense=(128,),
                model_lstm_size=128, model_head_hiddens=(128,),
                rollout_len=29, batch_size=16, replay_ratio=1,
                buffer_capacity=16, learning_rate=3e-3, steps_per_call=100,
                debug_checks=False)
# --tiny: a smoke run of the whole pipeline in a few minutes on a CPU.
TINY = dict(SETTINGS, conv_channels=(4,), dense=(16,), model_lstm_size=8,
            model_head_hiddens=(8,), rollout_len=8, batch_size=8,
            replay_ratio=2, buffer_capacity=32, steps_per_call=10)
TINY_ENV_STEPS = 2000
FINAL_FRACTION = 0.1  # The final return: the last 10% of environment steps.


def learner_steps_for(env_steps: int, settings: dict) -> int:
  """Learner steps that act `env_steps` environment steps (rounded up).

  Each iteration acts `batch_size // replay_ratio` environments for
  `rollout_len` steps; the first `replay_ratio - 1` only fill the buffer.
  """
  num_envs = settings['batch_size'] // settings['replay_ratio']
  iterations = math.ceil(env_steps / (num_envs * settings['rollout_len']))
  return max(1, iterations - (settings['replay_ratio'] - 1))


def run_dir(out: pathlib.Path, game: str, rule: str, seed: int):
  return out / game / rule / f'seed_{seed}'


def run_one(game: str, rule: str, seed: int, env_steps: int, settings: dict,
            path: pathlib.Path, overwrite: bool) -> dict:
  """Trains one run (unless it is done: `comparison.run_or_resume`)."""
  from disco_rl import EvalConfig  # pylint: disable=g-import-not-at-top
  config = EvalConfig(env=f'gymnax:{game}-MinAtar', rule=rule, seed=seed,
                      num_steps=learner_steps_for(env_steps, settings),
                      **settings)
  return comparison.run_or_resume(config, path, overwrite)


def final_return(path: pathlib.Path) -> float:
  """Mean return of the episodes ending in the last 10% of steps."""
  return comparison.final_return(comparison.read_curve(path), FINAL_FRACTION)


def plot_game(out: pathlib.Path, game: str, curves: dict) -> pathlib.Path:
  """curves_<game>.png: per rule, the mean over seeds and its 95% interval.

  Args:
    out: the benchmark directory.
    game: the game's name.
    curves: {rule: [`comparison.read_curve` of each seed]}.
  """
  return comparison.plot_rules(
      out / f'curves_{game}.png',
      f'{game}-MinAtar: mean and 95% interval over seeds',
      {RULE_LABELS[rule]: runs for rule, runs in curves.items()})


def results_rows(out, games, rules, seeds, summaries) -> list[dict]:
  """One row per game and rule: final return mean +- CI, speed.

  Speed: loop steps per second after compilation (each acts
  `env_steps_per_step` environment steps and takes one learner step), and
  the environment steps per second that makes.
  """
  rows = []
  for game in games:
    for rule in rules:
      finals, speeds = [], []  # Per seed.
      for seed in seeds:
        finals.append(final_return(run_dir(out, game, rule, seed)))
        speeds.append(summaries[game, rule, seed]['steps_per_second'])
      mean, half = comparison.mean_ci(finals)
      per_iter = (summaries[game, rule, seeds[0]].get('env_steps_per_step')
                  or float('nan'))
      rows.append(dict(game=game, rule=rule, seeds=len(seeds),
                       final_return_mean=mean, final_return_ci95=half,
                       final_returns=finals,
                       steps_per_s=float(np.nanmean(speeds)),
                       env_steps_per_s=float(np.nanmean(speeds)) * per_iter))
  return rows


def normalised_iqm(rows, rules) -> float:
  """IQM over games of Disco103's final return / the actor-critic's."""
  if set(RULES) - set(rules):
    return float('nan')
  by = {(r['game'], r['rule']): r['final_return_mean'] for r in rows}
  games = sorted({r['game'] for r in rows})
  return comparison.iqm([by[g, 'disco_103'] / by[g, 'actor_critic']
                         for g in games if by[g, 'actor_critic']])


def write_tables(out: pathlib.Path, rows, iqm_value: float, command: str,
                 env_steps: int, settings: dict) -> tuple[pathlib.Path, ...]:
  """results.csv and results.md."""
  import pandas as pd  # pylint: disable=g-import-not-at-top
  table = pd.DataFrame(rows)
  csv = out / 'results.csv'
  table.to_csv(csv, index=False)
  lines = [
      f'MinAtar (gymnax), {env_steps:,} environment steps per run; final '
      f'return = mean episode return over the last {FINAL_FRACTION:.0%} of '
      'steps; mean +- 95% t interval over seeds.', '',
      '| game | rule | seeds | final return | loop steps/s | env steps/s |',
      '|---|---|---|---|---|---|']
  for r in rows:
    lines.append(
        f'| {r["game"]} | {RULE_LABELS[r["rule"]]} | {r["seeds"]} | '
        f'{r["final_return_mean"]:.2f} +- {r["final_return_ci95"]:.2f} | '
        f'{r["steps_per_s"]:.2f} | {r["env_steps_per_s"]:.0f} |')
  lines += ['', 'Interquartile mean over games of Disco103 / actor-critic '
            f'final return: {iqm_value:.3f}', '',
            f'Settings (every game and rule): `{settings}`', '',
            f'Command: `{command}`', '']
  md = out / 'results.md'
  md.write_text('\n'.join(lines))
  return csv, md


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--games', nargs='+', default=list(GAMES),
                      choices=GAMES)
  parser.add_argument('--rules', nargs='+', default=list(RULES),
                      choices=RULES)
  parser.add_argument('--env-steps', type=int, default=5_000_000,
                      help='environment steps per run (default: 5M)')
  parser.add_argument('--tiny', action='store_true',
                      help=f'smoke run: tiny networks, {TINY_ENV_STEPS} '
                      'environment steps, unless --env-steps is given')
  comparison.add_run_flags(parser, 'runs/bench_minatar')
  argv = sys.argv[1:] if argv is None else list(argv)
  args = parser.parse_args(argv)
  settings = TINY if args.tiny else SETTINGS
  env_steps = (TINY_ENV_STEPS if args.tiny and '--env-steps' not in argv
               else args.env_steps)
  out = pathlib.Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  import jax  # pylint: disable=g-import-not-at-top
  # Seeds of a game and rule compile the same programs: compile them once.
  jax.config.update('jax_compilation_cache_dir', str(out / 'jax_cache'))
  jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)
  num_envs = settings['batch_size'] // settings['replay_ratio']
  summaries = {}
  for game in args.games:
    curves = {}
    for rule in args.rules:
      for seed in args.seeds:
        path = run_dir(out, game, rule, seed)
        start = time.time()
        summary = run_one(game, rule, seed, env_steps, settings, path,
                          args.overwrite)
        summary['env_steps_per_step'] = num_envs * settings['rollout_len']
        summaries[game, rule, seed] = summary
        print(f'{game} {rule} seed {seed}: final avg return '
              f'{summary["final_avg_return"]} | '
              f'{summary["steps_per_second"]:.2f} loop steps/s | '
              f'{summary["replay_bytes_per_trajectory"]:,} bytes per stored '
              f'trajectory | {time.time() - start:.0f}s | {path}',
              flush=True)
        curves.setdefault(rule, []).append(comparison.read_curve(path))
    print(f'plot: {plot_game(out, game, curves)}', flush=True)
  rows = results_rows(out, args.games, args.rules, args.seeds, summaries)
  iqm_value = normalised_iqm(rows, args.rules)
  command = 'python scripts/benchmark_minatar.py ' + ' '.join(
      shlex.quote(a) for a in argv)
  for path in write_tables(out, rows, iqm_value, command, env_steps,
                           settings):
    print(f'table: {path}')
  print((out / 'results.md').read_text())
  return 0


if __name__ == '__main__':
  sys.exit(main())
