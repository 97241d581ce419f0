# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Data types shared across the package.

Shape conventions used in docstrings throughout:
  T: trajectory length (time), B: batch, A: number of actions,
  D: devices (leading axis under `jax.pmap`).
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import chex
import dm_env
from dm_env import specs
import haiku as hk
import jax
import jax.numpy as jnp

# ----------------------------------------------------------------------------
# Aliases.

Array = jax.Array
ArraySpec = jax.ShapeDtypeStruct
ActionSpec = specs.BoundedArray
Specs = dict[str, 'specs.Array | ArraySpec']
SpecsTree = Any

HaikuState = hk.State
AgentParams = chex.ArrayTree
MetaParams = chex.ArrayTree
OptState = chex.ArrayTree
RNNState = chex.ArrayTree
AgentOuts = dict[str, chex.ArrayTree]
UpdateRuleOuts = dict[str, chex.ArrayTree]
UpdateRuleLog = dict[str, chex.ArrayTree]
HyperParams = dict[str, 'chex.Array | float']
LogDict = dict[str, chex.Array]
# Per-agent state an update rule owns and advances (EMAs, meta-RNN, ...).
MetaState = dict[str, 'chex.ArrayTree | None']
# {decay: params} for EMAs of meta-parameters.
MetaParamsEMA = dict[float, MetaParams]

# (params, state, observations, should_reset) -> (agent outputs, new state)
AgentStepFn = Callable[
  [AgentParams, HaikuState, chex.ArrayTree, 'chex.Array | None'],
  tuple[AgentOuts, HaikuState],
]
AgentUnrollFn = AgentStepFn
SampleActionFn = Callable[
  [chex.PRNGKey, MetaParams, AgentOuts],
  tuple[chex.ArrayTree, chex.ArrayTree, chex.ArrayTree],
]
# (rng, observations, should_reset) -> (params, state)
AgentInitFn = Callable[
  [chex.PRNGKey, chex.ArrayTree, 'chex.Array | None'],
  tuple[AgentParams, HaikuState],
]


# ----------------------------------------------------------------------------
# Configuration records.


@chex.dataclass
class ValueFnConfig:
  """Settings of the meta-training value function (`value_fns.ValueFunction`).

  Attributes:
    net: network name for `networks.nets.get_network` (e.g. 'mlp').
    net_args: keyword arguments of that network.
    learning_rate: Adam learning rate of the value function.
    max_abs_update: element-wise clip of each update.
    discount_factor: discount used for its V-trace targets.
    td_lambda: V-trace lambda.
    outer_value_cost: weight of its loss.
    ema_decay: decay of the advantage/TD moving averages.
    ema_eps: epsilon of the moving-average normalisation.
  """

  net: str
  net_args: Mapping[str, Any]
  learning_rate: float
  max_abs_update: float
  discount_factor: float
  td_lambda: float
  outer_value_cost: chex.Scalar
  ema_decay: float = 0.99
  ema_eps: float = 1e-6


@chex.dataclass
class TransformConfig:
  """Where a meta-network input comes from and how it is transformed.

  Attributes:
    source: '/'-separated path of attributes or keys into `UpdateRuleInputs`,
      e.g. 'agent_out/logits' or 'extra_from_rule/target_out/z'.
    transforms: names from `networks.input_transforms.TRANSFORMS`, or
      'y_net' / 'z_net', applied left to right.
  """

  source: str
  transforms: Sequence[Callable[[Any], chex.Array] | str]


@chex.dataclass
class MetaNetInputOption:
  """Inputs of the meta-network: per-step (`base`) and per-action ones."""

  base: Sequence[TransformConfig]
  action_conditional: Sequence[TransformConfig]


# ----------------------------------------------------------------------------
# States.


@chex.dataclass
class EmaState:
  """State of `utils.MovingAverage`.

  Attributes:
    moment1: tree of running first moments (zero-initialised, biased).
    moment2: tree of running second moments (zero-initialised, biased).
    decay_product: product of every decay applied so far (for debiasing).
  """

  moment1: chex.ArrayTree
  moment2: chex.ArrayTree
  decay_product: chex.Numeric


@chex.dataclass
class ValueState:
  """State of the meta-training value function."""

  params: AgentParams
  state: HaikuState
  opt_state: OptState
  adv_ema_state: EmaState
  td_ema_state: EmaState


# ----------------------------------------------------------------------------
# Agent networks.


@chex.dataclass(mappable_dataclass=False, frozen=True)
class PolicyNetwork:
  """The Haiku-transformed pure functions of an agent network.

  Attributes:
    init: (rng, observations [B, ...], should_reset [B] or None) ->
      (params, state).
    one_step: (params, state, observations [B, ...], should_reset [B]) ->
      (outputs [B, ...], state).
    unroll: (params, state, observations [T, B, ...], should_reset [T, B]) ->
      (outputs [T, B, ...], state).
  """

  init: AgentInitFn
  one_step: AgentStepFn
  unroll: AgentUnrollFn


# ----------------------------------------------------------------------------
# Environment and actor data.


@chex.dataclass
class EnvironmentTimestep:
  """A (batched) environment transition: observation [B, ...], step_type [B]
  (`dm_env.StepType` values) and reward [B]."""

  # A tree whose leaves are those of the environment's observation spec,
  # batched (the package's environments: {'observation': [B, ...]}).
  observation: chex.ArrayTree
  step_type: chex.Array
  reward: chex.Array


