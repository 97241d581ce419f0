# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Acting in environments stepped on the host (the dm_env Catch, envpool's
Atari), for the eval job.

Each actor step is one compiled call, the host steps the environments in
between, and storing and learning are one more call (the eval job's own
`iteration`, given the rollout). The keys are the compiled iteration's
(`eval.iteration_keys`, `eval.actor_keys`), so a host run draws its actions
with the keys a compiled run of the same seed would.
"""

from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np

from disco_rl import types
from disco_rl import utils
from disco_rl.runtime import checkpoints as checkpoints_lib
from disco_rl.runtime import compiled
from disco_rl.runtime import divergence
from disco_rl.runtime import mesh as mesh_lib

AXIS, SEED = mesh_lib.AXIS, mesh_lib.SEED_AXIS
PER_DEVICE = P(AXIS, SEED)


class HostEnvironments:
  """The runs' environments (one object per run) and their states: the
  job's `host_state`, checkpointed as pickled text."""

  def __init__(self, envs):
    self.envs, self.states = list(envs), [None] * len(envs)

  def save(self) -> dict[str, Any]:
    return dict(
      host_env=checkpoints_lib.encode_object((self.envs, self.states))
    )

  def load(self, saved: dict[str, Any]) -> None:
    self.envs[:], self.states[:] = checkpoints_lib.decode_object(
      saved['host_env']
    )


class NothingToCompile:
  """The `Job.program` of host acting: its calls compile on first use."""

  def compile(self, state) -> float:
    del state
    return 0.0

  def lower(self, state):
    del state
    raise ValueError(
      'A job that steps its environments on the host has no '
      'single program to lower.'
    )


