# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What the eval and meta-train commands share: run flags and the main flow.

Every run writes into `--out`; a directory that holds a run is refused
unless `--overwrite` (replace it) or `--resume DIR` (continue it, with the
settings it was started with; only `--steps` may change). Bad input prints
one `error:` line and exits 2. SIGINT/SIGTERM, whenever they come, stop the
run at the next safe point (before it starts, after compiling, or after the
compiled call that is running), save a checkpoint and the outputs, print
one line saying how to continue, and exit with 128 + the signal's number;
a second signal stops at once (the last checkpoint stays).
"""

import argparse
from collections.abc import Callable, Sequence
import dataclasses
import json
import signal
import sys
from typing import Any

import jax

from disco_rl import weights
from disco_rl.loops import config as config_lib
from disco_rl.loops import devices
from disco_rl.loops import driver
from disco_rl.loops import flags
from disco_rl.loops import run_dir
from disco_rl.loops import trainer

# Errors that are the user's input (a bad setting, path or file).
USER_ERRORS = (ValueError, FileNotFoundError, TypeError, KeyError)
EXIT_BAD_INPUT = 2
_UNSET = object()


def user_error(e: Exception) -> int:
  """Prints `e` as the one `error:` line of a command; the exit status."""
  message = ' '.join(str(e).split()) or type(e).__name__
  print(f'error: {message}', file=sys.stderr)
  return EXIT_BAD_INPUT


def make_parser(description: str, config_cls, default_out: str
                ) -> argparse.ArgumentParser:
  """Flags of every setting of `config_cls`, the run's and the processes'."""
  parser = argparse.ArgumentParser(description=description)
  group = parser.add_argument_group('run')
  group.add_argument('--out', default=default_out,
                     help=f'output directory (default: {default_out})')
  group.add_argument('--resume', metavar='DIR', default=None,
                     help='continue the run in DIR from its last checkpoint '
                     '(its saved settings; --steps may raise the total)')
  group.add_argument('--overwrite', action='store_true',
                     help='replace a run already in --out')
  group.add_argument('--checkpoint-every', type=int, default=None,
                     metavar='N', help='checkpoint every N steps (default: '
                     '10 times per run; 0: only at the end and on a signal)')
  group.add_argument('--keep-checkpoints', type=int, default=3, metavar='K',
                     help='checkpoints kept (default: 3)')
  group.add_argument('--no-progress', action='store_true',
                     help='no progress bar')
  flags.add_flags(parser, config_cls)
  devices.add_distributed_flags(parser)
  return parser


def add_weights_flag(parser: argparse.ArgumentParser, help_text: str) -> None:
  parser.add_argument('--weights', default=None, metavar='NPZ',
                      help=help_text)


def load_weights(args, needed: bool, why_not: str):
  """The --weights file's parameters (checked now), or None if not given.

  Args:
    args: the parsed flags.
    needed: whether the run's settings use a rule file.
    why_not: the error message when the file is given but not `needed`.

  Raises:
    ValueError: --weights given but not needed, or with --resume (the
      resumed run's rule is in its checkpoint); the weights module's errors
      for a missing, truncated or mis-shaped file (the same as for a bad
      $DISCO_RL_WEIGHTS).
  """
  if not args.weights:
    return None
  if args.resume is not None:
    raise ValueError('--weights cannot be given with --resume: the resumed '
                     'run continues with the rule saved in its checkpoint.')
  if not needed:
    raise ValueError(why_not)
  return weights.load_disco_103(args.weights)


def given_flags(parser: argparse.ArgumentParser, argv) -> set[str]:
  """The destinations of the flags given on the command line."""
  probe = argparse.Namespace(**{a.dest: _UNSET for a in parser._actions})  # pylint: disable=protected-access
  parser.parse_args(argv, namespace=probe)
  return {name for name, value in vars(probe).items() if value is not _UNSET}


def config_from_args(parser, argv, args, job: str, config_cls):
  """The run's settings: the flags', or on --resume the saved ones.

  On --resume the saved settings stand; a flag given for a setting must
  equal the saved value, except --steps.
  """
  values = flags.values_from_flags(config_cls, args)
  preset = getattr(args, 'preset', None)
  if args.resume is None:
    if preset is None:
      return config_cls(**values)
    given = given_flags(parser, argv)
    return config_lib.meta_train_preset(
        preset, **{k: v for k, v in values.items() if k in given})
  if preset is not None:
    raise ValueError('--preset cannot be given with --resume: the resumed '
                     'run keeps the settings it was started with.')
  if args.overwrite:
    raise ValueError('--resume and --overwrite exclude each other.')
  if '--out' in argv or any(a.startswith('--out=') for a in argv):
    raise ValueError('--resume DIR is the run directory: leave out --out.')
  path = run_dir.check(args.resume, resume=True)
  saved = run_dir.read_settings(path, job, config_cls)
  given = given_flags(parser, argv)
  changes = {k: v for k, v in values.items() if k in given}
  # The Trainer checks that these equal the saved ones (but --steps).
  return dataclasses.replace(saved, **changes)


def run(argv: Sequence[str] | None, *, description: str, config_cls,
        default_out: str, weights_help: str,
        weights_unusable: Callable[[Any], str | None],
        report: Callable[[dict[str, Any]], None],
        presets: Sequence[str] = ()) -> int:
  """Parses, trains and reports; returns the exit status.

  Args:
    argv: the arguments (default: sys.argv[1:]).
    description: the command's one-line description.
    config_cls: `EvalConfig` or `MetaTrainConfig`.
    default_out: the default output directory.
    weights_help: the help of the command's `--weights` flag.
    weights_unusable: `(config) -> None` if the settings read a rule file,
      else the error message for a `--weights` given anyway.
    report: prints the final lines from the summary (process 0).
    presets: names for `--preset` (settings to start from; flags given
      override them), e.g. `config.META_TRAIN_PRESETS`.
  """
  argv = list(sys.argv[1:] if argv is None else argv)
  # From here on a signal is a request to stop at the next safe point,
  # whenever it comes: start-up, compilation, a step, the outputs. A second
  # one ends the process at once, also in the middle of a compilation.
  with driver.StopOnSignal(on_second_signal=_stopped_at_once) as signals:
    parser = make_parser(description, config_cls, default_out)
    add_weights_flag(parser, weights_help)
    if presets:
      parser.add_argument('--preset', choices=tuple(presets), default=None,
                          help='start from these settings (flags given '
                          'override them): ' + ', '.join(presets))
    args = parser.parse_args(argv)
    return _train_and_report(parser, argv, args, config_cls,
                             weights_unusable, report, signals)


def _stopped_at_once(name: str) -> int:
  """The one error line of a second signal; the exit status."""
  print(f'error: stopped at once by a second {name}; the run keeps its last '
        'checkpoint (continue it with --resume)', file=sys.stderr)
  return 128 + signal.Signals[name].value


def _stopped_before_start(signals: driver.StopOnSignal) -> int:
  print(f'interrupted by {signals.signal_name} before the run started: '
        'nothing was written', file=sys.stderr)
  return 128 + signal.Signals[signals.signal_name].value


def _train_and_report(parser, argv, args, config_cls, weights_unusable,
                      report, signals: driver.StopOnSignal) -> int:
  """Checks the settings, trains and prints the summary; the exit status."""
  job = 'eval' if config_cls is config_lib.EvalConfig else 'meta_train'
  try:
    config = config_from_args(parser, argv, args, job, config_cls)
    if args.keep_checkpoints < 1:
      raise ValueError(f'--keep-checkpoints must be >= 1, got '
                       f'{args.keep_checkpoints}.')
    out = args.resume if args.resume is not None else args.out
    run_dir.check_writable(out)
    why_not = weights_unusable(config)
    rule_params = load_weights(args, needed=why_not is None, why_not=why_not)
    if signals.signal_name:
      return _stopped_before_start(signals)
    devices.initialize_distributed(devices.distributed_config_from_flags(args))
    run_trainer = trainer.Trainer(
        config, out, rule_params=rule_params,
        resume=args.resume is not None, overwrite=args.overwrite,
        checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints,
        progress=not args.no_progress)
    summary = run_trainer.fit()
    run_trainer.close()
  except USER_ERRORS as e:
    return user_error(e)
  lead = jax.process_index() == 0
  if lead:
    print(json.dumps(summary, indent=2))
    report(summary)
  interrupted = summary.get('interrupted')
  if interrupted not in ('SIGINT', 'SIGTERM'):
    if not signals.signal_name:
      return 0
    # The signal came after the run had ended: nothing was cut short.
    interrupted = signals.signal_name
    if lead:
      print(f'{interrupted} came after the run ended: its outputs are '
            'complete')
  elif lead and summary.get('completed'):
    print(f'interrupted by {interrupted} after the last step '
          f'({summary["stopped_at_step"]}): the run is complete and saved in '
          f'{summary["output_dir"]}')
  elif lead:
    print(f'interrupted by {interrupted} after step '
          f'{summary["stopped_at_step"]}: checkpoint, metrics and outputs '
          f'saved; continue with --resume {summary["output_dir"]}')
  return 128 + signal.Signals[interrupted].value
