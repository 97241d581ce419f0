# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Meta-trains an update rule with a population of agents on Catch.

  python -m disco_rl.examples.meta_train --steps 800 --out runs/meta_train

Prints progress, then the positive rewards per meta-step over the last 100
steps, meta-steps per second, compile time, and the output paths (metrics CSV,
plots, and the learned parameters in the disco_103.npz layout). Every setting
of `MetaTrainConfig` is a flag (`--help` lists them).
"""

import argparse
import json
import sys

from disco_rl.loops import config as config_lib
from disco_rl.loops import devices


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--out', default='runs/meta_train',
                      help='output directory')
  parser.add_argument('--no-progress', action='store_true')
  config_lib.add_flags(parser, config_lib.MetaTrainConfig)
  devices.add_distributed_flags(parser)
  return parser.parse_args(argv)


def main(argv=None) -> int:
  args = parse_args(argv)
  try:
    config = config_lib.from_flags(config_lib.MetaTrainConfig, args)
    config_lib.check_meta_train_config(config)
    devices.initialize_distributed(devices.distributed_config_from_flags(args))
    from disco_rl.loops import meta_loop  # pylint: disable=g-import-not-at-top
    summary = meta_loop.run_meta_train(config, args.out,
                                       progress=not args.no_progress)
  except (ValueError, FileNotFoundError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  if 'params_npz' not in summary:  # Not process 0: it reports.
    return 0
  print(json.dumps(summary, indent=2))
  print(f'positive rewards per meta-step (last 100): '
        f'{summary["final_pos_rewards"]:.1f}')
  print(f'meta-steps/s: {summary["meta_steps_per_second"]:.3f} after '
        f'{summary["compile_s"]:.0f}s of compilation')
  print(f'metrics: {summary["metrics_csv"]}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
