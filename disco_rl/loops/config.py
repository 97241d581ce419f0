# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Settings of the eval and meta-training runs, and their checks.

Each field of `EvalConfig` and `MetaTrainConfig` is written once: its type,
default and help text (field metadata) give the command-line flag and the
value read back (`flags.add_flags`, `flags.from_flags`).
"""

import dataclasses
import math
from typing import Any

from ml_collections import config_dict

from disco_rl import agent as agent_lib
from disco_rl import environments
from disco_rl.loops import precision as precision_lib
from disco_rl.loops import tasks as tasks_lib
from disco_rl.networks import nets

RULES = ('disco_103', 'actor_critic')
PRECISIONS = nets.PRECISIONS
MATMUL_PRECISIONS = precision_lib.MATMUL_PRECISIONS
_MATMUL_PRECISION_HELP = (
    "float32 matrix-product precision of the compiled programs (JAX's "
    "default_matmul_precision): 'default' (the backend's choice: TF32 on "
    "recent NVIDIA GPUs, bfloat16 passes on TPUs), 'high' (an intermediate "
    "precision where the backend has one) or 'highest' (full float32); CPUs "
    'compute float32 products in full at every setting')
NETS = ('mlp', 'conv', 'resnet')
# The config fields each network's torso takes (its constructor's names).
TORSO_FIELDS = {'mlp': (), 'conv': ('conv_channels', 'conv_kernel'),
                'resnet': ('resnet_channels', 'resnet_blocks')}
CATCH_ENVS = environments.CATCH_NAMES
_CONV_CHANNELS_HELP = ("output channels of the conv torso's layers (net "
                       'conv), e.g. 16 (MinAtar) or 32,64')
_CONV_KERNEL_HELP = "kernel size of the conv torso's layers (stride 1, SAME padding)"
_RESNET_CHANNELS_HELP = (
    "channels of the resnet torso's stages (net resnet; IMPALA's 16,32,32), "
    'each a conv, a stride-2 max-pool and --resnet-blocks residual blocks')
_RESNET_BLOCKS_HELP = ('residual blocks per stage of the resnet torso (each '
                       'two 3x3 convolutions)')
# env='custom': the Environment object given to Trainer/EvalLoop (env=...).
CUSTOM_ENV = 'custom'


def _field(default, help_text: str, **extra):
  """A dataclass field whose metadata carries its flag's help text.

  `extra` may hold `choices` (allowed values) and `flags` (extra flag names,
  e.g. `('--steps',)`).
  """
  return dataclasses.field(default=default,
                           metadata=dict(help=help_text, **extra))


def _dict_field(help_text: str, **extra):
  """A dict-valued field (default: empty) whose flag reads `k=v,k2=v2`."""
  return dataclasses.field(default_factory=dict,
                           metadata=dict(help=help_text, **extra))


@dataclasses.dataclass(frozen=True)
class EvalConfig:
  """Settings of an eval run (defaults: the upstream eval notebook).

  Checked when made (`check_eval_config`): a config that exists can run,
  and nothing downstream checks it again. Frozen: change one with
  `dataclasses.replace`, which checks the new one.
  """

  rule: str = _field('disco_103', 'update rule', choices=RULES)
  env: str = _field('jittable_catch',
                    "environment: 'jittable_catch' (acting compiled on the "
                    "device), 'catch' (the dm_env Catch, stepped on the "
                    "host), 'gymnax:<id>' (any gymnax environment with "
                    "discrete actions, e.g. gymnax:Breakout-MinAtar), "
                    "'craftax:<id>' (e.g. craftax:Craftax-Classic-Symbolic-v1"
                    ", pip install 'disco_rl[craftax]'), 'jumanji:<id>' "
                    "(e.g. jumanji:Sokoban-v0, pip install "
                    "'disco_rl[jumanji]'), 'envpool:<Game>-v5' (Atari, "
                    "stepped on the host, e.g. envpool:Breakout-v5, pip "
                    "install 'disco_rl[atari]') or 'custom' (the "
                    'Environment object passed as Trainer(..., env=...))')
  env_kwargs: dict[str, Any] = _dict_field(
      'environment settings as name=value pairs, e.g. size=10 (DeepSea) or '
      'max_steps_in_episode=500: constructor arguments or EnvParams fields '
      'of a gymnax/craftax environment; Catch takes them besides --rows and '
      '--columns')
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
  net: str = _field('mlp', "agent network: 'mlp' (observations flattened, "
                    "then the MLP torso), 'conv' (MinAtar-style: 3x3 "
                    'convolutions on [H, W, C] images, then the MLP torso) '
                    "or 'resnet' (IMPALA-style residual stages on [H, W, C] "
                    'images, each halving the image, then the MLP torso)',
                    choices=NETS)
  dense: tuple[int, ...] = _field((512, 512), "hidden sizes of the agent's "
                                  'MLP torso, e.g. 512,512')
  conv_channels: tuple[int, ...] = _field((16,), _CONV_CHANNELS_HELP)
  conv_kernel: int = _field(3, _CONV_KERNEL_HELP)
  resnet_channels: tuple[int, ...] = _field((16, 32, 32),
                                            _RESNET_CHANNELS_HELP)
  resnet_blocks: int = _field(2, _RESNET_BLOCKS_HELP)
  model_lstm_size: int = _field(128, 'size of the action-model LSTM')
  model_head_hiddens: tuple[int, ...] = _field(
      (128,), 'hidden sizes of the action-model heads')
  precision: str = _field(
      'float32', "compute dtype of the agent network ('bfloat16': "
      'parameters, outputs and the rule stay float32)', choices=PRECISIONS)
  matmul_precision: str = _field('default', _MATMUL_PRECISION_HELP,
                                 choices=MATMUL_PRECISIONS)
  seed: int = _field(0, 'random seed (of the first seed run)')
  num_seeds: int = _field(
      1, 'independent runs in one program, seeds seed, seed+1, ...: every '
      'device holds a share of each run (one metrics row per step and seed)')
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

  def __post_init__(self):
    check_eval_config(self)

  @property
  def num_envs(self) -> int:
    """Environments acting at once, over all devices."""
    return self.batch_size // self.replay_ratio


@dataclasses.dataclass(frozen=True)
class MetaTrainConfig:
  """Settings of a meta-training run (defaults: the upstream notebook).

  Checked when made (`check_meta_train_config`), like `EvalConfig`; frozen.
  """

  num_steps: int = _field(800, 'meta-steps', flags=('--steps',))
  num_agents: int = _field(2, 'population size')
  batch_size_per_device: int = _field(32, 'environments per agent and device')
  rollout_len: int = _field(16, 'steps per training rollout (validation is '
                            'twice as long)')
  num_inner_steps: int = _field(2, 'agent updates per meta-step')
  rows: int = _field(5, 'Catch board rows')
  columns: int = _field(5, 'Catch board columns')
  tasks: tuple[str, ...] = _field(
      (), 'the task suite: environments the population is split over '
      '(contiguous groups of agents, each with its own network shape), e.g. '
      'catch catch[rows=7,columns=5] gymnax:CartPole-v1 '
      'gymnax:DeepSea-bsuite[size=8]; catch without a board is rows x '
      'columns; none: catch alone')
  learning_rate: float = _field(5e-4, "the agents' learning rate")
  net: str = _field(
      'mlp', "the agents' network: 'mlp', 'conv' or 'resnet' (as the eval "
      "job's --net); a task may name its own, e.g. "
      'gymnax:Breakout-MinAtar[net=conv]', choices=NETS)
  dense: tuple[int, ...] = _field((512, 512), 'agent MLP hidden sizes')
  conv_channels: tuple[int, ...] = _field((16,), _CONV_CHANNELS_HELP)
  conv_kernel: int = _field(3, _CONV_KERNEL_HELP)
  resnet_channels: tuple[int, ...] = _field((16, 32, 32),
                                            _RESNET_CHANNELS_HELP)
  resnet_blocks: int = _field(2, _RESNET_BLOCKS_HELP)
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
      "(on CPUs no slower than vmap: faster with looped inner updates, the "
      "same unrolled), 'vmap' vectorised (for accelerators); 'auto': map on "
      'a CPU, vmap elsewhere', choices=('auto', 'map', 'vmap'))
  meta_grad_norm: str = _field(
      'average', "'average': one Adam on the agents' averaged meta-gradient "
      "(the upstream notebook); 'per_agent_adam': each agent's meta-gradient "
      'normalised by its own Adam, the updates averaged (the paper)',
      choices=('average', 'per_agent_adam'))
  meta_grad_clip: float = _field(
      0.0, "clip each agent's meta-gradient to this global norm (0: no clip)")
  remat: bool = _field(
      False, 'recompute the inner updates in the backward pass (memory flat '
      'in num_inner_steps, about a third more compute)')
  max_unrolled_inner_steps: int = _field(
      5, 'unroll the inner updates into one straight-line program when a '
      'meta-step has at most this many (on a CPU 1.7x the meta-steps/s at 2 '
      'updates and 1.4x at 5, for longer compiles); longer windows run as a '
      'loop (0: always a loop)')
  matmul_precision: str = _field('default', _MATMUL_PRECISION_HELP,
                                 choices=MATMUL_PRECISIONS)
  agent_lifetime: int = _field(
      0, 'agent updates after which an agent starts afresh, staggered over '
      'the population so that ages differ (0: agents live for the run)')
  debug_checks: bool = _field(
      True, "check the agents' training rollouts (actions in range, finite "
      'rewards) and stop with the field, step and batch index of the first '
      'bad entry')

  def __post_init__(self):
    check_meta_train_config(self)


def _check_positive(config, names, minimum: int = 1) -> None:
  for name in names:
    value = getattr(config, name)
    if value < minimum:
      raise ValueError(f'{name} must be >= {minimum}, got {value}.')


def _check_rates(config, names) -> None:
  """Learning rates: finite and > 0 (NaN would train nothing, < 0 ascend)."""
  for name in names:
    value = getattr(config, name)
    if not (isinstance(value, (int, float)) and math.isfinite(value)
            and value > 0):
      raise ValueError(f'{name} must be a finite number > 0, got {value!r}.')


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


def torso_args(config, net: str | None = None) -> dict[str, Any]:
  """The torso settings (`TORSO_FIELDS`) of network `net` (default:
  `config.net`) in an `EvalConfig` or `MetaTrainConfig`, by name."""
  return {name: getattr(config, name)
          for name in TORSO_FIELDS[net or config.net]}


def check_env_kwargs(config: EvalConfig) -> None:
  """`env_kwargs` is a mapping of names; Catch's may not repeat rows/columns.

  Whether a gymnax/craftax environment accepts the names is checked when
  it is built (`environments.get_environment`).
  """
  kwargs = config.env_kwargs
  if not isinstance(kwargs, dict) or not all(
      isinstance(k, str) for k in kwargs):
    raise ValueError('env_kwargs must be a dict of setting names to values, '
                     f'got {kwargs!r}.')
  if config.env in CATCH_ENVS:
    repeated = sorted({'rows', 'columns', 'random_seed'} & set(kwargs))
    if repeated:
      raise ValueError(
          f'env_kwargs {repeated} are set by EvalConfig fields for '
          f"env={config.env!r}: use rows=, columns= (--rows, --columns); the "
          'seed comes from seed.')
  if config.env == CUSTOM_ENV and kwargs:
    raise ValueError("env_kwargs must be empty for env='custom' (the "
                     'Environment object is built by you), got '
                     f'{kwargs!r}.')


def check_env_name(name: Any) -> None:
  """Raises ValueError unless `name` is an environment an EvalConfig can use.

  Lists the valid names and the close matches (`environments.check_name`);
  a missing optional package names the extra to install.
  """
  if name != CUSTOM_ENV:
    environments.check_name(name, 'env')


def steps_on_host(env: str) -> bool:
  """Whether an eval environment is stepped in Python (the dm_env Catch,
  envpool's Atari) rather than compiled into the program."""
  return environments.steps_on_host(env)


def check_eval_config(config: EvalConfig) -> None:
  """Raises ValueError naming any setting that cannot work.

  `EvalConfig` runs it when made; call it to check a config again.
  """
  _check_common(config, ('batch_size', 'replay_ratio', 'buffer_capacity',
                         'conv_kernel', 'num_seeds'),
                ('conv_channels', 'resnet_channels'))
  _check_positive(config, ('resnet_blocks',), minimum=0)
  _check_rates(config, ('learning_rate',))
  check_env_name(config.env)
  check_env_kwargs(config)
  if steps_on_host(config.env) and config.num_seeds > 1:
    hint = (" (use 'jittable_catch', the same game)" if config.env == 'catch'
            else '')
    raise ValueError(
        f"num_seeds={config.num_seeds} needs a jittable environment: "
        f"env={config.env!r} is stepped on the host one run at a time"
        f"{hint}.")
  if config.batch_size % config.replay_ratio:
    raise ValueError(
        f'batch_size={config.batch_size} must be a multiple of replay_ratio='
        f'{config.replay_ratio} (the number of environments is their ratio).')
  if config.buffer_capacity < config.batch_size:
    raise ValueError(f'buffer_capacity={config.buffer_capacity} is smaller '
                     f'than batch_size={config.batch_size}.')


def check_meta_train_config(config: MetaTrainConfig) -> None:
  """Raises ValueError naming any setting that cannot work.

  `MetaTrainConfig` runs it when made; call it to check a config again.
  """
  _check_common(config, ('num_agents', 'batch_size_per_device',
                         'num_inner_steps', 'conv_kernel'),
                ('value_dense', 'conv_channels', 'resnet_channels'))
  _check_positive(config, ('resnet_blocks',), minimum=0)
  _check_rates(config, ('learning_rate', 'meta_learning_rate'))
  _check_positive(config, ('meta_grad_clip', 'agent_lifetime',
                           'max_unrolled_inner_steps'), minimum=0)
  if not math.isfinite(config.meta_grad_clip):
    raise ValueError('meta_grad_clip must be finite (0: no clip), got '
                     f'{config.meta_grad_clip!r}.')
  if 0 < config.agent_lifetime < config.num_inner_steps:
    raise ValueError(
        f'agent_lifetime={config.agent_lifetime} is shorter than one '
        f'meta-step (num_inner_steps={config.num_inner_steps} updates).')
  suite = tasks_lib.parse_tasks(config.tasks, config.rows, config.columns)
  tasks_lib.group_sizes(config.num_agents, len(suite))


# Named starting points for meta-training; flags and fields override them.
META_TRAIN_PRESETS = {
    # The upstream meta-training notebook (the MetaTrainConfig defaults).
    'notebook': {},
    # The paper's meta-optimisation (Oh et al. 2025, Methods): Adam
    # normalisation per agent, meta learning rate 1e-3 with clipping 1.0,
    # backpropagation through 20 agent updates, 96 trajectories of 29 steps
    # per agent update. The population size and lifetime are this project's
    # choice for Catch on a small machine (the paper's population is far
    # larger, on Atari).
    'paper': dict(meta_grad_norm='per_agent_adam', meta_learning_rate=1e-3,
                  meta_grad_clip=1.0, num_inner_steps=20, remat=True,
                  batch_size_per_device=96, rollout_len=29, num_agents=8,
                  agent_lifetime=2000),
}


def meta_train_preset(name: str, **overrides) -> MetaTrainConfig:
  """A `MetaTrainConfig` from a named preset, with fields overridden."""
  if name not in META_TRAIN_PRESETS:
    raise ValueError(f'Unknown preset {name!r}; expected one of '
                     f'{tuple(META_TRAIN_PRESETS)}.')
  return MetaTrainConfig(**{**META_TRAIN_PRESETS[name], **overrides})


def agent_settings(rule: str, learning_rate: float, dense, model_lstm_size: int,
                   model_head_hiddens, precision: str = 'float32',
                   net: str = 'mlp', **torso) -> config_dict.ConfigDict:
  """Agent settings of the loops: the rule's defaults with an MLP/conv agent.

  Args:
    rule: 'disco_103' (the Disco agent) or 'actor_critic'.
    learning_rate: the agent's learning rate.
    dense: hidden sizes of the MLP torso.
    model_lstm_size: size of the action model's LSTM.
    model_head_hiddens: hidden sizes of the action model's heads.
    precision: compute dtype of the agent network (see
      `networks.nets.with_precision`).
    net: 'mlp', 'conv' (`networks.nets.ConvNet`: conv layers before the
      MLP torso) or 'resnet' (`networks.nets.ResNet`: residual stages).
    **torso: the network's own settings, `TORSO_FIELDS[net]`:
      `conv_channels`, `conv_kernel` (conv); `resnet_channels`,
      `resnet_blocks` (resnet); missing ones take the network's defaults.

  Raises:
    ValueError: an unknown rule or net, or settings `net` does not take.
  """
  if net not in NETS:
    raise ValueError(f'Unknown net {net!r}; expected one of {NETS}.')
  extra = sorted(set(torso) - set(TORSO_FIELDS[net]))
  if extra:
    raise ValueError(f'net={net!r} takes the torso settings '
                     f'{list(TORSO_FIELDS[net])}, got also {extra}.')
  if rule == 'disco_103':
    settings = agent_lib.get_settings_disco()
  elif rule == 'actor_critic':
    settings = agent_lib.get_settings_actor_critic()
  else:
    raise ValueError(f'Unknown rule {rule!r}; expected one of {RULES}.')
  settings.net_settings.name = net
  settings.net_settings.net_args = dict(
      dense=tuple(dense), model_arch_name='lstm', head_w_init_std=1e-2,
      model_kwargs=dict(head_mlp_hiddens=tuple(model_head_hiddens),
                        lstm_size=model_lstm_size))
  settings.net_settings.net_args.update(
      {k: tuple(v) if isinstance(v, (list, tuple)) else v
       for k, v in torso.items()})
  if precision != 'float32':
    settings.net_settings.precision = precision
  settings.learning_rate = learning_rate
  return settings
