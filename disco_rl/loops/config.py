# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The settings of the two jobs, checked once, when made.

`EvalConfig` (an agent trained by a fixed rule) and `MetaTrainConfig` (a
population training a rule) share their agent, run and device fields,
declared once in `RunConfig` with the eval job's defaults; the
meta-training job states the defaults it changes (`_default`). A field's
type, default, help text and choices (its metadata) also give its
command-line flag (`examples/flags.py`). Environments take their settings
as every family does: `env_kwargs`, or `NAME[key=value,...]` in a task.

Frozen: change one with `dataclasses.replace`, which checks the new one.
The meta-training task suite is text (`Task`, parsed here once); old run
records are read with `upgrade_settings`.
"""

import dataclasses
import functools
import math
from typing import Any, NamedTuple

from ml_collections import config_dict

from disco_rl import agent as agent_lib
from disco_rl import environments
from disco_rl import meta_objective
from disco_rl.environments import base as base_env
from disco_rl.networks import nets

RULES = tuple(agent_lib.RULES)
NETS = tuple(agent_lib.TORSO_FIELDS)
PRECISIONS = nets.PRECISIONS
MATMUL_PRECISIONS = ('default', 'high', 'highest')
# env='custom': the Environment object given to Trainer(..., env=...).
CUSTOM_ENV = 'custom'


class Run(NamedTuple):
  """One run of an eval program: its seed and the agent's learning rate."""

  seed: int
  learning_rate: float


def _field(default: Any, help_text: str, **extra: Any) -> Any:
  """A field whose metadata carries its flag's help text; `extra` may hold
  `choices` and `flags` (aliases, e.g. ('--steps',); () for no flag)."""
  if isinstance(default, dict):
    return dataclasses.field(
      default_factory=lambda: dict(default),
      metadata=dict(help=help_text, **extra),
    )
  return dataclasses.field(
    default=default, metadata=dict(help=help_text, **extra)
  )


