# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval job's steps: module functions of (setup, state, ...).

One iteration of one run, on one device's view (inside the mesh), in
reading order:

  init_runs       the state of the S runs (under `jit`, outside the mesh)
  act             one rollout in a run's environments
  store           its episode statistics, the rollout into the buffer
  update          a learner step on a given batch
  learn           `update` on a sampled batch
  maybe_learn     `learn` once the buffer holds a learner batch
  learn_on_policy `update`s over this iteration's rollout (with `epochs`)
  iteration       act (unless the host acted), store, maybe learn (or
                  learn on-policy)

`per_seed` maps a step of one run over the S runs of a program. The keys
(`iteration_keys`, `actor_keys`) are shared with host acting, so a run
stepped on the host draws the actions a compiled run of its seed would.
"""

from collections.abc import Callable
import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from disco_rl import actors
from disco_rl import replay
from disco_rl import rollout_checks
from disco_rl import types
from disco_rl.jobs.eval import setup as setup_lib
from disco_rl.runtime import divergence
from disco_rl.runtime import mesh as mesh_lib

AXIS = mesh_lib.AXIS
State = setup_lib.EvalState
Setup = setup_lib.EvalSetup
# A step's outputs by name: [] per device, [S] per run, [N, S] per call.
Metrics = dict[str, chex.Array]


def iteration_keys(rng: chex.PRNGKey) -> tuple[chex.PRNGKey, ...]:
  """(the next iteration's key, the acting key, the learning key)."""
  rng, act_key, learn_key = jax.random.split(rng, 3)
  return rng, act_key, learn_key


def device_key(key: chex.PRNGKey) -> chex.PRNGKey:
  """A key of this device's own, from a replicated one (inside the mesh)."""
  return jax.random.fold_in(key, jax.lax.axis_index(AXIS))


def actor_keys(setup: Setup, act_key: chex.PRNGKey) -> chex.PRNGKey:
  """[T, 2]: this device's key of each actor step of a rollout (as
  `actors.unroll_jittable_actor` splits it)."""
  return jax.random.split(device_key(act_key), setup.config.rollout_len)


def per_seed(fn: Callable[..., Any]) -> Callable[..., Any]:
  """`fn(state, *args)` of one run mapped over the S runs (and over the
  leading axis of `args`); its outputs get [S]."""

  def mapped(state: State, *args: Any) -> tuple[State, Any]:
    return jax.vmap(
      fn,
      in_axes=(setup_lib.SEED_AXES,) + (0,) * len(args),
      out_axes=(setup_lib.SEED_AXES, 0),
    )(state, *args)

  return mapped


def init_runs(
  setup: Setup,
  rngs: chex.Array,
  env_state: Any,
  timestep: types.EnvironmentTimestep,
  rule_params: types.MetaParams,
) -> State:
  """The S runs from [S, 2] keys, their environments' state and first
  timestep ([D, S, ...]) and the rule's parameters, as [D, S, ...]."""

  def one_run(
    rng: chex.PRNGKey, env_state: Any, timestep: types.EnvironmentTimestep
  ) -> State:
    learner_rng, actor_rng, loop_rng = jax.random.split(rng, 3)
    agent, devices = setup.agent, setup.batch_devices
    per_device = lambda x: jnp.broadcast_to(x, (devices,) + x.shape)
    buffer = replay.init(
      setup_lib.example_rollout(setup, mesh_lib.local_block(timestep)),
      setup.capacity_per_device,
    )
    return State(
      learner_state=agent.initial_learner_state(learner_rng),
      actor_state=jax.tree.map(
        per_device, agent.initial_actor_state(actor_rng)
      ),
      env_state=env_state,
      timestep=timestep,
      acc_rewards=jnp.zeros((devices, setup.envs_per_device), jnp.float32),
      replay=jax.tree.map(per_device, buffer),
      rule_params=rule_params,
      rng=loop_rng,
      step=jnp.zeros((), jnp.int32),
    )

  states = jax.vmap(one_run, in_axes=(0, 1, 1), out_axes=setup_lib.SEED_AXES)(
    rngs, env_state, timestep
  )
  return mesh_lib.map_per_device(  # [S, D, ...] -> [D, S, ...]
    lambda part: jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1), part),
    setup_lib.STATE_SPECS,
    states,
  )


