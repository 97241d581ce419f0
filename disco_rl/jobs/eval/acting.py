# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""How an eval run acts: compiled with the iteration, or on the host.

`compiled(setup, iterate, init_program)`: every iteration of every run in
one jit(shard_map(scan)) program. `on_host(setup, iterate, init_program)`:
the environments stepped in Python (the dm_env Catch, envpool's Atari),
each actor step one compiled call and storing and learning one more (the
job's own `iterate`, given the rollout). Which one is decided once, in
`setup.make_setup` (`setup.host_envs`). Both draw the actor steps' keys
as `steps.iteration_keys` and `steps.actor_keys` do, so a host run draws
its actions with the keys a compiled run of the same seed would.
"""

from collections.abc import Callable, Sequence
import dataclasses
import functools

import chex
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np

from disco_rl import types
from disco_rl import utils
from disco_rl.environments import base as base_env
from disco_rl.jobs.eval import report
from disco_rl.jobs.eval import setup as setup_lib
from disco_rl.jobs.eval import steps
from disco_rl.runtime import checkpoints as checkpoints_lib
from disco_rl.runtime import compiled as compiled_lib
from disco_rl.runtime import divergence
from disco_rl.runtime import job as job_lib
from disco_rl.runtime import mesh as mesh_lib

SEED = mesh_lib.SEED_AXIS
PER_DEVICE = setup_lib.PER_DEVICE
State = setup_lib.EvalState
# `(state, rates, rollout=None) -> (state, metrics)` of the S runs.
Iterate = Callable[..., tuple[State, steps.Metrics]]
# `(rngs, env_state, timestep, rule_params) -> state`, placed on the mesh.
InitProgram = Callable[..., State]


@dataclasses.dataclass(frozen=True)
class Acting:
  """The computation of the eval job for one way of acting.

  Attributes:
    init: `(rule_params) -> state`: the runs' environments reset and
      their initial state.
    state_shapes: `(rule_shapes) -> state` of `jax.ShapeDtypeStruct`s.
    step: `(state, count) -> (state, metrics)`, checked (`Job.step`).
    program: the compiled program (`Job.program`).
    host_state: the environments stepped on the host, or None.
  """

  init: Callable[[types.MetaParams], State]
  state_shapes: Callable[[types.MetaParams], State]
  step: Callable[[State, int], tuple[State, job_lib.Metrics]]
  program: job_lib.Program[State]
  host_state: job_lib.HostState | None = None


def init_program(setup: setup_lib.EvalSetup) -> InitProgram:
  """The runs' initial state (`steps.init_runs`) as one program, placed
  on the mesh."""
  return compiled_lib.placed(
    functools.partial(steps.init_runs, setup),
    mesh_lib.shardings(setup.mesh, setup_lib.STATE_SPECS),
    setup.config.matmul_precision,
  )


def compiled(
  setup: setup_lib.EvalSetup, iterate: Iterate, init_program: InitProgram
) -> Acting:
  """Every iteration of every run in one program: jit(shard_map(scan))."""
  config = setup.config
  # Every run's environments reset in one program (op by op, each
  # operation would be a program of its own: seconds of compiling).
  reset_runs = jax.jit(
    jax.vmap(lambda rng: steps.reset_envs(setup, rng), out_axes=(0, 1, 1))
  )

  def init(rule_params: types.MetaParams) -> State:
    rngs, env_state, timestep = reset_runs(setup.seed_keys)
    return init_program(rngs, env_state, timestep, rule_params)

  program = compiled_lib.program(
    iterate,
    length=config.steps_per_call,
    mesh=setup.mesh,
    state_specs=setup_lib.STATE_SPECS,
    operand_specs=(P(SEED),),
    output_specs=P(SEED),
    precision=config.matmul_precision,
  ).bind(setup.rates)

  def step(state: State, count: int) -> tuple[State, job_lib.Metrics]:
    state, metrics = program(state, count)
    first = int(mesh_lib.fetch(state.step)) - count
    report.raise_first_problem(config, metrics, first)
    return state, metrics

  return Acting(
    init=init,
    state_shapes=lambda shapes: jax.eval_shape(init, shapes),
    step=step,
    program=program,
  )


class HostEnvironments:
  """The runs' environments (one object per run) and their states: the
  job's `host_state`, checkpointed as pickled text."""

  def __init__(self, envs: Sequence[base_env.Environment]) -> None:
    self.envs, self.states = list(envs), [None] * len(envs)

  def save(self) -> dict[str, str]:
    return dict(
      host_env=checkpoints_lib.encode_object((self.envs, self.states))
    )

  def load(self, saved: dict[str, str]) -> None:
    self.envs[:], self.states[:] = checkpoints_lib.decode_object(
      saved['host_env']
    )


class NothingToCompile:
  """The program of host acting: its calls compile on first use."""

  def compile(self, state: State) -> float:
    del state
    return 0.0

  def lower(self, state: State) -> jax.stages.Lowered:
    del state
    raise ValueError(
      'A job that steps its environments on the host has no '
      'single program to lower.'
    )


def to_devices(
  setup: setup_lib.EvalSetup, timesteps: Sequence[types.EnvironmentTimestep]
) -> types.EnvironmentTimestep:
  """S host timesteps [E, ...] as [D, S, E / D, ...] on the mesh."""
  num_runs, num_devices = setup.config.num_runs, setup.batch_devices
  obs_spec = setup.env.single_observation_spec()

  def split(*xs: np.ndarray) -> np.ndarray:
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
  return mesh_lib.place(timestep, mesh_lib.shardings(setup.mesh, PER_DEVICE))


def host_timestep_shapes(
  setup: setup_lib.EvalSetup,
) -> types.EnvironmentTimestep:
  """The [D, S, E, ...] shapes of the runs' timesteps on the mesh."""
  shape = (setup.batch_devices, setup.config.num_runs, setup.envs_per_device)
  return types.EnvironmentTimestep(
    observation=jax.tree.map(
      lambda s: jax.ShapeDtypeStruct(shape + s.shape, s.dtype),
      setup.env.single_observation_spec(),
    ),
    step_type=jax.ShapeDtypeStruct(shape, jnp.int32),
    reward=jax.ShapeDtypeStruct(shape, jnp.float32),
  )


def on_host(
  setup: setup_lib.EvalSetup, iterate: Iterate, init_program: InitProgram
) -> Acting:
  """Acting in `setup.host_envs`, between compiled actor steps."""
  host = HostEnvironments(setup.host_envs)
  act_program, learn_program = _host_programs(setup, iterate)

  def init(rule_params: types.MetaParams) -> State:
    rngs, timesteps = [], []
    for j, key in enumerate(setup.seed_keys):
      env_rng, rng = jax.random.split(key)
      host.states[j], timestep = host.envs[j].reset(env_rng)
      rngs.append(rng)
      timesteps.append(timestep)
    timestep = to_devices(setup, timesteps)
    return init_program(jnp.stack(rngs), None, timestep, rule_params)

  def state_shapes(rule_shapes: types.MetaParams) -> State:
    timestep = host_timestep_shapes(setup)
    return jax.eval_shape(
      init_program, setup.seed_keys, None, timestep, rule_shapes
    )

  def one_iteration(state: State) -> tuple[State, job_lib.Metrics]:
    rollout, state = _host_rollout(setup, host, act_program, state)
    return learn_program(state, 1, setup.rates, rollout)

  return Acting(
    init=init,
    state_shapes=state_shapes,
    step=lambda state, count: _checked_calls(
      setup, one_iteration, state, count
    ),
    program=NothingToCompile(),
    host_state=host,
  )


def _host_programs(
  setup: setup_lib.EvalSetup, iterate: Iterate
) -> tuple[compiled_lib.Program, compiled_lib.Program]:
  """(one actor step of every run, storing and learning of every run)."""
  config, mesh = setup.config, setup.mesh

  def one_actor_step(
    actor_state: types.HaikuState,
    params: types.AgentParams,
    act_keys: chex.PRNGKey,
    t: chex.Array,
    timestep: types.EnvironmentTimestep,
  ) -> tuple[types.HaikuState, types.ActorTimestep]:
    """Actor step `t` of every run, on one device."""
    keys = jax.vmap(lambda k: steps.actor_keys(setup, k)[t])(act_keys)
    recorded, actor_state = jax.vmap(setup.agent.actor_step)(
      params, keys, timestep, actor_state
    )
    return actor_state, recorded

  act_program = compiled_lib.program(
    one_actor_step,
    length=1,
    mesh=mesh,
    state_specs=PER_DEVICE,
    operand_specs=(P(SEED), P(SEED), P(), PER_DEVICE),
    output_specs=PER_DEVICE,
    precision=config.matmul_precision,
  )
  learn_program = compiled_lib.program(
    iterate,
    length=1,
    mesh=mesh,
    state_specs=setup_lib.STATE_SPECS,
    operand_specs=(P(SEED), PER_DEVICE),
    output_specs=P(SEED),
    precision=config.matmul_precision,
  )
  return act_program, learn_program


def _host_rollout(
  setup: setup_lib.EvalSetup,
  host: HostEnvironments,
  act_program: compiled_lib.Program,
  state: State,
) -> tuple[types.ActorRollout, State]:
  """One rollout of every run: compiled actor steps, the host's
  environments stepped in between. Returns it [D, S, T, E, ...] on the
  mesh, and the state with the actors' and timesteps' new values."""
  act_keys = jnp.stack(
    [steps.iteration_keys(rng)[1] for rng in mesh_lib.fetch(state.rng)]
  )
  act_keys = mesh_lib.place(act_keys, mesh_lib.shardings(setup.mesh, P(SEED)))
  timestep, actor_state, recorded_steps = state.timestep, state.actor_state, []
  for t in range(setup.config.rollout_len):
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
    timestep = to_devices(setup, timesteps)
    recorded_steps.append(recorded)
  # [D, S, T, E, ...]: time after the device and seed axes.
  rollout = mesh_lib.place(
    types.ActorRollout.from_timestep(utils.tree_stack(recorded_steps, axis=2)),
    mesh_lib.shardings(setup.mesh, PER_DEVICE),
  )
  return rollout, dataclasses.replace(
    state, timestep=timestep, actor_state=actor_state
  )


def _checked_calls(
  setup: setup_lib.EvalSetup,
  one_iteration: Callable[[State], tuple[State, job_lib.Metrics]],
  state: State,
  count: int,
) -> tuple[State, job_lib.Metrics]:
  """`count` iterations, each checked as it ends; a problem's error
  carries the good steps of the whole call (`divergence.keep_good`): the
  iterations before it and the good part of its own."""
  calls: list[job_lib.Metrics] = []
  for _ in range(count):
    state, metrics = one_iteration(state)
    try:
      first = int(mesh_lib.fetch(state.step)) - 1
      report.raise_first_problem(setup.config, metrics, first)
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
