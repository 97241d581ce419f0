# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The meta-training job's steps: module functions of (setup, ...).

One meta-step on one device's view (inside the mesh), in reading order:

  step_keys              the next loop key, each agent's acting and
                         meta-gradient keys
  unroll_rollouts        one agent's training and validation rollouts
  training_fault         their first bad entry (`debug_checks`)
  agent_meta_gradient    one agent's rollouts and meta-gradient
  group_meta_gradients   every task group's agents (`vmap`, or `lax.map`
                         one after another: `population`)
  sum_parts              the meta-gradient's parts summed, and logged
                         (`meta_grad_parts`)
  update_logs            the scalar logs of the agents and of the rule's
                         update
  first_fault            the population's first bad rollout
  meta_step              the meta-gradients into one rule update; agents
                         past their lifetime start afresh
                         (`setup.renew_old_agents`)

The population's initial state is `setup.init_population`.
"""

import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
import optax

from disco_rl import meta_grad_stats
from disco_rl import meta_objective
from disco_rl import rollout_checks
from disco_rl import types
from disco_rl.jobs.meta import setup as meta_setup
from disco_rl.runtime import divergence
from disco_rl.runtime import mesh as mesh_lib

AXIS = mesh_lib.AXIS
State = meta_setup.PopulationState
Setup = meta_setup.MetaSetup
Member = meta_objective.MetaTrainAgent
AgentState = meta_objective.MetaTrainState


def step_keys(
  setup: Setup, rng: chex.PRNGKey
) -> tuple[chex.PRNGKey, chex.PRNGKey, chex.PRNGKey]:
  """(the next meta-step's key, [N, 2] acting keys, [N, 2] meta-gradient
  keys) of this device, from the state's `rng` (inside the mesh).

  As upstream: per agent one key for acting (its training and validation
  rollouts) and one for its meta-gradient.
  """
  rng, step_rng = jax.random.split(rng)
  device_rng = jax.random.split(step_rng, setup.num_devices)[
    jax.lax.axis_index(AXIS)
  ]
  act_rng, grad_rng = jax.random.split(device_rng)
  num_agents = setup.config.num_agents
  return (
    rng,
    jax.random.split(act_rng, num_agents),
    jax.random.split(grad_rng, num_agents),
  )


def unroll_rollouts(
  setup: Setup,
  member: Member,
  agent_state: AgentState,
  act_rng: chex.PRNGKey,
) -> tuple[AgentState, types.ActorRollout, types.ActorRollout]:
  """One agent's `num_inner_steps` training rollouts [K, T, B, ...] and its
  validation rollout [2T, B, ...]: (its state after them, the training
  rollouts, the validation rollout)."""
  config = setup.config
  # Unrolled: a few rollouts, and XLA optimises across them.
  agent_state, train_rollouts = jax.lax.scan(
    lambda s, key: member.unroll_actor(s, key, config.rollout_len),
    agent_state,
    jax.random.split(act_rng, config.num_inner_steps),
    unroll=True,
  )
  agent_state, valid_rollout = member.unroll_actor(
    agent_state, act_rng, 2 * config.rollout_len
  )
  return agent_state, train_rollouts, valid_rollout


def training_fault(
  member: Member, train_rollouts: types.ActorRollout, step: chex.Array
) -> rollout_checks.Fault:
  """The first bad entry of one agent's [K, T, B] training rollouts, as
  [T, K * B] (b counts over all K), at meta-step `step`."""
  actions, rewards, logits = (
    jnp.swapaxes(x, 0, 1).reshape(x.shape[1], -1, *x.shape[3:])
    for x in (
      train_rollouts.actions,
      train_rollouts.rewards,
      train_rollouts.logits,
    )
  )
  return rollout_checks.find_fault(
    actions, rewards, member.agent.num_actions, step, logits_t=logits
  )


def agent_meta_gradient(
  setup: Setup,
  member: Member,
  update_rule_params: types.MetaParams,
  step: chex.Array,
  agent_state: AgentState,
  act_rng: chex.PRNGKey,
  grad_rng: chex.PRNGKey,
) -> tuple[
  types.MetaParams,
  AgentState,
  types.LogDict,
  types.LogDict,
  rollout_checks.Fault | None,
]:
  """One agent's rollouts and meta-gradient ([2, ...] with
  `meta_grad_parts`: the parts of `meta_objective.PARTS`): (meta-gradient,
  new agent state, mean metrics, meta logs, rollout fault or None)."""
  config = setup.config
  agent_state, train_rollouts, valid_rollout = unroll_rollouts(
    setup, member, agent_state, act_rng
  )
  fault = None
  if config.debug_checks:
    fault = training_fault(member, train_rollouts, step)
  grads, (agent_state, metrics, meta_log) = (
    meta_objective.calculate_meta_gradient(
      update_rule_params,
      agent_state,
      train_rollouts,
      valid_rollout,
      grad_rng,
      member,
      axis_name=AXIS,
      weights=config.meta_loss_weights(),
      remat=config.remat,
      unroll=setup.unroll,
      parts=config.meta_grad_parts,
    )
  )
  rewards = train_rollouts.rewards
  meta_log = dict(
    meta_log,
    rewards=jnp.mean(rewards),
    pos_rewards=jnp.sum(rewards > 0).astype(jnp.float32),
    neg_rewards=jnp.sum(rewards < 0).astype(jnp.float32),
  )
  return (
    grads,
    agent_state,
    jax.tree.map(jnp.mean, metrics),
    meta_log,
    fault,
  )


def group_meta_gradients(
  setup: Setup,
  state: State,
  act_keys: chex.PRNGKey,
  grad_keys: chex.PRNGKey,
) -> tuple[
  types.MetaParams,
  tuple[AgentState, ...],
  types.LogDict,
  types.LogDict,
  list[chex.Array],
  rollout_checks.Fault | None,
]:
  """Every group's agents, from [N, 2] keys, concatenated over the groups
  [N, ...]: (meta-gradients, new agents per group, metrics {k: [N]}, meta
  logs {k: [N]}, each group's mean reward, [N] rollout faults or None)."""
  outputs, agents = [], []
  for (member, start, size), group in zip(
    setup.groups, state.agents, strict=True
  ):
    one_agent = functools.partial(
      agent_meta_gradient,
      setup,
      member,
      state.update_rule_params,
      state.step,
    )
    per_agent = (
      group,
      act_keys[start : start + size],
      grad_keys[start : start + size],
    )
    if setup.population == 'vmap':
      grads, group, metrics, meta_log, fault = jax.vmap(one_agent)(*per_agent)
    else:
      grads, group, metrics, meta_log, fault = jax.lax.map(
        lambda xs, fn=one_agent: fn(*xs), per_agent
      )
    outputs.append((grads, metrics, meta_log, fault))
    agents.append(group)
  grads, metrics, meta_log, fault = jax.tree.map(
    lambda *xs: jnp.concatenate(xs), *outputs
  )
  task_rewards = [jnp.mean(log['rewards']) for _, _, log, _ in outputs]
  return grads, tuple(agents), metrics, meta_log, task_rewards, fault


def sum_parts(
  setup: Setup, grads: types.MetaParams
) -> tuple[types.MetaParams, types.LogDict]:
  """The [N, ...] meta-gradients, and the statistics of their parts.

  With `meta_grad_parts` the [N, 2, ...] parts (`meta_objective.PARTS`)
  are logged (`meta_grad_stats.summary`, as 'meta_grad_{part}_...') and
  summed; otherwise the meta-gradients are as given and there are no
  logs.
  """
  part_logs: types.LogDict = {}
  if setup.config.meta_grad_parts:  # [N, 2, ...]: the parts, then their sum.
    for i, part in enumerate(meta_objective.PARTS):
      part_logs.update(
        meta_grad_stats.summary(
          jax.tree.map(lambda g, i=i: g[:, i], grads), f'meta_grad_{part}'
        )
      )
    grads = jax.tree.map(lambda g: jnp.sum(g, axis=1), grads)
  return grads, part_logs


def update_logs(
  setup: Setup,
  grads: types.MetaParams,
  updates: types.MetaParams,
  metrics: types.LogDict,
  meta_log: types.LogDict,
  part_logs: types.LogDict,
) -> types.LogDict:
  """The meta-step's scalar logs of the agents and of the rule's update:
  the means of the meta logs and of the agents' metrics ('agent_...')
  over the agents, the norms of the [N, ...] meta-gradients' mean (and of
  each head's) and of the `updates`, the parts' `part_logs`, and a uniform
  policy target's entropy."""
  logs = jax.tree.map(
    jnp.mean, dict(meta_log, **{f'agent_{k}': v for k, v in metrics.items()})
  )
  mean_grads = jax.tree.map(lambda g: jnp.mean(g, axis=0), grads)
  logs['meta_grad_norm'] = optax.tree_utils.tree_norm(mean_grads)
  logs.update(
    {
      f'meta_grad_{head}_norm': norm
      for head, norm in meta_grad_stats.head_norms(mean_grads).items()
    }
  )
  logs.update(part_logs)
  # What a uniform policy target's entropy would be (agent_pi_hat_entropy
  # at this value: the rule's target is uniform).
  logs['uniform_entropy'] = jnp.asarray(setup.uniform_entropy, jnp.float32)
  logs['meta_up_norm'] = optax.tree_utils.tree_norm(updates)
  return logs


def first_fault(setup: Setup, fault: rollout_checks.Fault) -> chex.Array:
  """The first bad entry of the [N] agents' training rollouts: the first
  agent's, then the first device's (`rollout_checks.KEY`'s log)."""
  config = setup.config
  fault = rollout_checks.first_of(
    dataclasses.replace(
      fault, source=jnp.arange(config.num_agents, dtype=jnp.int32)
    )
  )
  return rollout_checks.first_over_devices(
    fault, AXIS, config.num_inner_steps * config.batch_size_per_device
  )


def meta_step(setup: Setup, state: State) -> tuple[State, types.LogDict]:
  """One meta-step: (new state, scalar logs)."""
  config = setup.config
  rng, act_keys, grad_keys = step_keys(setup, state.rng)
  grads, agents, metrics, meta_log, task_rewards, fault = group_meta_gradients(
    setup, state, act_keys, grad_keys
  )
  # The reward counts are per device: averaged like the upstream logs.
  meta_log, task_rewards = jax.lax.pmean((meta_log, task_rewards), AXIS)
  grads, part_logs = sum_parts(setup, grads)
  updates, meta_opt_state = setup.meta_opt.update(grads, state.meta_opt_state)
  params = optax.apply_updates(state.update_rule_params, updates)
  agents, ages, lifetimes = meta_setup.renew_old_agents(
    setup,
    agents,
    state.ages + config.num_inner_steps,
    meta_setup.lifetimes_of(state),
    rng,
  )
  logs = update_logs(setup, grads, updates, metrics, meta_log, part_logs)
  logs[divergence.KEY] = jax.lax.pmin(
    divergence.all_finite((params, [a.learner_state.params for a in agents])),
    AXIS,
  )
  if len(setup.tasks) > 1:
    logs.update({f'rewards_task{g}': r for g, r in enumerate(task_rewards)})
  if config.agent_lifetime:
    logs['agents_renewed'] = jnp.sum(ages == 0).astype(jnp.float32)
  if fault is not None:
    logs[rollout_checks.KEY] = first_fault(setup, fault)
  return meta_setup.population_state(
    lifetimes=lifetimes,
    update_rule_params=params,
    meta_opt_state=meta_opt_state,
    agents=agents,
    ages=ages,
    rng=rng,
    step=state.step + 1,
  ), logs
