#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Meta-training benchmark: the upstream meta_train notebook's settings.

Meta-trains a rule from random parameters (2 agents, Catch 5x5, 800
meta-steps) and prints the agents' positive rewards per meta-step over the
last 100 steps (target >= 243 of 256), meta-steps per second and the compile
time. Writes summary.json, metrics.csv and plots in --out.

  python scripts/benchmark_meta_train.py --out runs/bench_meta_train
"""

import argparse
import json
import pathlib
import sys

import disco_rl

TARGET_POS_REWARDS = 243


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--steps', type=int, default=800)
  parser.add_argument('--seed', type=int, default=4)
  parser.add_argument(
    '--init', choices=('random', 'disco_103'), default='random'
  )
  parser.add_argument('--out', default='runs/bench_meta_train')
  parser.add_argument(
    '--overwrite', action='store_true', help='replace a run already in --out'
  )
  args = parser.parse_args()
  config = disco_rl.MetaTrainConfig(
    num_steps=args.steps, seed=args.seed, init=args.init
  )
  summary = disco_rl.Trainer(
    config, args.out, progress=True, overwrite=args.overwrite
  ).fit()
  out = pathlib.Path(args.out)
  (out / 'summary.json').write_text(json.dumps(summary, indent=2))
  ok = summary['final_pos_rewards'] >= TARGET_POS_REWARDS
  print(
    f'positive rewards per meta-step: first {summary["first_pos_rewards"]:.1f}'
    f', last 100 mean {summary["final_pos_rewards"]:.1f} (target >= '
    f'{TARGET_POS_REWARDS})'
  )
  # None: one call ran every meta-step, none was timed after it.
  speed = summary['meta_steps_per_second']
  print(
    f'{"n/a" if speed is None else f"{speed:.3f}"} meta-steps/s after '
    f'{summary["compile_s"]:.0f}s compile; peak memory '
    f'{summary["peak_memory_mb"]:.0f} MB; {summary["devices"]} device(s)'
  )
  print(f'{"PASS" if ok else "FAIL"}; plots and metrics in {out}')
  return 0 if ok else 1


if __name__ == '__main__':
  sys.exit(main())