def _default(name: str, value: Any) -> Any:
  """`RunConfig`'s field `name` with another default (a job's own)."""
  field = RunConfig.__dataclass_fields__[name]  # pylint: disable=no-member
  return _field(
    value,
    **{
      ('help_text' if k == 'help' else k): v for k, v in field.metadata.items()
    },
  )


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """The fields both jobs have: the agents, the run, the devices.

  Their defaults are the eval job's (the upstream eval notebook's);
  `MetaTrainConfig` states the ones it changes.
  """

  num_steps: int = _field(
    1000,
    'learner steps (eval) or meta-steps (meta-training)',
    flags=('--steps',),
  )
  rollout_len: int = _field(29, 'steps per trajectory')
  learning_rate: float = _field(1e-2, "the agents' learning rate")
  net: str = _field(
    'mlp',
    "agent network: 'mlp' (observations flattened, "
    "then the MLP torso), 'conv' (MinAtar-style: 3x3 "
    'convolutions on [H, W, C] images, then the MLP torso), '
    "'resnet' (IMPALA-style residual stages on [H, W, C] "
    'images, each halving the image, then the MLP torso) or '
    "'tabular' (heads on the observation itself, for one-hot "
    "states) or 'table' ('tabular' read as tables: one-hot "
    'state vectors only, a row per state instead of a product)',
    choices=NETS,
  )
  dense: tuple[int, ...] = _field(
    (512, 512), "hidden sizes of the agent's MLP torso, e.g. 512,512"
  )
  conv_channels: tuple[int, ...] = _field(
    (16,),
    "output channels of the conv torso's layers (net conv), e.g. 16 "
    '(MinAtar) or 32,64',
  )
  conv_kernel: int = _field(
    3, "kernel size of the conv torso's layers (stride 1, SAME padding)"
  )
  resnet_channels: tuple[int, ...] = _field(
    (16, 32, 32),
    "channels of the resnet torso's stages (net resnet; "
    "IMPALA's 16,32,32), each a conv, a stride-2 max-pool and "
    '--resnet-blocks residual blocks',
  )
  resnet_blocks: int = _field(
    2,
    'residual blocks per stage of the resnet torso (each two 3x3 convolutions)',
  )
  model_lstm_size: int = _field(128, 'size of the action-model LSTM')
  model_head_hiddens: tuple[int, ...] = _field(
    (128,), 'hidden sizes of the action-model heads'
  )
  rule_sizes: dict[str, Any] = _field(
    {},
    "sizes of rule disco_103's meta-network (a rule meta-trained here "
    'may be smaller), e.g. prediction_size=8,hidden_size=64,'
    'embedding_size=8x1 (fields of disco.MetaNetSizes; a --weights file '
    "sets them); none: Disco103's",
  )
  matmul_precision: str = _field(
    'default',
    'float32 matrix-product precision of the compiled programs '
    "(JAX's default_matmul_precision): 'default' (the backend's choice: "
    "TF32 on recent NVIDIA GPUs, bfloat16 passes on TPUs), 'high' or "
    "'highest' (full float32); CPUs compute float32 products in full at "
    'every setting',
    choices=MATMUL_PRECISIONS,
  )
  seed: int = _field(0, 'random seed')
  num_devices: int | None = _field(
    None, 'devices to use (default: as many as the batch divides into)'
  )
  steps_per_call: int = _field(20, 'steps compiled into one call')
  debug_checks: bool = _field(
    True,
    'check every acted rollout (actions in range, finite rewards) '
    'and stop with the field, step and batch index of the first bad entry',
  )

  def __post_init__(self) -> None:
    self._check()

  def _check(self) -> None:
    """Raises ValueError naming any setting that cannot work."""
    for field in dataclasses.fields(self):
      choices = field.metadata.get('choices')
      if choices and getattr(self, field.name) not in choices:
        raise ValueError(
          f'Unknown {field.name} '
          f'{getattr(self, field.name)!r}; expected one of '
          f'{tuple(choices)}.'
        )
    self._at_least(
      1, 'num_steps', 'steps_per_call', 'model_lstm_size', 'conv_kernel'
    )
    self._at_least(2, 'rollout_len')
    self._at_least(0, 'resnet_blocks')
    self._sizes(
      'dense', 'model_head_hiddens', 'conv_channels', 'resnet_channels'
    )
    self._rates('learning_rate')
    if self.num_devices is not None and self.num_devices < 1:
      raise ValueError(f'num_devices must be >= 1, got {self.num_devices}.')
    agent_lib.check_rule_sizes(self.rule_sizes, 'rule_sizes')

  def _at_least(self, minimum: int, *names: str) -> None:
    for name in names:
      if getattr(self, name) < minimum:
        raise ValueError(
          f'{name} must be >= {minimum}, got {getattr(self, name)}.'
        )

  def _sizes(self, *names: str) -> None:
    for name in names:
      sizes = tuple(getattr(self, name))
      if not sizes or min(sizes) < 1:
        raise ValueError(f'{name} must be positive layer sizes, got {sizes}.')

  def _rates(self, *names: str) -> None:
    """Finite and > 0 (NaN would train nothing, < 0 ascend)."""
    for name in names:
      value = getattr(self, name)
      if not (
        isinstance(value, (int, float)) and math.isfinite(value) and value > 0
      ):
        raise ValueError(f'{name} must be a finite number > 0, got {value!r}.')

  def torso(self, net: str | None = None) -> dict[str, Any]:
    """The torso settings of network `net` (default: `self.net`)."""
    return {
      name: getattr(self, name)
      for name in agent_lib.TORSO_FIELDS[net or self.net]
    }

  def agent_fields(self) -> dict[str, Any]:
    """The fields that make an agent and its learning (`AGENT_FIELDS`),
    e.g. to train a fresh agent like a meta-training's own."""
    return {name: getattr(self, name) for name in AGENT_FIELDS}

  def agent_settings(
    self, rule: str, net: str | None = None, precision: str = 'float32'
  ) -> config_dict.ConfigDict:
    """The agent settings of these fields (`agent.make_settings`)."""
    return agent_lib.make_settings(
      rule,
      self.learning_rate,
      self.dense,
      self.model_lstm_size,
      self.model_head_hiddens,
      precision,
      net=net or self.net,
      rule_sizes=(self.rule_sizes if rule in agent_lib.SIZED_RULES else None),
      **self.torso(net),
    )


