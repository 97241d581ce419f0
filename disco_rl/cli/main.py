# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The `disco-rl` console script: one entry point, a subcommand per command.

  disco-rl eval --steps 1000 --out runs/eval
  disco-rl meta-train --preset lpg --out runs/lpg
  disco-rl SUBCOMMAND --help

Each subcommand is a module of `disco_rl.cli` with its `main(argv, prog)`
(`python -m disco_rl.cli.eval` runs the same command); the subcommand's
module is imported only once chosen, after the rule for signals is set
(`disco_rl.runtime.signals`), so `disco-rl --help` and a misspelt
subcommand stay quick. Bad input prints one `error:` line and exits 2.
"""

import argparse
from collections.abc import Sequence
import importlib
import sys

from disco_rl.runtime import signals

PROG = 'disco-rl'
# Subcommand -> (its module in disco_rl.cli, what it does).
COMMANDS = {
  'eval': ('eval', 'train an agent with a fixed update rule'),
  'meta-train': ('meta_train', 'meta-train an update rule'),
  'study': ('study', 'run a study and write its report'),
  'export-rule': (
    'export_rule',
    "write a meta-training run's rule at a checkpoint to an npz",
  ),
  'probe-rule': (
    'probe_rule',
    "measure the meta-gradient at a rule's parameters",
  ),
}


def make_parser() -> argparse.ArgumentParser:
  """The parser of the subcommand's name (its flags are its own)."""
  parser = argparse.ArgumentParser(
    prog=PROG,
    usage='%(prog)s [-h] SUBCOMMAND [ARGS...]',
    description="disco_rl's commands; a subcommand's arguments follow it.",
    formatter_class=argparse.RawDescriptionHelpFormatter,
    epilog='\n'.join(
      [
        'subcommands:',
        *(f'  {name:<12} {what}' for name, (_, what) in COMMANDS.items()),
        '',
        f'`{PROG} SUBCOMMAND --help` lists its flags.',
      ]
    ),
  )
  parser.add_argument(
    'command',
    metavar='SUBCOMMAND',
    choices=tuple(COMMANDS),
    help=', '.join(COMMANDS),
  )
  return parser


def main(argv: Sequence[str] | None = None) -> int:
  """Runs `disco-rl SUBCOMMAND ARGS...`; returns the exit status.

  The process's first line when it runs as the console script: the rule for
  signals holds from here (a command's module sets it from its own first
  line only under `python -m`).
  """
  argv = list(sys.argv[1:] if argv is None else argv)
  args = make_parser().parse_args(argv[:1])
  signals.catch_from_here('__main__')  # The console script is the command.
  module, _ = COMMANDS[args.command]
  command = importlib.import_module(f'disco_rl.cli.{module}')
  return command.main(argv[1:], prog=f'{PROG} {args.command}')


if __name__ == '__main__':
  sys.exit(main())
