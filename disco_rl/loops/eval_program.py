# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval program as pure functions, in reading order.

As in the upstream eval notebook, each iteration acts for one rollout in a
few environments, stores the trajectories in a FIFO replay buffer and, once
the buffer holds a learner batch, takes one learner step on a uniformly
sampled batch:

  init            the state of S runs (`reset` for jittable environments)
  act             one rollout in a run's environments
  store           its episode statistics, the rollout into the buffer
  maybe_learn     a learner step once the buffer holds a batch
  iteration       act, store, maybe learn: one run's iteration
  run             `num_steps` iterations of every run, one `lax.scan`

Every function takes the run's `EvalSetup` (static) first; the rule's
parameters are an argument of the program, not part of it. `run` is the
body of the fused loop's `jit(shard_map(...))` (`eval_loop.EvalLoop`);
`host_act` and `host_store_and_learn` those of the host dm_env loop
(`host_eval_loop.HostEvalLoop`), which steps the environments in Python in
between.

Inside `shard_map` each device holds its share of the environments, of the
buffer and of the learner batch; gradients and the rule's statistics are
averaged across devices (the agent's `pmean` over `devices.AXIS`), so the
replicated parameters stay identical. `config.num_seeds` independent runs
(seeds `seed`, `seed + 1`, ...) share the program, as purejaxrl's
`vmap(make_train(config))`: every part of the state but the iteration count
has a seed axis S, and the iteration is `vmap`ped over the seeds. The seed
axis is sharded over the mesh's `devices.SEED_AXIS`: with k seed shards
(`EvalSetup.seed_shards`) each group of devices holds S / k of the runs
whole, and the collectives stay within a group. Run `i` computes what a run
with `seed + i` alone on a group's devices computes (to float rounding).
"""

from typing import Any

import chex
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np

from disco_rl import actors
from disco_rl import agent as agent_lib
from disco_rl import types
from disco_rl.loops import devices as devices_lib
from disco_rl.loops import divergence
from disco_rl.loops import driver
from disco_rl.loops import replay
from disco_rl import rollout_checks
from disco_rl.loops.eval_setup import EvalSetup

AXIS = devices_lib.AXIS
SEED = devices_lib.SEED_AXIS
# The programs' [K, S] metrics: K iterations of the S runs.
METRICS_SPEC = P(None, SEED)


@chex.dataclass
class EvalState:
  """Everything the eval program carries from one iteration to the next.

  Replicated over a seed group's devices: `learner_state` [S, ...], `rng`
  [S, 2], and on every device `step` [] (shared by the S seeds' runs, which
  go in step). Per device (a leading device axis D, the devices of a seed
  group, sharded over the mesh's batch axis): `actor_state` [D, S, ...],
  `env_state` [D, S, ...], `timestep` [D, S, E, ...], `acc_rewards`
  [D, S, E] and `replay` [D, S, C, ...], with E environments and C buffer
  slots per device and seed. The seed axis S is sharded over the seed
  groups (`state_specs`).

  Attributes:
    learner_state: the agent's parameters, optimiser and rule state.
    actor_state: the network's acting state.
    env_state: the jittable environments' state (None for host ones).
    timestep: the environments' current timestep.
    acc_rewards: each environment's return so far in its current episode.
    replay: the replay buffer.
    rng: the key the next iteration splits.
    step: [] int32, iterations done.
  """

  learner_state: agent_lib.LearnerState
  actor_state: types.HaikuState
  env_state: Any
  timestep: types.EnvironmentTimestep
  acc_rewards: chex.Array
  replay: replay.ReplayState
  rng: chex.PRNGKey
  step: chex.Array


def state_specs() -> EvalState:
  """The `PartitionSpec` of each part of an `EvalState` (a tree prefix)."""
  per_device = P(AXIS, SEED)
  return EvalState(learner_state=P(SEED), actor_state=per_device,
                   env_state=per_device, timestep=per_device,
                   acc_rewards=per_device, replay=per_device, rng=P(SEED),
                   step=P())


def _map_per_device(fn, state: EvalState) -> EvalState:
  """Applies `fn` to the per-device parts of a state."""
  return devices_lib.map_per_device(fn, state_specs(), state)


def _seed_axes() -> EvalState:
  """The seed axis of each part of a state without its device axis (a
  `vmap` axes prefix): 0, but none for the shared `step`."""
  return EvalState(learner_state=0, actor_state=0, env_state=0, timestep=0,
                   acc_rewards=0, replay=0, rng=0, step=None)


def _per_seed(fn):
  """`fn(state, *args) -> (state, metrics)` of one run, mapped over the S
  runs of a state without its device axis (and over the args' leading
  axis); metrics get [S]."""
  def mapped(state, *args):
    return jax.vmap(fn, in_axes=(_seed_axes(),) + (0,) * len(args),
                    out_axes=(_seed_axes(), 0))(state, *args)
  return mapped


def _device_key(key: chex.PRNGKey) -> chex.PRNGKey:
  """A key of this device's own, derived from a replicated one."""
  return jax.random.fold_in(key, jax.lax.axis_index(AXIS))


def iteration_keys(rng: chex.PRNGKey):
  """(next loop key, acting key, learning key), replicated."""
  return tuple(jax.random.split(rng, 3))


# ----------------------------------------------------------------------------
# The initial state (traced under `jit`, outside `shard_map`).


def init(setup: EvalSetup, rngs: chex.PRNGKey, env_state,
         timestep) -> EvalState:
  """The state of S runs from their [S, 2] keys and their environments'
  state and first timestep ([D, S, ...]); per-device parts [D, S, ...]."""
  states = jax.vmap(lambda *args: _init_run(setup, *args), in_axes=(0, 1, 1),
                    out_axes=_seed_axes())(rngs, env_state, timestep)
  return _map_per_device(
      lambda part: jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1), part),
      states)


