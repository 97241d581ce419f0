# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The meta-training objective: one agent's meta-loss and meta-gradient.

For each agent: act for `num_inner_steps` rollouts and one 2x longer
validation rollout; update the agent (and a value function) on the training
rollouts with the current rule, keeping the computation differentiable
(`is_meta_training=True`); the meta-loss is a policy-gradient loss of the
updated agent on the validation rollout (advantages from the value function)
plus regularisers of the rule's outputs. Its gradient w.r.t. the rule's
parameters, averaged over agents and devices, drives a meta-optimiser
(the meta-training job: `disco_rl.jobs.meta.job`).
"""

from collections.abc import Mapping
import dataclasses
from typing import Any

import chex
import distrax
import jax
import jax.numpy as jnp
from ml_collections import config_dict

from disco_rl import actors
from disco_rl import agent as agent_lib
from disco_rl import types
from disco_rl import utils
from disco_rl import weights
from disco_rl.environments import base as base_env
from disco_rl.environments import jittable_envs
from disco_rl.value_fns import value_fn as value_fn_lib


@chex.dataclass
class MetaTrainState:
  """Everything one agent of the population carries between meta-steps."""

  learner_state: agent_lib.LearnerState
  actor_state: types.HaikuState
  value_state: types.ValueState
  env_state: Any
  env_timestep: types.EnvironmentTimestep


@dataclasses.dataclass(frozen=True)
class MetaLossWeights:
  """Weights of the meta-objective's regularisers (upstream's values)."""

  entropy: float = 1e-2  # Entropy of the validation policy (bonus).
  prediction_entropy: float = 1e-3  # Entropy of the y and z predictions.
  target_mean: float = 1e-3  # Squared batch means of the pi/y/z targets.
  target_kl: float = 1e-2  # KL(target network policy || pi target).
  # Not the upstream's: LPG's L2 on its actor target, here the mean square
  # of the per-step scalar of policy target 'action' ('pi_action').
  action_l2: float = 0.0


def catch_env(
  batch_size: int, rows: int = 5, columns: int = 5
) -> jittable_envs.CatchJittableEnvironment:
  """The jittable Catch used for meta-training (5x5 by default)."""
  settings = jittable_envs.get_config_catch()
  settings.rows, settings.columns = rows, columns
  return jittable_envs.CatchJittableEnvironment(
    batch_size=batch_size, env_settings=settings
  )


def default_value_fn_config() -> types.ValueFnConfig:
  """The meta-training value function of the upstream notebook."""
  return types.ValueFnConfig(
    net='mlp',
    net_args=dict(dense=(256, 256), head_w_init_std=1e-2, action_spec=()),
    learning_rate=1e-3,
    max_abs_update=1.0,
    discount_factor=0.99,
    td_lambda=0.96,
    outer_value_cost=1.0,
  )


class MetaTrainAgent:
  """One member of the population: an agent, its value function and env.

  Attributes:
    agent: the `agent.Agent` trained by the rule.
    value_fn: the `ValueFunction` giving the meta-objective's advantages.
    env: its jittable environment (per-device batch).
  """

  def __init__(
    self,
    batch_size_per_device: int,
    agent_settings: config_dict.ConfigDict | Mapping[str, Any],
    value_fn_config: types.ValueFnConfig,
    axis_name: str | None = None,
    env: base_env.Environment | None = None,
  ):
    if batch_size_per_device < 1:
      raise ValueError(
        f'batch_size_per_device must be >= 1, got {batch_size_per_device}.'
      )
    self.batch_size_per_device = batch_size_per_device
    self.env = env if env is not None else catch_env(batch_size_per_device)
    if self.env.batch_size != batch_size_per_device:
      raise ValueError(
        f'env.batch_size={self.env.batch_size} differs from '
        f'batch_size_per_device={batch_size_per_device}.'
      )
    self.agent = agent_lib.Agent(
      agent_settings=agent_settings,
      single_observation_spec=self.env.single_observation_spec(),
      single_action_spec=self.env.single_action_spec(),
      batch_axis_name=axis_name,
    )
    self.value_fn = value_fn_lib.ValueFunction(
      value_fn_config, axis_name=axis_name
    )

  # The agent's own methods, also reachable on the member.
  learner_step = property(lambda self: self.agent.learner_step)
  actor_step = property(lambda self: self.agent.actor_step)
  unroll_net = property(lambda self: self.agent.unroll_net)

  def init_state(self, rng_key: chex.PRNGKey) -> MetaTrainState:
    """A fresh agent: parameters, value function and a reset environment."""
    env_state, env_timestep = self.env.reset(rng_key)
    return MetaTrainState(
      **self.fresh_agent(rng_key),
      env_state=env_state,
      env_timestep=env_timestep,
    )

  def fresh_agent(self, rng_key: chex.PRNGKey) -> dict[str, Any]:
    """A new agent's learner, actor and value states (no environment)."""
    learner_rng, actor_rng, value_rng = jax.random.split(rng_key, 3)
    dummy_obs = utils.zeros_like_spec(
      self.env.single_observation_spec(),
      prepend_shape=(self.batch_size_per_device,),
    )
    return dict(
      learner_state=self.agent.initial_learner_state(learner_rng),
      actor_state=self.agent.initial_actor_state(actor_rng),
      value_state=self.value_fn.initial_state(value_rng, dummy_obs),
    )

  def unroll_actor(
    self, state: MetaTrainState, rng: chex.PRNGKey, rollout_len: int
  ) -> tuple[MetaTrainState, types.ActorRollout]:
    """Acts `rollout_len` steps with the current parameters."""
    rollout, actor_state, timestep, env_state = actors.unroll_jittable_actor(
      state.learner_state.params,
      state.actor_state,
      state.env_timestep,
      state.env_state,
      rng,
      self.env,
      rollout_len,
      self.actor_step,
    )
    return dataclasses.replace(
      state, actor_state=actor_state, env_state=env_state, env_timestep=timestep
    ), rollout