# RunConfig's fields that make an agent and its learning (`agent_fields`).
AGENT_FIELDS = (
  'rollout_len',
  'learning_rate',
  'net',
  'dense',
  'conv_channels',
  'conv_kernel',
  'resnet_channels',
  'resnet_blocks',
  'model_lstm_size',
  'model_head_hiddens',
  'rule_sizes',
  'matmul_precision',
)


@dataclasses.dataclass(frozen=True)
class EvalConfig(RunConfig):
  """Settings of an eval run (defaults: the upstream eval notebook)."""

  rule: str = _field('disco_103', 'update rule', choices=RULES)
  env: str = _field(
    'jittable_catch',
    "environment: 'jittable_catch' (Catch compiled on "
    "the device), 'catch' (the dm_env Catch, stepped on the host), "
    "'gymnax:<id>' (any gymnax environment with discrete actions, e.g. "
    "gymnax:Breakout-MinAtar), 'craftax:<id>' (pip install "
    "'disco_rl[craftax]'), 'jumanji:<id>' (e.g. jumanji:Sokoban-v0, pip "
    "install 'disco_rl[jumanji]'), 'envpool:<Game>-v5' (Atari, stepped "
    "on the host, pip install 'disco_rl[atari]'), any registered family, "
    "or 'custom' (the Environment object given as Trainer(..., env=...))",
  )
  env_kwargs: dict[str, Any] = _field(
    {},
    'environment settings as name=value pairs, e.g. rows=5,columns=5 '
    '(Catch), size=10 (DeepSea) or max_steps_in_episode=500; unset ones '
    "take the environment's defaults; the command line also takes them "
    'in brackets after the name, e.g. --env lpg:dense[layout_seed=3]',
  )
  batch_size: int = _field(
    64, 'trajectories per learner step, over all devices'
  )
  replay_ratio: int = _field(
    32,
    'learner trajectories per acted trajectory; '
    'environments = batch_size // replay_ratio',
  )
  buffer_capacity: int = _field(
    1024, 'replay buffer size in trajectories, over all devices'
  )
  precision: str = _field(
    'float32',
    "compute dtype of the agent network ('bfloat16': "
    'parameters, outputs and the rule stay float32)',
    choices=PRECISIONS,
  )
  num_seeds: int = _field(
    1,
    'independent runs in one program, seeds seed, seed+1, ...: every '
    'device holds a share of each run (one metrics row per step and run)',
  )
  seeds: tuple[int, ...] = _field(
    (),
    "the runs' seeds, e.g. 0 1 2 (default: seed, seed+1, ..., num_seeds "
    'of them)',
    words=True,
  )
  learning_rates: tuple[float, ...] = _field(
    (),
    "the runs' learning rates, e.g. 1e-3 3e-3 1e-2: every seed runs at "
    'each, all in one program (default: learning_rate)',
    words=True,
  )
  behaviour_outputs: tuple[str, ...] | None = _field(
    ('logits',),
    'agent outputs kept in the replay buffer (the rules read '
    'only the behaviour logits)',
    flags=(),
  )

  @property
  def num_envs(self) -> int:  # Acting at once in each run, all devices.
    return self.batch_size // self.replay_ratio

  @property
  def runs(self) -> tuple[Run, ...]:
    """The program's runs, each (seed, learning rate): every seed at the
    first rate, then at the next, ..."""
    seeds = self.seeds or tuple(range(self.seed, self.seed + self.num_seeds))
    rates = self.learning_rates or (self.learning_rate,)
    return tuple(Run(s, float(r)) for r in rates for s in seeds)

  @property
  def num_runs(self) -> int:
    return len(self.runs)

  def _check(self) -> None:
    super()._check()
    self._at_least(
      1, 'batch_size', 'replay_ratio', 'buffer_capacity', 'num_seeds'
    )
    if self.batch_size % self.replay_ratio:
      raise ValueError(
        f'batch_size={self.batch_size} must be a multiple of replay_ratio='
        f'{self.replay_ratio} (the number of environments is their ratio).'
      )
    if self.seeds and (
      self.num_seeds != 1 or len(set(self.seeds)) != len(self.seeds)
    ):
      raise ValueError(
        f'seeds must be distinct and given instead of num_seeds, got '
        f'seeds={self.seeds} with num_seeds={self.num_seeds}.'
      )
    if any(not isinstance(s, int) or s < 0 for s in self.seeds):
      raise ValueError(f'seeds must be integers >= 0, got {self.seeds}.')
    for rate in self.learning_rates:
      if not (
        isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0
      ):
        raise ValueError(
          'learning_rates must be finite numbers > 0, got '
          f'{self.learning_rates}.'
        )
    if len(set(self.learning_rates)) != len(self.learning_rates):
      raise ValueError(
        f'learning_rates must be distinct, got {self.learning_rates}.'
      )
    if self.buffer_capacity < self.batch_size:
      raise ValueError(
        f'buffer_capacity={self.buffer_capacity} is smaller '
        f'than batch_size={self.batch_size}.'
      )
    kwargs = self.env_kwargs
    if not isinstance(kwargs, dict) or not all(
      isinstance(k, str) for k in kwargs
    ):
      raise ValueError(
        f'env_kwargs must be a dict of setting names to values, got {kwargs!r}.'
      )
    if self.env == CUSTOM_ENV and kwargs:
      raise ValueError(
        "env_kwargs must be empty for env='custom' (the "
        f'Environment object is built by you), got {kwargs!r}.'
      )
    if self.env == CUSTOM_ENV:
      return
    if '[' in self.env:
      name, settings = environments.parse_spec(self.env)
      raise ValueError(
        f'env={self.env!r}: give the settings as env_kwargs, i.e. '
        f'env={name!r}, env_kwargs={settings!r} (the command line takes '
        'either form).'
      )
    environments.check_name(self.env, 'env')
    if (
      environments.SEED_KEY in kwargs and environments.family(self.env).on_host
    ):
      raise ValueError(
        f'env_kwargs {environments.SEED_KEY} is set by seed '
        f'for env={self.env!r} (stepped on the host).'
      )


