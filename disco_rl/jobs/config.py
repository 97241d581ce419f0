# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The settings of the two jobs' shared fields and of the eval job,
checked once, when made.

`EvalConfig` (an agent trained by a fixed rule) and `MetaTrainConfig` (a
population training a rule, `meta_config.py`) share their agent, run and
device fields, declared once in `RunConfig` with the eval job's defaults;
the meta-training job states the defaults it changes (`redefault`). A
field's type, default, help text and choices (its metadata, `setting`)
also give its command-line flag (`cli/flags.py`). Environments take
their settings as every family does: `env_kwargs`, or
`NAME[key=value,...]` in a task.

Frozen: change one with `dataclasses.replace`, which checks the new one.
Old run records are read with `run_dir.upgrade_settings`.
"""

import dataclasses
import math
import numbers
import types as pytypes
import typing
from typing import Any, NamedTuple

from ml_collections import config_dict
import numpy as np

from disco_rl import agent as agent_lib
from disco_rl import environments
from disco_rl import optimizers
from disco_rl.networks import nets
from disco_rl.update_rules import disco

RULES = tuple(agent_lib.RULES)
NETS = tuple(agent_lib.TORSO_FIELDS)
PRECISIONS = nets.PRECISIONS
MATMUL_PRECISIONS = ('default', 'high', 'highest')
# The rules a warm start may begin with ('none': the main rule's own terms
# other than the policy's, with `warm_start_predictions`).
WARM_START_RULES = ('none', 'actor_critic', 'ppo')
# env='custom': the Environment object given to Trainer(..., env=...).
CUSTOM_ENV = 'custom'
# Seeds are below 2**32: `jax.random.PRNGKey` keeps a seed's low 32 bits
# (2**32 would be seed 0 again) and larger ones overflow.
SEED_LIMIT = 2**32


class Run(NamedTuple):
  """One run of an eval program: its seed and the agent's learning rate."""

  seed: int
  learning_rate: float


def setting(default: Any, help_text: str, **extra: Any) -> Any:
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


def _expected(annotation: Any) -> str:
  """What a field of `annotation` holds, in words ('an integer')."""
  if typing.get_origin(annotation) in (typing.Union, pytypes.UnionType):
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return f'{_expected(args[0])} or None'
  if typing.get_origin(annotation) is tuple:
    element = typing.get_args(annotation)[0]
    return f'a tuple of {_WORDS[element].split(" ", 1)[1]}s'
  if typing.get_origin(annotation) is dict:
    return 'a dict of names to values'
  return _WORDS[annotation]


_WORDS = {
  int: 'an integer',
  float: 'a number',
  bool: 'True or False',
  str: 'a text',
}


def _as_type(value: Any, annotation: Any) -> tuple[bool, Any]:
  """(whether `value` is of `annotation`, the value as the field keeps it:
  a list as a tuple, a NumPy integer, number or bool as Python's)."""
  if typing.get_origin(annotation) in (typing.Union, pytypes.UnionType):
    if value is None:
      return True, None
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    return _as_type(value, args[0])
  if typing.get_origin(annotation) is tuple:
    if not isinstance(value, (tuple, list)):
      return False, value
    element = typing.get_args(annotation)[0]
    kept = [_as_type(v, element) for v in value]
    return all(ok for ok, _ in kept), tuple(v for _, v in kept)
  if typing.get_origin(annotation) is dict:
    return isinstance(value, dict), value
  if annotation is bool:
    return _is_bool(value), bool(value) if _is_bool(value) else value
  if annotation in (int, float):
    kind = numbers.Integral if annotation is int else numbers.Real
    ok = isinstance(value, kind) and not _is_bool(value)
    if not ok or isinstance(value, (int, float)):
      return ok, value
    return ok, annotation(value)  # A NumPy scalar.
  if annotation is str:
    return isinstance(value, str), value
  return True, value


def _is_bool(value: Any) -> bool:
  """A Python or NumPy bool (never an integer setting)."""
  return isinstance(value, (bool, np.bool_))


_HINTS: dict[type, dict[str, Any]] = {}  # A config class's, read once.


def _hints(config_cls: type) -> dict[str, Any]:
  if config_cls not in _HINTS:
    _HINTS[config_cls] = typing.get_type_hints(config_cls)
  return _HINTS[config_cls]