def _act_on(agent: agent_lib.Agent, params, rng, rollout: types.ActorRollout):
  """The agent's outputs [T, B, ...] on the observations of a rollout."""
  timestep = rollout.to_env_timestep()
  t, b = rollout.rewards.shape[:2]
  flat = jax.tree.map(lambda x: x.reshape((t * b,) + x.shape[2:]), timestep)
  recorded, _ = agent.actor_step(
    params, rng, flat, rollout.first_state(time_axis=0)
  )
  return jax.tree.map(lambda x: x.reshape((t, b) + x.shape[1:]), recorded)


def meta_loss(
  update_rule_params: types.MetaParams,
  agent_state: MetaTrainState,
  train_rollouts: types.ActorRollout,
  valid_rollout: types.ActorRollout,
  rng: chex.PRNGKey,
  agent: MetaTrainAgent,
  weights: MetaLossWeights = MetaLossWeights(),
  remat: bool = False,
  unroll: int | bool = 1,
) -> tuple[chex.Array, tuple[MetaTrainState, types.LogDict, types.LogDict]]:
  """The meta-objective of one agent, differentiable w.r.t. the rule.

  Args:
    update_rule_params: the rule's meta-parameters.
    agent_state: the agent before its inner updates.
    train_rollouts: [N, T, B, ...] rollouts, one per inner update.
    valid_rollout: a [2T, B, ...] rollout for the meta-objective.
    rng: a random key.
    agent: the population member.
    weights: regulariser weights.
    remat: recompute each inner update in the backward pass
      (`jax.checkpoint`) instead of keeping its activations: the memory of a
      long window of updates stays that of a few, for about a third more
      compute.
    unroll: inner updates per iteration of the compiled loop over them
      (`lax.scan`'s `unroll`; True: no loop, the updates one after another
      in straight-line code). Unrolled, the activations the meta-gradient
      needs are not stacked into and read back from per-update buffers,
      and XLA optimises across the updates: faster (1.7x for the upstream
      notebook's 2 updates on a CPU). With True the program is also traced
      and differentiated without a loop, in half the time or less (the
      upstream notebook's meta-step: 6.2-6.4 s -> 3.2-3.4 s on a CPU; a
      scan linearises its body through a fixed point). The result is the
      same up to rounding.

  Returns:
    (meta-loss, (agent state after the inner updates, inner-step metrics
    [N] per key, meta logs)).
  """
  num_inner = train_rollouts.rewards.shape[0]
  train_rng, valid_rng = jax.random.split(rng)

  def inner_step(carry, xs):
    learner_state, actor_state, value_state = carry
    rollout, step_rng = xs
    new_learner_state, new_actor_state, metrics = agent.learner_step(
      rng=step_rng,
      rollout=rollout,
      learner_state=learner_state,
      agent_net_state=actor_state,
      update_rule_params=update_rule_params,
      is_meta_training=True,
    )
    # The value function follows the policy the rollout was scored with.
    agent_out, _ = agent.unroll_net(learner_state.params, actor_state, rollout)
    new_value_state, _, _ = agent.value_fn.update(
      value_state, rollout, agent_out['logits']
    )
    return (new_learner_state, new_actor_state, new_value_state), metrics

  if remat:
    inner_step = jax.checkpoint(inner_step)
  carry = (
    agent_state.learner_state,
    agent_state.actor_state,
    agent_state.value_state,
  )
  xs = (train_rollouts, jax.random.split(train_rng, num_inner))
  if unroll is True:  # Straight-line code, traced and differentiated so.
    per_step = []
    for i in range(num_inner):
      carry, out = inner_step(carry, jax.tree.map(lambda x, i=i: x[i], xs))
      per_step.append(out)
    metrics = jax.tree.map(lambda *x: jnp.stack(x), *per_step)
  else:
    carry, metrics = jax.lax.scan(inner_step, carry, xs, unroll=unroll)
  learner_state, actor_state, value_state = carry
  train_meta_out = metrics.pop('meta_out')

  # Policy gradient of the updated agent on the validation rollout.
  on_valid = _act_on(
    agent.agent, learner_state.params, valid_rng, valid_rollout
  )
  value_out, _, _, _ = agent.value_fn.get_value_outs(
    value_state, valid_rollout, on_valid['logits']
  )
  a_t = valid_rollout.actions[:-1]
  logits_t = on_valid['logits'][:-1]
  pg_loss = utils.differentiable_policy_gradient_loss(
    logits_t,
    a_t,
    adv_t=jax.lax.stop_gradient(value_out.normalized_adv),
    backprop=False,
  )

  # Regularisers of the validation agent.
  entropy_t = distrax.Softmax(logits_t).entropy()
  outs = on_valid['agent_outs']
  z_a_t = utils.batch_lookup(outs['z'][:-1], a_t)
  prediction_entropy = jnp.mean(
    distrax.Softmax(outs['y']).entropy()
  ) + jnp.mean(distrax.Softmax(z_a_t).entropy())
  reg_loss = (
    -weights.entropy * jnp.mean(entropy_t)
    - weights.prediction_entropy * prediction_entropy
  )

  # Regularisers of the rule's targets on the training rollouts [N, T, B, .].
  pi_hat, y_hat, z_hat = (
    train_meta_out['pi'],
    train_meta_out['y'],
    train_meta_out['z'],
  )
  chex.assert_equal_shape_prefix([pi_hat, y_hat, z_hat], 3)
  for target in (y_hat, z_hat, pi_hat):
    reg_loss += weights.target_mean * jnp.mean(
      jnp.square(jnp.mean(target, axis=(1, 2, 3)))
    )
  target_logits = train_meta_out['target_out']['logits'][:, :-1]
  chex.assert_equal_shape([target_logits, pi_hat])
  reg_loss += weights.target_kl * jnp.mean(
    distrax.Softmax(jax.lax.stop_gradient(target_logits)).kl_divergence(
      distrax.Softmax(pi_hat)
    )
  )

  # LPG's L2 on the actor target, logged with policy target 'action'.
  extra_log = {}
  if weights.action_l2 or 'pi_action' in train_meta_out:
    extra_log['action_l2'] = action_l2(train_meta_out)
    reg_loss += weights.action_l2 * extra_log['action_l2']

  loss = jnp.mean(pg_loss) + reg_loss
  meta_log = dict(
    **extra_log,
    adv=jnp.mean(value_out.adv),
    normalized_adv=jnp.mean(value_out.normalized_adv),
    entropy=jnp.mean(entropy_t),
    value=jnp.mean(value_out.value),
    val_importance_weight=jnp.mean(jnp.minimum(value_out.rho, 1.0)),
    meta_loss=loss,
    pg_loss=jnp.mean(pg_loss),
    reg_loss=reg_loss,
  )
  new_state = dataclasses.replace(
    agent_state,
    learner_state=learner_state,
    actor_state=actor_state,
    value_state=value_state,
  )
  return loss, (new_state, metrics, meta_log)