def reset(setup: EvalSetup, rngs: chex.PRNGKey) -> EvalState:
  """`init` with S runs of jittable environments reset from their keys."""
  def reset_run(rng):  # One run's environments, [D, ...].
    env_rng, rng = jax.random.split(rng)
    env_state, timestep = jax.vmap(setup.env.reset)(
        jax.random.split(env_rng, setup.batch_devices))
    return rng, env_state, timestep

  rngs, env_state, timestep = jax.vmap(reset_run, out_axes=(0, 1, 1))(rngs)
  return init(setup, rngs, env_state, timestep)


def _init_run(setup: EvalSetup, rng: chex.PRNGKey, env_state,
              timestep) -> EvalState:
  """One run's state: per-device parts get their leading device axis."""
  num = setup.batch_devices
  learner_rng, actor_rng, loop_rng = jax.random.split(rng, 3)
  per_device = lambda x: jnp.broadcast_to(x, (num,) + jnp.shape(x))
  agent = setup.agent
  example = _example_rollout(setup, devices_lib.local_block(timestep))
  return EvalState(
      learner_state=agent.initial_learner_state(learner_rng),
      actor_state=jax.tree.map(per_device,
                               agent.initial_actor_state(actor_rng)),
      env_state=env_state,
      timestep=timestep,
      acc_rewards=jnp.zeros((num, setup.envs_per_device), jnp.float32),
      replay=jax.tree.map(per_device, replay.init(
          example, setup.capacity_per_device)),
      rng=loop_rng,
      step=jnp.zeros((), jnp.int32),
  )


def _example_rollout(setup: EvalSetup, timestep) -> types.ActorRollout:
  """Zeros shaped like one device's [T, E, ...] stored rollout."""
  agent = setup.agent
  params = jax.eval_shape(agent.initial_learner_state,
                          jax.random.PRNGKey(0)).params
  actor_state = jax.eval_shape(agent.initial_actor_state,
                               jax.random.PRNGKey(0))
  recorded, _ = jax.eval_shape(agent.actor_step, params,
                               jax.random.PRNGKey(0), timestep, actor_state)
  rollout = replay.keep_outputs(types.ActorRollout.from_timestep(recorded),
                                setup.config.behaviour_outputs)
  return jax.tree.map(
      lambda s: jnp.zeros((setup.config.rollout_len,) + s.shape, s.dtype),
      rollout)


# ----------------------------------------------------------------------------
# One iteration of one run, on one device's view (inside `shard_map`, the
# per-device parts without their device axis).


def act(setup: EvalSetup, state: EvalState, key: chex.PRNGKey):
  """One rollout of `rollout_len` steps in the run's jittable environments.

  Returns:
    (state with the new actor, environment and timestep, [T, E] rollout).
  """
  rollout, actor_state, timestep, env_state = actors.unroll_jittable_actor(
      state.learner_state.params, state.actor_state, state.timestep,
      state.env_state, _device_key(key), setup.env, setup.config.rollout_len,
      setup.agent.actor_step)
  return state.replace(actor_state=actor_state, timestep=timestep,
                       env_state=env_state), rollout


