# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What a meta-training run is built from, and the shape of its state.

`make_setup(config)` decides once: the devices and the one-axis mesh, the
suite's tasks, one population member per task (`make_member`: its agent,
value function and environment), how many agents each task gets
(`group_sizes`), the rule's optimiser and how a device runs its agents.
`PopulationState` is what a meta-step carries to the next.
"""

from collections.abc import Sequence
import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np
import optax

from disco_rl import meta_objective
from disco_rl import optimizers
from disco_rl import types
from disco_rl.loops import config as config_lib
from disco_rl.loops import mesh as mesh_lib
from disco_rl.networks import nets

AXIS = mesh_lib.AXIS


@chex.dataclass
class PopulationState:
  """The rule, its optimiser, every agent, and the loop key.

  Replicated: everything but the agents' environments (`env_state`,
  `env_timestep` of each group), which carry a leading device axis
  [D, N_g, ...] sharded over the mesh.

  Attributes:
    update_rule_params: the rule's meta-parameters.
    meta_opt_state: the meta-optimiser's state ([N, ...] per agent with
      'per_agent_adam').
    agents: one `MetaTrainState` per task, its N_g agents stacked [N_g, ...].
    ages: [N] int32, agent updates each agent has taken since it started.
    rng: the key the next meta-step splits.
    step: [] int32, meta-steps done.
  """

  update_rule_params: types.MetaParams
  meta_opt_state: optax.OptState
  agents: tuple[meta_objective.MetaTrainState, ...]
  ages: chex.Array
  rng: chex.PRNGKey
  step: chex.Array


@chex.dataclass
class PopulationStateWithLifetimes(PopulationState):
  """A `PopulationState` whose agents draw their lifetimes
  (`lifetime_sampling` 'log_uniform'). A class of its own so that the state
  of a run of fixed lifetimes, and its checkpoints, keep their parts.

  Attributes:
    lifetimes: [N] int32, each agent's lifetime in updates, drawn at its
      (re)start; replicated.
  """

  lifetimes: chex.Array


def population_state(
  lifetimes: chex.Array | None = None, **fields: Any
) -> PopulationState:
  """A `PopulationState` of `fields`, with `lifetimes` when not None."""
  if lifetimes is None:
    return PopulationState(**fields)
  return PopulationStateWithLifetimes(lifetimes=lifetimes, **fields)


def lifetimes_of(state: PopulationState) -> chex.Array | None:
  """The agents' drawn lifetimes [N] (None: `agent_lifetime` each)."""
  if isinstance(state, PopulationStateWithLifetimes):
    return state.lifetimes
  return None


def state_specs(
  num_tasks: int = 1, sampled_lifetimes: bool = False
) -> PopulationState:
  """The `PartitionSpec` of each part of a `PopulationState` (with
  `lifetimes` when `sampled_lifetimes`)."""
  # A spec stands for a whole part of the state, whatever the type the
  # field declares for that part: typed Any.
  replicated: Any = P()
  sharded: Any = P(AXIS)
  group = meta_objective.MetaTrainState(
    learner_state=replicated,
    actor_state=replicated,
    value_state=replicated,
    env_state=sharded,
    env_timestep=sharded,
  )
  return population_state(
    lifetimes=replicated if sampled_lifetimes else None,
    update_rule_params=replicated,
    meta_opt_state=replicated,
    agents=(group,) * num_tasks,
    ages=replicated,
    rng=replicated,
    step=replicated,
  )


@dataclasses.dataclass(frozen=True)
class MetaSetup:
  """What a meta-training run is built from (static: not traced).

  Attributes:
    config: the run's settings.
    devices: the devices of the mesh.
    mesh: the one-axis device mesh (`AXIS`).
    tasks: the suite, one group of agents each.
    group_sizes: the number of agents of each task.
    members: one `meta_objective.MetaTrainAgent` per task (its agent
      network, value function and environment).
    meta_opt: the rule's optimiser (on the stacked meta-gradients [N, ...]).
    population: how a device runs its agents: 'map' or 'vmap'.
  """

  config: config_lib.MetaTrainConfig
  devices: tuple[jax.Device, ...]
  mesh: jax.sharding.Mesh
  tasks: tuple[config_lib.Task, ...]
  group_sizes: tuple[int, ...]
  members: tuple[meta_objective.MetaTrainAgent, ...]
  meta_opt: optax.GradientTransformation
  population: str

  @property
  def num_devices(self) -> int:
    return len(self.devices)

  @property
  def groups(self) -> list[tuple[meta_objective.MetaTrainAgent, int, int]]:
    """(member, first agent, agent count) of each task group."""
    starts = group_starts(self.group_sizes)
    return [
      (m, int(starts[g]), self.group_sizes[g])
      for g, m in enumerate(self.members)
    ]


