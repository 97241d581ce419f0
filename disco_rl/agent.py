# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""An agent whose learning is defined by an update rule.

`Agent` owns a network (from `networks.nets`), an optimiser and an update
rule. It acts (`actor_step`), and learns from a rollout (`learner_step`) with
the loss the rule defines, so the same agent trains with Disco103, the
actor-critic or PPO baselines or policy gradient, and can be differentiated
through for meta-training (`is_meta_training=True`).
"""

from collections.abc import Callable, Mapping, Sequence
import logging
from typing import Any

import chex
import distrax
import dm_env
import haiku as hk
import jax
from jax.experimental import checkify
import jax.numpy as jnp
from ml_collections import config_dict
import numpy as np
import optax

from disco_rl import optimizers
from disco_rl import rollout_checks
from disco_rl import types
from disco_rl import utils
from disco_rl.networks import nets
from disco_rl.update_rules import actor_critic
from disco_rl.update_rules import base as update_rules_base
from disco_rl.update_rules import disco
from disco_rl.update_rules import policy_gradient
from disco_rl.update_rules import ppo
from disco_rl.update_rules import warm_start

UPDATE_RULES = {
  'disco': disco.DiscoUpdateRule,
  'actor_critic': actor_critic.ActorCritic,
  'policy_gradient': policy_gradient.PolicyGradientUpdate,
  'ppo': ppo.PPO,
  'warm_start': warm_start.WarmStart,
}
# The rule that holds two others (`with_warm_start`): its `main` and `warm`
# settings are each {'name': a rule's name, 'settings': its settings}.
WARM_START = 'warm_start'
_HELD_RULES = ('main', 'warm')
SETTINGS_KEYS = (
  'hyper_params',
  'update_rule_name',
  'update_rule',
  'learning_rate',
  'max_abs_update',
  'net_settings',
)
# Settings an agent may have: 'optimizer', one of
# `optimizers.AGENT_OPTIMIZERS` (default 'adam').
OPTIONAL_SETTINGS_KEYS = ('optimizer',)
# Network constructor arguments the agent fills in itself.
_NET_ARGS_FROM_AGENT = ('out_spec', 'action_spec', 'model_out_spec')


@chex.dataclass(frozen=True)
class LearnerState:
  """The learner's state.

  Attributes:
    params: the agent network's parameters.
    opt_state: the optimiser's state.
    meta_state: the update rule's per-agent state (EMAs, meta-RNN state,
      target network...).
  """

  params: hk.Params
  opt_state: optax.OptState
  meta_state: types.MetaState


def _to_plain(x: Any) -> Any:
  return x.to_dict() if isinstance(x, config_dict.ConfigDict) else x


def _check_settings(settings: config_dict.ConfigDict) -> None:
  utils.check_keys(
    settings.keys(), SETTINGS_KEYS + OPTIONAL_SETTINGS_KEYS, 'agent_settings'
  )
  missing = [k for k in SETTINGS_KEYS if k not in settings]
  if missing:
    raise ValueError(
      f'agent_settings lacks {missing}; see '
      'agent.get_settings_disco() for a complete example.'
    )
  _check_rule(settings.update_rule_name, settings.update_rule, 'agent_settings')
  utils.check_keys(
    settings.net_settings.keys(),
    ('name', 'net_args', 'precision'),
    'agent_settings.net_settings',
  )
  precision = settings.net_settings.get('precision', 'float32')
  if precision not in nets.PRECISIONS:
    raise ValueError(
      f'Unknown agent_settings.net_settings.precision '
      f'{precision!r}; expected one of {nets.PRECISIONS}.'
    )
  net_name = settings.net_settings.name
  if net_name not in nets.NETWORKS:
    raise ValueError(
      f'Unknown network name {net_name!r} in '
      'agent_settings.net_settings.name; expected one of '
      f'{sorted(nets.NETWORKS)}.'
    )
  utils.check_kwargs(
    nets.NETWORKS[net_name],
    settings.net_settings.net_args,
    f'agent_settings.net_settings.net_args ({net_name})',
  )
  given = [
    k for k in settings.net_settings.net_args if k in _NET_ARGS_FROM_AGENT
  ]
  if given:
    raise ValueError(
      f'agent_settings.net_settings.net_args must not set '
      f'{given}: the agent derives them from the update rule.'
    )


def _check_rule(name: str, rule: Any, what: str) -> None:
  """Raises ValueError, naming `what`, unless `name` is a rule and `rule`
  its constructor settings (a warm start's held rules checked alike)."""
  if name not in UPDATE_RULES:
    raise ValueError(
      f'Unknown {what}.update_rule_name {name!r}; expected one of '
      f'{sorted(UPDATE_RULES)}.'
    )
  utils.check_kwargs(UPDATE_RULES[name], rule, f'{what}.update_rule ({name})')
  if name != WARM_START:
    return
  for part in _HELD_RULES:
    held = rule.get(part)
    if held is None and part == 'warm':
      continue
    if held is None or sorted(held.keys()) != ['name', 'settings']:
      raise ValueError(
        f"{what}.update_rule.{part} ({name}) must be {{'name': a rule's "
        f"name, 'settings': its settings}}, got {held!r}."
      )
    if held['name'] == WARM_START:
      raise ValueError(
        f'{what}.update_rule.{part} ({name}): a warm start cannot hold '
        'another warm start.'
      )
    _check_rule(held['name'], held['settings'], f'{what}.update_rule.{part}')


def build_update_rule(name: str, rule: Any) -> update_rules_base.UpdateRule:
  """The rule `name` from its constructor settings `rule` (checked by
  `_check_rule`); a warm start's held rules are built first."""
  if name != WARM_START:
    return UPDATE_RULES[name](**rule)
  held = [
    None if rule.get(part) is None
    else build_update_rule(rule[part]['name'], rule[part]['settings'])
    for part in _HELD_RULES
  ]  # fmt: skip
  main, warm = held
  assert main is not None  # Checked by _check_rule.
  return warm_start.WarmStart(
    main=main,
    warm=warm,
    steps=rule['steps'],
    predictions=rule.get('predictions', False),
  )


def _check_action_spec(spec: Any) -> None:
  shape = getattr(spec, 'shape', None)
  dtype = getattr(spec, 'dtype', None)
  if (
    shape is None
    or tuple(shape) != ()
    or dtype != np.int32
    or not hasattr(spec, 'maximum')
  ):
    raise ValueError(
      'single_action_spec must be a scalar int32 dm_env BoundedArray '
      '(discrete actions), got shape '
      f'{shape} dtype {dtype} ({type(spec).__name__}).'
    )


def check_rollout(rollout: types.ActorRollout, what: str = 'rollout') -> None:
  """Checks that every field of an actor rollout is [T, B, ...] alike.

  Raises:
    ValueError: naming the first field whose leading axes differ from those
      of `rollout.rewards`.
  """
  if not isinstance(rollout, types.ActorTimestep):
    raise TypeError(
      f'{what} must be a types.ActorRollout, got {type(rollout).__name__}.'
    )
  reward_shape = tuple(jnp.shape(rollout.rewards))
  if len(reward_shape) != 2:
    raise ValueError(
      f'{what}.rewards must be [T, B], got shape {reward_shape}.'
    )
  fields = ('observations', 'actions', 'discounts', 'agent_outs', 'logits')
  for field in fields:
    paths = jax.tree_util.tree_leaves_with_path(getattr(rollout, field))
    for path, leaf in paths:
      if tuple(jnp.shape(leaf)[:2]) != reward_shape:
        raise ValueError(
          f'{what}.{field}{jax.tree_util.keystr(path)} has shape '
          f'{jnp.shape(leaf)}; its leading [T, B] axes must match '
          f'{what}.rewards {reward_shape}.'
        )
  if reward_shape[0] < 2:
    raise ValueError(
      f'{what} needs at least 2 time steps to learn from, got '
      f'T={reward_shape[0]}.'
    )


def _spec_shapes(spec: Any) -> Any:
  return jax.tree.map(
    lambda s: tuple(s.shape), spec, is_leaf=lambda x: hasattr(x, 'shape')
  )


def check_observations(
  observations: Any, spec: Any, lead: tuple[str, ...], what: str
) -> None:
  """Checks observations against the single-observation spec.

  Args:
    observations: the observations, each leaf [*lead, *spec shape].
    spec: the agent's `single_observation_spec`.
    lead: names of the leading axes, e.g. ('T', 'B').
    what: the argument's name in messages, e.g. 'rollout.observations'.

  Raises:
    ValueError: naming the argument, the expected and the received shape.
  """
  # Leaves in order: a bare array stands for a one-entry spec (as upstream).
  flat_expected = jax.tree.leaves(
    _spec_shapes(spec), is_leaf=lambda x: isinstance(x, tuple)
  )
  leaves = jax.tree.leaves(observations)
  if len(leaves) != len(flat_expected):
    raise ValueError(
      f'{what} must hold {len(flat_expected)} array(s), one '
      f'per entry of the observation spec, got {len(leaves)}.'
    )
  for (path, leaf), shape in zip(
    jax.tree_util.tree_leaves_with_path(observations),
    flat_expected,
    strict=True,
  ):
    got = tuple(jnp.shape(leaf))
    if len(got) != len(lead) + len(shape) or got[len(lead) :] != shape:
      axes = ', '.join(lead)
      raise ValueError(
        f'{what}{jax.tree_util.keystr(path)} must have shape [{axes}, '
        f'*{shape}] (the observation spec {shape} after the {axes} axes), '
        f'got {got}.'
      )


_DTYPE_KINDS = {
  'float': ((jnp.floating,), 'a floating dtype'),
  'discount': ((jnp.floating, jnp.bool_), 'a floating (or bool) dtype'),
  'int': ((jnp.integer,), 'an integer dtype (discrete actions)'),
}


def _check_dtype(value: Any, kind: str, what: str) -> None:
  dtype = jnp.result_type(value)
  allowed, expected = _DTYPE_KINDS[kind]
  if not any(jnp.issubdtype(dtype, a) for a in allowed):
    raise ValueError(f'{what} must have {expected}, got {dtype}.')


def check_rollout_values(
  rollout: types.ActorRollout,
  num_actions: int,
  what: str = 'rollout',
  step: chex.Array | None = None,
) -> None:
  """Actions in [0, num_actions) and finite rewards, as `checkify` checks.

  The first bad entry is `rollout_checks.find_fault`'s (as in the loops);
  the failure names the field, the time step t and the batch index b (and
  `step`, e.g. the loop iteration, if given). Runs eagerly as it is; under
  `jit` the caller must functionalise it with
  `jax.experimental.checkify.checkify(..., errors=checkify.user_checks)`.
  """
  suffix = '' if step is None else ' (loop step {step})'
  extra = {} if step is None else dict(step=step)
  fault = rollout_checks.find_fault(
    jnp.asarray(rollout.actions),
    jnp.asarray(rollout.rewards),
    num_actions,
    step=0 if step is None else step,
  )
  checkify.check(
    fault.kind != rollout_checks.BAD_ACTION,
    f'{what}.actions[t={{t}}, b={{b}}] = {{value}} is outside '
    f'[0, {num_actions}){suffix}',
    t=fault.t,
    b=fault.b,
    value=fault.value.astype(jnp.int32),
    **extra,
  )
  checkify.check(
    fault.kind != rollout_checks.BAD_REWARD,
    f'{what}.rewards[t={{t}}, b={{b}}] = {{value}} is not finite{suffix}',
    t=fault.t,
    b=fault.b,
    value=fault.value,
    **extra,
  )


class Agent:
  """A generic agent trained by an update rule.

  For inference-only use the rule's `__call__` gives the whole loss at once;
  `learner_step` keeps the meta-network's pass separate so that it can be
  differentiated when meta-training.
  """

  settings: config_dict.ConfigDict
  update_rule: update_rules_base.UpdateRule
  num_actions: int  # Actions are 0 .. num_actions - 1.

  def __init__(
    self,
    *,
    single_observation_spec: types.Specs,
    single_action_spec: types.ActionSpec,
    agent_settings: config_dict.ConfigDict | Mapping[str, Any],
    batch_axis_name: str | None,
    debug_checks: bool = False,
  ):
    """Builds the agent.

    Args:
      single_observation_spec: spec (tree) of one observation, no batch axis.
      single_action_spec: a scalar int32 `dm_env.specs.BoundedArray`.
      agent_settings: e.g. `get_settings_disco()` (a plain mapping is
        wrapped in a ConfigDict); unknown keys are errors.
      batch_axis_name: the `pmap` axis name the learner runs under, or None.
      debug_checks: also check the values of every rollout `learner_step`
        gets (`check_rollout_values`: actions in range, finite rewards),
        naming the field, time step and batch index of the first bad entry.
        Eager calls raise at once; a jitted call must be functionalised with
        `checkify.checkify(..., errors=checkify.user_checks)`. (The loops
        use `rollout_checks.find_fault` directly, without checkify.)
        Off by default (the checks cost a little).
    """
    settings = utils.as_config(agent_settings, 'agent_settings')
    _check_settings(settings)
    _check_action_spec(single_action_spec)
    self.settings = settings
    self.single_observation_spec = single_observation_spec
    self.single_action_spec = single_action_spec
    self._batch_axis_name = batch_axis_name
    self.debug_checks = debug_checks
    self.num_actions = int(single_action_spec.maximum) + 1

    self.update_rule = build_update_rule(
      settings.update_rule_name, settings.update_rule
    )
    logging.info(
      'Update rule %s: %r', settings.update_rule_name, settings.update_rule
    )

    self._network = nets.with_observation_scales(
      nets.with_precision(
        nets.get_network(
          name=settings.net_settings.name,
          action_spec=single_action_spec,
          out_spec=self.update_rule.flat_output_spec(single_action_spec),
          model_out_spec=self.update_rule.model_output_spec(single_action_spec),
          **_to_plain(settings.net_settings.net_args),
        ),
        settings.net_settings.get('precision', 'float32'),
      ),
      single_observation_spec,
    )
    self._max_abs_update = settings.max_abs_update
    self._optimizer_kind = settings.get('optimizer', 'adam')
    self._jitted_initial_actor_state = jax.jit(self._initial_actor_state)
    self._jitted_initial_learner_state = jax.jit(self._initial_learner_state)
    self._optimizer = optimizers.agent_optimizer(
      learning_rate=settings.learning_rate,
      max_abs_update=settings.max_abs_update,
      kind=self._optimizer_kind,
    )

  @property
  def network(self) -> types.PolicyNetwork:
    """The agent network's pure functions."""
    return self._network

  @property
  def optimizer(self) -> optax.GradientTransformation:
    return self._optimizer

  def _hyper_params(self) -> dict[str, Any]:
    return _to_plain(self.settings.hyper_params)

  def _dummy_inputs(self) -> tuple[chex.ArrayTree, chex.Array]:
    observations = utils.zeros_like_spec(
      self.single_observation_spec, prepend_shape=(1,)
    )
    return observations, jnp.zeros((1,), dtype=bool)

  # --------------------------------------------------------------------------
  # Initial states.

  # Each initial state is made by one compiled program: called op by op
  # (as the upstream's notebooks do), the initialisers of a network and of
  # Disco103's meta-state would compile a few hundred small programs, seconds
  # on a CPU. Inside a trace (jit, pmap, vmap) the call is inlined.

  def initial_actor_state(self, rng: chex.PRNGKey) -> types.HaikuState:
    """The network's recurrent state for a batch of one (empty for an MLP)."""
    return self._jitted_initial_actor_state(rng)

  def _initial_actor_state(self, rng: chex.PRNGKey) -> types.HaikuState:
    _, actor_state = self._network.init(rng, *self._dummy_inputs())
    return actor_state

  def initial_learner_state(self, rng_key: chex.PRNGKey) -> LearnerState:
    """Fresh parameters, optimiser state and update-rule state."""
    return self._jitted_initial_learner_state(rng_key)

  def _initial_learner_state(self, rng_key: chex.PRNGKey) -> LearnerState:
    params_rng, rule_rng = jax.random.split(rng_key)
    params, _ = self._network.init(params_rng, *self._dummy_inputs())
    return LearnerState(
      params=params,
      opt_state=self._optimizer.init(params),
      meta_state=self.update_rule.init_meta_state(rng=rule_rng, params=params),
    )

  # --------------------------------------------------------------------------
  # Acting.

  def actor_step(
    self,
    actor_params: hk.Params,
    rng: chex.PRNGKey,
    timestep: types.EnvironmentTimestep,
    actor_state: types.HaikuState,
  ) -> tuple[types.ActorTimestep, types.HaikuState]:
    """Samples actions [B] for a batch of timesteps.

    Returns:
      The `ActorTimestep` to record (with the state *before* this step) and
      the network state after it.
    """
    check_observations(
      timestep.observation,
      self.single_observation_spec,
      ('B',),
      'timestep.observation',
    )
    should_reset = timestep.step_type == dm_env.StepType.LAST
    agent_outs, next_actor_state = self._network.one_step(
      actor_params, actor_state, timestep.observation, should_reset
    )
    logits = agent_outs['logits']
    recorded = types.ActorTimestep(
      observations=timestep.observation,
      agent_outs=agent_outs,
      states=actor_state,  # The state this step started from.
      logits=logits,
      actions=distrax.Softmax(logits).sample(seed=rng),
      rewards=timestep.reward,
      discounts=jnp.logical_not(should_reset),
    )
    return recorded, next_actor_state

  def unroll_net(
    self,
    agent_net_params: hk.Params,
    agent_net_state: types.HaikuState,
    rollout: types.ActorRollout,
  ) -> tuple[types.AgentOuts, types.HaikuState]:
    """The network's outputs [T, B, ...] along a rollout.

    The recurrent state resets where the actor's did: at timesteps whose
    discount is 0 (their observation already starts the next episode).
    """
    should_reset = jnp.asarray(rollout.discounts) == 0
    return self._network.unroll(
      agent_net_params, agent_net_state, rollout.observations, should_reset
    )

  # --------------------------------------------------------------------------
  # Learning.

  def _update_rule_inputs(
    self, rollout: types.ActorRollout, agent_out: types.AgentOuts
  ) -> types.UpdateRuleInputs:
    """Aligns a [T, B] actor rollout to the rule's [T-1] transitions."""
    return types.UpdateRuleInputs(
      observations=rollout.observations,  # [T, B, ...]
      actions=rollout.actions,  # [T, B]
      rewards=rollout.rewards[1:],  # [T-1, B]
      is_terminal=rollout.discounts[1:] == 0,  # [T-1, B]
      behaviour_agent_out=rollout.agent_outs,  # [T, B, ...]
      agent_out=agent_out,  # [T, B, ...]
      value_out=None,
    )

  def _loss(
    self,
    params: hk.Params,
    rollout: types.ActorRollout,
    meta_out: types.UpdateRuleOuts,
    net_state: types.HaikuState,
    is_meta_training: bool,
  ) -> tuple[chex.Array, tuple[types.HaikuState, types.LogDict]]:
    """The rule's loss, averaged over non-terminal steps.

    Differentiable in `params`; returns (loss, (network state after the
    rollout, logs)).
    """
    agent_out, net_state_after = self.unroll_net(params, net_state, rollout)
    inputs = self._update_rule_inputs(rollout, agent_out)
    hyper_params = self._hyper_params()
    # The rule's two parts: the loss meta-gradients flow through (keeping
    # the path into `meta_out` only when meta-training) and the rest.
    meta_part, meta_part_logs = self.update_rule.agent_loss(
      inputs, meta_out, hyper_params, backprop=is_meta_training
    )
    rest, rest_logs = self.update_rule.agent_loss_no_meta(
      inputs, meta_out, hyper_params
    )
    per_step = meta_part + rest  # [T-1, B]
    live_t = rollout.discounts[:-1] > 0
    total_loss = jnp.sum(per_step * live_t) / (jnp.sum(live_t) + 1e-8)
    logs = {'total_loss': total_loss}
    logs.update(jax.tree.map(jnp.mean, {**rest_logs, **meta_part_logs}))
    return total_loss, (net_state_after, logs)

  def _check_rollout_inputs(self, rollout: types.ActorRollout) -> None:
    """Shapes and dtypes at the call; values too with `debug_checks`."""
    check_observations(
      rollout.observations,
      self.single_observation_spec,
      ('T', 'B'),
      'rollout.observations',
    )
    _check_dtype(rollout.rewards, 'float', 'rollout.rewards')
    _check_dtype(rollout.discounts, 'discount', 'rollout.discounts')
    _check_dtype(rollout.actions, 'int', 'rollout.actions')
    if self.debug_checks:
      check_rollout_values(rollout, self.num_actions)

  def learner_step(
    self,
    rng: chex.PRNGKey,
    rollout: types.ActorRollout,
    learner_state: LearnerState,
    agent_net_state: types.HaikuState,
    update_rule_params: types.MetaParams,
    is_meta_training: bool,
    learning_rate: chex.Numeric | None = None,
  ) -> tuple[LearnerState, types.HaikuState, types.LogDict]:
    """One update of the agent on a rollout.

    Args:
      rng: a random key (given to the update rule).
      rollout: [T, B, ...] trajectories (per device under `pmap`).
      learner_state: current parameters, optimiser and rule state.
      agent_net_state: the network state at the start of the rollout.
      update_rule_params: the rule's meta-parameters (e.g. Disco103).
      is_meta_training: keep the gradient path from the loss to the rule's
        outputs, so the step can be differentiated w.r.t. the meta-params.
      learning_rate: [] the step's learning rate, a traced value (e.g. one
        per run of a batched sweep); None: the settings' `learning_rate`.
        The optimiser's state is the same either way.

    Returns:
      (new learner state, network state after the rollout, logs). Logs hold
      scalars plus `meta_out`, the rule's [T-1, B, ...] outputs.
    """
    check_rollout(rollout)
    self._check_rollout_inputs(rollout)
    agent_out, _ = self.unroll_net(
      learner_state.params, agent_net_state, rollout
    )
    meta_out, new_meta_state = self.update_rule.unroll_meta_net(
      meta_params=update_rule_params,
      params=learner_state.params,
      state=agent_net_state,
      meta_state=learner_state.meta_state,
      rollout=self._update_rule_inputs(rollout, agent_out),
      hyper_params=self._hyper_params(),
      unroll_policy_fn=self._network.unroll,
      rng=rng,
      axis_name=self._batch_axis_name,
    )

    # d loss / d params (the first argument only); learners under `pmap`
    # then share the mean gradient.
    grads, (last_agent_net_state, logs) = jax.grad(self._loss, has_aux=True)(
      learner_state.params, rollout, meta_out, agent_net_state, is_meta_training
    )
    if self._batch_axis_name is not None:
      grads = jax.lax.pmean(grads, self._batch_axis_name)
    optimizer = self._optimizer
    if learning_rate is not None:
      optimizer = optimizers.agent_optimizer(
        learning_rate, self._max_abs_update, self._optimizer_kind
      )
    updates, new_opt_state = optimizer.update(
      grads, learner_state.opt_state, learner_state.params
    )
    new_params = optax.apply_updates(learner_state.params, updates)

    logs['global_gradient_norm'] = optax.tree_utils.tree_norm(grads)
    logs['global_update_norm'] = optax.tree_utils.tree_norm(updates)
    logs['meta_out'] = meta_out
    new_learner_state = LearnerState(
      params=new_params, opt_state=new_opt_state, meta_state=new_meta_state
    )
    return new_learner_state, last_agent_net_state, logs


# ----------------------------------------------------------------------------
# Settings.

# Shared by the Disco103 and actor-critic agents: the discount, and the
# categorical value head's support (601 two-hot bins on [-300, 300]).
_DISCOUNT = 0.997
_VALUE_BINS = dict(num_bins=601, max_abs_value=300.0)


def _agent_net(hiddens: tuple[int, ...], model_size: int) -> dict[str, Any]:
  """Network arguments: an MLP torso of hidden sizes `hiddens` and an LSTM
  action model (LSTM and one-layer heads of `model_size` units)."""
  return dict(
    dense=hiddens,
    model_arch_name='lstm',
    head_w_init_std=1e-2,
    model_kwargs=dict(head_mlp_hiddens=(model_size,), lstm_size=model_size),
  )


def _agent_settings(
  rule_name: str,
  hyper_params: dict[str, Any],
  rule: Any,
  learning_rate: float,
  net_args: dict[str, Any],
) -> config_dict.ConfigDict:
  return config_dict.ConfigDict(
    dict(
      update_rule_name=rule_name,
      hyper_params=hyper_params,
      update_rule=rule,
      learning_rate=learning_rate,
      max_abs_update=1.0,
      net_settings=dict(name='mlp', net_args=net_args),
    )
  )


def get_settings_disco(
  rule_sizes: disco.MetaNetSizes | Mapping[str, Any] | None = None,
  policy_target: str = 'absolute',
) -> config_dict.ConfigDict:
  """Settings of an agent trained by Disco103 (the paper's configuration).

  Args:
    rule_sizes: the meta-network's sizes (`disco.MetaNetSizes`, or a
      mapping of some of its fields); None: Disco103's. Other sizes make a
      rule of Disco103's architecture that Disco103's weights do not fit
      (e.g. one to meta-train at LPG's size).
    policy_target: how the meta-network's policy output becomes the
      target (`disco.POLICY_TARGETS`; Disco103: 'absolute').
  """
  meta_net = dict(
    name='lstm',
    **disco.as_sizes(rule_sizes).net_kwargs(),
    # Initialisation scales of the meta-network's output layers.
    output_stddev=0.3,
    aux_stddev=0.3,
    policy_target_stddev=0.3,
    state_stddev=1.0,
    input_option=disco.get_input_option(),
  )
  # Settings past the upstream's only where they differ from its behaviour,
  # so that Disco103's settings are the upstream's, key for key.
  rule_extra: dict[str, Any] = {}
  if policy_target != 'absolute':
    rule_extra['policy_target'] = policy_target
  if policy_target in disco.ACTION_TARGETS:
    meta_net['action_head'] = True
  # Unit weights for the policy, y, z and auxiliary-policy losses.
  loss_weights = dict.fromkeys(
    ('pi_cost', 'y_cost', 'z_cost', 'aux_policy_cost'), 1.0
  )
  return _agent_settings(
    'disco',
    hyper_params=dict(
      loss_weights,
      value_cost=0.2,
      target_params_coeff=0.9,
      value_fn_td_lambda=0.95,
      discount_factor=_DISCOUNT,
    ),
    rule=dict(
      net=config_dict.ConfigDict(meta_net),
      value_discount=_DISCOUNT,
      **_VALUE_BINS,
      **rule_extra,
    ),
    learning_rate=3e-4,
    net_args=_agent_net((512, 512), 128),
  )


def get_settings_actor_critic() -> config_dict.ConfigDict:
  """Settings of the V-trace actor-critic baseline agent."""
  # A categorical value head in signed-hyperbolic space; raw advantages and
  # TD errors (no moving-average normalisation).
  rule = dict(
    categorical_value=True,
    nonlinear_value_transform=True,
    normalize_adv=False,
    normalize_td=False,
    **_VALUE_BINS,
  )
  return _agent_settings(
    'actor_critic',
    hyper_params=dict(
      pg_cost=1.0,
      entropy_cost=0.2,
      value_cost=0.5,
      discount_factor=_DISCOUNT,
      vtrace_lambda=0.95,
    ),
    rule=config_dict.ConfigDict(rule),
    learning_rate=5e-4,
    net_args=_agent_net((64, 32, 32), 64),
  )


def get_settings_ppo() -> config_dict.ConfigDict:
  """Settings of the PPO-clip baseline agent (`update_rules.ppo`).

  Hyper-parameters: purejaxrl's PPO (`ppo.DEFAULT_HYPER_PARAMS`); learning
  rate: gymnax-blines' MinAtar PPO (5e-4; a job's `learning_rate` replaces
  it, `make_settings`); the network: the actor-critic's.
  """
  return _agent_settings(
    'ppo',
    hyper_params=dict(ppo.DEFAULT_HYPER_PARAMS),
    rule=config_dict.ConfigDict(dict(normalize_adv=True)),
    learning_rate=5e-4,
    net_args=_agent_net((64, 32, 32), 64),
  )


# The rules a job names, and the settings function of each.
RULES: dict[str, Callable[..., config_dict.ConfigDict]] = {
  'disco_103': get_settings_disco,
  'actor_critic': get_settings_actor_critic,
  'ppo': get_settings_ppo,
}
# The constructor settings each network's torso takes, by network name.
TORSO_FIELDS = {
  'mlp': (),
  'conv': ('conv_channels', 'conv_kernel'),
  'resnet': ('resnet_channels', 'resnet_blocks'),
  'tabular': (),
  'table': (),
}
# The rules whose meta-network's sizes a job may choose (`rule_sizes`), and
# the names of those sizes (`disco.MetaNetSizes`' fields).
SIZED_RULES = ('disco_103',)
RULE_SIZE_FIELDS = disco.SIZE_FIELDS


def check_rule_sizes(
  sizes: Mapping[str, Any], what: str = 'rule_sizes'
) -> None:
  """Raises ValueError, naming `what`, unless `sizes` are meta-network
  sizes (`disco.MetaNetSizes` fields and valid values)."""
  try:
    disco.as_sizes(sizes)
  except (TypeError, ValueError) as e:
    raise ValueError(f'{what}: {e}') from None


def make_settings(
  rule: str,
  learning_rate: float,
  dense: Sequence[int],
  model_lstm_size: int,
  model_head_hiddens: Sequence[int],
  precision: str = 'float32',
  net: str = 'mlp',
  rule_sizes: disco.MetaNetSizes | Mapping[str, Any] | None = None,
  policy_target: str = 'absolute',
  optimizer: str = 'adam',
  **torso: Any,
) -> config_dict.ConfigDict:
  """The settings of a job's agent: the rule's, with the job's network.

  The one place where a job's fields become an agent (the eval job's and
  every meta-training task's).

  Args:
    rule: 'disco_103' (the Disco agent), 'actor_critic' or 'ppo'.
    learning_rate: the agent's learning rate.
    dense: hidden sizes of the MLP torso (unused by 'tabular', 'table').
    model_lstm_size: size of the action model's LSTM.
    model_head_hiddens: hidden sizes of the action model's heads.
    precision: compute dtype of the network (`nets.with_precision`).
    net: 'mlp', 'conv' (`nets.ConvNet`), 'resnet' (`nets.ResNet`),
      'tabular' (`nets.Tabular`: linear heads on the observation itself)
      or 'table' (`nets.Table`: 'tabular' read as tables of one-hot
      states).
    rule_sizes: for rule 'disco_103', the meta-network's sizes
      (`disco.MetaNetSizes` or a mapping of some of `RULE_SIZE_FIELDS`);
      None or empty: Disco103's.
    policy_target: for rule 'disco_103', how the meta-network's policy
      output becomes the target (`disco.POLICY_TARGETS`).
    optimizer: the agent's optimiser (`optimizers.AGENT_OPTIMIZERS`;
      'adam', the upstream's, leaves the settings as the rule gives them).
    **torso: the network's own settings, `TORSO_FIELDS[net]`; missing ones
      take the network's defaults.

  Raises:
    ValueError: an unknown rule or net, settings `net` does not take, or
      sizes for a rule without a meta-network.
  """
  if rule not in RULES:
    raise ValueError(f'Unknown rule {rule!r}; expected one of {tuple(RULES)}.')
  if rule_sizes and rule not in SIZED_RULES:
    raise ValueError(
      f'rule_sizes are the sizes of a meta-network: rule '
      f'{rule!r} has none (rules with one: {SIZED_RULES}).'
    )
  if policy_target != 'absolute' and rule not in SIZED_RULES:
    raise ValueError(
      f'policy_target={policy_target!r} is a setting of a meta-network: '
      f'rule {rule!r} has none (rules with one: {SIZED_RULES}).'
    )
  if net not in TORSO_FIELDS:
    raise ValueError(
      f'Unknown net {net!r}; expected one of {tuple(TORSO_FIELDS)}.'
    )
  extra = sorted(set(torso) - set(TORSO_FIELDS[net]))
  if extra:
    raise ValueError(
      f'net={net!r} takes the torso settings '
      f'{list(TORSO_FIELDS[net])}, got also {extra}.'
    )
  settings = (
    RULES[rule](rule_sizes, policy_target)
    if rule in SIZED_RULES
    else RULES[rule]()
  )
  settings.net_settings.name = net
  settings.net_settings.net_args = dict(
    dense=tuple(dense),
    model_arch_name='lstm',
    head_w_init_std=1e-2,
    model_kwargs=dict(
      head_mlp_hiddens=tuple(model_head_hiddens), lstm_size=model_lstm_size
    ),
    **{
      k: tuple(v) if isinstance(v, (list, tuple)) else v
      for k, v in torso.items()
    },
  )
  if precision != 'float32':
    settings.net_settings.precision = precision
  settings.learning_rate = learning_rate
  if optimizer not in optimizers.AGENT_OPTIMIZERS:
    raise ValueError(
      f'optimizer must be one of {optimizers.AGENT_OPTIMIZERS}, got '
      f'{optimizer!r}.'
    )
  if optimizer != 'adam':
    settings.optimizer = optimizer
  return settings


def with_warm_start(
  settings: config_dict.ConfigDict,
  warm: config_dict.ConfigDict | None,
  steps: int,
  predictions: bool = False,
) -> config_dict.ConfigDict:
  """`settings`' agent trained first by `warm`'s rule (`update_rules.
  warm_start`): its first `steps` updates by `warm`'s loss, then by its own.

  Args:
    settings: the agent's settings (e.g. `make_settings('disco_103', ...)`):
      its network, optimiser and learning rate are the run's.
    warm: the settings whose rule and hyper-parameters train the first
      updates (e.g. `get_settings_actor_critic()`; only its
      `update_rule_name`, `update_rule` and `hyper_params` are read), or
      None: with `predictions`, only `settings`' rule's terms other than
      the policy's.
    steps: updates of the warm start (>= 1).
    predictions: during the warm start, also `settings`' rule's terms other
      than the policy's (Disco's y, z and auxiliary-policy KLs).

  Raises:
    ValueError: a rule with meta-parameters as `warm`, or `warm=None`
      without `predictions`.
  """
  if warm is not None and warm.update_rule_name in ('disco', WARM_START):
    raise ValueError(
      f'with_warm_start: the warm rule must be a hand-written one (it is '
      f'given no meta-parameters), got {warm.update_rule_name!r}.'
    )
  held = lambda s: dict(name=s.update_rule_name, settings=s.update_rule)
  wrapped = config_dict.ConfigDict(settings.to_dict())
  wrapped.update_rule_name = WARM_START
  wrapped.update_rule = config_dict.ConfigDict(
    dict(
      main=held(settings),
      warm=None if warm is None else held(warm),
      steps=steps,
      predictions=predictions,
    )
  )
  wrapped.hyper_params = config_dict.ConfigDict(
    dict(
      main=settings.hyper_params.to_dict(),
      warm={} if warm is None else warm.hyper_params.to_dict(),
    )
  )
  return wrapped