def action_l2(meta_out: types.UpdateRuleOuts) -> chex.Array:
  """The mean square of the per-step scalars [..., T, B] that policy
  target 'action' adds to the action taken's logit (LPG's L2 penalty on
  its actor target pi_hat).

  Raises:
    ValueError: `meta_out` has no 'pi_action' (the rule's policy target is
      not 'action').
  """
  if 'pi_action' not in meta_out:
    raise ValueError(
      "action_l2 penalises the scalar of policy target 'action' "
      "('pi_action'); the rule's outputs have none, got keys "
      f'{sorted(meta_out)}.'
    )
  return jnp.mean(jnp.square(meta_out['pi_action']))


# The parts of the meta-loss `calculate_meta_gradient(parts=True)`
# differentiates apart: the updated agent's policy-gradient loss and the
# regularisers.
PARTS = ('pg', 'reg')


def calculate_meta_gradient(
  update_rule_params: types.MetaParams,
  agent_state: MetaTrainState,
  train_rollouts: types.ActorRollout,
  valid_rollout: types.ActorRollout,
  rng: chex.PRNGKey,
  agent: MetaTrainAgent,
  axis_name: str | None = None,
  weights: MetaLossWeights = MetaLossWeights(),
  remat: bool = False,
  unroll: int | bool = 1,
  parts: bool = False,
) -> tuple[
  types.MetaParams, tuple[MetaTrainState, types.LogDict, types.LogDict]
]:
  """Gradient of `meta_loss` w.r.t. the rule, averaged over `axis_name`.

  `remat` and `unroll` are `meta_loss`'s. With `parts`, the gradient split
  by the parts of the meta-loss (`PARTS`), stacked [2, ...]: one forward
  pass and one (vmapped) backward pass per part; their sum is the gradient
  up to rounding.

  Returns:
    (meta-gradient, (new agent state, inner metrics, meta logs)); the
    gradient, metrics and logs are averaged over `axis_name` (the mesh axis
    of a `shard_map`, or a `pmap` axis).
  """

  def losses(params):
    loss, (new_state, metrics, meta_log) = meta_loss(
      params,
      agent_state,
      train_rollouts,
      valid_rollout,
      rng,
      agent,
      weights,
      remat,
      unroll,
    )
    if parts:
      loss = jnp.stack([meta_log['pg_loss'], meta_log['reg_loss']])
    return loss, (new_state, metrics, meta_log)

  if parts:
    _, backward, aux = jax.vjp(losses, update_rule_params, has_aux=True)
    (grads,) = jax.vmap(backward)(jnp.eye(len(PARTS)))
  else:
    grads, aux = jax.grad(losses, has_aux=True)(update_rule_params)
  new_state, metrics, meta_log = aux
  if axis_name is not None:
    grads, metrics, meta_log = jax.lax.pmean(
      (grads, metrics, meta_log), axis_name
    )
  return grads, (new_state, metrics, meta_log)


def save_params(params: types.MetaParams, path) -> None:
  """Saves meta-parameters in disco_103.npz's layout (`weights.save_params`)."""
  weights.save_params(params, path)
