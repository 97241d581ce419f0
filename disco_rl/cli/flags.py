# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What users type, read into settings: command-line flags and notebook
parameters.

`add_flags` makes a `--field-name` flag of every field of a config
dataclass whose metadata holds its help text (and `choices`, `flags`
aliases); `values_from_flags` reads the parsed values back. The parsers
also read what notebooks pass (papermill gives tuples and dicts as text).
The flags of several processes (`add_distributed_flags`) are here too.
"""

import argparse
import ast
import dataclasses
import types as pytypes
import typing
from typing import Any

from disco_rl import environments
from disco_rl.jobs import config as config_lib
from disco_rl.jobs.meta import config as meta_config
from disco_rl.runtime import distributed
from disco_rl.update_rules import disco

parse_kwargs = environments.parse_kwargs
# Shorthands for Catch's board: --rows R --columns C.
BOARD = ('rows', 'columns')
_CATCH = ('catch', 'jittable_catch')


def env_kwargs(value) -> dict[str, Any]:
  """Environment keyword arguments from a mapping or text ('size=10,...').

  Papermill passes a notebook parameter given as a dict as its text.
  """
  if isinstance(value, str):
    text = value.strip()
    if text.startswith('{'):
      parsed = ast.literal_eval(text)
      if not isinstance(parsed, dict):
        raise ValueError(f'env_kwargs must be a dict, got {value!r}.')
      return parsed
    return parse_kwargs(text)
  return dict(value or {})


def parse_sizes(text: str) -> tuple[int, ...]:
  """'512,512' -> (512, 512): layer sizes given on the command line."""
  try:
    sizes = tuple(int(x) for x in text.split(',') if x.strip())
  except ValueError:
    raise argparse.ArgumentTypeError(
      f'expected comma-separated integers such as 512,512, got {text!r}'
    ) from None
  if not sizes or min(sizes) < 1:
    raise argparse.ArgumentTypeError(
      f'expected positive layer sizes such as 512,512, got {text!r}'
    )
  return sizes


def rule_sizes(text: str) -> dict[str, Any]:
  """`--rule-sizes`: a named size of the rule (`disco.NAMED_SIZES`, e.g.
  'tiny') as its changes from Disco103's, or the changes as name=value
  pairs ('prediction_size=8,embedding_size=8x1')."""
  if text.strip() in disco.NAMED_SIZES:
    return disco.NAMED_SIZES[text.strip()].changes()
  try:
    return parse_kwargs(text)
  except argparse.ArgumentTypeError:
    raise argparse.ArgumentTypeError(
      f'expected a named size ({", ".join(disco.NAMED_SIZES)}) or '
      'name=value pairs such as prediction_size=8,embedding_size=8x1, got '
      f'{text!r}'
    ) from None


# Fields whose flag reads text its own way.
FIELD_TYPES = {'rule_sizes': rule_sizes}


def layer_sizes(value) -> tuple[int, ...]:
  """Layer sizes as a tuple from a tuple, a list or text ('(16,)', '16,8').

  Papermill passes a notebook parameter given as a tuple as its text.
  """
  if isinstance(value, str):
    return parse_sizes(value.strip('()[] '))
  return tuple(int(v) for v in value)


def _flag_type(annotation) -> tuple[Any, bool]:
  """(argparse type, optional) of a field annotation."""
  optional = False
  if typing.get_origin(annotation) in (typing.Union, pytypes.UnionType):
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = len(args) < len(typing.get_args(annotation))
    annotation = args[0]
  if typing.get_origin(annotation) is tuple:
    element = typing.get_args(annotation)[0]
    if element in (str, float):  # Several words: nargs='*'.
      return element, optional
    return parse_sizes, optional
  if typing.get_origin(annotation) is dict:
    return parse_kwargs, optional
  if annotation is bool:
    return bool, optional
  if annotation in (int, float, str):
    return annotation, optional
  raise TypeError(f'No flag type for {annotation!r}.')


def _shown(default) -> Any:
  """A default as its flag would be written ('512,512', 'size=10', 'none')."""
  if isinstance(default, tuple):
    if default and isinstance(default[0], (str, float)):
      return ' '.join(map(str, default))
    return ','.join(map(str, default)) or 'none'
  if isinstance(default, dict):
    return ','.join(f'{k}={v}' for k, v in default.items()) or 'none'
  return default


def add_flags(parser: argparse.ArgumentParser, config_cls) -> None:
  """Adds `--field-name` for every field of a config dataclass.

  A field whose metadata has `flags=()` gets none; `flags=('--x',)` adds
  aliases.
  """
  hints = typing.get_type_hints(config_cls)
  group = parser.add_argument_group(f'{config_cls.__name__} settings')
  for field in dataclasses.fields(config_cls):
    aliases = field.metadata.get('flags')
    if aliases == ():
      continue
    flag_type, optional = _flag_type(hints[field.name])
    flag_type = FIELD_TYPES.get(field.name, flag_type)
    if field.default is not dataclasses.MISSING:
      default = field.default
    elif field.default_factory is not dataclasses.MISSING:
      default = field.default_factory()
    else:
      raise TypeError(
        f'{config_cls.__name__}.{field.name} has no default: every '
        'setting with a flag needs one.'
      )
    shown = _shown(default)
    help_text = field.metadata.get('help', '')
    help_text += ' (default: %s)' % (
      'none' if optional and default is None else shown
    )
    if flag_type is bool:  # --name / --no-name
      group.add_argument(
        f'--{field.name.replace("_", "-")}',
        dest=field.name,
        action=argparse.BooleanOptionalAction,
        default=default,
        help=help_text.replace('%', '%%'),
      )
      continue
    words = isinstance(default, tuple) and (
      flag_type in (str, float) or field.metadata.get('words', False)
    )
    if words:
      flag_type = typing.get_args(hints[field.name])[0]
    group.add_argument(
      f'--{field.name.replace("_", "-")}',
      *(aliases or ()),
      dest=field.name,
      type=flag_type,
      default=default,
      nargs='*' if words else None,
      choices=field.metadata.get('choices'),
      help=help_text.replace('%', '%%'),
    )


def add_board_flags(parser: argparse.ArgumentParser, config_cls) -> None:
  """--rows and --columns: Catch's board, written into the settings of the
  Catch environment (eval) or of every Catch task naming none
  (meta-training)."""
  where = (
    '--env-kwargs rows=R,columns=C'
    if config_cls is config_lib.EvalConfig
    else 'the board of every catch task that '
    'names none, e.g. --tasks catch[rows=R,columns=C]'
  )
  group = parser.add_argument_group('shorthands', f"Catch's board: {where}")
  for name in BOARD:
    group.add_argument(
      f'--{name}', type=int, default=None, help=f'Catch board {name}'
    )


def values_from_flags(
  config_cls, args: argparse.Namespace
) -> tuple[dict[str, Any], set[str]]:
  """({field: value} of the flags `add_flags` made (lists as tuples), the
  fields the board shorthands set).

  Raises:
    ValueError: a shorthand that disagrees with the settings it fills in,
      or that no Catch environment takes.
  """
  values = {
    f.name: getattr(args, f.name)
    for f in dataclasses.fields(config_cls)
    if hasattr(args, f.name)
  }
  values = {
    k: tuple(v) if isinstance(v, list) else v for k, v in values.items()
  }
  shorthands = set()
  if config_cls is config_lib.EvalConfig and '[' in str(values['env']):
    values = _env_settings_to_kwargs(values)
    shorthands = {'env', 'env_kwargs'}
  board = {
    k: getattr(args, k) for k in BOARD if getattr(args, k, None) is not None
  }
  if not board:
    return values, shorthands
  if config_cls is config_lib.EvalConfig:
    if values['env'] not in _CATCH:
      raise ValueError(
        f'--rows/--columns set the board of Catch; env is {values["env"]!r}.'
      )
    values['env_kwargs'] = _with_board(
      dict(values['env_kwargs']), board, f'--env-kwargs of env {values["env"]}'
    )
    return values, shorthands | {'env_kwargs'}
  default = meta_config.MetaTrainConfig.__dataclass_fields__['tasks'].default
  if tuple(values['tasks']) == default:  # The default task, resized.
    name, settings = environments.parse_spec(default[0])
    values['tasks'] = (environments.format_spec(name, {**settings, **board}),)
    return values, {'tasks'}
  tasks = []
  for text in values['tasks']:
    name, settings = environments.parse_spec(text)
    if name in _CATCH:
      net = settings.pop('net', None)
      settings = _with_board(settings, board, f'task {text!r}')
      if net is not None:
        settings['net'] = net
      text = environments.format_spec(name, settings)
    tasks.append(text)
  if tasks == list(values['tasks']):
    raise ValueError(
      '--rows/--columns set the board of catch tasks; tasks '
      f'{list(values["tasks"])} have none.'
    )
  values['tasks'] = tuple(tasks)
  return values, {'tasks'}


def _env_settings_to_kwargs(values: dict[str, Any]) -> dict[str, Any]:
  """`--env NAME[key=value,...]` as env NAME and those env_kwargs (the
  form tasks and studies take), which must agree with --env-kwargs."""
  name, settings = environments.parse_spec(values['env'])
  given = dict(values['env_kwargs'] or {})
  for key, value in settings.items():
    if key in given and given[key] != value:
      raise ValueError(
        f'--env {values["env"]} sets {key}={value}, --env-kwargs sets '
        f'{key}={given[key]}.'
      )
  return {**values, 'env': name, 'env_kwargs': {**given, **settings}}


def _with_board(
  settings: dict[str, Any], board: dict[str, int], what: str
) -> dict[str, Any]:
  """`settings` with the board's rows and columns (which must agree)."""
  for name, value in board.items():
    if settings.get(name, value) != value:
      raise ValueError(
        f'--{name} {value} disagrees with {name}={settings[name]} in {what}.'
      )
  return {**board, **settings}


