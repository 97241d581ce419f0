# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What the commands share: one-line errors and exit statuses; for the run
commands (eval, meta-train), their run flags and main flow.

Every run writes into `--out`; a directory that holds a run is refused
unless `--overwrite` (replace it) or `--resume DIR` (continue it, with the
settings it was started with; only `--steps` may change). Bad input prints
one `error:` line and exits 2 (another run writing the directory too); a
failure of the system (a full disk) one `error:` line and exits 1. Signals
follow one rule from the job's first line (`disco_rl.runtime.signals`): SIGINT
(unless inherited as ignored) and SIGTERM stop the run at the next safe
point, save a checkpoint and the outputs, print one line saying how to
continue, and exit with 128 + the signal's number; a second signal stops at
once (the last checkpoint stays).
"""

import argparse
from collections.abc import Callable, Collection, Mapping, Sequence
import dataclasses
import errno
import json
import os
import signal
import sys
from typing import Any, Protocol

import jax

from disco_rl import weights
from disco_rl.cli import flags
from disco_rl.jobs import trainer
from disco_rl.runtime import distributed
from disco_rl.runtime import metrics as metrics_lib
from disco_rl.runtime import run_dir as run_dir_lib
from disco_rl.runtime import signals
from disco_rl.update_rules import disco

# Errors that are the user's input (a bad setting, path or file).
USER_ERRORS = (ValueError, FileNotFoundError, TypeError, KeyError)
EXIT_BAD_INPUT = 2
EXIT_SYSTEM = 1  # The system failed the run (e.g. a full disk).
_UNSET = object()


def user_error(e: Exception) -> int:
  """Prints `e` as the one `error:` line of a command; the exit status."""
  message = ' '.join(str(e).split()) or type(e).__name__
  print(f'error: {message}', file=sys.stderr)
  return EXIT_BAD_INPUT


def system_error(e: OSError, run_dir: str | None) -> int:
  """Prints an OSError (a full disk, a failed write) as the one `error:`
  line of a command, with how to continue the run in `run_dir`; the exit
  status."""
  message = e.strerror or str(e)
  if e.filename:
    message = f'{e.filename}: {message}'
  if e.errno == errno.ENOSPC and run_dir:
    message += (
      '; the run keeps its last complete checkpoint: free space, then '
      f'continue it with --resume {run_dir}'
    )
  print(f'error: {" ".join(message.split())}', file=sys.stderr)
  return EXIT_SYSTEM


def make_parser(
  description: str,
  config_cls,
  default_out: str,
  weights_help: str = "a rule's parameters (npz)",
  presets: Collection[str] | None = None,
  prog: str | None = None,
) -> argparse.ArgumentParser:
  """Flags of every setting of `config_cls`, the run's and the processes';
  `prog` is the command as users type it (`--help`'s usage line)."""
  parser = argparse.ArgumentParser(prog=prog, description=description)
  group = parser.add_argument_group('run')
  group.add_argument(
    '--out',
    default=default_out,
    help=f'output directory (default: {default_out})',
  )
  group.add_argument(
    '--resume',
    metavar='DIR',
    default=None,
    help='continue the run in DIR from its last checkpoint '
    '(its saved settings; --steps may raise the total)',
  )
  group.add_argument(
    '--overwrite', action='store_true', help='replace a run already in --out'
  )
  group.add_argument(
    '--checkpoint-every',
    type=int,
    default=None,
    metavar='N',
    help='checkpoint every N steps (default: '
    '10 times per run; 0: only at the end and on a signal)',
  )
  group.add_argument(
    '--keep-checkpoints',
    type=int,
    default=3,
    metavar='K',
    help='checkpoints kept (default: 3)',
  )
  group.add_argument(
    '--no-progress', action='store_true', help='no progress bar'
  )
  group.add_argument(
    '--log',
    nargs='*',
    default=[],
    metavar='LOGGER',
    choices=metrics_lib.LOGGERS,
    help='live curves of the metrics besides metrics.csv: '
    'tensorboard (OUT/tensorboard; pip install '
    "'disco_rl[tensorboard]'), wandb (OUT/wandb, offline "
    "unless $WANDB_MODE; pip install 'disco_rl[wandb]')",
  )
  group.add_argument(
    '--weights', default=None, metavar='NPZ', help=weights_help
  )
  if presets:
    group.add_argument(
      '--preset',
      choices=tuple(presets),
      default=None,
      help='start from these settings (flags given '
      'override them): ' + ', '.join(presets),
    )
  flags.add_flags(parser, config_cls)
  flags.add_board_flags(parser, config_cls)
  flags.add_distributed_flags(parser)
  return parser


def given_flags(parser: argparse.ArgumentParser, argv) -> set[str]:
  """The destinations of the flags given on the command line."""
  probe = argparse.Namespace(**{a.dest: _UNSET for a in parser._actions})  # pylint: disable=protected-access
  parser.parse_args(argv, namespace=probe)
  return {name for name, value in vars(probe).items() if value is not _UNSET}


def load_weights(args, why_not: str | None):
  """The --weights file's parameters (checked now), or None if not given.

  Raises:
    ValueError: --weights with --resume (the resumed run's rule is in its
      checkpoint) or with settings that read no rule file (`why_not`); the
      weights module's errors for a missing, truncated or mis-shaped file.
  """
  if not args.weights:
    return None
  if args.resume is not None:
    raise ValueError(
      '--weights cannot be given with --resume: the resumed '
      'run continues with the rule saved in its checkpoint.'
    )
  if why_not is not None:
    raise ValueError(why_not)
  return weights.load_rule(args.weights)


def with_rule_sizes(config, params, path: str, sizes_given: bool):
  """`config` with the meta-network sizes of the rule file's `params`.

  A rule file's sizes are read from it (`disco.sizes_from_params`): Disco103's
  or those of a rule meta-trained here at another size.

  Raises:
    ValueError: `--rule-sizes` given (`sizes_given`) and other than the
      file's, naming both.
  """
  found = disco.sizes_from_params(params)
  if disco.as_sizes(config.rule_sizes) == found:
    return config
  if sizes_given:
    raise ValueError(
      f'--rule-sizes {disco.as_sizes(config.rule_sizes).text()} differ '
      f'from the sizes of the --weights file {path} ({found.text()}): '
      "leave out --rule-sizes (a rule file's sizes are read from it)."
    )
  return dataclasses.replace(config, rule_sizes=found.changes())


def with_policy_target(config, params, path: str, target_given: bool):
  """`config` with the policy target 'action' when the rule file's
  `params` hold the meta-network's action head (which only the action
  targets, `disco.ACTION_TARGETS`, read) and no target is given;
  'absolute' and 'residual' rules look alike, as do 'action' and
  'action_pg': the flag decides.

  Raises:
    ValueError: `--policy-target` given (`target_given`) and not an action
      target for a file with the head, or an action target for one
      without.
  """
  has_head = disco.has_action_head(params)
  if has_head == (config.policy_target in disco.ACTION_TARGETS):
    return config
  if has_head and not target_given:
    return dataclasses.replace(config, policy_target='action')
  targets = ' or '.join(disco.ACTION_TARGETS)
  raise ValueError(
    f'--policy-target {config.policy_target} does not fit the --weights '
    f'file {path}: '
    + (
      f'it holds the action head of policy target {targets}; leave out '
      '--policy-target or give one of them.'
      if has_head
      else f'it has no action head, which policy target {targets} reads.'
    )
  )


class Main(Protocol):
  """A command's `main(argv=None, prog=None) -> exit status`; `prog` is
  the command as the user typed it (`--help`'s usage line; default the
  command's `python -m` spelling)."""

  def __call__(
    self, argv: Sequence[str] | None = None, prog: str | None = None
  ) -> int: ...


def command(*, prog: str, **settings: Any) -> Main:
  """A command's `main(argv=None, prog=None) -> exit status`: `run` with
  these settings (the command's description, config class, report, ...);
  `prog` is the default of main's `prog`."""
  default_prog = prog

  def main(argv: Sequence[str] | None = None, prog: str | None = None) -> int:
    return run(argv, prog=prog or default_prog, **settings)

  return main


def run(
  argv: Sequence[str] | None,
  *,
  description: str,
  config_cls,
  default_out: str,
  weights_help: str,
  weights_unusable: Callable[[Any], str | None],
  report: Callable[[dict[str, Any]], None],
  presets: Mapping[str, Mapping[str, Any]] | None = None,
  prog: str | None = None,
) -> int:
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
    presets: named settings for `--preset` to start from (flags given
      override them), e.g. `cli.meta_train.PRESETS`.
    prog: the command as users type it, e.g. 'disco-rl eval' or 'python -m
      disco_rl.cli.eval' (default: argparse's, the script's name).
  """
  argv = list(sys.argv[1:] if argv is None else argv)
  # The rule for signals is the command's first line's
  # (`signals.catch_from_here`); the run watches for them (`run.run`).
  parser = make_parser(
    description, config_cls, default_out, weights_help, presets, prog
  )
  args = parser.parse_args(argv)
  try:
    run_trainer = _trainer(
      parser, argv, args, config_cls, weights_unusable, presets or {}
    )
    if run_trainer is None:
      run_dir_lib.release_all()  # The directory as it was.
      name = signals.name_received()
      print(
        f'interrupted by {name} before the run started: nothing was written',
        file=sys.stderr,
      )
      return 128 + signal.Signals[name].value
    try:
      summary = run_trainer.fit()
    finally:
      run_trainer.close()
  except (*USER_ERRORS, jax.errors.JaxRuntimeError) as e:
    if jax.process_count() == 1:
      if isinstance(e, USER_ERRORS):
        return _end(user_error(e))
      raise
    # A peer gone mid-run fails a collective, with whatever error the
    # runtime gives (not always a JaxRuntimeError): ask the peers.
    silent = distributed.silent_peers()
    if silent:
      return _end(
        user_error(
          RuntimeError(
            f'another process of the run stopped or failed (process '
            f'{silent[0]} of {jax.process_count()} is silent: {e})'
          )
        )
      )
    if isinstance(e, USER_ERRORS):
      return _end(user_error(e))
    return _end(  # A JaxRuntimeError: a collective failed.
      user_error(
        RuntimeError(f'another process of the run stopped or failed ({e})')
      )
    )
  except OSError as e:  # Not the input's: the system's (a full disk).
    return _end(system_error(e, args.resume or args.out))
  return _report(summary, report)


def _end(status: int) -> int:
  """The exit status of a failed run; with several processes the process
  ends here, as JAX's exit waits for every process (a failed one never
  comes)."""
  run_dir_lib.release_all()  # The run directory's lock, if still held.
  if jax.process_count() > 1:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # pylint: disable=protected-access
  return status


def _trainer(
  parser, argv, args, config_cls, weights_unusable, presets
) -> trainer.Trainer | None:
  """The run's Trainer from the flags (None: a signal came first)."""
  if args.keep_checkpoints < 1:
    raise ValueError(
      f'--keep-checkpoints must be >= 1, got {args.keep_checkpoints}.'
    )
  given = given_flags(parser, argv)
  values, shorthands = flags.values_from_flags(config_cls, args)
  given |= shorthands
  preset = getattr(args, 'preset', None)
  run_args = dict(
    checkpoint_every=args.checkpoint_every,
    keep_checkpoints=args.keep_checkpoints,
    progress=not args.no_progress,
    loggers=args.log,
  )
  if args.resume is not None:
    if preset is not None:
      raise ValueError(
        '--preset cannot be given with --resume: the resumed '
        'run keeps the settings it was started with.'
      )
    if args.overwrite:
      raise ValueError('--resume and --overwrite exclude each other.')
    if 'out' in given:
      raise ValueError('--resume DIR is the run directory: leave out --out.')
    if not args.resume.strip():
      raise ValueError("--resume is empty; expected the run's directory.")
    load_weights(args, None)  # Refused with --resume.
    processes = flags.distributed_config(args)
    run_dir = run_dir_lib.RunDir(
      args.resume, resume=True, lock=_writes_files(processes)
    )
    if 'keep_checkpoints' not in given:
      # How many to keep is not a setting of the run: without the flag a
      # resume keeps the newest as many as the run holds (at least the
      # default), so the default does not cut a longer history to 3.
      run_args['keep_checkpoints'] = max(
        args.keep_checkpoints, run_dir.checkpoints_held()
      )
    if signals.received():
      return None
    distributed.initialize(processes)
    return trainer.Trainer.resume(
      run_dir,
      {k: v for k, v in values.items() if k in given},
      config_cls=config_cls,
      **run_args,
    )
  if preset is None:
    config = config_cls(**values)
  else:
    config = config_cls(
      **{**presets[preset], **{k: v for k, v in values.items() if k in given}}
    )
  if not args.out.strip():
    raise ValueError(
      "--out is empty; expected the run's directory ('.' for the current one)."
    )
  processes = flags.distributed_config(args)
  run_dir = run_dir_lib.RunDir(
    args.out, overwrite=args.overwrite, lock=_writes_files(processes)
  )
  rule_params = load_weights(args, weights_unusable(config))
  if rule_params is not None:
    config = with_rule_sizes(
      config, rule_params, args.weights, 'rule_sizes' in given
    )
    config = with_policy_target(
      config, rule_params, args.weights, 'policy_target' in given
    )
  if signals.received():
    return None
  distributed.initialize(processes)
  return trainer.Trainer(config, run_dir, rule_params=rule_params, **run_args)