def reset_envs(
  setup: Setup, rng: chex.PRNGKey
) -> tuple[chex.PRNGKey, Any, Any]:
  """One run's jittable environments reset: (its key, their [D, ...] state
  and first timestep)."""
  env_rng, rng = jax.random.split(rng)
  env_state, timestep = jax.vmap(setup.env.reset)(
    jax.random.split(env_rng, setup.batch_devices)
  )
  return rng, env_state, timestep


def act(
  setup: Setup, state: State, key: chex.PRNGKey
) -> tuple[State, types.ActorRollout]:
  """One rollout of `rollout_len` steps in jittable environments."""
  rollout, actor_state, timestep, env_state = actors.unroll_jittable_actor(
    state.learner_state.params,
    state.actor_state,
    state.timestep,
    state.env_state,
    device_key(key),
    setup.env,
    setup.config.rollout_len,
    setup.agent.actor_step,
  )
  return dataclasses.replace(
    state, actor_state=actor_state, timestep=timestep, env_state=env_state
  ), rollout


def store(
  setup: Setup, state: State, rollout: types.ActorRollout
) -> tuple[State, Metrics]:
  """Episode statistics of a [T, E] rollout, and the rollout buffered.

  With `debug_checks` the statistics hold the rollout's first bad entry
  (`rollout_checks.KEY`), raised on the host.
  """
  config = setup.config
  checks: Metrics = {}
  if config.debug_checks:
    fault = rollout_checks.find_fault(
      rollout.actions,
      rollout.rewards,
      setup.agent.num_actions,
      state.step,
      logits_t=rollout.logits,
    )
    checks[rollout_checks.KEY] = rollout_checks.first_over_devices(
      fault, AXIS, rollout.rewards.shape[1]
    )
  acc_rewards, returns = actors.accumulate_rewards(
    state.acc_rewards, (rollout.rewards, rollout.discounts)
  )
  total, episodes = actors.episode_returns(returns, rollout.discounts)
  buffer = replay.add(
    state.replay, replay.keep_outputs(rollout, config.behaviour_outputs)
  )
  return dataclasses.replace(
    state, acc_rewards=acc_rewards, replay=buffer
  ), dict(
    return_sum=jax.lax.psum(total, AXIS),
    episodes=jax.lax.psum(episodes, AXIS),
    **checks,
  )


def step_learning_rate(
  setup: Setup, state: State, learning_rate: chex.Array
) -> chex.Array:
  """[] the rate of this iteration's learner step: the run's, or during a
  warm start (its first `warm_start_steps` updates, the iterations from
  `setup.warmup` on) `warm_start_learning_rate` when set."""
  config = setup.config
  if config.warm_start_learning_rate is None:
    return learning_rate
  warm = state.step - setup.warmup < config.warm_start_steps
  return jnp.where(
    warm, jnp.asarray(config.warm_start_learning_rate, jnp.float32),
    learning_rate,
  )  # fmt: skip


def update(
  setup: Setup,
  state: State,
  batch: types.ActorRollout,
  key: chex.PRNGKey,
  learning_rate: chex.Array,
) -> tuple[State, Metrics]:
  """One learner step on a [T, B] `batch` at `learning_rate`; scalar logs
  averaged over the devices."""
  learner_state, _, logs = setup.agent.learner_step(
    key,
    batch,
    state.learner_state,
    state.actor_state,
    state.rule_params,
    False,
    learning_rate=learning_rate,
  )
  scalars = jax.lax.pmean({k: logs[k] for k in setup.log_keys}, AXIS)
  scalars[divergence.KEY] = jax.lax.pmin(
    divergence.all_finite(learner_state.params), AXIS
  )
  return dataclasses.replace(state, learner_state=learner_state), scalars


def learn(
  setup: Setup, state: State, key: chex.PRNGKey, learning_rate: chex.Array
) -> tuple[State, Metrics]:
  """One learner step on a sampled batch at the run's learning rate (at
  the warm start's, `step_learning_rate`)."""
  learning_rate = step_learning_rate(setup, state, learning_rate)
  sample_key, step_key = jax.random.split(device_key(key))
  batch = replay.sample(state.replay, sample_key, setup.batch_per_device)
  return update(setup, state, batch, step_key, learning_rate)


