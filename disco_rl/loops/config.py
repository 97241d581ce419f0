# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The settings of the two jobs, checked once, when made.

`EvalConfig` (an agent trained by a fixed rule) and `MetaTrainConfig` (a
population training a rule) share their agent, run and device fields,
declared once in `RunConfig`; each job states only its own defaults for
them (`_job`). A field's type, default, help text and choices (its
metadata) also give its command-line flag (`examples/flags.py`).

Frozen: change one with `dataclasses.replace`, which checks the new one.
The meta-training task suite is text (`Task`, parsed here once).
"""

import argparse
import ast
import dataclasses
import functools
import math
import re
from typing import Any

import numpy as np

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
CATCH_ENVS = environments.CATCH_NAMES


def _field(default, help_text: str, **extra):
  """A field whose metadata carries its flag's help text; `extra` may hold
  `choices` and `flags` (aliases, e.g. ('--steps',); () for no flag)."""
  if isinstance(default, dict):
    return dataclasses.field(default_factory=dict,
                             metadata=dict(help=help_text, **extra))
  return dataclasses.field(default=default,
                           metadata=dict(help=help_text, **extra))


def _job(**defaults):
  """A job's config class: `RunConfig`'s fields with the job's defaults.

  The fields keep their declaration (type, help, choices) and position; only
  the defaults named here change.
  """
  def wrap(cls):
    fields = RunConfig.__dataclass_fields__  # pylint: disable=no-member
    own = dict(cls.__dict__.get('__annotations__', {}))
    cls.__annotations__ = {name: fields[name].type for name in defaults}
    cls.__annotations__.update(own)
    for name, value in defaults.items():
      setattr(cls, name, _field(value, fields[name].metadata['help'],
                                **{k: v for k, v in fields[name].metadata
                                   .items() if k != 'help'}))
    return dataclasses.dataclass(frozen=True)(cls)
  return wrap


@dataclasses.dataclass(frozen=True)
class RunConfig:
  """The fields both jobs have: the agents, the run, the devices."""

  num_steps: int = _field(1000, 'learner steps (eval) or meta-steps '
                          '(meta-training)', flags=('--steps',))
  rollout_len: int = _field(29, 'steps per trajectory')
  rows: int = _field(8, 'Catch board rows')
  columns: int = _field(8, 'Catch board columns')
  learning_rate: float = _field(1e-2, "the agents' learning rate")
  net: str = _field('mlp', "agent network: 'mlp' (observations flattened, "
                    "then the MLP torso), 'conv' (MinAtar-style: 3x3 "
                    'convolutions on [H, W, C] images, then the MLP torso) '
                    "or 'resnet' (IMPALA-style residual stages on [H, W, C] "
                    'images, each halving the image, then the MLP torso)',
                    choices=NETS)
  dense: tuple[int, ...] = _field((512, 512), "hidden sizes of the agent's "
                                  'MLP torso, e.g. 512,512')
  conv_channels: tuple[int, ...] = _field(
      (16,), "output channels of the conv torso's layers (net conv), e.g. 16 "
      '(MinAtar) or 32,64')
  conv_kernel: int = _field(3, "kernel size of the conv torso's layers "
                            '(stride 1, SAME padding)')
  resnet_channels: tuple[int, ...] = _field(
      (16, 32, 32), "channels of the resnet torso's stages (net resnet; "
      "IMPALA's 16,32,32), each a conv, a stride-2 max-pool and "
      '--resnet-blocks residual blocks')
  resnet_blocks: int = _field(2, 'residual blocks per stage of the resnet '
                              'torso (each two 3x3 convolutions)')
  model_lstm_size: int = _field(128, 'size of the action-model LSTM')
  model_head_hiddens: tuple[int, ...] = _field(
      (128,), 'hidden sizes of the action-model heads')
  matmul_precision: str = _field(
      'default', "float32 matrix-product precision of the compiled programs "
      "(JAX's default_matmul_precision): 'default' (the backend's choice: "
      "TF32 on recent NVIDIA GPUs, bfloat16 passes on TPUs), 'high' or "
      "'highest' (full float32); CPUs compute float32 products in full at "
      'every setting', choices=MATMUL_PRECISIONS)
  seed: int = _field(0, 'random seed')
  num_devices: int | None = _field(
      None, 'devices to use (default: as many as the batch divides into)')
  steps_per_call: int = _field(20, 'steps compiled into one call')
  debug_checks: bool = _field(
      True, 'check every acted rollout (actions in range, finite rewards) '
      'and stop with the field, step and batch index of the first bad entry')

  def __post_init__(self):
    self._check()

  def _check(self) -> None:
    """Raises ValueError naming any setting that cannot work."""
    for field in dataclasses.fields(self):
      choices = field.metadata.get('choices')
      if choices and getattr(self, field.name) not in choices:
        raise ValueError(f'Unknown {field.name} '
                         f'{getattr(self, field.name)!r}; expected one of '
                         f'{tuple(choices)}.')
    self._at_least(1, 'num_steps', 'steps_per_call', 'model_lstm_size',
                   'conv_kernel')
    self._at_least(2, 'rollout_len', 'rows', 'columns')
    self._at_least(0, 'resnet_blocks')
    self._sizes('dense', 'model_head_hiddens', 'conv_channels',
                'resnet_channels')
    self._rates('learning_rate')
    if self.num_devices is not None and self.num_devices < 1:
      raise ValueError(f'num_devices must be >= 1, got {self.num_devices}.')

  def _at_least(self, minimum: int, *names: str) -> None:
    for name in names:
      if getattr(self, name) < minimum:
        raise ValueError(f'{name} must be >= {minimum}, got '
                         f'{getattr(self, name)}.')

  def _sizes(self, *names: str) -> None:
    for name in names:
      sizes = tuple(getattr(self, name))
      if not sizes or min(sizes) < 1:
        raise ValueError(f'{name} must be positive layer sizes, got {sizes}.')

  def _rates(self, *names: str) -> None:
    """Finite and > 0 (NaN would train nothing, < 0 ascend)."""
    for name in names:
      value = getattr(self, name)
      if not (isinstance(value, (int, float)) and math.isfinite(value)
              and value > 0):
        raise ValueError(f'{name} must be a finite number > 0, got '
                         f'{value!r}.')

  def torso(self, net: str | None = None) -> dict[str, Any]:
    """The torso settings of network `net` (default: `self.net`)."""
    return {name: getattr(self, name)
            for name in agent_lib.TORSO_FIELDS[net or self.net]}

  def agent_settings(self, rule: str, net: str | None = None,
                     precision: str = 'float32'):
    """The agent settings of these fields (`agent.make_settings`)."""
    return agent_lib.make_settings(
        rule, self.learning_rate, self.dense, self.model_lstm_size,
        self.model_head_hiddens, precision, net=net or self.net,
        **self.torso(net))


@_job(num_steps=1000, rollout_len=29, rows=8, columns=8, learning_rate=1e-2,
      model_lstm_size=128, model_head_hiddens=(128,), seed=0,
      steps_per_call=20)
class EvalConfig(RunConfig):
  """Settings of an eval run (defaults: the upstream eval notebook)."""

  rule: str = _field('disco_103', 'update rule', choices=RULES)
  env: str = _field(
      'jittable_catch', "environment: 'jittable_catch' (Catch compiled on "
      "the device), 'catch' (the dm_env Catch, stepped on the host), "
      "'gymnax:<id>' (any gymnax environment with discrete actions, e.g. "
      "gymnax:Breakout-MinAtar), 'craftax:<id>' (pip install "
      "'disco_rl[craftax]'), 'jumanji:<id>' (e.g. jumanji:Sokoban-v0, pip "
      "install 'disco_rl[jumanji]'), 'envpool:<Game>-v5' (Atari, stepped "
      "on the host, pip install 'disco_rl[atari]'), any registered family, "
      "or 'custom' (the Environment object given as Trainer(..., env=...))")
  env_kwargs: dict[str, Any] = _field(
      {}, 'environment settings as name=value pairs, e.g. size=10 (DeepSea) '
      'or max_steps_in_episode=500; Catch takes them besides --rows and '
      '--columns')
  batch_size: int = _field(64, 'trajectories per learner step, over all '
                           'devices')
  replay_ratio: int = _field(32, 'learner trajectories per acted trajectory; '
                             'environments = batch_size // replay_ratio')
  buffer_capacity: int = _field(1024, 'replay buffer size in trajectories, '
                                'over all devices')
  precision: str = _field(
      'float32', "compute dtype of the agent network ('bfloat16': "
      'parameters, outputs and the rule stay float32)', choices=PRECISIONS)
  num_seeds: int = _field(
      1, 'independent runs in one program, seeds seed, seed+1, ...: every '
      'device holds a share of each run (one metrics row per step and seed)')
  behaviour_outputs: tuple[str, ...] | None = _field(
      ('logits',), 'agent outputs kept in the replay buffer (the rules read '
      'only the behaviour logits)', flags=())

  @property
  def num_envs(self) -> int:
    """Environments acting at once in each run, over all devices."""
    return self.batch_size // self.replay_ratio

  def _check(self) -> None:
    super()._check()
    self._at_least(1, 'batch_size', 'replay_ratio', 'buffer_capacity',
                   'num_seeds')
    if self.batch_size % self.replay_ratio:
      raise ValueError(
          f'batch_size={self.batch_size} must be a multiple of replay_ratio='
          f'{self.replay_ratio} (the number of environments is their ratio).')
    if self.buffer_capacity < self.batch_size:
      raise ValueError(f'buffer_capacity={self.buffer_capacity} is smaller '
                       f'than batch_size={self.batch_size}.')
    kwargs = self.env_kwargs
    if not isinstance(kwargs, dict) or not all(isinstance(k, str)
                                               for k in kwargs):
      raise ValueError('env_kwargs must be a dict of setting names to '
                       f'values, got {kwargs!r}.')
    if self.env == CUSTOM_ENV:
      if kwargs:
        raise ValueError("env_kwargs must be empty for env='custom' (the "
                         f'Environment object is built by you), got '
                         f'{kwargs!r}.')
      return
    environments.check_name(self.env, 'env')
    repeated = sorted({'rows', 'columns', 'random_seed'} & set(kwargs))
    if self.env in CATCH_ENVS and repeated:
      raise ValueError(
          f'env_kwargs {repeated} are set by EvalConfig fields for '
          f"env={self.env!r}: use rows=, columns= (--rows, --columns); the "
          'seed comes from seed.')

  def env_settings(self) -> dict[str, Any]:
    """What `environments.get_environment` gets: `env_kwargs`, and for
    Catch its board."""
    if self.env in CATCH_ENVS:
      return dict(self.env_kwargs, rows=self.rows, columns=self.columns)
    return dict(self.env_kwargs)


# MetaTrainConfig's fields of the meta-objective's regulariser weights.
META_LOSS_COSTS = ('meta_entropy_cost', 'meta_prediction_entropy_cost',
                   'meta_target_mean_cost', 'meta_target_kl_cost')


@_job(num_steps=800, rollout_len=16, rows=5, columns=5, learning_rate=5e-4,
      model_lstm_size=256, model_head_hiddens=(256,), seed=4,
      steps_per_call=10)
class MetaTrainConfig(RunConfig):
  """Settings of a meta-training run (defaults: the upstream notebook)."""

  num_agents: int = _field(2, 'population size')
  batch_size_per_device: int = _field(32, 'environments per agent and device')
  num_inner_steps: int = _field(2, 'agent updates per meta-step')
  tasks: tuple[str, ...] = _field(
      (), 'the task suite: environments the population is split over '
      '(contiguous groups of agents, each with its own network shape), e.g. '
      'catch catch[rows=7,columns=5] gymnax:CartPole-v1 '
      'gymnax:DeepSea-bsuite[size=8]; catch without a board is rows x '
      'columns; a task may name its net, e.g. '
      'gymnax:Breakout-MinAtar[net=conv]; none: catch alone')
  value_dense: tuple[int, ...] = _field((256, 256),
                                        'value-function MLP hidden sizes')
  meta_learning_rate: float = _field(5e-4, 'Adam step size of the rule')
  init: str = _field('random', "starting rule: 'random' (a fresh "
                     "meta-network) or 'disco_103' (fine-tune)",
                     choices=('random', 'disco_103'))
  rule_seed: int = _field(1, 'seed of the fresh meta-network (init random; '
                          'the upstream notebook uses 1)')
  population: str = _field(
      'auto', "how a device runs its agents: 'map' one after another (on "
      "CPUs no slower than vmap), 'vmap' vectorised (for accelerators); "
      "'auto': map on a CPU, vmap elsewhere",
      choices=('auto', 'map', 'vmap'))
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
  agent_lifetime: int = _field(
      0, 'agent updates after which an agent starts afresh, staggered over '
      'the population so that ages differ (0: agents live for the run)')
  # The meta-objective's regularisers (`meta_objective.MetaLossWeights`;
  # the defaults are upstream's).
  meta_entropy_cost: float = _field(
      meta_objective.MetaLossWeights.entropy,
      "meta-objective: weight of the validation policy's entropy bonus")
  meta_prediction_entropy_cost: float = _field(
      meta_objective.MetaLossWeights.prediction_entropy,
      "meta-objective: weight of the y and z predictions' entropy bonus")
  meta_target_mean_cost: float = _field(
      meta_objective.MetaLossWeights.target_mean,
      "meta-objective: weight of the pi, y and z targets' squared batch "
      'means')
  meta_target_kl_cost: float = _field(
      meta_objective.MetaLossWeights.target_kl,
      "meta-objective: weight of the KL from the target network's policy "
      'to the policy target')

  def _check(self) -> None:
    super()._check()
    self._at_least(1, 'num_agents', 'batch_size_per_device',
                   'num_inner_steps')
    self._at_least(0, 'meta_grad_clip', 'agent_lifetime',
                   'max_unrolled_inner_steps', *META_LOSS_COSTS)
    self._sizes('value_dense')
    self._rates('meta_learning_rate')
    if not math.isfinite(self.meta_grad_clip):
      raise ValueError('meta_grad_clip must be finite (0: no clip), got '
                       f'{self.meta_grad_clip!r}.')
    for name in META_LOSS_COSTS:
      if not math.isfinite(getattr(self, name)):
        raise ValueError(f'{name} must be a finite weight >= 0, got '
                         f'{getattr(self, name)!r}.')
    if 0 < self.agent_lifetime < self.num_inner_steps:
      raise ValueError(
          f'agent_lifetime={self.agent_lifetime} is shorter than one '
          f'meta-step (num_inner_steps={self.num_inner_steps} updates).')
    group_sizes(self.num_agents, len(self.suite))

  @functools.cached_property
  def suite(self) -> tuple['Task', ...]:
    """The tasks, parsed once (Catch rows x columns when none is given)."""
    return parse_tasks(self.tasks, self.rows, self.columns)

  def meta_loss_weights(self) -> meta_objective.MetaLossWeights:
    """The meta-objective's regulariser weights of these fields."""
    return meta_objective.MetaLossWeights(
        entropy=self.meta_entropy_cost,
        prediction_entropy=self.meta_prediction_entropy_cost,
        target_mean=self.meta_target_mean_cost,
        target_kl=self.meta_target_kl_cost)