def check_types(config: Any) -> None:
  """Raises ValueError naming the first field of the dataclass `config`
  whose value is not of its declared type (no conversion: '8', 8.0 and
  True are not an integer, 'no' is not False), with the expected and the
  received value; keeps a list as a tuple and NumPy scalars as Python's."""
  hints = _hints(type(config))
  for field in dataclasses.fields(config):
    value = getattr(config, field.name)
    ok, kept = _as_type(value, hints[field.name])
    if not ok:
      one = (
        f' (write ({value!r},) for one)'
        if isinstance(value, str) and 'tuple' in _expected(hints[field.name])
        else ''
      )
      raise ValueError(
        f'{field.name} must be {_expected(hints[field.name])}, got '
        f'{value!r} ({type(value).__name__}){one}.'
      )
    if kept is not value:
      object.__setattr__(config, field.name, kept)


def check_seed(name: str, value: int) -> None:
  """Raises ValueError unless 0 <= value < SEED_LIMIT (`value` an int):
  a negative seed or one of 2**32 or more would be another seed's key, or
  overflow (`--seed 99999999999999999999`)."""
  if not 0 <= value < SEED_LIMIT:
    raise ValueError(
      f'{name} must be from 0 to {SEED_LIMIT - 1} (jax.random.PRNGKey '
      f'keeps 32 bits of a seed), got {value}.'
    )


