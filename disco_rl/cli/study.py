# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Runs a study (rules compared on environments, stage by stage) and
writes its report.

  disco-rl study studies/catch_example.py --out DIR
  disco-rl study studies/catch_example.py --out DIR \
      --report    # the report again from DIR's results alone

SPEC is a Python file that defines `STUDY`, a `disco_rl.studies.spec.Study`
(docs/studies/README.md says how to write one). Each cell (a stage's
environment x rule) is one program of its seeds x learning rates; the
results (`DIR/results.csv`, `DIR/curves.csv`) are rewritten after every
cell and each stage's report goes to `DIR/STAGE/`. The same command
continues an interrupted study where it stopped; a cell whose saved
settings differ from the spec's is refused. Every cell's settings are
checked before the first runs. Progress: bars on a terminal, else (and
with --no-progress) one line per cell and a line about every tenth of
each cell's steps. Bad input prints one `error:`
line and exits 2; a signal stops the running cell at its next safe point
(its run is saved) and exits with 128 + the signal's number.
"""

import argparse
import functools
import importlib.util
import pathlib
import signal
import sys

from disco_rl.runtime import signals

signals.catch_from_here(__name__)  # The rule for signals, from this line on.

# pylint: disable=g-import-not-at-top,wrong-import-position
from disco_rl.cli import common
from disco_rl.studies import run as study_run
from disco_rl.studies import spec as spec_lib

# The command as `python -m` runs it (`disco-rl study` passes its own).
PROG = 'python -m disco_rl.cli.study'


def make_parser(prog: str = PROG) -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
    prog=prog, description=__doc__.split('\n\n')[0]
  )
  parser.add_argument(
    'spec', metavar='SPEC', help='a Python file that defines STUDY'
  )
  parser.add_argument('--out', required=True, help="the study's folder")
  parser.add_argument(
    '--tiny',
    action='store_true',
    help="every cell at the study's test size (minutes)",
  )
  parser.add_argument(
    '--report',
    action='store_true',
    help="write the reports from --out's results alone; train nothing",
  )
  parser.add_argument(
    '--only', metavar='STAGE', default=None, help='this stage alone'
  )
  parser.add_argument(
    '--no-progress',
    action='store_true',
    help='no progress bars: one line per cell and a line about every '
    "tenth of each cell's steps instead (also when the output is not a "
    'terminal)',
  )
  return parser


def load_study(path) -> spec_lib.Study:
  """The `STUDY` that the Python file at `path` defines.

  Raises:
    ValueError: no such file, one that does not load (a syntax error, an
      error while it runs: naming the file), or it defines no `Study`
      called STUDY.
  """
  path = pathlib.Path(path)
  if not path.is_file():
    raise ValueError(f'SPEC {path} is not a file.')
  module_spec = importlib.util.spec_from_file_location(
    f'disco_rl_study_{path.stem}', path
  )
  if module_spec is None or module_spec.loader is None:
    raise ValueError(f'SPEC {path} is not a Python file.')
  module = importlib.util.module_from_spec(module_spec)
  try:
    module_spec.loader.exec_module(module)
  except SyntaxError as e:
    raise ValueError(
      f'SPEC {path} is not valid Python: {e.msg} (line {e.lineno}).'
    ) from None
  except Exception as e:  # pylint: disable=broad-exception-caught
    # The spec's own code failed (a bad Study, a NameError, ...).
    raise ValueError(
      f'SPEC {path} does not load: {type(e).__name__}: {e}'
    ) from None
  study = getattr(module, 'STUDY', None)
  if not isinstance(study, spec_lib.Study):
    raise ValueError(
      f'SPEC {path} must define STUDY, a disco_rl.studies.spec.Study; got '
      f'{type(study).__name__}.'
    )
  return study


def main(argv=None, prog: str | None = None) -> int:
  args = make_parser(prog or PROG).parse_args(argv)
  try:
    study = load_study(args.spec)
    if args.tiny:
      study = study.shrunk()
    if args.only is not None:
      study.stage(args.only)  # Raises for an unknown stage.
    out = pathlib.Path(args.out)
    # Bars on a terminal only: a log file gets lines, not escape codes.
    bars = not args.no_progress and sys.stderr.isatty()
    if not args.report:
      study_run.run_study(
        study,
        out,
        only=args.only,
        spec_dir=pathlib.Path(args.spec).parent,
        progress=bars,
        log=None if bars else functools.partial(print, flush=True),
      )
    paths = study_run.write_reports(study, out, only=args.only)
  except study_run.StudyInterrupted as e:
    print(
      f'interrupted by {e.signal_name} during {e.cell}: its run is saved; '
      'the same command continues the study',
      file=sys.stderr,
    )
    return 128 + signal.Signals[e.signal_name].value
  except common.USER_ERRORS as e:
    return common.user_error(e)
  for stage, files in paths.items():
    print(f'{stage}: {files["report.md"]}')
  late = signals.received()
  return 128 + signal.Signals[late].value if late else 0


if __name__ == '__main__':
  sys.exit(main())