# How agents' lifetimes are chosen (`MetaTrainConfig.lifetime_sampling`).
LIFETIME_SAMPLING = ('fixed', 'log_uniform')

# MetaTrainConfig's fields of the meta-objective's regulariser weights.
META_LOSS_COSTS = (
  'meta_entropy_cost',
  'meta_prediction_entropy_cost',
  'meta_target_mean_cost',
  'meta_target_kl_cost',
)


@dataclasses.dataclass(frozen=True)
class MetaTrainConfig(RunConfig):
  """Settings of a meta-training run (defaults: the upstream notebook)."""

  num_steps: int = _default('num_steps', 800)
  rollout_len: int = _default('rollout_len', 16)
  learning_rate: float = _default('learning_rate', 5e-4)
  model_lstm_size: int = _default('model_lstm_size', 256)
  model_head_hiddens: tuple[int, ...] = _default('model_head_hiddens', (256,))
  seed: int = _default('seed', 4)
  steps_per_call: int = _default('steps_per_call', 10)
  num_agents: int = _field(2, 'population size')
  batch_size_per_device: int = _field(32, 'environments per agent and device')
  num_inner_steps: int = _field(2, 'agent updates per meta-step')
  tasks: tuple[str, ...] = _field(
    ('catch[rows=5,columns=5]',),
    'the task suite: environments the '
    'population is split over (contiguous groups of agents, each with its '
    'own network shape), each NAME[key=value,...], e.g. '
    'catch[rows=7,columns=5] gymnax:CartPole-v1 '
    'gymnax:DeepSea-bsuite[size=8]; unset settings take the '
    "environment's defaults; a task may name its net, e.g. "
    'gymnax:Breakout-MinAtar[net=conv]',
  )
  value_dense: tuple[int, ...] = _field(
    (256, 256), 'value-function MLP hidden sizes'
  )
  meta_learning_rate: float = _field(5e-4, 'Adam step size of the rule')
  init: str = _field(
    'random',
    "starting rule: 'random' (a fresh meta-network) or 'disco_103' (fine-tune)",
    choices=('random', 'disco_103'),
  )
  rule_seed: int = _field(
    1,
    'seed of the fresh meta-network (init random; '
    'the upstream notebook uses 1)',
  )
  population: str = _field(
    'auto',
    "how a device runs its agents: 'map' one after another (on "
    "CPUs no slower than vmap), 'vmap' vectorised (for accelerators); "
    "'auto': map on a CPU, vmap elsewhere",
    choices=('auto', 'map', 'vmap'),
  )
  meta_grad_norm: str = _field(
    'average',
    "'average': one Adam on the agents' averaged meta-gradient "
    "(the upstream notebook); 'per_agent_adam': each agent's meta-gradient "
    'normalised by its own Adam, the updates averaged (the paper)',
    choices=('average', 'per_agent_adam'),
  )
  meta_grad_clip: float = _field(
    0.0, "clip each agent's meta-gradient to this global norm (0: no clip)"
  )
  remat: bool = _field(
    False,
    'recompute the inner updates in the backward pass (memory flat '
    'in num_inner_steps, about a third more compute)',
  )
  max_unrolled_inner_steps: int = _field(
    5,
    'unroll the inner updates into straight-line code when a meta-step '
    'has at most this many (CPU: 1.4-1.7x the speed, longer compiles); '
    'else a loop (0: always a loop)',
  )
  agent_lifetime: int = _field(
    0,
    'agent updates after which an agent starts afresh, staggered over '
    'the population so that ages differ (0: agents live for the run); '
    'with lifetime_sampling log_uniform, the longest lifetime drawn',
  )
  lifetime_sampling: str = _field(
    'fixed',
    "'fixed': every agent lives agent_lifetime updates; 'log_uniform' "
    "(GROOVE's all_vrandlife): each agent draws its lifetime at each "
    '(re)start, log-uniformly from min_agent_lifetime to agent_lifetime '
    "updates, from the run's keys (first lives staggered as with fixed)",
    choices=LIFETIME_SAMPLING,
  )
  min_agent_lifetime: int = _field(
    0,
    'with lifetime_sampling log_uniform: the shortest lifetime drawn, in '
    "agent updates (GROOVE: a 25th of the longest); 0 with 'fixed'",
  )
  # The meta-objective's regularisers (`meta_objective.MetaLossWeights`;
  # the defaults are upstream's).
  meta_entropy_cost: float = _field(
    meta_objective.MetaLossWeights.entropy,
    "meta-objective: weight of the validation policy's entropy bonus",
  )
  meta_prediction_entropy_cost: float = _field(
    meta_objective.MetaLossWeights.prediction_entropy,
    "meta-objective: weight of the y and z predictions' entropy bonus",
  )
  meta_target_mean_cost: float = _field(
    meta_objective.MetaLossWeights.target_mean,
    "meta-objective: weight of the targets' squared batch means",
  )
  meta_target_kl_cost: float = _field(
    meta_objective.MetaLossWeights.target_kl,
    "meta-objective: weight of the KL from the target network's policy "
    'to the policy target',
  )

  def _check(self) -> None:
    super()._check()
    self._at_least(1, 'num_agents', 'batch_size_per_device', 'num_inner_steps')
    self._at_least(
      0,
      'meta_grad_clip',
      'agent_lifetime',
      'min_agent_lifetime',
      'max_unrolled_inner_steps',
      *META_LOSS_COSTS,
    )
    self._sizes('value_dense')
    self._rates('meta_learning_rate')
    for name in ('meta_grad_clip',) + META_LOSS_COSTS:
      if not math.isfinite(getattr(self, name)):
        raise ValueError(
          f'{name} must be finite and >= 0, got {getattr(self, name)!r}.'
        )
    if 0 < self.agent_lifetime < self.num_inner_steps:
      raise ValueError(
        f'agent_lifetime={self.agent_lifetime} is shorter than one '
        f'meta-step (num_inner_steps={self.num_inner_steps} updates).'
      )
    self._check_lifetime_sampling()
    if self.num_agents < len(self.suite):
      raise ValueError(
        f'num_agents={self.num_agents} is smaller than the '
        f'number of tasks ({len(self.suite)}): every task '
        'needs an agent.'
      )

  def _check_lifetime_sampling(self) -> None:
    low, high = self.min_agent_lifetime, self.agent_lifetime
    if self.lifetime_sampling == 'fixed':
      if low:
        raise ValueError(
          f'min_agent_lifetime={low} is the low end of lifetimes drawn '
          "per agent: it needs lifetime_sampling='log_uniform' (got "
          "'fixed', where every agent lives agent_lifetime updates)."
        )
      return
    if not high:
      raise ValueError(
        f'lifetime_sampling={self.lifetime_sampling!r} draws lifetimes up '
        'to agent_lifetime: set agent_lifetime > 0 (got 0).'
      )
    if not self.num_inner_steps <= low <= high:
      raise ValueError(
        f'min_agent_lifetime={low} must be at least one meta-step '
        f'(num_inner_steps={self.num_inner_steps} updates) and at most '
        f'agent_lifetime={high}.'
      )

  @property
  def sampled_lifetimes(self) -> bool:
    """Whether each agent draws its lifetime (else all live alike)."""
    return self.lifetime_sampling != 'fixed'

  @functools.cached_property
  def suite(self) -> tuple['Task', ...]:  # The tasks, parsed once.
    return parse_tasks(self.tasks)

  def meta_loss_weights(self) -> meta_objective.MetaLossWeights:
    """The meta-objective's regulariser weights of these fields."""
    return meta_objective.MetaLossWeights(
      entropy=self.meta_entropy_cost,
      prediction_entropy=self.meta_prediction_entropy_cost,
      target_mean=self.meta_target_mean_cost,
      target_kl=self.meta_target_kl_cost,
    )


