# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The `disco-rl` console script: one entry point, a subcommand per command.

  disco-rl eval --steps 1000 --out runs/eval
  disco-rl meta-train --preset lpg --out runs/lpg
  disco-rl SUBCOMMAND --help

Each subcommand is a module of `disco_rl.cli` with its `main(argv, prog)`
(`python -m disco_rl.cli.eval` runs the same command); the subcommand's
module is imported only once chosen, after the console script has set
the rule for signals (`disco_rl.runtime.signals`), so `disco-rl --help`
and a misspelt subcommand stay quick. Bad input prints one `error:` line
and exits 2.
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

  Called from Python (tests, notebooks) it leaves the signals alone until
  the run starts, as each subcommand's `main` does; the console script
  (`console_script`) sets the process's rule for signals first.
  """
  argv = list(sys.argv[1:] if argv is None else argv)
  args = make_parser().parse_args(argv[:1])
  module, _ = COMMANDS[args.command]
  command = importlib.import_module(f'disco_rl.cli.{module}')
  return command.main(argv[1:], prog=f'{PROG} {args.command}')


def console_script() -> int:
  """The `disco-rl` console script: the process's first line sets the rule
  for signals (`signals.catch_from_here`), which holds to its end, then
  `main` reads sys.argv. Only a process that is the command calls it: the
  rule is never exited."""
  signals.catch_from_here('__main__')
  return main()


if __name__ == '__main__':
  sys.exit(console_script())