def make_member(
  config: config_lib.MetaTrainConfig,
  task: config_lib.Task,
  axis_name: str | None = AXIS,
) -> meta_objective.MetaTrainAgent:
  """The population member of `task`: an agent of the config's settings
  with the task's network, the notebook's value function with the config's
  `value_dense`, and the task's environment (`batch_size_per_device`
  instances). `axis_name`: the mesh axis its updates average over (None:
  outside a mesh).

  Raises:
    ValueError: the task's observations do not fit its network.
  """
  env = task.make_env(config.batch_size_per_device)
  net = task.net or config.net
  nets.check_observation_spec(
    net,
    env.single_observation_spec(),
    f'task {task.spec()!r} (its single_observation_spec())',
  )
  value_fn = meta_objective.default_value_fn_config()
  return meta_objective.MetaTrainAgent(
    batch_size_per_device=config.batch_size_per_device,
    agent_settings=config.agent_settings('disco_103', net),
    value_fn_config=dataclasses.replace(
      value_fn,
      net_args=dict(value_fn.net_args, dense=tuple(config.value_dense)),
    ),
    axis_name=axis_name,
    env=env,
  )


def make_setup(
  config: config_lib.MetaTrainConfig,
  devices: Sequence[jax.Device] | None = None,
) -> MetaSetup:
  """The run's devices, tasks and agents from `config`.

  Raises:
    ValueError: a task whose observations do not fit its agents' network.
  """
  devices = tuple(
    devices
    if devices is not None
    else mesh_lib.pick_devices({}, config.num_devices)
  )
  members = [make_member(config, task) for task in config.suite]
  population = config.population
  if population == 'auto':
    population = 'map' if devices[0].platform == 'cpu' else 'vmap'
  return MetaSetup(
    config=config,
    devices=devices,
    mesh=mesh_lib.make_mesh(devices),
    tasks=config.suite,
    group_sizes=group_sizes(config.num_agents, len(config.suite)),
    members=tuple(members),
    meta_opt=optimizers.meta_optimizer(
      config.meta_grad_norm,
      config.meta_learning_rate,
      config.meta_grad_clip,
      config.num_agents,
    ),
    population=population,
  )


def group_sizes(num_agents: int, num_tasks: int) -> tuple[int, ...]:
  """Agents per task: `num_agents` split as evenly as possible, first first
  (the config makes sure every task gets one)."""
  share, extra = divmod(num_agents, num_tasks)
  return tuple(share + (g < extra) for g in range(num_tasks))


def group_starts(sizes) -> np.ndarray:
  """[G + 1] offsets of the groups in the population (0, ..., N)."""
  return np.concatenate([[0], np.cumsum(sizes)]).astype(int)


def initial_ages(num_agents: int, lifetime: int) -> np.ndarray:
  """[N] starting ages, staggered over a lifetime (all 0 without one):
  agent i starts at `i * lifetime // N`, so that the population always
  holds agents at every stage of learning."""
  if lifetime <= 0:
    return np.zeros((num_agents,), np.int32)
  return (np.arange(num_agents) * lifetime // num_agents).astype(np.int32)


def staggered_ages(lifetimes: chex.Array) -> chex.Array:
  """[N] starting ages of agents whose first lives last `lifetimes` [N]
  updates: agent i starts at `i * lifetimes[i] // N` (`initial_ages` with
  a lifetime per agent)."""
  num_agents = lifetimes.shape[0]
  return (jnp.arange(num_agents) * lifetimes // num_agents).astype(jnp.int32)


def draw_lifetimes(
  rng: chex.PRNGKey, num_agents: int, low: int, high: int
) -> chex.Array:
  """[N] int32 lifetimes, each drawn log-uniformly from [low, high] updates
  with key `fold_in(rng, i)` (GROOVE's `log_uniform_int`: exp of a uniform
  draw between log(low) and log(high), rounded)."""

  def one(i: chex.Array) -> chex.Array:
    u = jax.random.uniform(
      jax.random.fold_in(rng, i),
      minval=np.log(low),
      maxval=np.log(high),
    )
    return jnp.clip(jnp.round(jnp.exp(u)), low, high).astype(jnp.int32)

  return jax.vmap(one)(jnp.arange(num_agents))
