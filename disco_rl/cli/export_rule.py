# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Writes a meta-training run's rule at one of its checkpoints to an npz.

  disco-rl export-rule runs/meta_train --step 750 \
      --out runs/rule_750.npz
  disco-rl eval --weights runs/rule_750.npz ...

The file has the layout of `disco_103.npz` (and of the run's final
`update_rule_params.npz`), so `--weights` of the eval and meta-train
commands takes it. The run is only read: a finished, interrupted or running
run stays as it is. Without `--step`, the latest checkpoint; a run keeps
its last `--keep-checkpoints` (3 unless set). An existing `--out` is
refused unless `--overwrite`. Bad input prints one `error:` line and exits 2.
"""

import argparse
import pathlib
import signal
import sys

from disco_rl.runtime import signals

signals.catch_from_here(__name__)  # The rule for signals, from this line on.

# pylint: disable=g-import-not-at-top,wrong-import-position
from disco_rl import meta_objective
from disco_rl.cli import common
from disco_rl.jobs.meta import job as meta

# The command as `python -m` runs it (`disco-rl export-rule` passes its own).
PROG = 'python -m disco_rl.cli.export_rule'


def make_parser(prog: str = PROG) -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
    prog=prog,
    description=__doc__.split('\n\n')[0],
  )
  parser.add_argument(
    'run', metavar='RUN_DIR', help='the meta-training run directory'
  )
  parser.add_argument(
    '--step',
    type=int,
    default=None,
    help='the checkpoint (meta-step) to read; default: the latest',
  )
  parser.add_argument(
    '--out', required=True, metavar='NPZ', help='the file to write'
  )
  parser.add_argument(
    '--overwrite', action='store_true', help='replace an existing --out'
  )
  return parser


def export(
  run, out, step: int | None = None, overwrite: bool = False
) -> int | None:
  """Writes the rule of `run`'s checkpoint `step` to `out`; returns the step
  (None: the command's signal rule saw a signal before the file was
  written, and it was not).

  Raises:
    ValueError: `out` exists and not `overwrite`, or is a directory; the
      errors of `meta.read_rule`.
    FileNotFoundError: no such checkpoint.
  """
  out = pathlib.Path(out)
  if out.is_dir():
    raise ValueError(f'--out {out} is a directory; expected a file path.')
  if out.exists() and not overwrite:
    raise ValueError(f'--out {out} exists; pass --overwrite to replace it.')
  params, step = meta.read_rule(run, step)
  if signals.received():
    return None
  out.parent.mkdir(parents=True, exist_ok=True)
  tmp = out.with_name(out.name + '.tmp.npz')
  try:  # Written whole or not at all.
    meta_objective.save_params(params, tmp)
    tmp.replace(out)
  finally:
    tmp.unlink(missing_ok=True)
  return step


def main(argv=None, prog: str | None = None) -> int:
  args = make_parser(prog or PROG).parse_args(argv)
  try:
    step = export(args.run, args.out, args.step, args.overwrite)
  except common.USER_ERRORS as e:
    return common.user_error(e)
  if step is None:
    name = signals.name_received()
    print(f'interrupted by {name}: {args.out} was not written', file=sys.stderr)
    return 128 + signal.Signals[name].value
  print(f'rule of meta-step {step} of {args.run}: {args.out}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