def upgrade_settings(
  cls: type[EvalConfig] | type[MetaTrainConfig], settings: dict[str, Any]
) -> dict[str, Any]:
  """The settings of a run's record (`run.json`) as fields of `cls` (an
  `EvalConfig` or a `MetaTrainConfig`) today.

  Version 0.1 records name Catch's board in fields `rows` and `columns`:
  the eval job's `env_kwargs`, or each meta-training Catch task's board.

  Raises:
    ValueError: naming settings `cls` does not know.
  """
  settings = dict(settings)
  board: dict[str, Any] = {
    k: settings.pop(k) for k in ('rows', 'columns') if k in settings
  }
  if (
    board
    and cls is EvalConfig
    and settings.get('env') in ('catch', 'jittable_catch')
  ):
    settings['env_kwargs'] = {**board, **dict(settings.get('env_kwargs') or {})}
  elif board and cls is MetaTrainConfig:
    tasks: list[str] = []
    for text in tuple(settings.get('tasks') or ('catch',)):
      task = parse_task(text)
      if task.name in ('catch', 'jittable_catch'):
        merged: dict[str, Any] = {**board, **dict(task.settings)}
        task = dataclasses.replace(task, settings=tuple(merged.items()))
      tasks.append(task.spec())
    settings['tasks'] = tuple(tasks)
  for field in dataclasses.fields(cls):  # Fields added since: defaults.
    if field.name in settings:
      continue
    if field.default is not dataclasses.MISSING:
      settings[field.name] = field.default
    elif field.default_factory is not dataclasses.MISSING:
      settings[field.name] = field.default_factory()
    else:
      raise ValueError(
        f'The record lacks setting {field.name!r}, which has no default.'
      )
  unknown = sorted(set(settings) - {f.name for f in dataclasses.fields(cls)})
  if unknown:
    raise ValueError(
      f'The run record has settings {unknown} that '
      f'{cls.__name__} does not know (written by another '
      'version?).'
    )
  return settings


