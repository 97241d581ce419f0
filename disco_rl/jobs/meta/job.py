# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Meta-training: a population of agents over a task suite trains one rule.

`make_meta_train(config) -> Job`, the eval job's shape: the setup is made
once (`meta_setup.make_setup`, one `meta_setup.make_member` per task),
then the program's pieces in reading order:

  agent_meta_gradient    one agent's rollouts and meta-gradient
  group_meta_gradients   every task group's agents (`vmap`, or `lax.map`
                         one after another: `population`)
  meta_step              the meta-gradients into one rule update; agents
                         past their lifetime start afresh
                         (`meta_setup.renew_old_agents`)

The population's initial state is `meta_setup.init_population`; rows,
summary and outputs are on the host (`meta_report`); `evaluate` and
`rule` read a job's state.

One meta-step, for every agent: act for `num_inner_steps` training
rollouts and one validation rollout, then differentiate the meta-objective
through the agent's inner updates (`meta_objective.calculate_meta_gradient`;
unrolled into straight-line code when there are at most
`max_unrolled_inner_steps` of them, a loop otherwise); the meta-gradients
of all agents and devices drive the rule's optimiser. The population is
split over the tasks (`config.suite`): one group of agents per environment,
each with the network its environment calls for; the rule is shared.

The rule, its optimiser and the agents are replicated; each device acts in
its own environments (device 0 in those the upstream notebook would use, so
on one device a run repeats the upstream's). `compiled.program` runs
`steps_per_call` meta-steps in one jit(shard_map(scan)).
"""

from collections.abc import Sequence
import dataclasses
import functools
import os
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax

from disco_rl import meta_grad_stats
from disco_rl import meta_objective
from disco_rl import rollout_checks
from disco_rl import types
from disco_rl import weights
from disco_rl.jobs import config as config_lib
from disco_rl.jobs.eval import job as eval_lib
from disco_rl.jobs.meta import config as meta_config
from disco_rl.jobs.meta import report as meta_report
from disco_rl.jobs.meta import setup as meta_setup
from disco_rl.runtime import compiled
from disco_rl.runtime import divergence
from disco_rl.runtime import host_loop
from disco_rl.runtime import job as job_lib
from disco_rl.runtime import mesh as mesh_lib
from disco_rl.runtime import run_dir as run_dir_lib
from disco_rl.update_rules import disco

AXIS = mesh_lib.AXIS


def make_meta_train(
  config: meta_config.MetaTrainConfig,
  *,
  rule_params: types.MetaParams | None = None,
  devices: Sequence[jax.Device] | None = None,
) -> job_lib.Job:
  """The meta-training job of `config` (see the module's docstring).

  Args:
    config: the run's settings.
    rule_params: the rule to start from (default per `config.init`:
      Disco103's weights, found by `disco_rl.weights` when the first state
      is made, or a fresh meta-network drawn with `PRNGKey(rule_seed)`).
    devices: the devices (default: `config.num_devices`, or all).
  """
  setup = meta_setup.make_setup(config, devices)
  rule = setup.members[0].agent.update_rule
  num_agents, num_devices = config.num_agents, setup.num_devices
  specs = meta_setup.state_specs(len(setup.tasks), config.sampled_lifetimes)
  uniform_entropy = float(  # ln(actions), averaged over the agents.
    np.mean(
      [
        np.log(member.agent.num_actions)
        for member, _, size in setup.groups
        for _ in range(size)
      ]
    )
  )

  # -- The meta-step, on one device's view. --------------------------------

  def agent_meta_gradient(
    member: meta_objective.MetaTrainAgent,
    update_rule_params: types.MetaParams,
    step: chex.Array,
    agent_state: meta_objective.MetaTrainState,
    act_rng: chex.PRNGKey,
    grad_rng: chex.PRNGKey,
  ) -> tuple[
    types.MetaParams,
    meta_objective.MetaTrainState,
    types.LogDict,
    types.LogDict,
    rollout_checks.Fault | None,
  ]:
    """One agent's rollouts and meta-gradient ([2, ...] with
    `meta_grad_parts`: the parts of `meta_objective.PARTS`)."""
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
    fault = None
    if config.debug_checks:  # [K, T, B] -> [T, K * B]: b counts over all K.
      actions, rewards, logits = (
        jnp.swapaxes(x, 0, 1).reshape(x.shape[1], -1, *x.shape[3:])
        for x in (
          train_rollouts.actions,
          train_rollouts.rewards,
          train_rollouts.logits,
        )
      )
      fault = rollout_checks.find_fault(
        actions, rewards, member.agent.num_actions, step, logits_t=logits
      )
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
        unroll=config.num_inner_steps <= config.max_unrolled_inner_steps,
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
    state: meta_setup.PopulationState,
    act_keys: chex.PRNGKey,
    grad_keys: chex.PRNGKey,
  ) -> tuple[
    types.MetaParams,
    tuple[meta_objective.MetaTrainState, ...],
    types.LogDict,
    types.LogDict,
    list[chex.Array],
    rollout_checks.Fault | None,
  ]:
    """Every group's agents, concatenated over the groups [N, ...]:
    (meta-gradients, new agents per group, metrics {k: [N]}, meta logs
    {k: [N]}, each group's mean reward, [N] rollout faults or None)."""
    outputs, agents = [], []
    for (member, start, size), group in zip(
      setup.groups, state.agents, strict=True
    ):
      one_agent = functools.partial(
        agent_meta_gradient, member, state.update_rule_params, state.step
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

  def meta_step(
    state: meta_setup.PopulationState,
  ) -> tuple[meta_setup.PopulationState, types.LogDict]:
    """One meta-step: (new state, scalar logs)."""
    rng, step_rng = jax.random.split(state.rng)
    device_rng = jax.random.split(step_rng, num_devices)[
      jax.lax.axis_index(AXIS)
    ]
    # As upstream: per agent one key for acting (its training and
    # validation rollouts) and one for its meta-gradient.
    act_rng, grad_rng = jax.random.split(device_rng)
    grads, agents, metrics, meta_log, task_rewards, fault = (
      group_meta_gradients(
        state,
        jax.random.split(act_rng, num_agents),
        jax.random.split(grad_rng, num_agents),
      )
    )
    # The reward counts are per device: averaged like the upstream logs.
    meta_log, task_rewards = jax.lax.pmean((meta_log, task_rewards), AXIS)
    part_logs = {}
    if config.meta_grad_parts:  # [N, 2, ...]: the parts, then their sum.
      for i, part in enumerate(meta_objective.PARTS):
        part_logs.update(
          meta_grad_stats.summary(
            jax.tree.map(lambda g, i=i: g[:, i], grads), f'meta_grad_{part}'
          )
        )
      grads = jax.tree.map(lambda g: jnp.sum(g, axis=1), grads)
    updates, meta_opt_state = setup.meta_opt.update(grads, state.meta_opt_state)
    params = optax.apply_updates(state.update_rule_params, updates)
    agents, ages, lifetimes = meta_setup.renew_old_agents(
      setup,
      agents,
      state.ages + config.num_inner_steps,
      meta_setup.lifetimes_of(state),
      rng,
    )
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
    logs['uniform_entropy'] = jnp.asarray(uniform_entropy, jnp.float32)
    logs['meta_up_norm'] = optax.tree_utils.tree_norm(updates)
    logs[divergence.KEY] = jax.lax.pmin(
      divergence.all_finite((params, [a.learner_state.params for a in agents])),
      AXIS,
    )
    if len(setup.tasks) > 1:
      logs.update({f'rewards_task{g}': r for g, r in enumerate(task_rewards)})
    if config.agent_lifetime:
      logs['agents_renewed'] = jnp.sum(ages == 0).astype(jnp.float32)
    if fault is not None:  # The first agent's, then the first device's.
      fault = rollout_checks.first_of(
        dataclasses.replace(
          fault, source=jnp.arange(num_agents, dtype=jnp.int32)
        )
      )
      logs[rollout_checks.KEY] = rollout_checks.first_over_devices(
        fault, AXIS, config.num_inner_steps * config.batch_size_per_device
      )
    return meta_setup.population_state(
      lifetimes=lifetimes,
      update_rule_params=params,
      meta_opt_state=meta_opt_state,
      agents=agents,
      ages=ages,
      rng=rng,
      step=state.step + 1,
    ), logs

  init_program = compiled.placed(
    functools.partial(meta_setup.init_population, setup),
    mesh_lib.shardings(setup.mesh, specs),
    config.matmul_precision,
  )
  program = compiled.program(
    meta_step,
    length=config.steps_per_call,
    mesh=setup.mesh,
    state_specs=specs,
    precision=config.matmul_precision,
  )

  # -- On the host. ---------------------------------------------------------

  def init() -> meta_setup.PopulationState:
    params = rule_params
    if params is None:
      params = weights.starting_rule_params(
        rule, config.init == 'disco_103', config.rule_seed
      )
    return init_program(
      jax.random.PRNGKey(config.seed),
      mesh_lib.place(params, mesh_lib.replicated(setup.mesh)),
    )

  def state_shapes() -> meta_setup.PopulationState:
    return jax.eval_shape(
      init_program,
      jax.random.PRNGKey(config.seed),
      jax.eval_shape(rule.init_params, jax.random.PRNGKey(0))[0],
    )

  def step(
    state: meta_setup.PopulationState, count: int
  ) -> tuple[meta_setup.PopulationState, dict[str, np.ndarray]]:
    """`count` meta-steps; raises for the first problem: a training
    rollout that failed the debug checks (`RolloutError`) or a meta-step
    whose losses or parameters are not finite (`DivergedError`); the
    error carries the logs of the meta-steps before it
    (`divergence.good_steps`)."""
    state, logs = program(state, count)
    faults = logs.pop(rollout_checks.KEY, None)
    finite = ('meta_loss', 'meta_grad_norm', 'agent_total_loss')
    fault = rollout_checks.first_index(faults)
    diverged = divergence.first_diverged(logs, finite, until=fault)
    good = min([count] + [i for i in (fault, diverged) if i is not None])
    with divergence.keep_good(logs, good):
      divergence.raise_if_diverged(
        logs,
        finite,
        int(mesh_lib.fetch(state.step)) - count,
        'meta-step',
        "the rule's or the agents' parameters",
        hint='Try a smaller meta_learning_rate or learning_rate '
        '(--meta-learning-rate, --learning-rate).',
        until=fault,
      )
      rollout_checks.raise_if_faulty(
        faults, 'training rollout of agent {source}'
      )
    return state, logs

  return job_lib.Job(
    name='meta_train',
    setup=setup,
    init=init,
    state_shapes=state_shapes,
    step=step,
    program=program,
    steps_per_call=config.steps_per_call,
    report=meta_report.make(setup),
  )


def evaluate(
  job: job_lib.Job,
  state: meta_setup.PopulationState,
  *,
  params: types.MetaParams | None = None,
  env: config_lib.EvalConfig | None = None,
  progress: bool = False,
) -> dict[str, Any]:
  """A fresh agent trained by a meta-training job's rule: the eval job's
  summary (nothing is written).

  Args:
    job: the meta-training job (`make_meta_train`; a Trainer's `job`).
    state: its state.
    params: the rule (default: the state's).
    env: an `EvalConfig` with rule 'disco_103' and the rule's sizes
      (default: `default_eval_config`).
    progress: show the eval run's progress bar.

  Raises:
    ValueError: `env` is not such an `EvalConfig`, or its `rule_sizes`
      are not those of `params`.
  """
  if params is None:
    params = rule(job, state)
  sizes = disco.sizes_from_params(params)
  if env is None:
    env = default_eval_config(job, params)
  if not isinstance(env, config_lib.EvalConfig) or env.rule != 'disco_103':
    raise ValueError(
      'env must be an EvalConfig with rule disco_103 (a '
      f'meta-learned rule), got {env!r}.'
    )
  if disco.as_sizes(env.rule_sizes) != sizes:
    raise ValueError(
      f'env.rule_sizes ({disco.as_sizes(env.rule_sizes).text()}) differ '
      f"from the sizes of the rule's parameters ({sizes.text()}): give "
      f'env rule_sizes={sizes.changes()!r}.'
    )
  eval_job = eval_lib.make_eval(env, rule_params=params)
  rows: job_lib.Rows = []
  outcome = host_loop.run(
    eval_job,
    eval_job.init(),
    env.num_steps + eval_job.warmup,
    rows,
    progress=progress,
  )
  return eval_job.report.summary(outcome.state, rows, outcome.timing)


def default_eval_config(
  job: job_lib.Job, params: weights.Params
) -> config_lib.EvalConfig:
  """`evaluate`'s default: 200 learner steps of a fresh agent like the
  job's own (its network, rollouts, learning rate and matmul precision:
  `agent_fields`) trained by the rule `params` (its sizes read from them)
  on the job's first task."""
  return config_lib.EvalConfig(
    **{
      **job.setup.config.agent_fields(),
      **job.setup.tasks[0].eval_settings(),
      'num_steps': 200,
      'rule_sizes': disco.sizes_from_params(params).changes(),
    }
  )


def rule(job: job_lib.Job, state: meta_setup.PopulationState) -> weights.Params:
  """The rule's meta-parameters of a meta-training job's state, as NumPy
  arrays ({module: {name: array}}, the layout of `disco_103.npz`)."""
  del job
  return mesh_lib.fetch(state.update_rule_params)


def read_rule(
  output_dir: str | os.PathLike[str], step: int | None = None
) -> tuple[weights.Params, int]:
  """A meta-training run's rule at one of its checkpoints, read only:
  nothing in `output_dir` changes.

    params, step = read_rule('runs/meta_train', step=750)

  Returns:
    The rule's meta-parameters as NumPy arrays, {module: {name: array}} (the
    layout of `disco_103.npz`), and the checkpoint's meta-step.

  Raises:
    ValueError: `output_dir` holds no run, or an eval run.
    FileNotFoundError: the run has no checkpoint `step` (the message lists
      the ones it has) or none at all.
  """
  run_dir = run_dir_lib.RunDir(output_dir, read_only=True)
  run_dir.saved_settings('meta_train')  # Raises for an eval run or none.
  if not run_dir.file(run_dir_lib.CHECKPOINTS).is_dir():
    raise FileNotFoundError(
      f'No checkpoint in {run_dir.path}: the run has '
      f'no {run_dir_lib.CHECKPOINTS}/ directory.'
    )
  # Only the rule, as saved (replicated over the run's devices, so whatever
  # devices or processes the run had): no job built, nothing traced.
  checkpoints = run_dir.checkpoints()
  try:
    step = checkpoints.resolve_step(step)
    state = checkpoints.read(step)
  finally:
    checkpoints.close()
  return state['update_rule_params'], step
