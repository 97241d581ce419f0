# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Meta-trains an update rule with a population of agents on Catch.

  python -m disco_rl.examples.meta_train --steps 800 --out runs/meta_train

Prints progress, then the positive rewards per meta-step over the last 100
steps, meta-steps per second, compile time, and the output paths (metrics CSV,
plots, and the learned parameters in the disco_103.npz layout).
"""

import argparse
import json
import sys

from disco_rl import meta_train
from disco_rl.examples import parse_sizes



def parse_args(argv=None) -> argparse.Namespace:
  d = meta_train.MetaTrainConfig()
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--steps', type=int, default=d.num_steps, help='meta-steps')
  p.add_argument('--seed', type=int, default=d.seed,
                 help='agents, environments and meta-steps')
  p.add_argument('--rule-seed', type=int, default=d.rule_seed,
                 help='seed of the fresh meta-network (--init random)')
  p.add_argument('--out', default='runs/meta_train', help='output directory')
  p.add_argument('--init', choices=('random', 'disco_103'), default=d.init)
  p.add_argument('--num-agents', type=int, default=d.num_agents)
  p.add_argument('--batch-size-per-device', type=int,
                 default=d.batch_size_per_device)
  p.add_argument('--rollout-len', type=int, default=d.rollout_len)
  p.add_argument('--num-inner-steps', type=int, default=d.num_inner_steps)
  p.add_argument('--rows', type=int, default=d.rows)
  p.add_argument('--columns', type=int, default=d.columns)
  p.add_argument('--learning-rate', type=float, default=d.learning_rate)
  p.add_argument('--meta-learning-rate', type=float,
                 default=d.meta_learning_rate)
  p.add_argument('--dense', type=parse_sizes, default=d.dense)
  p.add_argument('--model-lstm-size', type=int, default=d.model_lstm_size)
  p.add_argument('--model-head-hiddens', type=parse_sizes,
                 default=d.model_head_hiddens)
  p.add_argument('--value-dense', type=parse_sizes, default=d.value_dense)
  p.add_argument('--num-devices', type=int, default=None)
  p.add_argument('--no-progress', action='store_true')
  return p.parse_args(argv)


def main(argv=None) -> int:
  args = parse_args(argv)
  config = meta_train.MetaTrainConfig(
      num_steps=args.steps, num_agents=args.num_agents,
      batch_size_per_device=args.batch_size_per_device,
      rollout_len=args.rollout_len, num_inner_steps=args.num_inner_steps,
      rows=args.rows, columns=args.columns, learning_rate=args.learning_rate,
      dense=args.dense, model_lstm_size=args.model_lstm_size,
      model_head_hiddens=args.model_head_hiddens,
      value_dense=args.value_dense,
      meta_learning_rate=args.meta_learning_rate, init=args.init,
      rule_seed=args.rule_seed, seed=args.seed, num_devices=args.num_devices)
  try:
    summary = meta_train.run_meta_train(config, args.out,
                                        progress=not args.no_progress)
  except (ValueError, FileNotFoundError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  print(json.dumps(summary, indent=2))
  print(f'positive rewards per meta-step (last 100): '
        f'{summary["final_pos_rewards"]:.1f}')
  print(f'meta-steps/s: {summary["meta_steps_per_second"]:.3f} after '
        f'{summary["compile_s"]:.0f}s of compilation')
  print(f'metrics: {summary["metrics_csv"]}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