@dataclasses.dataclass(frozen=True)
class Task:
  """One environment of the meta-training suite, e.g.
  'gymnax:DeepSea-bsuite[size=8]' or 'gymnax:Breakout-MinAtar[net=conv]'.

  Attributes:
    name: an environment name (a host family's tasks act in its jittable
      twin: 'catch' is the jittable Catch here).
    settings: its settings (unset ones: the family's defaults).
    net: the network of its agents; None: the config's `net`.
  """

  name: str
  settings: tuple[tuple[str, Any], ...] = ()
  net: str | None = None

  def spec(self) -> str:
    """The task as text (`parse_task(task.spec()) == task`)."""
    items = self.settings + ((('net', self.net),) if self.net else ())
    return environments.format_spec(self.name, items)

  @property
  def env_name(self) -> str:
    """The jittable environment the task's agents act in."""
    family = environments.family(self.name)
    return (
      family.jittable if family.on_host and family.jittable else (self.name)
    )

  def make_env(self, batch_size: int) -> base_env.Environment:
    """The task's jittable environment with `batch_size` instances."""
    return environments.get_environment(
      self.env_name, batch_size, dict(self.settings)
    )

  def eval_settings(self) -> dict[str, Any]:
    """The `EvalConfig` fields that train an agent on this task, e.g.
    `EvalConfig(**task.eval_settings(), num_steps=200)`."""
    net = dict(net=self.net) if self.net else {}
    return dict(env=self.env_name, env_kwargs=dict(self.settings), **net)


