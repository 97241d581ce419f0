# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Trains an agent on Catch with Disco103 (or the actor-critic baseline).

  python -m disco_rl.examples.eval --steps 1000 --seed 0 --out runs/eval

Prints progress, then the final average return and the paths of the metrics
CSV and the learning-curve PNG. Every setting of `EvalConfig` is a flag
(`--help` lists them). Several processes: see the README ("Several hosts").
"""

import argparse
import json
import sys

from disco_rl.loops import config as config_lib
from disco_rl.loops import devices


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--out', default='runs/eval', help='output directory')
  parser.add_argument('--weights', default=None,
                      help='path of disco_103.npz (default: see '
                      'disco_rl.weights)')
  parser.add_argument('--no-progress', action='store_true')
  config_lib.add_flags(parser, config_lib.EvalConfig)
  devices.add_distributed_flags(parser)
  return parser.parse_args(argv)


def main(argv=None) -> int:
  args = parse_args(argv)
  try:
    config = config_lib.from_flags(config_lib.EvalConfig, args)
    config_lib.check_eval_config(config)
    if args.weights and config.rule != 'disco_103':
      raise ValueError(f'--weights is for the disco_103 rule; rule '
                       f'{config.rule!r} has no meta-parameters to load.')
    devices.initialize_distributed(devices.distributed_config_from_flags(args))
    # Imported after the processes have joined (it touches the devices).
    from disco_rl.loops import eval_loop  # pylint: disable=g-import-not-at-top
    rule_params = None
    if args.weights:
      from disco_rl import weights  # pylint: disable=g-import-not-at-top
      rule_params = weights.load_disco_103(args.weights)
    summary = eval_loop.run_eval(config, args.out, rule_params=rule_params,
                                 progress=not args.no_progress)
  except (ValueError, FileNotFoundError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  if 'plot_png' not in summary:  # Not process 0: it reports.
    return 0
  print(json.dumps(summary, indent=2))
  print(f'final average return (last 100 steps): '
        f'{summary["final_avg_return"]:.3f}')
  print(f'metrics: {summary["metrics_csv"]}')
  print(f'plot:    {summary["plot_png"]}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