def make(
  setup,
  *,
  state_specs,
  seed_keys,
  iteration_keys,
  actor_keys,
  actor_step,
  learn_iteration,
  rates,
  init_program,
  rule_params,
  rule_shapes,
  check,
) -> dict[str, Any]:
  """The `Job` fields of host acting.

  Args:
    setup: the eval job's `EvalSetup` (its `host_envs` are stepped here).
    state_specs: the `PartitionSpec`s of the eval job's state.
    seed_keys: [S, 2], each run's key.
    iteration_keys: `rng -> (next rng, act key, learn key)`.
    actor_keys: `(act key) -> [T, 2]` keys of a rollout's actor steps, on
      one device (inside the mesh).
    actor_step: the agent's `actor_step`.
    learn_iteration: `(state, rates, rollout) -> (state, metrics)` of the
      runs: store and maybe learn.
    rates: [S] the runs' learning rates, on the mesh.
    init_program: the eval job's initial state from keys, environment
      state (None), timesteps and the rule's parameters.
    rule_params: `() -> params`, placed on the mesh.
    rule_shapes: `() -> params` of `jax.ShapeDtypeStruct`s.
    check: `(metrics, first step) -> None`, raises for a call's problems.
  """
  config, mesh = setup.config, setup.mesh
  num_runs, num_devices = config.num_runs, setup.batch_devices
  host = HostEnvironments(setup.host_envs)
  obs_spec = setup.env.single_observation_spec()

  def to_devices(timesteps):
    """S host timesteps [E, ...] as [D, S, E / D, ...] on the mesh."""

    def split(*xs):
      x = np.stack([np.asarray(x) for x in xs])  # [S, E, ...]
      x = x.reshape((num_runs, num_devices, -1) + x.shape[2:])
      return np.swapaxes(x, 0, 1)

    timestep = jax.tree.map(split, *timesteps)
    timestep = timestep.replace(
      observation=jax.tree.map(
        lambda x, s: x.astype(s.dtype), timestep.observation, obs_spec
      ),
      step_type=timestep.step_type.astype(np.int32),
      reward=timestep.reward.astype(np.float32),
    )
    return mesh_lib.place(timestep, mesh_lib.shardings(mesh, PER_DEVICE))

  def one_actor_step(actor_state, params, act_keys, t, timestep):
    """Actor step `t` of every run, on one device."""
    keys = jax.vmap(lambda k: actor_keys(k)[t])(act_keys)
    recorded, actor_state = jax.vmap(actor_step)(
      params, keys, timestep, actor_state
    )
    return actor_state, recorded

  act_program = compiled.program(
    one_actor_step,
    length=1,
    mesh=mesh,
    state_specs=PER_DEVICE,
    operand_specs=(P(SEED), P(SEED), P(), PER_DEVICE),
    output_specs=PER_DEVICE,
    precision=config.matmul_precision,
  )
  learn_program = compiled.program(
    learn_iteration,
    length=1,
    mesh=mesh,
    state_specs=state_specs,
    operand_specs=(P(SEED), PER_DEVICE),
    output_specs=P(SEED),
    precision=config.matmul_precision,
  )

  def init():
    rngs, timesteps = [], []
    for j, key in enumerate(seed_keys):
      env_rng, rng = jax.random.split(key)
      host.states[j], timestep = host.envs[j].reset(env_rng)
      rngs.append(rng)
      timesteps.append(timestep)
    return init_program(
      jnp.stack(rngs), None, to_devices(timesteps), rule_params()
    )

  def state_shapes():
    shape = (num_devices, num_runs, setup.envs_per_device)
    timestep = types.EnvironmentTimestep(
      observation=jax.tree.map(
        lambda s: jax.ShapeDtypeStruct(shape + s.shape, s.dtype), obs_spec
      ),
      step_type=jax.ShapeDtypeStruct(shape, jnp.int32),
      reward=jax.ShapeDtypeStruct(shape, jnp.float32),
    )
    return jax.eval_shape(
      init_program, seed_keys, None, timestep, rule_shapes()
    )

  def one_iteration(state):
    act_keys = jnp.stack(
      [iteration_keys(rng)[1] for rng in mesh_lib.fetch(state.rng)]
    )
    act_keys = mesh_lib.place(act_keys, mesh_lib.shardings(mesh, P(SEED)))
    timestep, actor_state, steps = state.timestep, state.actor_state, []
    for t in range(config.rollout_len):
      actor_state, recorded = act_program(
        actor_state,
        1,
        state.learner_state.params,
        act_keys,
        jnp.int32(t),
        timestep,
      )
      recorded = jax.tree.map(lambda x: x[0], recorded)  # [D, S, E/D...]
      timesteps = []
      for j, env in enumerate(host.envs):
        host.states[j], host_timestep = env.step(
          host.states[j], recorded.actions[:, j].reshape(-1)
        )
        timesteps.append(host_timestep)
      timestep = to_devices(timesteps)
      steps.append(recorded)
    # [D, S, T, E, ...]: time after the device and seed axes.
    rollout = mesh_lib.place(
      types.ActorRollout.from_timestep(utils.tree_stack(steps, axis=2)),
      mesh_lib.shardings(mesh, PER_DEVICE),
    )
    return learn_program(
      state.replace(timestep=timestep, actor_state=actor_state),
      1,
      rates,
      rollout,
    )

  def step(state, count):
    """`count` iterations, each checked as it ends; a problem's error
    carries the good steps of the whole call (`divergence.keep_good`):
    the iterations before it and the good part of its own."""
    calls: list[dict[str, np.ndarray]] = []
    for _ in range(count):
      state, metrics = one_iteration(state)
      try:
        check(metrics, int(mesh_lib.fetch(state.step)) - 1)
      except Exception as error:
        found = divergence.good_steps(error)
        if found is None:  # Not a problem of the run's numbers.
          raise
        done = sum(len(next(iter(m.values()))) for m in calls)
        joined = jax.tree.map(
          lambda *xs: np.concatenate(xs), *calls, found.metrics
        )
        with divergence.keep_good(joined, done + found.count):
          raise
      calls.append(metrics)
    return state, jax.tree.map(lambda *xs: np.concatenate(xs), *calls)

  return dict(
    init=init,
    state_shapes=state_shapes,
    step=step,
    program=NothingToCompile(),
    host_state=host,
  )