def parse_task(text: Any) -> Task:
  """A `Task` from its text, NAME or NAME[key=value,...].

  Raises:
    ValueError: naming the task: malformed text, an unknown environment or
      network.
  """
  if not isinstance(text, str):
    raise ValueError(
      f'A task must be text such as catch[rows=7,columns=5] '
      f'or gymnax:CartPole-v1, got {text!r}.'
    )
  try:
    name, settings = environments.parse_spec(text)
  except ValueError as e:
    raise ValueError(f'Task {text!r}: {e}') from None
  net = settings.pop('net', None)
  if net is not None and net not in NETS:
    raise ValueError(
      f'Task {text!r}: unknown net {net!r}; expected one of {NETS}.'
    )
  environments.check_name(name, 'task environment')
  return Task(name, tuple(settings.items()), net)


def parse_tasks(texts: Any) -> tuple[Task, ...]:
  """The suite: the tasks of `texts` (at least one)."""
  if isinstance(texts, str):
    raise ValueError(
      f'tasks must be a sequence of task texts, got the text '
      f'{texts!r} (write ({texts!r},) for one task).'
    )
  tasks = tuple(parse_task(t) for t in tuple(texts))
  if not tasks:
    raise ValueError(
      'tasks must name at least one environment, e.g. '
      "('catch[rows=5,columns=5]',)."
    )
  repeated = sorted({t.spec() for t in tasks if tasks.count(t) > 1})
  if repeated:
    raise ValueError(
      f'tasks {repeated} appear more than once: give the '
      'task more agents with num_agents instead.'
    )
  return tasks
