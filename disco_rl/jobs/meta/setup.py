# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What a meta-training run is built from, and the shape of its state.

`make_setup(config)` decides once: the devices and the one-axis mesh, the
suite's tasks, one population member per task (`make_member`: its agent,
value function and environment), how many agents each task gets
(`group_sizes`), the rule's optimiser and how a device runs its agents;
what follows from those (the groups' offsets, the state's layout, the
rule's shapes, a uniform policy's entropy) the `MetaSetup` computes once,
when first read. `PopulationState` is what a meta-step carries to the
next; the population's life cycle is here too: its initial state
(`init_population`, from `rule_params`) and the renewal of agents past
their lifetime (`renew_old_agents`, inside the meta-step).
"""

from collections.abc import Sequence
import dataclasses
import functools
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
from disco_rl import weights
from disco_rl.jobs.meta import config as meta_config
from disco_rl.networks import nets
from disco_rl.runtime import mesh as mesh_lib
from disco_rl.update_rules import base as update_rules_base

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

  Its cached properties (`groups`, `state_specs`, `rule`, `rule_shapes`,
  `seed_key`, `uniform_entropy`) are computed once, when first read.

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

  config: meta_config.MetaTrainConfig
  devices: tuple[jax.Device, ...]
  mesh: jax.sharding.Mesh
  tasks: tuple[meta_config.Task, ...]
  group_sizes: tuple[int, ...]
  members: tuple[meta_objective.MetaTrainAgent, ...]
  meta_opt: optax.GradientTransformation
  population: str

  def rule_params(self, given: types.MetaParams | None) -> types.MetaParams:
    """The rule's starting meta-parameters on the mesh (replicated):
    `given`, or per `config.init` Disco103's weights (`disco_rl.weights`)
    or a fresh meta-network drawn with `PRNGKey(rule_seed)`."""
    config = self.config
    if given is None:
      given = weights.starting_rule_params(
        self.rule, config.init == 'disco_103', config.rule_seed
      )
    return mesh_lib.place(given, mesh_lib.replicated(self.mesh))

  @property
  def num_devices(self) -> int:
    return len(self.devices)

  @functools.cached_property
  def groups(
    self,
  ) -> tuple[tuple[meta_objective.MetaTrainAgent, int, int], ...]:
    """(member, first agent, agent count) of each task group."""
    starts = group_starts(self.group_sizes)
    return tuple(
      (m, int(starts[g]), self.group_sizes[g])
      for g, m in enumerate(self.members)
    )

  @functools.cached_property
  def state_specs(self) -> PopulationState:
    """The `PartitionSpec` of each part of the run's `PopulationState`
    (`state_specs` of its tasks and lifetimes)."""
    return state_specs(len(self.tasks), self.config.sampled_lifetimes)

  @functools.cached_property
  def rule(self) -> update_rules_base.UpdateRule:
    """The update rule the agents learn by (the meta-network's)."""
    return self.members[0].agent.update_rule

  @functools.cached_property
  def rule_shapes(self) -> types.MetaParams:
    """The shapes of the rule's meta-parameters (`jax.ShapeDtypeStruct`s)."""
    return jax.eval_shape(self.rule.init_params, jax.random.PRNGKey(0))[0]

  @functools.cached_property
  def seed_key(self) -> chex.PRNGKey:
    """[2]: the key of the population's initial state, `PRNGKey(seed)`."""
    return jax.random.PRNGKey(self.config.seed)

  @functools.cached_property
  def uniform_entropy(self) -> float:
    """ln(actions), averaged over the agents: what a uniform policy
    target's entropy would be."""
    return float(
      np.mean(
        [
          np.log(member.agent.num_actions)
          for member, _, size in self.groups
          for _ in range(size)
        ]
      )
    )

  @property
  def unroll(self) -> bool:
    """Whether the agents' inner updates are unrolled into straight-line
    code (at most `max_unrolled_inner_steps` of them), not a loop."""
    config = self.config
    return config.num_inner_steps <= config.max_unrolled_inner_steps


def make_member(
  config: meta_config.MetaTrainConfig,
  task: meta_config.Task,
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
  config: meta_config.MetaTrainConfig,
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


# Folded into a key to draw lifetimes from it (`lifetime_sampling`), apart
# from the keys of the agents it starts.
LIFETIME_SALT = 0x11FF


def agent_lifetimes(
  config: meta_config.MetaTrainConfig, rng: chex.PRNGKey
) -> chex.Array:
  """[N] lifetimes of the population's agents drawn from `rng` (agent i's
  from `fold_in` of i), per `config`'s range."""
  return draw_lifetimes(
    jax.random.fold_in(rng, LIFETIME_SALT),
    config.num_agents,
    config.min_agent_lifetime,
    config.agent_lifetime,
  )


def init_population(
  setup: MetaSetup, rng: chex.PRNGKey, update_rule_params: types.MetaParams
) -> PopulationState:
  """The initial state (under `jit`, outside `shard_map`): agent i starts
  from `split(init_rng, N)[i]` with `_, init_rng = split(rng)`, as in the
  upstream notebook; ages staggered within each task's group."""
  config = setup.config
  loop_rng, init_rng = jax.random.split(rng)
  agent_keys = jax.random.split(init_rng, config.num_agents)
  # [D, N] keys: device 0 keeps the environments of the agents' own keys,
  # the others fold in the device index.
  reset_keys = jnp.stack(
    [agent_keys]
    + [
      jax.vmap(functools.partial(jax.random.fold_in, data=d))(agent_keys)
      for d in range(1, setup.num_devices)
    ]
  )
  lifetimes = None
  if config.sampled_lifetimes:  # Each agent's first lifetime.
    lifetimes = agent_lifetimes(config, init_rng)
  groups, ages = [], []
  for member, start, size in setup.groups:
    agents = jax.vmap(member.init_state)(agent_keys[start : start + size])
    env_state, timestep = jax.vmap(jax.vmap(member.env.reset))(
      reset_keys[:, start : start + size]
    )
    groups.append(
      dataclasses.replace(agents, env_state=env_state, env_timestep=timestep)
    )
    # Staggered within each group: every task has agents of every age.
    if lifetimes is None:
      ages.append(initial_ages(size, config.agent_lifetime))
    else:
      ages.append(staggered_ages(lifetimes[start : start + size]))
  return population_state(
    lifetimes=lifetimes,
    update_rule_params=update_rule_params,
    meta_opt_state=setup.meta_opt.init(update_rule_params),
    agents=tuple(groups),
    ages=jnp.concatenate([jnp.asarray(a) for a in ages]),
    rng=loop_rng,
    step=jnp.zeros((), jnp.int32),
  )


# Folded into a key to draw renewed agents from it, and into a renewed
# agent's key for its new environments.
RENEWED_AGENT_SALT = 0x11FE
RENEWED_ENV_SALT = 0x11FD


def renew_old_agents(
  setup: MetaSetup,
  agents: tuple[meta_objective.MetaTrainState, ...],
  ages: chex.Array,
  lifetimes: chex.Array | None,
  rng: chex.PRNGKey,
) -> tuple[
  tuple[meta_objective.MetaTrainState, ...], chex.Array, chex.Array | None
]:
  """Agents of age >= lifetime start afresh at age 0 (keys from `rng`
  folded with their index), in new environments: reset with that key
  folded with `RENEWED_ENV_SALT` and the device's index (a new episode;
  a new layout where the environment draws one per reset key, as in
  LPG's and GROOVE's lifetimes). With sampled lifetimes each renewed
  agent draws its next one (also from `rng`). New agents are drawn only
  in a meta-step that renews one. Returns the agents, their ages and
  their lifetimes (None: `agent_lifetime` each). Inside the mesh."""
  config = setup.config
  if not config.agent_lifetime:
    return agents, ages, lifetimes
  renew = ages >= (config.agent_lifetime if lifetimes is None else lifetimes)
  keys = jax.vmap(
    lambda i: jax.random.fold_in(jax.random.fold_in(rng, RENEWED_AGENT_SALT), i)
  )(jnp.arange(ages.shape[0]))
  renewed = []
  for (member, start, size), group in zip(setup.groups, agents, strict=True):
    mask = renew[start : start + size]
    learned = dict(
      learner_state=group.learner_state,
      actor_state=group.actor_state,
      value_state=group.value_state,
      env_state=group.env_state,
      env_timestep=group.env_timestep,
    )

    def renew_some(
      learned: dict[str, Any],
      member: meta_objective.MetaTrainAgent = member,
      mask: chex.Array = mask,
      start: int = start,
      size: int = size,
    ) -> dict[str, Any]:
      agent_keys = keys[start : start + size]
      fresh = jax.vmap(member.fresh_agent)(agent_keys)
      env_keys = jax.vmap(
        lambda k: jax.random.fold_in(
          jax.random.fold_in(k, RENEWED_ENV_SALT), jax.lax.axis_index(AXIS)
        )
      )(agent_keys)
      fresh['env_state'], fresh['env_timestep'] = jax.vmap(member.env.reset)(
        env_keys
      )
      return jax.tree.map(
        lambda new, old: jnp.where(
          mask.reshape(mask.shape + (1,) * (old.ndim - 1)), new, old
        ),
        fresh,
        learned,
      )

    learned = jax.lax.cond(jnp.any(mask), renew_some, lambda x: x, learned)
    renewed.append(dataclasses.replace(group, **learned))
  if lifetimes is not None:
    lifetimes = jnp.where(renew, agent_lifetimes(config, rng), lifetimes)
  return tuple(renewed), jnp.where(renew, 0, ages), lifetimes