def add_distributed_flags(parser: argparse.ArgumentParser) -> None:
  """--coordinator-address, --num-processes, --process-id and
  --peer-timeout-s."""
  group = parser.add_argument_group(
    'several processes',
    f'also read from ${distributed.ENV_COORDINATOR}, '
    f'${distributed.ENV_NUM_PROCESSES}, ${distributed.ENV_PROCESS_ID} and '
    f'${distributed.ENV_PEER_TIMEOUT}',
  )
  group.add_argument(
    '--coordinator-address', default=None, help="process 0's address, HOST:PORT"
  )
  group.add_argument(
    '--num-processes',
    type=int,
    default=None,
    help='processes in the run (default 1)',
  )
  group.add_argument(
    '--process-id', type=int, default=None, help="this process's index"
  )
  group.add_argument(
    '--peer-timeout-s',
    type=float,
    default=None,
    help='seconds without a sign of life from another process after '
    'which this one stops with one error line (default '
    f'{distributed.PEER_TIMEOUT_S})',
  )


def distributed_config(
  args: argparse.Namespace,
) -> distributed.DistributedConfig:
  """The processes' settings from the flags (else the environment)."""
  return distributed.DistributedConfig.from_environment(
    coordinator_address=args.coordinator_address,
    num_processes=args.num_processes,
    process_id=args.process_id,
    peer_timeout_s=args.peer_timeout_s,
  )