def upgrade_settings(cls, settings: dict[str, Any]) -> dict[str, Any]:
  """The settings of a run's record (`run.json`) as fields of `cls` (an
  `EvalConfig` or a `MetaTrainConfig`) today.

  Raises:
    ValueError: naming settings `cls` does not know.
  """
  unknown = sorted(set(settings) - {f.name for f in dataclasses.fields(cls)})
  if unknown:
    raise ValueError(f'The run record has settings {unknown} that '
                     f'{cls.__name__} does not know (written by another '
                     'version?).')
  return dict(settings)


# Named starting points for meta-training; flags and fields override them.
META_TRAIN_PRESETS = {
    # The upstream meta-training notebook (the MetaTrainConfig defaults).
    'notebook': {},
    # The paper's meta-optimisation (Oh et al. 2025, Methods): Adam
    # normalisation per agent, meta learning rate 1e-3 with clipping 1.0,
    # backpropagation through 20 agent updates, 96 trajectories of 29 steps
    # per agent update. The population size and lifetime are this project's
    # choice for Catch on a small machine (the paper's is far larger).
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


# ----------------------------------------------------------------------------
# Settings written as text: 'size=10,deterministic=false', task specs.


def _parse_value(text: str) -> Any:
  """'10' -> 10, '0.5' -> 0.5, 'true'/'false' -> bool, anything else: str."""
  text = text.strip()
  if text.lower() in ('true', 'false'):
    return text.lower() == 'true'
  try:
    value = ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text
  return value if isinstance(value, (int, float, str)) else text


def parse_kwargs(text: str) -> dict[str, Any]:
  """'size=10,deterministic=false' -> {'size': 10, 'deterministic': False}.

  Raises:
    argparse.ArgumentTypeError: (a ValueError) for text that is not
      comma-separated name=value pairs.
  """
  kwargs = {}
  for item in (i for i in text.split(',') if i.strip()):
    key, sep, value = item.partition('=')
    if not sep or not key.strip().isidentifier():
      raise argparse.ArgumentTypeError(
          f'expected comma-separated name=value pairs such as '
          f'size=10,max_steps_in_episode=500, got {text!r}')
    kwargs[key.strip()] = _parse_value(value)
  return kwargs


_TASK = re.compile(r'^([^\[\]\s]+)(?:\[([^\[\]]*)\])?$')


@dataclasses.dataclass(frozen=True)
class Task:
  """One environment of the meta-training suite, e.g.
  'gymnax:DeepSea-bsuite[size=8]' or 'gymnax:Breakout-MinAtar[net=conv]'.

  Attributes:
    name: an environment name ('catch' is the jittable Catch here).
    settings: its settings (Catch: rows, columns; gymnax: constructor
      arguments or `EnvParams` fields).
    net: the network of its agents; None: the config's `net`.
  """

  name: str
  settings: tuple[tuple[str, Any], ...] = ()
  net: str | None = None

  @property
  def is_catch(self) -> bool:
    return self.name in CATCH_ENVS

  def spec(self) -> str:
    """The task as text (`parse_task(task.spec()) == task`)."""
    items = self.settings + ((('net', self.net),) if self.net else ())
    if not items:
      return self.name
    return '%s[%s]' % (self.name, ','.join(f'{k}={v}' for k, v in items))

  def make_env(self, batch_size: int) -> base_env.Environment:
    """The task's jittable environment with `batch_size` instances."""
    name = 'jittable_catch' if self.is_catch else self.name
    return environments.get_environment(name, batch_size,
                                        dict(self.settings))

  def eval_settings(self) -> dict[str, Any]:
    """The `EvalConfig` fields that train an agent on this task, e.g.
    `EvalConfig(**task.eval_settings(), num_steps=200)`."""
    net = dict(net=self.net) if self.net else {}
    if self.is_catch:
      board = dict(self.settings)
      return dict(env='jittable_catch', rows=board['rows'],
                  columns=board['columns'], **net)
    return dict(env=self.name, env_kwargs=dict(self.settings), **net)


def parse_task(text: Any, rows: int = 5, columns: int = 5) -> Task:
  """A `Task` from its text; Catch without a board gets `rows` x `columns`.

  Raises:
    ValueError: naming the task: malformed text, an unknown environment or
      network, or Catch settings other than rows and columns.
  """
  if not isinstance(text, str):
    raise ValueError(f'A task must be text such as catch[rows=7,columns=5] '
                     f'or gymnax:CartPole-v1, got {text!r}.')
  match = _TASK.match(text.strip())
  if not match:
    raise ValueError(f'Malformed task {text!r}; expected NAME or '
                     'NAME[key=value,...], e.g. catch[rows=7,columns=5] or '
                     'gymnax:DeepSea-bsuite[size=8].')
  name, settings_text = match.groups()
  try:
    settings = parse_kwargs(settings_text or '')
  except argparse.ArgumentTypeError as e:
    raise ValueError(f'Malformed settings in task {text!r}: {e}.') from None
  net = settings.pop('net', None)
  if net is not None and net not in NETS:
    raise ValueError(f'Task {text!r}: unknown net {net!r}; expected one of '
                     f'{NETS}.')
  if name not in CATCH_ENVS:
    environments.check_name(name, 'task environment')
    return Task(name, tuple(settings.items()), net)
  unknown = sorted(set(settings) - {'rows', 'columns'})
  if unknown:
    raise ValueError(f'Task {text!r}: Catch takes only rows and columns, '
                     f'got {unknown}.')
  board = dict(rows=settings.get('rows', rows),
               columns=settings.get('columns', columns))
  base_env.check_board(board['rows'], board['columns'], f'task {text!r}')
  return Task('catch', tuple(board.items()), net)


def parse_tasks(texts, rows: int = 5, columns: int = 5) -> tuple[Task, ...]:
  """The suite: the tasks of `texts`, or Catch rows x columns if none."""
  if isinstance(texts, str):
    raise ValueError(f'tasks must be a sequence of task texts, got the text '
                     f'{texts!r} (write ({texts!r},) for one task).')
  tasks = tuple(parse_task(t, rows, columns) for t in tuple(texts) or
                ('catch',))
  repeated = sorted({t.spec() for t in tasks if tasks.count(t) > 1})
  if repeated:
    raise ValueError(f'tasks {repeated} appear more than once: give the '
                     'task more agents with num_agents instead.')
  return tasks


def group_sizes(num_agents: int, num_tasks: int) -> tuple[int, ...]:
  """Agents per task: `num_agents` split as evenly as possible, first first.

  Raises:
    ValueError: if some task would get no agent.
  """
  if num_agents < num_tasks:
    raise ValueError(f'num_agents={num_agents} is smaller than the number of '
                     f'tasks ({num_tasks}): every task needs an agent.')
  share, extra = divmod(num_agents, num_tasks)
  return tuple(share + (g < extra) for g in range(num_tasks))


def group_starts(sizes) -> np.ndarray:
  """[G + 1] offsets of the groups in the population (0, ..., N)."""
  return np.concatenate([[0], np.cumsum(sizes)]).astype(int)