def _writes_files(processes: distributed.DistributedConfig) -> bool:
  """Whether this process writes the run's files and holds its directory's
  lock: process 0 of several, or the only one."""
  return not processes.enabled or processes.process_id == 0


def speed_line(
  unit: str, speed: float | None, seconds: float | None, what: str, digits: int
) -> str:
  """A report's speed line, e.g. 'steps/s: 5.09 after 27s of compilation':
  `speed` in `unit`s per second after the first call, `seconds` the time
  of `what` (None: no `unit` ran in this call, e.g. --resume of a finished
  run)."""
  if seconds is None:
    return f'{unit}s/s: n/a (no {unit} ran in this call)'
  rate = 'n/a' if speed is None else f'{speed:.{digits}f}'
  return f'{unit}s/s: {rate} after {seconds:.0f}s of {what}'


def _report(summary, report) -> int:
  """Prints the summary and how the run ended; the exit status."""
  lead = jax.process_index() == 0
  if lead:
    print(json.dumps(summary, indent=2))
    report(summary)
  interrupted = summary.get('interrupted')
  if interrupted not in ('SIGINT', 'SIGTERM'):
    late = signals.received()
    if not late:
      return 0
    # The signal came after the run had ended: nothing was cut short.
    if lead:
      print(f'{late} came after the run ended: its outputs are complete')
    return 128 + signal.Signals[late].value
  if summary.get('completed'):
    print(
      f'interrupted by {interrupted} after the last step '
      f'({summary["stopped_at_step"]}): the run is complete and saved in '
      f'{summary["output_dir"]}'
    )
  else:
    print(
      f'interrupted by {interrupted} after step '
      f'{summary["stopped_at_step"]}: checkpoint, metrics and outputs '
      f'saved; continue with --resume {summary["output_dir"]}'
    )
  return 128 + signal.Signals[interrupted].value
