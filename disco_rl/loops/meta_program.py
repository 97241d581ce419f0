# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The meta-training program as pure functions, in reading order.

  init                   the population: the rule, its optimiser, every agent
  agent_meta_gradient    one agent's rollouts and meta-gradient
  group_meta_gradients   every task group's agents (`vmap`, or `lax.map` one
                         after another: `population`)
  meta_step              the meta-gradients averaged into one rule update;
                         agents past their lifetime renewed
  run                    `num_steps` meta-steps, one `lax.scan`

One meta-step, for every agent of the population: act for `num_inner_steps`
training rollouts and one validation rollout (`lax.scan`), then
differentiate the meta-objective through the agent's inner updates
(`meta_objective.calculate_meta_gradient`; unrolled into straight-line code
when there are at most `max_unrolled_inner_steps` of them, a loop
otherwise); the meta-gradient, averaged over the agents and devices, drives
the rule's optimiser. The population is split over a task suite
(`config.tasks`, `tasks.py`): one group of agents per environment, each
group with the network shape its environment calls for; the meta-network is
shared.

Every function takes the run's `MetaSetup` (static) first. `run` is the body
of `meta_loop.MetaTrainLoop`'s `jit(shard_map(...))`: the rule, its
optimiser and the agents are replicated, each device acts in its own
environments (device 0 in those the upstream notebook would use, so on one
device a run repeats the upstream's).
"""

import functools

import chex
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np
import optax

from disco_rl import meta_objective
from disco_rl import types
from disco_rl.loops import devices as devices_lib
from disco_rl.loops import divergence
from disco_rl.loops import driver
from disco_rl import rollout_checks
from disco_rl.loops.meta_setup import MetaSetup
from disco_rl.loops.meta_setup import unrolls_inner_steps

AXIS = devices_lib.AXIS


@chex.dataclass
class PopulationState:
  """The rule, its optimiser and every agent, and the loop key.

  Replicated: everything but the agents' environments (`env_state`,
  `env_timestep` of each group), which carry a leading device axis
  [D, N_g, ...] sharded over the mesh.

  Attributes:
    update_rule_params: the rule's meta-parameters.
    meta_opt_state: the meta-optimiser's state ([N, ...] per agent with
      'per_agent_adam').
    agents: one `MetaTrainState` per task, its N_g agents stacked on a
      leading axis [N_g, ...]; the groups in the order of the tasks.
    ages: [N] int32, agent updates each agent has taken since it started
      (the groups' agents one after another).
    rng: the key the next meta-step splits.
    step: [] int32, meta-steps done.
  """

  update_rule_params: types.MetaParams
  meta_opt_state: optax.OptState
  agents: tuple[meta_objective.MetaTrainState, ...]
  ages: chex.Array
  rng: chex.PRNGKey
  step: chex.Array


def state_specs(num_tasks: int = 1) -> PopulationState:
  """The `PartitionSpec` of each part of a `PopulationState`."""
  group = meta_objective.MetaTrainState(
      learner_state=P(), actor_state=P(), value_state=P(),
      env_state=P(AXIS), env_timestep=P(AXIS))
  return PopulationState(
      update_rule_params=P(), meta_opt_state=P(),
      agents=(group,) * num_tasks, ages=P(), rng=P(), step=P())


def initial_ages(num_agents: int, lifetime: int) -> np.ndarray:
  """[N] starting ages, staggered over a lifetime (all 0 without one).

  Agent i starts at age `i * lifetime // N`, so that at any time the
  population holds agents at every stage of learning.
  """
  if lifetime <= 0:
    return np.zeros((num_agents,), np.int32)
  return (np.arange(num_agents) * lifetime // num_agents).astype(np.int32)


def reward_logs(rewards: chex.Array) -> dict[str, chex.Array]:
  """Mean reward and counts of positive and negative rewards, [] each."""
  return dict(rewards=jnp.mean(rewards),
              pos_rewards=jnp.sum(rewards > 0).astype(jnp.float32),
              neg_rewards=jnp.sum(rewards < 0).astype(jnp.float32))


def step_logs(meta_log, metrics, grads, updates
              ) -> dict[str, chex.Array]:
  """A meta-step's scalar logs (the columns of metrics.csv).

  Args:
    meta_log: {name: [N]} the agents' meta-objective logs.
    metrics: {name: [N]} the agents' mean inner-update metrics (logged as
      'agent_<name>').
    grads: the agents' meta-gradients [N, ...]; the norm of their mean
      (before clipping and normalisation) is logged as 'meta_grad_norm'.
    updates: the rule's update ('meta_up_norm').
  """
  logs = jax.tree.map(jnp.mean, dict(meta_log, **{
      f'agent_{k}': v for k, v in metrics.items()}))
  logs['meta_grad_norm'] = optax.tree_utils.tree_norm(
      jax.tree.map(lambda g: jnp.mean(g, axis=0), grads))
  logs['meta_up_norm'] = optax.tree_utils.tree_norm(updates)
  return logs



# ----------------------------------------------------------------------------
# The initial state (traced under `jit`, outside `shard_map`).


def init(setup: MetaSetup, rng: chex.PRNGKey,
         update_rule_params: types.MetaParams) -> PopulationState:
  """The initial population (the rule's parameters given).

  Agent `i` is initialised from `jax.random.split(init_rng, num_agents)[i]`
  with `_, init_rng = jax.random.split(rng)`, as in the upstream notebook.
  """
  cfg, num = setup.config, setup.num_devices
  # The upstream notebook's key plumbing: one key for the agents, the
  # other split once per meta-step.
  loop_rng, init_rng = jax.random.split(rng)
  agent_keys = jax.random.split(init_rng, cfg.num_agents)
  # [D, N] keys: device 0 keeps the environments of the agents' own keys,
  # the others reset theirs with keys folded with the device index.
  reset_keys = jnp.stack([agent_keys] + [
      jax.vmap(functools.partial(jax.random.fold_in, data=d))(agent_keys)
      for d in range(1, num)])
  groups, ages = [], []
  for member, start, size in setup.groups:
    agents = jax.vmap(member.init_state)(agent_keys[start:start + size])
    env_state, timestep = jax.vmap(jax.vmap(member.env.reset))(
        reset_keys[:, start:start + size])
    groups.append(agents.replace(env_state=env_state,
                                 env_timestep=timestep))
    # Staggered within each group, so that every task has agents of
    # every age.
    ages.append(initial_ages(size, cfg.agent_lifetime))
  return PopulationState(
      update_rule_params=update_rule_params,
      meta_opt_state=setup.meta_opt.init(update_rule_params),
      agents=tuple(groups), ages=jnp.asarray(np.concatenate(ages)),
      rng=loop_rng, step=jnp.zeros((), jnp.int32))



# ----------------------------------------------------------------------------
# The meta-step (inside `shard_map`; per-device parts without their device
# axis).


def agent_meta_gradient(setup: MetaSetup, member, update_rule_params, step,
                        agent_state, act_rng, grad_rng):
  """Rollouts and the meta-gradient of one agent on one device."""
  cfg = setup.config

  def act(agent_state, key):
    return member.unroll_actor(agent_state, key, cfg.rollout_len)

  # Unrolled: a few rollouts, and XLA optimises across them.
  agent_state, train_rollouts = jax.lax.scan(
      act, agent_state, jax.random.split(act_rng, cfg.num_inner_steps),
      unroll=True)
  agent_state, valid_rollout = member.unroll_actor(
      agent_state, act_rng, 2 * cfg.rollout_len)
  fault = None
  if cfg.debug_checks:  # [K, T, B] -> [T, K * B]: b counts over all K.
    actions, rewards, logits = (
        jnp.swapaxes(x, 0, 1).reshape(x.shape[1], -1, *x.shape[3:])
        for x in (train_rollouts.actions, train_rollouts.rewards,
                  train_rollouts.logits))
    fault = rollout_checks.find_fault(actions, rewards,
                                      member.agent.num_actions, step,
                                      logits_t=logits)
  grads, (agent_state, metrics, meta_log) = (
      meta_objective.calculate_meta_gradient(
          update_rule_params, agent_state, train_rollouts, valid_rollout,
          grad_rng, member, axis_name=AXIS, remat=cfg.remat,
          unroll=unrolls_inner_steps(cfg)))
  meta_log = dict(meta_log, **reward_logs(train_rollouts.rewards))
  return (grads, agent_state, jax.tree.map(jnp.mean, metrics), meta_log,
          fault)


def group_meta_gradients(setup: MetaSetup, state: PopulationState,
                         act_keys, grad_keys):
  """Every group's agents' outputs, concatenated over the groups [N, ...].

  Returns:
    (meta-gradients [N, ...], new agents per group, metrics {k: [N]},
    meta logs {k: [N]}, mean reward of each group's training rollouts,
    [N] rollout faults or None without debug checks).
  """
  outputs, agents = [], []
  for (member, start, size), group in zip(setup.groups, state.agents):
    one_agent = functools.partial(agent_meta_gradient, setup, member,
                                  state.update_rule_params, state.step)
    per_agent = (group, act_keys[start:start + size],
                 grad_keys[start:start + size])
    if setup.population == 'vmap':
      grads, new_group, metrics, meta_log, fault = jax.vmap(one_agent)(
          *per_agent)
    else:
      grads, new_group, metrics, meta_log, fault = jax.lax.map(
          lambda xs, fn=one_agent: fn(*xs), per_agent)
    outputs.append((grads, metrics, meta_log, fault))
    agents.append(new_group)
  grads, metrics, meta_log, fault = jax.tree.map(
      lambda *xs: jnp.concatenate(xs), *outputs)
  task_rewards = [jnp.mean(log['rewards']) for _, _, log, _ in outputs]
  return grads, tuple(agents), metrics, meta_log, task_rewards, fault


def meta_step(setup: MetaSetup, state: PopulationState):
  """One meta-step on one device's view: (new state, scalar logs)."""
  rng, step_rng = jax.random.split(state.rng)
  device_rng = jax.random.split(step_rng, setup.num_devices)[
      jax.lax.axis_index(AXIS)]
  # As upstream: per agent one key for acting (its training and validation
  # rollouts) and one for its meta-gradient.
  act_rng, grad_rng = jax.random.split(device_rng)
  num_agents = setup.config.num_agents
  grads, agents, metrics, meta_log, task_rewards, fault = (
      group_meta_gradients(setup, state,
                                 jax.random.split(act_rng, num_agents),
                                 jax.random.split(grad_rng, num_agents)))
  # The reward counts are per device: average them like the upstream logs.
  meta_log, task_rewards = jax.lax.pmean((meta_log, task_rewards), AXIS)
  updates, meta_opt_state = setup.meta_opt.update(grads,
                                                 state.meta_opt_state)
  params = optax.apply_updates(state.update_rule_params, updates)
  agents, ages = renew_old_agents(
      setup, agents, state.ages + setup.config.num_inner_steps, rng)
  logs = step_logs(meta_log, metrics, grads, updates)
  logs[divergence.KEY] = jax.lax.pmin(divergence.all_finite(
      (params, [a.learner_state.params for a in agents])), AXIS)
  if len(setup.tasks) > 1:
    logs.update({f'rewards_task{g}': r for g, r in enumerate(task_rewards)})
  if setup.config.agent_lifetime:
    logs['agents_renewed'] = jnp.sum(ages == 0).astype(jnp.float32)
  if fault is not None:  # The first agent's, then the first device's.
    fault = rollout_checks.first_of(fault.replace(
        source=jnp.arange(num_agents, dtype=jnp.int32)))
    logs[rollout_checks.KEY] = rollout_checks.first_over_devices(
        fault, AXIS, setup.config.num_inner_steps
        * setup.config.batch_size_per_device)
  new_state = PopulationState(update_rule_params=params,
                              meta_opt_state=meta_opt_state, agents=agents,
                              ages=ages, rng=rng, step=state.step + 1)
  return new_state, logs


def renew_old_agents(setup: MetaSetup, agents, ages, rng):
  """Agents whose lifetime is over start afresh (their environments go on).

  Args:
    agents: one `MetaTrainState` [N_g, ...] per group.
    ages: [N] ages after this meta-step's updates.
    rng: the key of this meta-step.

  Returns:
    (agents, ages) with every agent of age >= lifetime replaced by a new
    one of age 0 (keys from `rng` folded with the agent's index in the
    population). New agents are only drawn in a meta-step that renews one.
  """
  lifetime = setup.config.agent_lifetime
  if not lifetime:
    return agents, ages
  renew = ages >= lifetime
  keys = jax.vmap(lambda i: jax.random.fold_in(
      jax.random.fold_in(rng, 0x11fe), i))(jnp.arange(ages.shape[0]))
  renewed = []
  for (member, start, size), group in zip(setup.groups, agents):
    mask = renew[start:start + size]
    learned = dict(learner_state=group.learner_state,
                   actor_state=group.actor_state,
                   value_state=group.value_state)

    def renew_some(learned, member=member, mask=mask, start=start,
                   size=size):
      fresh = jax.vmap(member.fresh_agent)(keys[start:start + size])
      return jax.tree.map(
          lambda new, old: jnp.where(
              mask.reshape(mask.shape + (1,) * (old.ndim - 1)), new, old),
          fresh, learned)

    learned = jax.lax.cond(jnp.any(mask), renew_some, lambda x: x, learned)
    renewed.append(group.replace(**learned))
  return tuple(renewed), jnp.where(renew, 0, ages)



# ----------------------------------------------------------------------------
# The program's body (per device, inside `shard_map`).


def run(setup: MetaSetup, state: PopulationState, num_steps: chex.Array):
  """`num_steps` (<= `steps_per_call`) meta-steps in one `lax.scan`: the
  program's body.

  Returns:
    (state, {name: [steps_per_call]}: NaN past `num_steps`).
  """
  per_device = functools.partial(devices_lib.map_per_device,
                                 specs=state_specs(len(setup.tasks)))
  state, logs = driver.scan_up_to(
      functools.partial(meta_step, setup),
      per_device(devices_lib.local_block, tree=state), num_steps,
      setup.config.steps_per_call)
  return per_device(devices_lib.device_block, tree=state), logs


# ----------------------------------------------------------------------------
# On the host: the logs of a call.


def raise_first_problem(logs: dict[str, np.ndarray], first_step: int) -> None:
  """Raises for the first problem of a call's [K] host `logs` (and drops the
  checks' entries): a training rollout that failed the debug checks
  (`RolloutError`), or a meta-step whose losses or parameters are not
  finite (`divergence.DivergedError`), whichever came first (a meta-step
  acts before it learns)."""
  faults = logs.pop(rollout_checks.KEY, None)
  divergence.raise_if_diverged(
      logs, ('meta_loss', 'meta_grad_norm', 'agent_total_loss'), first_step,
      'meta-step', "the rule's or the agents' parameters",
      hint='Try a smaller meta_learning_rate or learning_rate '
      '(--meta-learning-rate, --learning-rate).',
      until=rollout_checks.first_index(faults))
  rollout_checks.raise_if_faulty(faults, 'training rollout of agent {source}')