def redefault(name: str, value: Any) -> Any:
  """`RunConfig`'s field `name` with another default (a job's own)."""
  field = RunConfig.__dataclass_fields__[name]  # pylint: disable=no-member
  return setting(
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

  num_steps: int = setting(
    1000,
    'learner steps (eval) or meta-steps (meta-training)',
    flags=('--steps',),
  )
  rollout_len: int = setting(29, 'steps per trajectory')
  learning_rate: float = setting(1e-2, "the agents' learning rate")
  net: str = setting(
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
  dense: tuple[int, ...] = setting(
    (512, 512), "hidden sizes of the agent's MLP torso, e.g. 512,512"
  )
  conv_channels: tuple[int, ...] = setting(
    (16,),
    "output channels of the conv torso's layers (net conv), e.g. 16 "
    '(MinAtar) or 32,64',
  )
  conv_kernel: int = setting(
    3, "kernel size of the conv torso's layers (stride 1, SAME padding)"
  )
  resnet_channels: tuple[int, ...] = setting(
    (16, 32, 32),
    "channels of the resnet torso's stages (net resnet; "
    "IMPALA's 16,32,32), each a conv, a stride-2 max-pool and "
    '--resnet-blocks residual blocks',
  )
  resnet_blocks: int = setting(
    2,
    'residual blocks per stage of the resnet torso (each two 3x3 convolutions)',
  )
  model_lstm_size: int = setting(128, 'size of the action-model LSTM')
  model_head_hiddens: tuple[int, ...] = setting(
    (128,), 'hidden sizes of the action-model heads'
  )
  rule_sizes: dict[str, Any] = setting(
    {},
    "sizes of rule disco_103's meta-network (a rule meta-trained here "
    'may be smaller), e.g. prediction_size=8,hidden_size=64,'
    'embedding_size=8x1 (fields of disco.MetaNetSizes) or a named size '
    '(tiny, small, lpg: disco.NAMED_SIZES); a --weights file sets them; '
    "none: Disco103's",
  )
  agent_optimizer: str = setting(
    'adam',
    "the agents' optimiser: 'adam' (the upstream's: Adam, each update "
    "clipped to 1) or 'sgd' (GROOVE's tabular agents: plain steps of the "
    'gradient clipped to a global norm of 0.5; a meta-gradient through '
    "them does not grow where the agents' gradients are small)",
    choices=optimizers.AGENT_OPTIMIZERS,
  )
  policy_target: str = setting(
    'absolute',
    "rule disco_103: how its meta-network's policy output becomes the "
    "policy target: 'absolute' (Disco103's logits), 'residual' (added "
    "to the agent's own logits: an output of 0 asks for no change) or "
    "'action' (a scalar per step added to the action taken's logit, "
    "LPG's actor term to first order but for a factor pi(a_t); a rule "
    "file with the action head sets it) or 'action_pg' (the scalar over "
    "pi(a_t): LPG's actor term to first order); for rules meta-trained "
    'so, docs/meta_training.md',
    choices=disco.POLICY_TARGETS,
  )
  matmul_precision: str = setting(
    'default',
    'float32 matrix-product precision of the compiled programs '
    "(JAX's default_matmul_precision): 'default' (the backend's choice: "
    "TF32 on recent NVIDIA GPUs, bfloat16 passes on TPUs), 'high' or "
    "'highest' (full float32); CPUs compute float32 products in full at "
    'every setting',
    choices=MATMUL_PRECISIONS,
  )
  seed: int = setting(0, 'random seed')
  num_devices: int | None = setting(
    None, 'devices to use (default: as many as the batch divides into)'
  )
  steps_per_call: int = setting(20, 'steps compiled into one call')
  debug_checks: bool = setting(
    True,
    'check every acted rollout (actions in range, finite rewards) '
    'and stop with the field, step and batch index of the first bad entry',
  )

  def __post_init__(self) -> None:
    self._check()

  def _check(self) -> None:
    """Raises ValueError naming any setting that cannot work."""
    check_types(self)
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
    for field in dataclasses.fields(self):
      if field.name == 'seed' or field.name.endswith('_seed'):
        check_seed(field.name, getattr(self, field.name))
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
      policy_target=(
        self.policy_target if rule in agent_lib.SIZED_RULES else 'absolute'
      ),
      optimizer=self.agent_optimizer,
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
  'agent_optimizer',
  'policy_target',
  'matmul_precision',
)


@dataclasses.dataclass(frozen=True)
class EvalConfig(RunConfig):
  """Settings of an eval run (defaults: the upstream eval notebook)."""

  rule: str = setting('disco_103', 'update rule', choices=RULES)
  warm_start_rule: str = setting(
    'none',
    "rule disco_103: the rule of the agent's first warm_start_steps "
    "updates, then Disco's, in one run (docs/eval.md): 'actor_critic', "
    "'ppo' or 'none' (with warm_start_predictions: Disco's own terms "
    "but the policy's)",
    choices=WARM_START_RULES,
  )
  warm_start_steps: int = setting(
    0, 'updates of the warm start (0: none, the upstream run)'
  )
  warm_start_learning_rate: float | None = setting(
    None,
    "the agents' learning rate during the warm start (default: the "
    "run's; e.g. the warm rule's own rate)",
  )
  warm_start_predictions: bool = setting(
    False,
    "during the warm start, also train Disco's terms other than the "
    "policy's (its y, z and auxiliary-policy targets); Disco's value "
    'loss trains from the first update either way',
  )
  env: str = setting(
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
  env_kwargs: dict[str, Any] = setting(
    {},
    'environment settings as name=value pairs, e.g. rows=5,columns=5 '
    '(Catch), size=10 (DeepSea) or max_steps_in_episode=500; unset ones '
    "take the environment's defaults; the command line also takes them "
    'in brackets after the name, e.g. --env lpg:dense[layout_seed=3]',
  )
  batch_size: int = setting(
    64, 'trajectories per learner step, over all devices'
  )
  replay_ratio: int = setting(
    32,
    'learner trajectories per acted trajectory; '
    'environments = batch_size // replay_ratio',
  )
  buffer_capacity: int = setting(
    1024, 'replay buffer size in trajectories, over all devices'
  )
  epochs: int = setting(
    0,
    "on-policy learning (Stoix's regime) instead of replay: the passes "
    "over each step's rollout, each of `minibatches` learner updates on "
    'a disjoint share of its environments, drawn anew per pass; nothing '
    'is replayed (needs replay_ratio 1 and buffer_capacity = batch_size). '
    'A step (num_steps, warm_start_steps, checkpoint_every) is then one '
    'rollout and its epochs x minibatches updates. 0: the replay regime '
    '(the upstream eval), one update per step',
  )
  minibatches: int = setting(
    1, 'with epochs: learner updates per pass over a rollout'
  )
  precision: str = setting(
    'float32',
    "compute dtype of the agent network ('bfloat16': "
    'parameters, outputs and the rule stay float32)',
    choices=PRECISIONS,
  )
  num_seeds: int = setting(
    1,
    'independent runs in one program, seeds seed, seed+1, ...: every '
    'device holds a share of each run (one metrics row per step and run)',
  )
  seeds: tuple[int, ...] = setting(
    (),
    "the runs' seeds, e.g. 0 1 2 (default: seed, seed+1, ..., num_seeds "
    'of them)',
    words=True,
  )
  learning_rates: tuple[float, ...] = setting(
    (),
    "the runs' learning rates, e.g. 1e-3 3e-3 1e-2: every seed runs at "
    'each, all in one program (default: learning_rate)',
    words=True,
  )
  behaviour_outputs: tuple[str, ...] | None = setting(
    ('logits',),
    'agent outputs kept in the replay buffer (the rules read '
    'only the behaviour logits)',
    flags=(),
  )

  def _check_on_policy(self) -> None:
    self._at_least(0, 'epochs')
    self._at_least(1, 'minibatches')
    if not self.epochs:
      if self.minibatches != 1:
        raise ValueError(
          f'minibatches={self.minibatches} divides the rollout of the '
          'on-policy regime: give epochs >= 1 (got 0, the replay regime).'
        )
      return
    if self.replay_ratio != 1 or self.buffer_capacity != self.batch_size:
      raise ValueError(
        f'epochs={self.epochs} learns on-policy from each rollout of '
        'batch_size environments: needs replay_ratio=1 and '
        f'buffer_capacity=batch_size={self.batch_size}, got replay_ratio='
        f'{self.replay_ratio} and buffer_capacity={self.buffer_capacity}.'
      )
    if self.batch_size % self.minibatches:
      raise ValueError(
        f'batch_size={self.batch_size} must be a multiple of minibatches='
        f'{self.minibatches} (each update learns on batch_size // '
        'minibatches environments).'
      )

  def _check_warm_start(self) -> None:
    warm = self.warm_start_rule != 'none' or self.warm_start_predictions
    self._at_least(0, 'warm_start_steps')
    if warm and not self.warm_start_steps:
      raise ValueError(
        f'warm_start_rule={self.warm_start_rule!r}, warm_start_predictions='
        f'{self.warm_start_predictions} set a warm start: give its length, '
        'warm_start_steps >= 1 (got 0).'
      )
    if self.warm_start_steps and not warm:
      raise ValueError(
        f'warm_start_steps={self.warm_start_steps} needs a warm start: '
        "warm_start_rule ('actor_critic' or 'ppo') or "
        "warm_start_predictions=True (got 'none' and False)."
      )
    rate = self.warm_start_learning_rate
    if rate is not None and not self.warm_start_steps:
      raise ValueError(
        f'warm_start_learning_rate={rate} is the rate of a warm start: '
        'give warm_start_steps >= 1 (got 0).'
      )
    if rate is not None and not (
      isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0
    ):
      raise ValueError(
        f'warm_start_learning_rate must be a finite number > 0, got {rate!r}.'
      )
    if self.warm_start_steps and self.rule not in agent_lib.SIZED_RULES:
      raise ValueError(
        f'warm_start_steps={self.warm_start_steps}: a warm start begins a '
        f'run of a rule with a meta-network {agent_lib.SIZED_RULES}; rule '
        f'is {self.rule!r}.'
      )

  def run_agent_settings(self) -> config_dict.ConfigDict:
    """The agent settings of this run: `rule`'s, after a warm start by
    `warm_start_rule` when `warm_start_steps` (`agent.with_warm_start`)."""
    settings = self.agent_settings(self.rule, precision=self.precision)
    if not self.warm_start_steps:
      return settings
    warm = None
    if self.warm_start_rule != 'none':
      warm = self.agent_settings(self.warm_start_rule)
    return agent_lib.with_warm_start(
      settings, warm, self.warm_start_steps, self.warm_start_predictions
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
    if any(not 0 <= s < SEED_LIMIT for s in self.seeds):
      raise ValueError(
        f'seeds must be from 0 to {SEED_LIMIT - 1} (jax.random.PRNGKey '
        f'keeps 32 bits of a seed), got {self.seeds}.'
      )
    if not self.seeds:
      check_seed('seed + num_seeds - 1', self.seed + self.num_seeds - 1)
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
    self._check_on_policy()
    if (
      self.policy_target != 'absolute'
      and self.rule not in agent_lib.SIZED_RULES
    ):
      raise ValueError(
        f'policy_target={self.policy_target!r} is a setting of a rule with '
        f'a meta-network {agent_lib.SIZED_RULES}; rule is {self.rule!r}.'
      )
    self._check_warm_start()
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
