# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The update-rule interface.

An update rule turns a trajectory and the agent's outputs on it into a
per-step loss for the agent. It declares which outputs the agent network must
produce (`agent_output_spec`), may own meta-parameters (`init_params`) and a
per-agent state (`init_meta_state`), and splits its loss into the part that
meta-gradients flow through (`agent_loss`) and the part they must not
(`agent_loss_no_meta`).
"""

from collections.abc import Mapping

import chex
from dm_env import specs as dm_env_specs
import jax
import jax.numpy as jnp

from disco_rl import types
from disco_rl import utils


def get_agent_out_spec(
  action_spec: types.ActionSpec,
  flat_out_spec: types.Specs,
  model_out_spec: types.Specs,
) -> types.Specs:
  """Merges per-state and per-action output specs into one.

  A per-action entry of shape S becomes (A, *S). For example, with A actions,
  flat {'logits': (A,), 'y': (Y,)} and model {'z': (Z,)} give
  {'logits': (A,), 'y': (Y,), 'z': (A, Z)}.

  Args:
    action_spec: the scalar discrete action spec.
    flat_out_spec: specs of outputs that do not depend on the action.
    model_out_spec: specs of the action-conditional outputs, per action.

  Returns:
    The agent's full output specs.
  """
  shared = set(flat_out_spec) & set(model_out_spec)
  if shared:
    raise ValueError(
      f'Output names {sorted(shared)} appear in both flat_out_spec '
      f'({flat_out_spec}) and model_out_spec ({model_out_spec}).'
    )
  num_actions = utils.get_num_actions_from_spec(action_spec)
  merged = dict(flat_out_spec)
  for key, spec in model_out_spec.items():
    per_action_shape = (num_actions, *spec.shape)
    merged[key] = types.ArraySpec(per_action_shape, spec.dtype)
  return merged


def check_update_rule_inputs(
  rollout: types.UpdateRuleInputs,
  required_outputs: tuple[str, ...] = (),
  rule_name: str = 'update rule',
) -> tuple[int, int]:
  """Checks the shapes of an update rule's trajectory; returns (T, B).

  Rewards and `is_terminal` must be [T, B]; actions and every agent output
  [T+1, B, ...]; `required_outputs` must all be present in `agent_out`.
  Raises ValueError naming the offending field and the shapes involved.
  """
  rewards = rollout.rewards
  if jnp.ndim(rewards) != 2:
    raise ValueError(
      f'{rule_name}: rollout.rewards must be [T, B], got shape '
      f'{jnp.shape(rewards)}.'
    )
  t, b = jnp.shape(rewards)
  if jnp.shape(rollout.is_terminal) != (t, b):
    raise ValueError(
      f'{rule_name}: rollout.is_terminal must have the shape of rewards '
      f'[T, B]={(t, b)}, got {jnp.shape(rollout.is_terminal)}.'
    )
  agent_out = rollout.agent_out
  if not isinstance(agent_out, Mapping):
    raise ValueError(
      f'{rule_name}: rollout.agent_out must be a dict of '
      f'arrays, got {type(agent_out).__name__}.'
    )
  missing = [k for k in required_outputs if k not in agent_out]
  if missing:
    raise ValueError(
      f'{rule_name}: agent outputs {missing} are missing; the agent network '
      f'must produce {list(required_outputs)}, got {sorted(agent_out)}.'
    )
  prefix = (t + 1, b)
  named = [('actions', rollout.actions)] + [
    (f"agent_out['{k}']", v) for k, v in agent_out.items()
  ]
  for name, value in named:
    for leaf in jax.tree.leaves(value):
      if tuple(jnp.shape(leaf)[:2]) != prefix:
        raise ValueError(
          f'{rule_name}: rollout.{name} must have leading axes [T+1, B]='
          f'{prefix} (rewards are [T, B]={(t, b)}), got shape '
          f'{jnp.shape(leaf)}.'
        )
  return t, b


def _ones_value_outs(t: int, b: int, num_actions: int) -> types.ValueOuts:
  """ValueOuts of ones with the shapes a single-discount value fn gives."""
  per_step = jnp.ones((t, b, 1))
  per_state = jnp.ones((t + 1, b, 1))
  per_action = jnp.ones((t, b, num_actions, 1))
  per_action_state = jnp.ones((t + 1, b, num_actions, 1))
  return types.ValueOuts(
    value=per_state,
    target_value=per_state,
    rho=jnp.ones((t, b)),
    adv=per_step,
    normalized_adv=per_step,
    td=per_step,
    normalized_td=per_step,
    value_target=per_step,
    qv_adv=per_action_state,
    normalized_qv_adv=per_action_state,
    q_target=per_action,
    q_value=per_action,
    target_q_value=per_action,
    q_td=per_action,
    normalized_q_td=per_action,
  )


class UpdateRule:
  """Base class of update rules.

  A rule names the agent outputs it reads (`flat_output_spec`,
  `model_output_spec`), builds its meta-parameters and per-agent state, and
  computes the loss in two steps: `unroll_meta_net` on the trajectory, then
  `agent_loss` and `agent_loss_no_meta` on what it returned (see the module
  docstring); `__call__` runs all three.
  """

  def init_params(
    self, rng: chex.PRNGKey
  ) -> tuple[types.MetaParams, chex.ArrayTree]:
    """Returns (meta-parameters, initial meta-network state)."""
    raise NotImplementedError

  def flat_output_spec(self, action_spec: types.ActionSpec) -> types.Specs:
    """Specs of the agent outputs that do not depend on the action."""
    del action_spec
    return {}

  def model_output_spec(self, action_spec: types.ActionSpec) -> types.Specs:
    """Specs of the action-conditional agent outputs (per action)."""
    del action_spec
    return {}

  def agent_output_spec(self, action_spec: types.ActionSpec) -> types.Specs:
    """Specs of every agent output, per-action ones with an [A] axis first."""
    per_state = self.flat_output_spec(action_spec)
    per_action = self.model_output_spec(action_spec)
    return get_agent_out_spec(action_spec, per_state, per_action)

  def required_agent_outputs(self) -> tuple[str, ...]:
    """Names of the agent outputs this rule reads."""
    spec = dm_env_specs.BoundedArray((), int, 0, 1)
    return tuple(self.agent_output_spec(spec))

  def _get_dummy_input(
    self,
    *,
    include_behaviour_out: bool = True,
    include_agent_adv: bool = False,
    include_value_out: bool = False,
  ) -> types.UpdateRuleInputs:
    """A tiny all-zeros trajectory (T=2, B=1, A=4) for initialising networks.

    Args:
      include_behaviour_out: with `behaviour_agent_out` (the agent's outputs).
      include_agent_adv: with the value quantities a meta-network reads in
        `extra_from_rule` (zeros), besides `target_out`.
      include_value_out: with a `value_out` of ones.
    """
    t, b = 2, 1
    action_spec = dm_env_specs.BoundedArray(
      shape=(3,), dtype=int, minimum=0, maximum=3
    )
    num_actions = utils.get_num_actions_from_spec(action_spec)
    agent_out = jax.tree.map(
      lambda spec: jnp.zeros((t + 1, b) + tuple(spec.shape)),
      self.agent_output_spec(action_spec),
    )

    dummy = types.UpdateRuleInputs(
      observations=jnp.zeros((t + 1, b)),
      actions=jnp.zeros((t + 1, b), jnp.int32),
      rewards=jnp.zeros((t, b)),
      is_terminal=jnp.ones((t, b), jnp.bool_),
      agent_out=agent_out,
    )
    if include_behaviour_out:
      dummy.behaviour_agent_out = dict(agent_out)

    extra = dict(target_out=agent_out)
    if include_agent_adv:
      per_step = jnp.zeros((t, b, 1))
      per_action_state = jnp.zeros((t + 1, b, num_actions, 1))
      extra = dict(
        adv=per_step,
        normalized_adv=per_step,
        v_scalar=jnp.zeros((t + 1, b, 1)),
        q=per_action_state,
        qv_adv=per_action_state,
        normalized_qv_adv=per_action_state,
        target_out=agent_out,
      )
    dummy.extra_from_rule = extra
    if include_value_out:
      dummy.value_out = _ones_value_outs(t, b, num_actions)
    return dummy

  def init_meta_state(
    self, rng: chex.PRNGKey, params: types.AgentParams
  ) -> types.MetaState:
    """The rule's per-agent state for an agent with parameters `params`."""
    raise NotImplementedError

  # The two steps' arguments are typed here, once for every rule (the
  # rules' own signatures are untyped), in the learner's argument order.
  def unroll_meta_net(
    self, meta_params: types.MetaParams,
    params: types.AgentParams, state: types.HaikuState,
    meta_state: types.MetaState,
    rollout: types.UpdateRuleInputs, hyper_params: types.HyperParams,
    unroll_policy_fn: types.AgentUnrollFn,
    rng: chex.PRNGKey, axis_name: str | None,
  ) -> tuple[types.UpdateRuleOuts, types.MetaState]:  # fmt: skip
    """Computes what the loss needs (targets, advantages...) on a rollout.

    Args:
      meta_params: the rule's meta-parameters.
      params: the agent's current parameters.
      state: the agent network's state at the start of the rollout.
      meta_state: the rule's per-agent state.
      rollout: the trajectory; rewards [T, B], agent outputs [T+1, B, ...].
      hyper_params: the rule's scalar hyper-parameters.
      unroll_policy_fn: the agent network's unroll function.
      rng: a random key.
      axis_name: the `pmap` axis name for cross-device statistics, or None.

    Returns:
      (outputs [T, B, ...], updated meta state).
    """
    raise NotImplementedError

  def agent_loss(
    self, rollout: types.UpdateRuleInputs, meta_out: types.UpdateRuleOuts,
    hyper_params: types.HyperParams, backprop: bool,
  ) -> tuple[chex.Array, types.UpdateRuleLog]:  # fmt: skip
    """The per-step [T, B] loss meta-gradients flow through, and logs.

    Args:
      rollout: the trajectory with the agent's (differentiable) outputs.
      meta_out: what `unroll_meta_net` returned.
      hyper_params: the rule's scalar hyper-parameters.
      backprop: keep the gradient path into `meta_out` (meta-training).
    """
    raise NotImplementedError

  def agent_loss_no_meta(
    self, rollout: types.UpdateRuleInputs,
    meta_out: types.UpdateRuleOuts | None, hyper_params: types.HyperParams,
  ) -> tuple[chex.Array, types.UpdateRuleLog]:  # fmt: skip
    """The per-step [T, B] loss that receives no meta-gradient, and logs.

    By default there is none: zeros [T, B] and no logs.
    """
    del meta_out, hyper_params
    zero_t = jnp.zeros_like(rollout.rewards)  # [T, B]
    return zero_t, {}

  def __call__(
    self, meta_params, params, state, rollout, hyper_params, meta_state,
    unroll_policy_fn, rng, axis_name, backprop: bool = False,
  ) -> tuple[chex.Array, types.MetaState, types.UpdateRuleLog]:  # fmt: skip
    """The whole loss in one call: (per-step loss [T, B], meta state, logs).

    The arguments are `unroll_meta_net`'s, typed there, with `rollout` and
    `hyper_params` before `meta_state`; `backprop` is `agent_loss`'s.
    """
    meta_out, new_meta_state = self.unroll_meta_net(
      meta_params, params, state, meta_state, rollout, hyper_params,
      unroll_policy_fn, rng, axis_name,
    )  # fmt: skip
    with_meta, log = self.agent_loss(
      rollout, meta_out, hyper_params, backprop=backprop
    )
    without_meta, log_no_meta = self.agent_loss_no_meta(
      rollout, meta_out, hyper_params
    )
    return with_meta + without_meta, new_meta_state, {**log, **log_no_meta}
