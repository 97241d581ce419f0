#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The reward signal a fresh agent sees: how uniform random play's episode
returns vary, per task.

A rule that moves a policy only when returns differ learns nothing where
random play's returns are all alike (Acrobot: every episode ends at the
500-step limit with -500). Per task: the episodes uniform random play
ends in `--steps` steps of 32 instances, their mean return, standard
deviation, range, the share of episodes whose return differs from the
most common one (0: no episode tells one policy from another) and the
share that reach the best return seen (how often random play finds the
reward a task is about).

  python scripts/random_play.py --out docs/results/random_play.md
  python scripts/random_play.py 'catch[rows=5,columns=5]' gymnax:Acrobot-v1
"""

import argparse
import pathlib
import sys

import numpy as np

from disco_rl.loops import config as config_lib
from disco_rl.studies import measure

TASKS = (
  # The stage-2 suite (docs/studies/meta_suite.md) and its held-out tasks.
  'catch[rows=5,columns=5]',
  'catch[rows=7,columns=5]',
  'gymnax:CartPole-v1',
  'catch[rows=8,columns=8]',
  'gymnax:Catch-bsuite',
  'gymnax:Acrobot-v1',
  # Sparse or delayed reward, exploration, other families.
  'gymnax:MountainCar-v0',
  'gymnax:DeepSea-bsuite[size=8]',
  'gymnax:DeepSea-bsuite[size=12]',
  'gymnax:UmbrellaChain-bsuite',
  'gymnax:MemoryChain-bsuite',
  'gymnax:DiscountingChain-bsuite',
  'gymnax:FourRooms-misc',
  'gymnax:Breakout-MinAtar',
  'gymnax:Asterix-MinAtar',
)
NUM_ENVS = 32


def spread(returns: np.ndarray) -> dict[str, float]:
  """Episodes, mean, std, min, max of `returns` [N], the share of them
  that differ from the most common return and the share at the maximum."""
  if not returns.size:
    return dict(
      episodes=0,
      mean=np.nan,
      std=np.nan,
      min=np.nan,
      max=np.nan,
      differ=np.nan,
      at_max=np.nan,
    )
  values, counts = np.unique(returns, return_counts=True)
  mode = values[np.argmax(counts)]
  return dict(
    episodes=int(returns.size),
    mean=float(returns.mean()),
    std=float(returns.std()),
    min=float(returns.min()),
    max=float(returns.max()),
    differ=float(np.mean(returns != mode)),
    at_max=float(np.mean(returns == returns.max())),
  )


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument(
    'tasks',
    nargs='*',
    default=list(TASKS),
    help='tasks, as MetaTrainConfig.tasks writes them',
  )
  parser.add_argument(
    '--steps',
    type=int,
    default=5000,
    help='steps of each of the 32 instances (default: 5000)',
  )
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument(
    '--out', default=None, help='also write the table to this markdown file'
  )
  args = parser.parse_args(argv)
  if args.steps < 1:
    parser.error(f'--steps must be >= 1, got {args.steps}')
  try:
    tasks = [config_lib.parse_task(t) for t in args.tasks]
  except ValueError as e:
    parser.error(str(e))
  command = 'python scripts/random_play.py ' + ' '.join(argv or sys.argv[1:])
  lines = [
    f'Uniform random play, {NUM_ENVS} instances x {args.steps} steps '
    f'(seed {args.seed}): the episodes it ended and their returns; '
    '"differ": the share of episodes whose return is not the most common '
    'one; "at max": the share whose return is the highest seen. By '
    f'`{command.strip()}`.',
    '',
    '| task | episodes | mean | std | min | max | differ | at max |',
    '|---|---|---|---|---|---|---|---|',
  ]
  for task in tasks:
    returns = measure.random_play_returns(
      task.make_env(NUM_ENVS), args.steps, args.seed
    )
    s = spread(returns)
    lines.append(
      f'| {task.spec()} | {s["episodes"]} | {s["mean"]:.3f} | '
      f'{s["std"]:.3f} | {s["min"]:.3f} | {s["max"]:.3f} | '
      f'{s["differ"]:.3f} | {s["at_max"]:.4f} |'
    )
    print(lines[-1], flush=True)
  text = '\n'.join(lines) + '\n'
  if args.out:
    pathlib.Path(args.out).write_text(text)
  print(text)
  return 0


if __name__ == '__main__':
  sys.exit(main())
