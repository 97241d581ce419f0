# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Trains an agent on Catch with Disco103 (or the actor-critic baseline).

  python -m disco_rl.examples.eval --steps 1000 --seed 0 --out runs/eval

Prints progress, then the final average return and the paths of the metrics
CSV and the learning-curve PNG.
"""

import argparse
import json
import sys

from disco_rl import evaluation
from disco_rl.examples import parse_sizes



def parse_args(argv=None) -> argparse.Namespace:
  d = evaluation.EvalConfig()
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--rule', choices=evaluation.RULES, default=d.rule)
  p.add_argument('--env', choices=('jittable_catch', 'catch'), default=d.env)
  p.add_argument('--steps', type=int, default=d.num_steps,
                 help='learner steps')
  p.add_argument('--seed', type=int, default=d.seed)
  p.add_argument('--out', default='runs/eval', help='output directory')
  p.add_argument('--rows', type=int, default=d.rows)
  p.add_argument('--columns', type=int, default=d.columns)
  p.add_argument('--batch-size', type=int, default=d.batch_size)
  p.add_argument('--rollout-len', type=int, default=d.rollout_len)
  p.add_argument('--replay-ratio', type=int, default=d.replay_ratio)
  p.add_argument('--buffer-capacity', type=int, default=d.buffer_capacity)
  p.add_argument('--learning-rate', type=float, default=d.learning_rate)
  p.add_argument('--dense', type=parse_sizes, default=d.dense,
                 help='agent MLP sizes, e.g. 512,512')
  p.add_argument('--model-lstm-size', type=int, default=d.model_lstm_size)
  p.add_argument('--model-head-hiddens', type=parse_sizes,
                 default=d.model_head_hiddens)
  p.add_argument('--num-devices', type=int, default=None)
  p.add_argument('--weights', default=None,
                 help='path of disco_103.npz (default: see disco_rl.weights)')
  p.add_argument('--no-progress', action='store_true')
  return p.parse_args(argv)


def main(argv=None) -> int:
  args = parse_args(argv)
  config = evaluation.EvalConfig(
      rule=args.rule, env=args.env, rows=args.rows, columns=args.columns,
      num_steps=args.steps, batch_size=args.batch_size,
      rollout_len=args.rollout_len, replay_ratio=args.replay_ratio,
      buffer_capacity=args.buffer_capacity, learning_rate=args.learning_rate,
      dense=args.dense, model_lstm_size=args.model_lstm_size,
      model_head_hiddens=args.model_head_hiddens, seed=args.seed,
      num_devices=args.num_devices)
  rule_params = None
  if args.rule == 'disco_103' and args.weights:
    from disco_rl import weights  # pylint: disable=g-import-not-at-top
    rule_params = weights.load_disco_103(args.weights)
  try:
    summary = evaluation.run_eval(config, args.out, rule_params=rule_params,
                                  progress=not args.no_progress)
  except (ValueError, FileNotFoundError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  print(json.dumps(summary, indent=2))
  print(f'final average return (last 100 steps): '
        f'{summary["final_avg_return"]:.3f}')
  print(f'metrics: {summary["metrics_csv"]}')
  print(f'plot:    {summary["plot_png"]}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