def store(setup: EvalSetup, state: EvalState, rollout: types.ActorRollout):
  """Episode statistics of a [T, E] rollout, and the rollout buffered.

  With `config.debug_checks` the stats also hold the rollout's first bad
  entry (`rollout_checks.KEY`: policy logits that are not finite, an action
  out of range or a reward that is not finite), raised on the host.
  """
  config = setup.config
  checks = {}
  if config.debug_checks:
    fault = rollout_checks.find_fault(rollout.actions, rollout.rewards,
                                      setup.agent.num_actions, state.step,
                                      logits_t=rollout.logits)
    checks[rollout_checks.KEY] = rollout_checks.first_over_devices(
        fault, AXIS, rollout.rewards.shape[1])
  acc_rewards, returns = actors.accumulate_rewards(
      state.acc_rewards, (rollout.rewards, rollout.discounts))
  total, episodes = actors.episode_returns(returns, rollout.discounts)
  stats = dict(return_sum=jax.lax.psum(total, AXIS),
               episodes=jax.lax.psum(episodes, AXIS), **checks)
  buffer = replay.add(state.replay,
                      replay.keep_outputs(rollout, config.behaviour_outputs))
  return state.replace(acc_rewards=acc_rewards, replay=buffer), stats


def maybe_learn(setup: EvalSetup, state: EvalState, key: chex.PRNGKey,
                rule_params):
  """The learner step once each buffer holds a learner batch (else NaN logs).

  Every device's (and seed's) buffer holds as many trajectories, `(step +
  1) * E` up to its capacity after this iteration's rollout: the shared
  `step` decides, so every device and seed takes the same branch (a
  `cond`, also under the seeds' `vmap`).
  """
  stored = jnp.minimum(setup.capacity_per_device,
                       (state.step + 1) * setup.envs_per_device)
  learn_now = stored >= setup.batch_per_device

  def skip(state, key, rule_params):
    del key, rule_params
    logs = {k: jnp.full((), jnp.nan, jnp.float32) for k in setup.log_keys}
    return state, dict(logs, **{divergence.KEY: jnp.ones((), jnp.float32)})

  state, logs = jax.lax.cond(learn_now, lambda *a: learn(setup, *a), skip,
                             state, key, rule_params)
  return state, dict(logs, learned=learn_now.astype(jnp.float32))


def learn(setup: EvalSetup, state: EvalState, key: chex.PRNGKey,
          rule_params):
  """One learner step on a sampled batch; scalar logs averaged."""
  sample_key, step_key = jax.random.split(_device_key(key))
  batch = replay.sample(state.replay, sample_key, setup.batch_per_device)
  learner_state, _, logs = setup.agent.learner_step(
      step_key, batch, state.learner_state, state.actor_state, rule_params,
      False)
  scalars = jax.lax.pmean({k: logs[k] for k in setup.log_keys}, AXIS)
  scalars[divergence.KEY] = jax.lax.pmin(
      divergence.all_finite(learner_state.params), AXIS)
  return state.replace(learner_state=learner_state), scalars


def iteration(setup: EvalSetup, state: EvalState, rule_params):
  """Act, store, maybe learn: one iteration of one run."""
  rng, act_key, learn_key = iteration_keys(state.rng)
  state, rollout = act(setup, state, act_key)
  state, stats = store(setup, state, rollout)
  state, logs = maybe_learn(setup, state, learn_key, rule_params)
  return state.replace(rng=rng, step=state.step + 1), dict(stats, **logs)


def store_and_learn(setup: EvalSetup, state: EvalState,
                    rollout: types.ActorRollout, rule_params):
  """The host loop's iteration of one run once it has acted: store, maybe
  learn."""
  rng, _, learn_key = iteration_keys(state.rng)
  state, stats = store(setup, state, rollout)
  state, logs = maybe_learn(setup, state, learn_key, rule_params)
  return state.replace(rng=rng, step=state.step + 1), dict(stats, **logs)


# ----------------------------------------------------------------------------
# The programs' bodies (per device, inside `shard_map`; per-device parts
# arrive as [1, ...] blocks).