def _step_type_from_discounts(discounts: chex.Array) -> chex.Array:
  return jnp.where(discounts > 0, dm_env.StepType.MID, dm_env.StepType.LAST)


@chex.dataclass
class ActorTimestep:
  """What the actor records at one step.

  Attributes:
    observations: observation the action was chosen on.
    actions: sampled actions [B].
    rewards: reward that came with `observations` [B].
    discounts: 0 where `observations` ended an episode, else 1 [B].
    agent_outs: network outputs on `observations`.
    states: recurrent network state *before* the step.
    logits: behaviour policy logits [B, A].
  """

  observations: chex.ArrayTree
  actions: chex.Array
  rewards: chex.Array
  discounts: chex.Array
  agent_outs: AgentOuts
  states: HaikuState
  logits: chex.Array

  @classmethod
  def from_rollout(cls, rollout: 'ActorRollout') -> 'ActorTimestep':
    return cls(**{name: getattr(rollout, name) for name in _TIMESTEP_FIELDS})

  def to_env_timestep(self) -> EnvironmentTimestep:
    """Recovers the environment's view (observation, step type, reward)."""
    return EnvironmentTimestep(
      observation=self.observations,
      step_type=_step_type_from_discounts(self.discounts),
      reward=self.rewards,
    )


_TIMESTEP_FIELDS = (
  'observations',
  'actions',
  'rewards',
  'discounts',
  'agent_outs',
  'states',
  'logits',
)


@chex.dataclass
class ActorRollout(ActorTimestep):
  """`ActorTimestep`s stacked along time: every leaf is [T, B, ...].

  Under `pmap` a device axis leads ([D, T, B, ...]) and meta-training stacks
  inner steps in front of time ([N, T, B, ...]).
  """

  @classmethod
  def from_timestep(cls, timestep: ActorTimestep) -> 'ActorRollout':
    return cls(**{name: getattr(timestep, name) for name in _TIMESTEP_FIELDS})

  def first_state(self, time_axis: int) -> HaikuState:
    """The recurrent state at time 0, `time_axis` being the axis of time."""
    index = (slice(None),) * (time_axis - 1) + (0,)
    return jax.tree.map(lambda x: x[index], self.states)


# ----------------------------------------------------------------------------
# Update-rule data.


@chex.dataclass
class ValueOuts:
  """Value estimates, targets and advantages along a trajectory.

  Scalar-per-step arrays are [T, B] (targets, advantages, TDs) or [T+1, B]
  (values); per-action arrays add an action axis.
  """

  value: jax.typing.ArrayLike = 0.0  # V(s_t) [T+1, B]
  target_value: jax.typing.ArrayLike = 0.0  # target-network V [T+1, B]
  rho: jax.typing.ArrayLike = 0.0  # pi/mu importance weights [T, B]
  adv: jax.typing.ArrayLike = 0.0  # advantage [T, B]
  normalized_adv: jax.typing.ArrayLike = 0.0  # EMA-normalised advantage
  value_target: jax.typing.ArrayLike = 0.0  # target for V [T, B]
  td: jax.typing.ArrayLike = 0.0  # value_target - value [T, B]
  normalized_td: jax.typing.ArrayLike = 0.0  # EMA-scaled TD
  qv_adv: chex.ArrayTree | None = None  # Q(s, a) - V(s) [T+1, B, A]
  normalized_qv_adv: chex.ArrayTree | None = None
  q_value: chex.ArrayTree | None = None  # Q(s, .) [T+1, B, A]
  target_q_value: chex.ArrayTree | None = None  # target-network Q
  q_target: chex.ArrayTree | None = None  # Retrace target for Q(s, a) [T, B]
  q_td: chex.ArrayTree | None = None  # q_target - Q(s, a) [T, B]
  normalized_q_td: chex.ArrayTree | None = None


@chex.dataclass
class UpdateRuleInputs:
  """What an update rule sees of a trajectory.

  Attributes:
    observations: [T+1, B, ...].
    actions: [T+1, B].
    rewards: r_t following action a_t, [T, B].
    is_terminal: whether action a_t ended the episode, [T, B].
    agent_out: outputs of the network being trained, [T+1, B, ...].
    behaviour_agent_out: outputs of the acting network, [T+1, B, ...].
    value_out: value estimates, for rules that take them from outside.
    extra_from_rule: quantities a rule prepares for its meta-network.
  """

  observations: chex.ArrayTree
  actions: chex.Array
  rewards: chex.Array
  is_terminal: chex.Array
  agent_out: chex.ArrayTree
  behaviour_agent_out: AgentOuts | None = None
  value_out: ValueOuts | None = None
  extra_from_rule: chex.ArrayTree | None = None

  def _with_extra_step(self, at_front: bool) -> chex.Array:
    pad = jnp.zeros_like(self.is_terminal[:1])
    parts = (pad, self.is_terminal) if at_front else (self.is_terminal, pad)
    return jnp.concatenate(parts, axis=0, dtype=self.is_terminal.dtype)

  @property
  def should_reset_mask_fwd(self) -> chex.Array:
    """[T+1, B] reset mask for a forward RNN: true at the first step of an
    episode (the terminal flags moved one step later)."""
    return self._with_extra_step(at_front=True)

  @property
  def should_reset_mask_bwd(self) -> chex.Array:
    """[T+1, B] reset mask for a backward RNN: the terminal flags with a
    non-terminal bootstrap step appended."""
    return self._with_extra_step(at_front=False)
