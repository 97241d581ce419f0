# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Settings of the eval and meta-training runs, and flags made from them.

Each field of `EvalConfig` and `MetaTrainConfig` is written once: its type,
default and help text (field metadata) give the command-line flag
(`add_flags`) and the value read back (`from_flags`).
"""

import argparse
import dataclasses
import types as pytypes
import typing
from typing import Any

from ml_collections import config_dict

from disco_rl import agent as agent_lib
from disco_rl.networks import nets

RULES = ('disco_103', 'actor_critic')
PRECISIONS = nets.PRECISIONS


def _field(default, help_text: str, **extra):
  """A dataclass field whose metadata carries its flag's help text.

  `extra` may hold `choices` (allowed values) and `flags` (extra flag names,
  e.g. `('--steps',)`).
  """
  return dataclasses.field(default=default,
                           metadata=dict(help=help_text, **extra))


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
        f'expected positive layer sizes such as 512,512, got {text!r}')
  return sizes


def layer_sizes(value) -> tuple[int, ...]:
  """Layer sizes as a tuple from a tuple, a list or text ('(16,)', '16,8').

  Papermill passes a notebook parameter given as a tuple as its text.
  """
  if isinstance(value, str):
    return parse_sizes(value.strip('()[] '))
  return tuple(int(v) for v in value)


@dataclasses.dataclass
class EvalConfig:
  """Settings of an eval run (defaults: the upstream eval notebook)."""

  rule: str = _field('disco_103', 'update rule', choices=RULES)
  env: str = _field('jittable_catch',
                    "environment: 'jittable_catch' (acting compiled on the "
                    "device) or 'catch' (the dm_env Catch, stepped on the "
                    'host)', choices=('jittable_catch', 'catch'))
  rows: int = _field(8, 'Catch board rows')
  columns: int = _field(8, 'Catch board columns')
  num_steps: int = _field(1000, 'learner steps (one actor rollout each)',
                          flags=('--steps',))
  batch_size: int = _field(64, 'trajectories per learner step, over all '
                           'devices')
  rollout_len: int = _field(29, 'steps per trajectory')
  replay_ratio: int = _field(32, 'learner trajectories per acted trajectory; '
                             'environments = batch_size // replay_ratio')
  buffer_capacity: int = _field(1024, 'replay buffer size in trajectories, '
                                'over all devices')
  learning_rate: float = _field(1e-2, "the agent's learning rate")
  dense: tuple[int, ...] = _field((512, 512), "hidden sizes of the agent's "
                                  'MLP torso, e.g. 512,512')
  model_lstm_size: int = _field(128, 'size of the action-model LSTM')
  model_head_hiddens: tuple[int, ...] = _field(
      (128,), 'hidden sizes of the action-model heads')
  precision: str = _field(
      'float32', "compute dtype of the agent network ('bfloat16': "
      'parameters, outputs and the rule stay float32)', choices=PRECISIONS)
  seed: int = _field(0, 'random seed')
  num_devices: int | None = _field(
      None, 'devices to use (default: as many as the batch divides into)')
  steps_per_call: int = _field(
      20, 'learner steps compiled into one call of the fused loop')
  debug_checks: bool = _field(
      True, 'check every acted rollout (actions in range, finite rewards) '
      'and stop with the field, step and batch index of the first bad entry')
  behaviour_outputs: tuple[str, ...] | None = _field(
      ('logits',), 'agent outputs kept in the replay buffer (the rules read '
      'only the behaviour logits)', flags=())

  @property
  def num_envs(self) -> int:
    """Environments acting at once, over all devices."""
    return self.batch_size // self.replay_ratio


@dataclasses.dataclass
class MetaTrainConfig:
  """Settings of a meta-training run (defaults: the upstream notebook)."""

  num_steps: int = _field(800, 'meta-steps', flags=('--steps',))
  num_agents: int = _field(2, 'population size')
  batch_size_per_device: int = _field(32, 'environments per agent and device')
  rollout_len: int = _field(16, 'steps per training rollout (validation is '
                            'twice as long)')
  num_inner_steps: int = _field(2, 'agent updates per meta-step')
  rows: int = _field(5, 'Catch board rows')
  columns: int = _field(5, 'Catch board columns')
  learning_rate: float = _field(5e-4, "the agents' learning rate")
  dense: tuple[int, ...] = _field((512, 512), 'agent MLP hidden sizes')
  model_lstm_size: int = _field(256, 'agent action-model LSTM size')
  model_head_hiddens: tuple[int, ...] = _field(
      (256,), 'agent action-model head sizes')
  value_dense: tuple[int, ...] = _field((256, 256),
                                        'value-function MLP hidden sizes')
  meta_learning_rate: float = _field(5e-4, "Adam step size of the rule")
  init: str = _field('random', "starting rule: 'random' (a fresh "
                     "meta-network) or 'disco_103' (fine-tune)",
                     choices=('random', 'disco_103'))
  rule_seed: int = _field(1, 'seed of the fresh meta-network (init random; '
                          'the upstream notebook uses 1)')
  seed: int = _field(4, 'seed of the agents, environments and meta-steps')
  num_devices: int | None = _field(None, 'devices to use (default: all)')
  steps_per_call: int = _field(10, 'meta-steps compiled into one call')
  population: str = _field(
      'auto', "how a device runs its agents: 'map' one after another "
      "(fastest on CPUs), 'vmap' vectorised (for accelerators); 'auto': map "
      'on a CPU, vmap elsewhere', choices=('auto', 'map', 'vmap'))
  debug_checks: bool = _field(
      True, "check the agents' training rollouts (actions in range, finite "
      'rewards) and stop with the field, step and batch index of the first '
      'bad entry')


def _check_positive(config, names, minimum: int = 1) -> None:
  for name in names:
    value = getattr(config, name)
    if value < minimum:
      raise ValueError(f'{name} must be >= {minimum}, got {value}.')


def _check_choices(config) -> None:
  for field in dataclasses.fields(config):
    choices = field.metadata.get('choices')
    value = getattr(config, field.name)
    if choices and value not in choices:
      raise ValueError(f'Unknown {field.name} {value!r}; expected one of '
                       f'{tuple(choices)}.')


def _check_sizes(config, names) -> None:
  for name in names:
    sizes = tuple(getattr(config, name))
    if not sizes or min(sizes) < 1:
      raise ValueError(f'{name} must be positive layer sizes, got {sizes}.')


def _check_common(config, positive, sizes) -> None:
  """Choices, counts >= 1, rollout_len >= 2, layer sizes, num_devices."""
  _check_choices(config)
  _check_positive(config, positive + ('num_steps', 'steps_per_call',
                                      'model_lstm_size'))
  _check_positive(config, ('rollout_len', 'rows', 'columns'), minimum=2)
  _check_sizes(config, sizes + ('dense', 'model_head_hiddens'))
  if config.num_devices is not None and config.num_devices < 1:
    raise ValueError(f'num_devices must be >= 1, got {config.num_devices}.')


def check_eval_config(config: EvalConfig) -> None:
  """Raises ValueError naming any setting that cannot work."""
  _check_common(config, ('batch_size', 'replay_ratio', 'buffer_capacity'), ())
  if config.batch_size % config.replay_ratio:
    raise ValueError(
        f'batch_size={config.batch_size} must be a multiple of replay_ratio='
        f'{config.replay_ratio} (the number of environments is their ratio).')
  if config.buffer_capacity < config.batch_size:
    raise ValueError(f'buffer_capacity={config.buffer_capacity} is smaller '
                     f'than batch_size={config.batch_size}.')


def check_meta_train_config(config: MetaTrainConfig) -> None:
  """Raises ValueError naming any setting that cannot work."""
  _check_common(config, ('num_agents', 'batch_size_per_device',
                         'num_inner_steps'), ('value_dense',))


def agent_settings(rule: str, learning_rate: float, dense, model_lstm_size: int,
                   model_head_hiddens,
                   precision: str = 'float32') -> config_dict.ConfigDict:
  """Agent settings of the loops: the rule's defaults with an MLP agent.

  Args:
    rule: 'disco_103' (the Disco agent) or 'actor_critic'.
    learning_rate: the agent's learning rate.
    dense: hidden sizes of the MLP torso.
    model_lstm_size: size of the action model's LSTM.
    model_head_hiddens: hidden sizes of the action model's heads.
    precision: compute dtype of the agent network (see
      `networks.nets.with_precision`).
  """
  if rule == 'disco_103':
    settings = agent_lib.get_settings_disco()
  elif rule == 'actor_critic':
    settings = agent_lib.get_settings_actor_critic()
  else:
    raise ValueError(f'Unknown rule {rule!r}; expected one of {RULES}.')
  settings.net_settings.name = 'mlp'
  settings.net_settings.net_args = dict(
      dense=tuple(dense), model_arch_name='lstm', head_w_init_std=1e-2,
      model_kwargs=dict(head_mlp_hiddens=tuple(model_head_hiddens),
                        lstm_size=model_lstm_size))
  if precision != 'float32':
    settings.net_settings.precision = precision
  settings.learning_rate = learning_rate
  return settings


# ----------------------------------------------------------------------------
# Command-line flags.


def _flag_type(annotation) -> tuple[Any, bool]:
  """(argparse type, optional) of a field annotation."""
  optional = False
  if typing.get_origin(annotation) in (typing.Union, pytypes.UnionType):
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    optional = len(args) < len(typing.get_args(annotation))
    annotation = args[0]
  if typing.get_origin(annotation) is tuple:
    return parse_sizes, optional
  if annotation is bool:
    return bool, optional
  if annotation in (int, float, str):
    return annotation, optional
  raise TypeError(f'No flag type for {annotation!r}.')


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
    default = field.default
    shown = ','.join(map(str, default)) if isinstance(default, tuple) else (
        default)
    help_text = field.metadata.get('help', '')
    help_text += ' (default: %s)' % ('none' if optional and default is None
                                     else shown)
    if flag_type is bool:  # --name / --no-name
      group.add_argument(f'--{field.name.replace("_", "-")}', dest=field.name,
                         action=argparse.BooleanOptionalAction,
                         default=default, help=help_text.replace('%', '%%'))
      continue
    group.add_argument(
        f'--{field.name.replace("_", "-")}', *(aliases or ()),
        dest=field.name, type=flag_type, default=default,
        choices=field.metadata.get('choices'),
        help=help_text.replace('%', '%%'))


def from_flags(config_cls, args: argparse.Namespace):
  """The config dataclass holding the values of the flags `add_flags` made."""
  values = {f.name: getattr(args, f.name) for f in dataclasses.fields(
      config_cls) if hasattr(args, f.name)}
  return config_cls(**values)
