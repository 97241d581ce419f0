# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Measures the meta-gradient at a rule's parameters on fresh agents.

  disco-rl probe-rule runs/meta_train --step 500 \
      --agents 20 --ages 0,50 --csv runs/probe.csv
  disco-rl probe-rule --preset lpg --weights rule.npz

With a meta-training run directory: its settings and the rule of its
checkpoint `--step` (default: the latest); the run is only read. Without
one: `--preset` and the meta-train flags given, and the rule of
`--weights` (default per `--init`: a fresh meta-network from `--rule-seed`,
or Disco103). Prints, per head of the meta-network and part of the
meta-gradient (policy gradient, regularisers), the norm of the agents'
mean, their coherence (noise: 1/sqrt(agents)) and the share of
significant parameters (noise: 0.05), and the policy target's entropy
against a uniform target's (`disco_rl.jobs.meta.probe`;
docs/meta_training.md says how to read them). Bad input prints one
`error:` line and exits 2.
"""

import argparse
import csv
import dataclasses
import pathlib
import sys

from disco_rl.runtime import signals

signals.catch_from_here(__name__)  # The rule for signals, from this line on.

# pylint: disable=g-import-not-at-top,wrong-import-position
from disco_rl import weights
from disco_rl.cli import common
from disco_rl.cli import flags
from disco_rl.cli import meta_train
from disco_rl.jobs.meta import config as meta_config
from disco_rl.jobs.meta import job as meta
from disco_rl.jobs.meta import probe as meta_probe

# The command as `python -m` runs it (`disco-rl probe-rule` passes its own).
PROG = 'python -m disco_rl.cli.probe_rule'


def make_parser(prog: str = PROG) -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
    prog=prog,
    description=__doc__.split('\n\n')[0],
  )
  group = parser.add_argument_group('probe')
  group.add_argument(
    'run',
    nargs='?',
    metavar='RUN_DIR',
    default=None,
    help='a meta-training run directory (its settings and checkpoint)',
  )
  group.add_argument(
    '--step',
    type=int,
    default=None,
    help="with RUN_DIR: the checkpoint's meta-step (default: the latest)",
  )
  group.add_argument(
    '--preset',
    choices=tuple(meta_train.PRESETS),
    default=None,
    help='without RUN_DIR: start from these settings (flags given '
    'override them)',
  )
  group.add_argument(
    '--weights',
    default=None,
    metavar='NPZ',
    help='without RUN_DIR: the rule (default per --init)',
  )
  group.add_argument(
    '--agents', type=int, default=20, help='fresh agents (default: 20)'
  )
  group.add_argument(
    '--ages',
    default='0',
    help='agent updates before each measurement, comma-separated '
    'multiples of --num-inner-steps (default: 0)',
  )
  group.add_argument(
    '--csv', default=None, metavar='PATH', help='also write the rows here'
  )
  flags.add_flags(parser, meta_config.MetaTrainConfig)
  return parser


def _ages(text: str) -> tuple[int, ...]:
  try:
    return tuple(int(a) for a in text.split(','))
  except ValueError:
    raise ValueError(
      f'--ages must be comma-separated integers, e.g. 0,50; got {text!r}.'
    ) from None


def _config_and_rule(parser, argv, args):
  """The settings and the rule the probe runs on."""
  given = common.given_flags(parser, argv)
  values, _ = flags.values_from_flags(meta_config.MetaTrainConfig, args)
  overrides = {k: v for k, v in values.items() if k in given}
  if args.run is not None:
    if args.preset is not None or args.weights is not None:
      raise ValueError(
        'RUN_DIR gives the settings and the rule: leave out --preset '
        'and --weights.'
      )
    params, step = meta.read_rule(args.run, args.step)
    config = dataclasses.replace(meta_probe.saved_config(args.run), **overrides)
    return config, params, f'{args.run} at meta-step {step}'
  if args.step is not None:
    raise ValueError('--step names a checkpoint of RUN_DIR: give RUN_DIR.')
  preset = meta_train.PRESETS[args.preset] if args.preset else {}
  config = meta_config.MetaTrainConfig(**{**preset, **overrides})
  if args.weights is None:
    return config, None, f'the {config.init} rule'
  params = weights.load_rule(args.weights)
  config = common.with_rule_sizes(
    config, params, args.weights, 'rule_sizes' in given
  )
  return config, params, args.weights


def main(argv=None, prog: str | None = None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  parser = make_parser(prog or PROG)
  args = parser.parse_args(argv)
  try:
    ages = _ages(args.ages)
    config, params, source = _config_and_rule(parser, argv, args)
    if args.csv is not None and pathlib.Path(args.csv).is_dir():
      raise ValueError(f'--csv {args.csv} is a directory; expected a file.')
    print(f'probing {source} with {args.agents} fresh agents', flush=True)
    rows = meta_probe.probe(
      config,
      params,
      num_agents=args.agents,
      ages=ages,
      report=lambda line: print(line, flush=True),
    )
  except common.USER_ERRORS as e:
    return common.user_error(e)
  print(meta_probe.table(rows))
  print(
    f'noise: coherence {rows[0]["noise_coherence"]:.2f}, t_share 0.05',
  )
  if args.csv is not None:
    path = pathlib.Path(args.csv)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, 'w', newline='') as f:
      writer = csv.DictWriter(f, fieldnames=list(rows[0]))
      writer.writeheader()
      writer.writerows(rows)
    print(f'rows: {path}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