def learn_on_policy(
  setup: Setup,
  state: State,
  rollout: types.ActorRollout,
  key: chex.PRNGKey,
  learning_rate: chex.Array,
) -> tuple[State, Metrics]:
  """`epochs` passes over this iteration's [T, E] rollout, each of
  `minibatches` learner steps on a disjoint share of its E environments
  (a fresh permutation per pass, as Stoix's and purejaxrl's PPO loops);
  logs averaged over the steps (the divergence flag: their minimum).

  The rollout is learned from as the buffer would give it
  (`replay.keep_outputs`, then `replay.restore`).
  """
  config = setup.config
  learning_rate = step_learning_rate(setup, state, learning_rate)
  batch = replay.restore(replay.keep_outputs(rollout, config.behaviour_outputs))
  size = setup.batch_per_device // config.minibatches

  def one_pass(state: State, pass_key: chex.PRNGKey) -> tuple[State, Metrics]:
    order_key, steps_key = jax.random.split(pass_key)
    order = jax.random.permutation(order_key, setup.batch_per_device)
    shares = order.reshape(config.minibatches, size)
    step_keys = jax.random.split(steps_key, config.minibatches)

    def one_step(
      state: State, xs: tuple[chex.Array, chex.PRNGKey]
    ) -> tuple[State, Metrics]:
      share, step_key = xs  # [size] environments, a key.
      minibatch = jax.tree.map(lambda x: x[:, share], batch)
      return update(setup, state, minibatch, step_key, learning_rate)

    return jax.lax.scan(one_step, state, (shares, step_keys))

  state, logs = jax.lax.scan(
    one_pass, state, jax.random.split(device_key(key), config.epochs)
  )
  flag = logs.pop(divergence.KEY)
  logs = jax.tree.map(jnp.mean, logs)
  logs[divergence.KEY] = jnp.min(flag)
  return state, logs


def maybe_learn(
  setup: Setup, state: State, key: chex.PRNGKey, learning_rate: chex.Array
) -> tuple[State, Metrics]:
  """`learn` once each buffer holds a learner batch (else NaN logs).

  Every device's and run's buffer holds `min(C, (step + 1) * E)`
  trajectories after this iteration's rollout: the shared `step` decides,
  so all take the same branch.
  """
  stored = jnp.minimum(
    setup.capacity_per_device, (state.step + 1) * setup.envs_per_device
  )
  learn_now = stored >= setup.batch_per_device

  def skip(
    state: State, key: chex.PRNGKey, learning_rate: chex.Array
  ) -> tuple[State, Metrics]:
    del key, learning_rate
    nan = jnp.full((), jnp.nan, jnp.float32)
    return state, dict(
      {k: nan for k in setup.log_keys},
      **{divergence.KEY: jnp.ones((), jnp.float32)},
    )

  state, logs = jax.lax.cond(
    learn_now,
    lambda *args: learn(setup, *args),
    skip,
    state,
    key,
    learning_rate,
  )
  return state, dict(logs, learned=learn_now.astype(jnp.float32))


def iteration(
  setup: Setup,
  state: State,
  learning_rate: chex.Array,
  rollout: types.ActorRollout | None = None,
) -> tuple[State, Metrics]:
  """Act (unless the host acted: `rollout`), store, maybe learn (at the
  run's [] `learning_rate`), or with `epochs` learn on-policy from the
  rollout: one iteration of one run."""
  rng, act_key, learn_key = iteration_keys(state.rng)
  if rollout is None:
    state, rollout = act(setup, state, act_key)
  state, stats = store(setup, state, rollout)
  if setup.config.epochs:
    state, logs = learn_on_policy(
      setup, state, rollout, learn_key, learning_rate
    )
    updates = setup.config.epochs * setup.config.minibatches
    logs = dict(logs, learned=jnp.full((), updates, jnp.float32))
  else:
    state, logs = maybe_learn(setup, state, learn_key, learning_rate)
  return dataclasses.replace(state, rng=rng, step=state.step + 1), dict(
    stats, **logs
  )