def run(setup: EvalSetup, state: EvalState, num_steps: chex.Array,
        rule_params):
  """`num_steps` (<= `steps_per_call`) iterations of every run in one
  `lax.scan`: the fused loop's program.

  Returns:
    (state, {name: [steps_per_call, S]}: NaN past `num_steps`).
  """
  def all_runs(state, rule_params):
    return _per_seed(lambda s: iteration(setup, s, rule_params))(state)

  state, metrics = driver.scan_up_to(
      all_runs, _map_per_device(devices_lib.local_block, state), num_steps,
      setup.config.steps_per_call, rule_params)
  return _map_per_device(devices_lib.device_block, state), metrics


def host_act(setup: EvalSetup, params, key: chex.PRNGKey,
             timestep: types.EnvironmentTimestep, actor_state):
  """One actor step of every run (the host loop's acting program).

  Args:
    setup: the run's setup.
    params: [S, ...] the agents' parameters.
    key: the step's replicated key.
    timestep: [1, S, E, ...] this device's block of the timesteps.
    actor_state: [1, S, ...] this device's block of the acting states.

  Returns:
    ([1, S, E, ...] the recorded step, [1, S, ...] the new acting states).
  """
  def act_step(params, timestep, actor_state):
    return setup.agent.actor_step(params, _device_key(key), timestep,
                                  actor_state)
  recorded, actor_state = jax.vmap(act_step)(
      params, devices_lib.local_block(timestep),
      devices_lib.local_block(actor_state))
  return devices_lib.device_block((recorded, actor_state))


def host_store_and_learn(setup: EvalSetup, state: EvalState,
                         rollout: types.ActorRollout, rule_params):
  """`store_and_learn` of every run; the rollout [1, S, T, E, ...] (the
  host loop's learning program)."""
  state, metrics = _per_seed(
      lambda s, r: store_and_learn(setup, s, r, rule_params))(
          _map_per_device(devices_lib.local_block, state),
          devices_lib.local_block(rollout))
  return _map_per_device(devices_lib.device_block, state), metrics


# ----------------------------------------------------------------------------
# On the host: the metrics of a call.


def metrics_rows(setup: EvalSetup, metrics: dict[str, np.ndarray],
                 first_step: int) -> list[dict[str, float]]:
  """CSV rows from the [K, S] metrics of K iterations starting at
  `first_step`: one per iteration and seed, in that order."""
  config = setup.config
  rows = []
  per_iteration = config.num_envs * config.rollout_len
  num_steps, num_seeds = np.shape(metrics['episodes'])
  for i in range(num_steps):
    step = first_step + i
    for j in range(num_seeds):
      episodes = float(metrics['episodes'][i, j])
      row = dict(step=step, seed=config.seed + j,
                 env_steps=(step + 1) * per_iteration, episodes=episodes,
                 avg_return=(float(metrics['return_sum'][i, j]) / episodes
                             if episodes else float('nan')),
                 learned=int(metrics['learned'][i, j]))
      row.update({k: float(metrics[k][i, j]) for k in setup.log_keys})
      rows.append(row)
  return rows


def raise_first_problem(setup: EvalSetup, metrics: dict[str, np.ndarray],
                        first_step: int) -> None:
  """Raises for the first problem of a call's [K, S] host `metrics` (and
  drops the checks' entries).

  A rollout that failed the debug checks (`RolloutError`), or a learner
  step whose loss or parameters are not finite (`divergence.DivergedError`),
  whichever came first in a run (a step acts before it learns); the runs
  are checked in seed order.
  """
  config = setup.config
  faults = metrics.pop(rollout_checks.KEY, None)
  flags = metrics.pop(divergence.KEY)
  for j in range(config.num_seeds):
    run_name = '' if config.num_seeds == 1 else f'seed {config.seed + j} '
    run_faults = (None if faults is None
                  else jax.tree.map(lambda x, j=j: x[:, j], faults))
    columns = {k: v[:, j] for k, v in metrics.items()}
    columns[divergence.KEY] = flags[:, j]
    divergence.raise_if_diverged(
        columns, ('total_loss',), first_step, run_name + 'loop step',
        "the agent's parameters", active=columns['learned'] > 0,
        hint='Try a smaller learning_rate (--learning-rate).',
        until=rollout_checks.first_index(run_faults))
    rollout_checks.raise_if_faulty(run_faults, run_name + 'rollout')


def bytes_per_trajectory(state: EvalState) -> int:
  """Bytes one stored trajectory of one run takes in the replay buffer."""
  one_run = jax.tree.map(lambda x: x[0],
                         devices_lib.local_block(state.replay))
  return replay.bytes_per_trajectory(one_run)
