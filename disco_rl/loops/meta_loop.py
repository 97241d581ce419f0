# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Meta-training an update rule with a population of agents.

One meta-step, for every agent of the population (`vmap`, or `lax.map` one
agent after another, no slower on CPUs: `population`): act for
`num_inner_steps` training rollouts and one validation rollout (`lax.scan`),
then differentiate the meta-objective through the agent's inner updates
(`meta_objective.calculate_meta_gradient`; unrolled into straight-line code when
there are at most `max_unrolled_inner_steps` of them, a loop otherwise); the
meta-gradient, averaged over the agents and devices, drives the rule's
optimiser.

The population is split over a task suite (`config.tasks`, `tasks.py`): one
group of agents per environment, each group with the network shape its
environment's observations and actions call for. The meta-network is shared.

`MetaTrainLoop` compiles `steps_per_call` meta-steps into one `jax.jit`
program over the device mesh (`jax.shard_map`); the rule, its optimiser and
the agents are replicated, each device acts in its own environments (device
0 in those the upstream notebook would use, so on one device a run repeats
the upstream's).
"""

import functools
import pathlib
from typing import Any

import chex
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np
import optax

from disco_rl import meta_objective
from disco_rl import types
from disco_rl import weights
from disco_rl.loops import config as config_lib
from disco_rl.loops import devices as devices_lib
from disco_rl.loops import divergence
from disco_rl.loops import driver
from disco_rl.loops import meta_optimizer
from disco_rl.loops import program
from disco_rl.loops import reporting
from disco_rl.loops import rollout_checks
from disco_rl.loops import tasks as tasks_lib

AXIS = devices_lib.AXIS
PLOTS = (('pos_rewards', 'positive rewards per meta-step'),
         ('neg_rewards', 'negative rewards per meta-step'),
         ('meta_loss', 'meta loss'),
         ('meta_grad_norm', 'meta-gradient norm'),
         ('meta_up_norm', 'meta-update norm'),
         ('rewards', 'mean reward'))


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


def unrolls_inner_steps(config: config_lib.MetaTrainConfig) -> bool:
  """Whether a meta-step runs its inner updates unrolled (else a loop)."""
  return config.num_inner_steps <= config.max_unrolled_inner_steps


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


def agent_settings(config: config_lib.MetaTrainConfig):
  """The population's agent settings (the Disco agent, MLP network)."""
  return config_lib.agent_settings('disco_103', config.learning_rate,
                                   config.dense, config.model_lstm_size,
                                   config.model_head_hiddens)


def value_fn_config(config: config_lib.MetaTrainConfig) -> types.ValueFnConfig:
  """The meta-objective's value function with the configured sizes."""
  default = meta_objective.default_value_fn_config()
  return default.replace(net_args=dict(default.net_args,
                                       dense=tuple(config.value_dense)))


def initial_ages(num_agents: int, lifetime: int) -> np.ndarray:
  """[N] starting ages, staggered over a lifetime (all 0 without one).

  Agent i starts at age `i * lifetime // N`, so that at any time the
  population holds agents at every stage of learning.
  """
  if lifetime <= 0:
    return np.zeros((num_agents,), np.int32)
  return (np.arange(num_agents) * lifetime // num_agents).astype(np.int32)


class MetaTrainLoop:
  """A population of agents over a task suite meta-training one update rule.

  Usage:
    loop = MetaTrainLoop(config)
    state = loop.init(jax.random.PRNGKey(config.seed))
    state, logs = loop.run(state)  # steps_per_call meta-steps

  `logs` holds one [K] NumPy array per name for the K meta-steps run.

  Attributes:
    tasks: the suite (`tasks.Task`), one group of agents each.
    group_sizes: the number of agents of each task.
    members: one `meta_objective.MetaTrainAgent` per task (its agent network,
      value function and environment); `member` is the first.
  """

  def __init__(self, config: config_lib.MetaTrainConfig, devices=None):
    config_lib.check_meta_train_config(config)
    self.config = config
    self.devices = list(devices) if devices is not None else (
        devices_lib.pick_devices({}, config.num_devices))
    self.mesh = devices_lib.make_mesh(self.devices)
    self.tasks = tasks_lib.parse_tasks(config.tasks, config.rows,
                                       config.columns)
    self.group_sizes = tasks_lib.group_sizes(config.num_agents,
                                             len(self.tasks))
    self.members = tuple(
        meta_objective.MetaTrainAgent(
            batch_size_per_device=config.batch_size_per_device,
            agent_settings=agent_settings(config),
            value_fn_config=value_fn_config(config),
            axis_name=AXIS,
            env=tasks_lib.make_env(task, config.batch_size_per_device))
        for task in self.tasks)
    self.member = self.members[0]
    # optax, on the agents' stacked meta-gradients [N, ...].
    self.meta_opt = meta_optimizer.make(
        config.meta_grad_norm, config.meta_learning_rate,
        config.meta_grad_clip, config.num_agents)
    self.population = config.population
    if self.population == 'auto':
      self.population = ('map' if self.devices[0].platform == 'cpu'
                         else 'vmap')
    self.debug_checks = config.debug_checks
    self._specs = state_specs(len(self.tasks))
    specs = self._specs
    self._init = program.on_mesh(self._initial_state,
                                 devices_lib.shardings(self.mesh, specs),
                                 config.matmul_precision)
    self._run = program.over_mesh(self._run_on_device, self.mesh,
                                  (specs, P()), (specs, P()),
                                  config.matmul_precision, donate_state=True)

  # -- Initial state ----------------------------------------------------------

  def initial_rule_params(self, update_rule_params=None,
                          load: bool = True) -> types.MetaParams:
    """The given parameters, else those `config.init` names (with
    `load=False` a fresh meta-network stands in for Disco103's weights: a
    run about to be restored)."""
    if update_rule_params is not None:
      return update_rule_params
    return weights.starting_rule_params(
        self.member.agent.update_rule,
        self.config.init == 'disco_103' and load, self.config.rule_seed)

  def _groups(self):
    """(member, first agent, agent count) of each task group."""
    starts = tasks_lib.group_starts(self.group_sizes)
    return [(m, int(starts[g]), self.group_sizes[g])
            for g, m in enumerate(self.members)]

  def _initial_state(self, rng, update_rule_params) -> PopulationState:
    cfg, num = self.config, len(self.devices)
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
    for member, start, size in self._groups():
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
        meta_opt_state=self.meta_opt.init(update_rule_params),
        agents=tuple(groups), ages=jnp.asarray(np.concatenate(ages)),
        rng=loop_rng, step=jnp.zeros((), jnp.int32))

  def init(self, rng: chex.PRNGKey, update_rule_params=None
           ) -> PopulationState:
    """The initial population on the mesh.

    Agent `i` is initialised from `jax.random.split(init_rng, num_agents)[i]`
    with `_, init_rng = jax.random.split(rng)`, as in the upstream notebook.

    Args:
      rng: the run's key (the notebook's `PRNGKey(seed)`).
      update_rule_params: starting meta-parameters; default per
        `config.init`: Disco103's weights, or a fresh meta-network drawn
        with `jax.random.PRNGKey(config.rule_seed)`.
    """
    params = devices_lib.place(self.initial_rule_params(update_rule_params),
                               devices_lib.replicated(self.mesh))
    return self._init(rng, params)

  # -- The meta-step (inside shard_map; per-device parts unwrapped) ----------

  def _agent_meta_gradient(self, member, update_rule_params, step,
                           agent_state, act_rng, grad_rng):
    """Rollouts and the meta-gradient of one agent on one device."""
    cfg = self.config

    def act(agent_state, key):
      return member.unroll_actor(agent_state, key, cfg.rollout_len)

    # Unrolled: a few rollouts, and XLA optimises across them.
    agent_state, train_rollouts = jax.lax.scan(
        act, agent_state, jax.random.split(act_rng, cfg.num_inner_steps),
        unroll=True)
    agent_state, valid_rollout = member.unroll_actor(
        agent_state, act_rng, 2 * cfg.rollout_len)
    fault = None
    if self.debug_checks:  # [K, T, B] -> [T, K * B]: b counts over all K.
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

  def _group_meta_gradients(self, state: PopulationState, act_keys,
                            grad_keys):
    """Every group's agents' outputs, concatenated over the groups [N, ...].

    Returns:
      (meta-gradients [N, ...], new agents per group, metrics {k: [N]},
      meta logs {k: [N]}, mean reward of each group's training rollouts,
      [N] rollout faults or None without debug checks).
    """
    outputs, agents = [], []
    for (member, start, size), group in zip(self._groups(), state.agents):
      one_agent = functools.partial(self._agent_meta_gradient, member,
                                    state.update_rule_params, state.step)
      per_agent = (group, act_keys[start:start + size],
                   grad_keys[start:start + size])
      if self.population == 'vmap':
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

  def _meta_step(self, state: PopulationState):
    rng, step_rng = jax.random.split(state.rng)
    device_rng = jax.random.split(step_rng, len(self.devices))[
        jax.lax.axis_index(AXIS)]
    # As upstream: per agent one key for acting (its training and validation
    # rollouts) and one for its meta-gradient.
    act_rng, grad_rng = jax.random.split(device_rng)
    num_agents = self.config.num_agents
    grads, agents, metrics, meta_log, task_rewards, fault = (
        self._group_meta_gradients(state,
                                   jax.random.split(act_rng, num_agents),
                                   jax.random.split(grad_rng, num_agents)))
    # The reward counts are per device: average them like the upstream logs.
    meta_log, task_rewards = jax.lax.pmean((meta_log, task_rewards), AXIS)
    updates, meta_opt_state = self.meta_opt.update(grads,
                                                   state.meta_opt_state)
    params = optax.apply_updates(state.update_rule_params, updates)
    agents, ages = self._renew_old_agents(
        agents, state.ages + self.config.num_inner_steps, rng)
    logs = step_logs(meta_log, metrics, grads, updates)
    logs[divergence.KEY] = jax.lax.pmin(divergence.all_finite(
        (params, [a.learner_state.params for a in agents])), AXIS)
    if len(self.tasks) > 1:
      logs.update({f'rewards_task{g}': r for g, r in enumerate(task_rewards)})
    if self.config.agent_lifetime:
      logs['agents_renewed'] = jnp.sum(ages == 0).astype(jnp.float32)
    if fault is not None:  # The first agent's, then the first device's.
      fault = rollout_checks.first_of(fault.replace(
          source=jnp.arange(num_agents, dtype=jnp.int32)))
      logs[rollout_checks.KEY] = rollout_checks.first_over_devices(
          fault, AXIS, self.config.num_inner_steps
          * self.config.batch_size_per_device)
    new_state = PopulationState(update_rule_params=params,
                                meta_opt_state=meta_opt_state, agents=agents,
                                ages=ages, rng=rng, step=state.step + 1)
    return new_state, logs

  def _renew_old_agents(self, agents, ages, rng):
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
    lifetime = self.config.agent_lifetime
    if not lifetime:
      return agents, ages
    renew = ages >= lifetime
    keys = jax.vmap(lambda i: jax.random.fold_in(
        jax.random.fold_in(rng, 0x11fe), i))(jnp.arange(ages.shape[0]))
    renewed = []
    for (member, start, size), group in zip(self._groups(), agents):
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

  def _run_on_device(self, state: PopulationState, num_steps):
    per_device = functools.partial(devices_lib.map_per_device,
                                   specs=self._specs)
    state, logs = driver.scan_up_to(
        self._meta_step, per_device(devices_lib.local_block, tree=state),
        num_steps, self.config.steps_per_call)
    return per_device(devices_lib.device_block, tree=state), logs

  def lower(self, state: PopulationState) -> jax.stages.Lowered:
    """The run program lowered for `state` (`.compile()`, cost analysis)."""
    return self._run.lower(state, jnp.int32(1))

  def compile(self, state: PopulationState) -> float:
    """Compiles the run program for `state` before the first call (a point
    where a run can stop before any step); `run` then uses it.

    Returns:
      The seconds it took (0.0 if it was compiled before).
    """
    return self._run.compile(state, jnp.int32(1))

  def run(self, state: PopulationState, num_steps: int | None = None):
    """Runs `num_steps` (<= steps_per_call, default all) meta-steps.

    The given state is donated: use the returned one.

    Returns:
      (new state, {name: [num_steps] NumPy array} of scalar logs).
    """
    per_call = self.config.steps_per_call
    num_steps = per_call if num_steps is None else int(num_steps)
    if not 0 < num_steps <= per_call:
      raise ValueError(f'num_steps must be in [1, steps_per_call={per_call}]'
                       f', got {num_steps}.')
    state, logs = self._run(state, jnp.int32(num_steps))
    logs = jax.tree.map(lambda v: v[:num_steps], devices_lib.fetch(logs))
    # The first problem: a training rollout that failed the debug checks,
    # or a meta-step whose losses or parameters are not finite (a meta-step
    # acts before it learns).
    faults = logs.pop(rollout_checks.KEY, None)
    divergence.raise_if_diverged(
        logs, ('meta_loss', 'meta_grad_norm', 'agent_total_loss'),
        int(devices_lib.fetch(state.step)) - num_steps, 'meta-step',
        "the rule's or the agents' parameters",
        hint='Try a smaller meta_learning_rate or learning_rate '
        '(--meta-learning-rate, --learning-rate).',
        until=rollout_checks.first_index(faults))
    rollout_checks.raise_if_faulty(faults,
                                   'training rollout of agent {source}')
    return state, logs

  def params(self, state: PopulationState) -> types.MetaParams:
    """The current meta-parameters as NumPy arrays on the host."""
    return devices_lib.fetch(state.update_rule_params)


class MetaTrainJob:
  """Meta-training as `Trainer` runs it: loop, rows, summary and outputs.

  A `Trainer` step is one meta-step.
  """

  name = 'meta_train'
  config_cls = config_lib.MetaTrainConfig
  check_config = staticmethod(config_lib.check_meta_train_config)

  def __init__(self, config: config_lib.MetaTrainConfig,
               rule_params=None, devices=None, restoring: bool = False):
    self.config = config
    self.loop = MetaTrainLoop(config, devices=devices)
    self.steps_per_call = config.steps_per_call
    self.rows_per_step = 1
    self.description = 'meta-train'
    # The rule's weights are loaded now, so that a bad file fails at once;
    # a run about to be restored starts from a fresh meta-network instead.
    self._rule_params = self.loop.initial_rule_params(
        rule_params, load=not restoring)

  # The rule is part of the loop state (PopulationState.update_rule_params).
  rule_params = None

  def iterations(self, num_steps: int) -> int:
    return num_steps

  def learner_steps(self, iterations: int) -> int:
    return iterations

  def init(self) -> PopulationState:
    return self.loop.init(jax.random.PRNGKey(self.config.seed),
                             self._rule_params)

  def compile(self, state: PopulationState) -> float:
    return self.loop.compile(state)

  def run(self, state: PopulationState, num_steps: int):
    return self.loop.run(state, num_steps)

  def to_rows(self, logs, first_step: int):
    count = len(next(iter(logs.values())))
    return [dict(step=first_step + i, **{k: float(v[i]) for k, v in
                                         logs.items()}) for i in range(count)]

  def postfix(self, rows) -> dict[str, str]:
    return dict(pos_rewards=f'{rows[-1]["pos_rewards"]:.1f}',
                meta_loss=f'{rows[-1]["meta_loss"]:.3f}')

  def host_state(self) -> dict[str, Any]:
    return {}

  def set_host_state(self, extra: dict[str, Any]) -> None:
    del extra

  def rule_eval_config(self, state: PopulationState, params=None, env=None
                       ) -> tuple[types.MetaParams, config_lib.EvalConfig]:
    """What evaluating the rule trains: (its parameters, the eval settings).

    `Trainer.evaluate` trains a fresh agent with them.

    Args:
      state: the population state (its rule is the default).
      params: the rule's meta-parameters (default: the current ones).
      env: an `EvalConfig` (rule 'disco_103') for the agent, e.g. a held-out
        board size; default: `EvalConfig(num_steps=200)` on the first task,
        at the run's `matmul_precision`.
    """
    if params is None:
      params = self.loop.params(state)
    if env is None:
      env = config_lib.EvalConfig(
          **tasks_lib.eval_settings(self.loop.tasks[0]), num_steps=200,
          matmul_precision=self.config.matmul_precision)
    if not isinstance(env, config_lib.EvalConfig) or env.rule != 'disco_103':
      raise ValueError('env must be an EvalConfig with rule disco_103 (a '
                       f'meta-learned rule), got {env!r}.')
    return params, env

  def summary(self, state: PopulationState, rows, timing: driver.Timing
              ) -> dict[str, Any]:
    """Positive rewards (last 100 meta-steps), speed, memory."""
    del state
    pos_rewards = [r['pos_rewards'] for r in rows] or [float('nan')]
    return dict(
        final_pos_rewards=float(np.mean(pos_rewards[-100:])),
        first_pos_rewards=pos_rewards[0],
        steps=len(rows),
        compile_s=timing.first_call_s,
        meta_steps_per_second=timing.steps_per_second,
        peak_memory_mb=reporting.peak_memory_mb(),
        devices=len(self.loop.devices),
        processes=jax.process_count(),
        tasks=[t.spec() for t in self.loop.tasks],
        agents_per_task=list(self.loop.group_sizes),
    )

  def write_outputs(self, state: PopulationState, rows,
                    output_dir: pathlib.Path, lead: bool) -> dict[str, Any]:
    """One plot per logged curve and the learned rule's parameters.

    Every process calls it (fetching the parameters may gather them); only
    the `lead` one writes.
    """
    params = self.loop.params(state)
    if not lead:
      return {}
    curves = list(PLOTS)
    if len(self.loop.tasks) > 1:
      curves += [(f'rewards_task{g}', f'mean reward on {t.spec()}')
                 for g, t in enumerate(self.loop.tasks)]
    outputs = dict(plots={
        key: str(reporting.plot_curve(
            [r['step'] for r in rows], [r[key] for r in rows],
            output_dir / f'{key}.png', 'meta-step', label,
            f'meta-training: {label}', smooth=20))
        for key, label in curves})
    weights_path = output_dir / 'update_rule_params.npz'
    meta_objective.save_params(params, weights_path)
    outputs['params_npz'] = str(weights_path)
    return outputs


# The name this loop had before (the tests and `disco_rl.meta_train` use it).
MetaTrainer = MetaTrainLoop
