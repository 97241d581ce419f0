# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What an eval run is built from, and the shape of its state.

`make_setup(config)` decides once: the devices and the [seed groups, batch
devices] mesh, the environment (jittable, `envs_per_device` instances, or
stepped on the host), the agent, and each device's share of the batch and
the buffer. `EvalState` is what an iteration carries to the next, for the
S runs of one program; `state_specs` says how it lies on the mesh, and
`example_rollout` the shape of a stored rollout. `rule_params` places the
rule's meta-parameters (given, or the rule's default) on the mesh.
"""

import dataclasses
import functools
from typing import Any

import chex
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np

from disco_rl import agent as agent_lib
from disco_rl import environments
from disco_rl import replay
from disco_rl import types
from disco_rl import weights
from disco_rl.environments import base as base_env
from disco_rl.jobs import config as config_lib
from disco_rl.networks import nets
from disco_rl.runtime import mesh as mesh_lib
from disco_rl.update_rules import disco
from disco_rl.update_rules import warm_start as warm_start_lib

AXIS, SEED = mesh_lib.AXIS, mesh_lib.SEED_AXIS
PER_DEVICE = P(AXIS, SEED)  # [D, S, ...]: a row per device, the seeds split.


@chex.dataclass
class EvalState:
  """What an iteration carries to the next, for S runs.

  Replicated over a seed group's devices: `learner_state` [S, ...], `rng`
  [S, 2], `rule_params` and `step` [] (the runs go in step). Per device (a
  leading device axis D, sharded over the mesh's batch axis): `actor_state`
  [D, S, ...], `env_state` [D, S, ...], `timestep` [D, S, E, ...],
  `acc_rewards` [D, S, E] and `replay` [D, S, C, ...], with E environments
  and C buffer slots per device and run.

  Attributes:
    learner_state: the agent's parameters, optimiser and rule state.
    actor_state: the network's acting state.
    env_state: the jittable environments' state (None for host ones).
    timestep: the environments' current timestep.
    acc_rewards: each environment's return so far in its current episode.
    replay: the replay buffer.
    rule_params: the rule's meta-parameters (the same for every run).
    rng: the key the next iteration splits.
    step: [] int32, iterations done.
  """

  learner_state: agent_lib.LearnerState
  actor_state: types.HaikuState
  env_state: Any
  timestep: types.EnvironmentTimestep
  acc_rewards: chex.Array
  replay: replay.ReplayState
  rule_params: types.MetaParams
  rng: chex.PRNGKey
  step: chex.Array


# Where each part of an `EvalState` lies: (its `PartitionSpec` on the mesh,
# a tree prefix; its seed axis once the device axis is gone, a `vmap`
# prefix).
_LAYOUT: dict[str, tuple[P, int | None]] = dict(
  learner_state=(P(SEED), 0),
  actor_state=(PER_DEVICE, 0),
  env_state=(PER_DEVICE, 0),
  timestep=(PER_DEVICE, 0),
  acc_rewards=(PER_DEVICE, 0),
  replay=(PER_DEVICE, 0),
  rule_params=(P(), None),
  rng=(P(SEED), 0),
  step=(P(), None),
)
_SPECS: dict[str, Any] = {k: spec for k, (spec, _) in _LAYOUT.items()}
STATE_SPECS = EvalState(**_SPECS)
_AXES: dict[str, Any] = {k: axis for k, (_, axis) in _LAYOUT.items()}
SEED_AXES = EvalState(**_AXES)


@dataclasses.dataclass(frozen=True)
class EvalSetup:
  """What an eval run is built from (static: not traced).

  Attributes:
    config: the run's settings.
    devices: the devices of the mesh.
    mesh: the [seed groups, batch devices] mesh (`SEED`, `AXIS`).
    env: the environment: jittable, `envs_per_device` instances; or
      stepped on the host (`host_envs[0]`).
    host_envs: environments stepped on the host, one per run with all
      `config.num_envs` instances (seeded `seed + i`); empty when acting is
      compiled. Decided here, once.
    jittable_env: the name of a jittable environment of the same game, for
      `evaluate` (None: there is none).
    agent: the agent, learning under the mesh's batch axis.
    envs_per_device: environments per device and run (E).
    batch_per_device: learner batch per device and run.
    capacity_per_device: replay slots per device and run (C).
    log_keys: the learner scalars recorded per step.
    seed_keys: [S, 2], the key of each run (`seed_keys`).
    rates: [S], each run's learning rate, on the mesh (split over the seed
      groups like the runs: an operand of the programs, so a sweep of any
      rates is one program).
  """

  config: config_lib.EvalConfig
  devices: tuple[jax.Device, ...]
  mesh: jax.sharding.Mesh
  env: base_env.Environment
  host_envs: tuple[base_env.Environment, ...]
  jittable_env: str | None
  agent: agent_lib.Agent
  envs_per_device: int
  batch_per_device: int
  capacity_per_device: int
  log_keys: tuple[str, ...]
  seed_keys: chex.PRNGKey
  rates: jax.Array

  @functools.cached_property
  def rule_shapes(self) -> types.MetaParams:
    """The shapes of the rule's meta-parameters (`jax.ShapeDtypeStruct`s),
    computed once, when first read."""
    rule = self.agent.update_rule
    return jax.eval_shape(rule.init_params, jax.random.PRNGKey(0))[0]

  def rule_params(self, given: types.MetaParams | None) -> types.MetaParams:
    """The rule's meta-parameters on the mesh (replicated): `given`, or for
    'disco_103' the Disco103 weights (`disco_rl.weights`), for a hand-written
    rule its own placeholder parameters.

    Raises:
      ValueError: 'disco_103' with other `rule_sizes` and no parameters.
    """
    config, rule = self.config, self.agent.update_rule
    sizes = disco.as_sizes(config.rule_sizes)
    if given is None and config.rule == 'disco_103' and sizes.changes():
      raise ValueError(
        f'rule_sizes {sizes.text()}: Disco103 has its own sizes, so a '
        'rule of these sizes needs its parameters (--weights FILE, or '
        'rule_params=).'
      )
    if given is None:
      given = weights.starting_rule_params(rule, config.rule == 'disco_103')
    return mesh_lib.place(given, mesh_lib.replicated(self.mesh))

  @property
  def num_devices(self) -> int:
    return len(self.devices)

  @property
  def batch_devices(self) -> int:
    """D: the devices each run's environments, batch and buffer split over."""
    return self.mesh.shape[AXIS]

  @property
  def warmup(self) -> int:
    """Iterations that only act: until each buffer holds a learner batch."""
    return -(-self.batch_per_device // self.envs_per_device) - 1


def log_keys(
  rule: str, warm_start: bool = False, policy_target: str = 'absolute'
) -> tuple[str, ...]:
  """The learner scalars the eval job records per step, for a rule (and
  the warm start's weight: 1 during it, else 0; and for a Disco rule of an
  action target what its action head does where no reward came, see
  `disco._signal_logs`)."""
  common = (
    'total_loss',
    'global_gradient_norm',
    'global_update_norm',
    'entropy',
  )
  if rule == 'disco_103':
    disco_keys: tuple[str, ...] = (
      'pi_loss',
      'q_loss',
      'aux_kl_loss',
      'pi_hat_entropy',
    )
    if policy_target in disco.ACTION_TARGETS:
      disco_keys += disco.ACTION_SIGNAL_KEYS
    warm = (warm_start_lib.WARM_KEY,) if warm_start else ()
    return common + disco_keys + warm
  return common + ('pg_advs', 'avg_value')


def environment(
  config: config_lib.EvalConfig, per_device: int, env: Any = None
) -> tuple[base_env.Environment, tuple[base_env.Environment, ...], str | None]:
  """The run's environment, decided once: (the environment of one device's
  share, jittable; or the first host one), the host environments (one per
  run with all `config.num_envs` instances, seeded `seed + i`; empty when
  acting is compiled), and the name of a jittable twin for `evaluate`.

  Args:
    config: the run's settings.
    per_device: environments per device and run.
    env: with `config.env == 'custom'`, a jittable `Environment` of
      `per_device` environments, or a function of that number that builds
      one; checked now (`base.check_jittable_environment`).

  Raises:
    ValueError: a custom environment that is missing, given without
      env='custom', or of the wrong size; a host environment in several
      processes.
  """
  if (env is not None) != (config.env == config_lib.CUSTOM_ENV):
    raise ValueError(
      "An Environment object goes with env='custom' and env='custom' "
      "needs one: pass both EvalConfig(env='custom', ...) and env= "
      f'(got env={config.env!r} and an env object: {env is not None}).'
    )
  if env is not None:
    if callable(env) and not isinstance(env, base_env.Environment):
      env = env(per_device)  # A factory of batch_size.
    base_env.check_jittable_environment(env)
    if env.batch_size != per_device:
      raise ValueError(
        'env.batch_size must be the environments per device, batch_size '
        f'// replay_ratio // devices = {config.batch_size} // '
        f'{config.replay_ratio} // {config.num_envs // per_device} = '
        f'{per_device}, got {env.batch_size}.'
      )
    return env, (), None
  if not environments.family(config.env).on_host:
    jittable = environments.get_environment(
      config.env, per_device, dict(config.env_kwargs)
    )
    return jittable, (), config.env
  # Host or compiled acting: the one place that decides.
  if jax.process_count() > 1:
    raise ValueError(
      f'env={config.env!r} is stepped on the host, in one '
      f'process; got {jax.process_count()} processes.'
    )
  host_envs = tuple(
    environments.get_environment(
      config.env,
      config.num_envs,
      dict(config.env_kwargs, random_seed=run.seed),
    )
    for run in config.runs
  )
  return host_envs[0], host_envs, environments.family(config.env).jittable


def make_setup(
  config: config_lib.EvalConfig, devices=None, env=None
) -> EvalSetup:
  """The run's devices, mesh, environment and agent, from `config`.

  Args:
    config: the run's settings.
    devices: the devices (default: the most the environments, the batch
      and the buffer divide into, up to `config.num_devices`).
    env: with `config.env == 'custom'`, a jittable `Environment` of one
      device's share of the environments, or a function of that number
      that builds one; checked now (`base.check_jittable_environment`).

  Raises:
    ValueError: a custom environment that is missing, given without
      env='custom', of the wrong size; a host environment in several
      processes; observations that do not fit `config.net`.
  """
  shares = {
    'number of environments (batch_size // replay_ratio)': config.num_envs,
    'batch_size': config.batch_size,
    'buffer_capacity': config.buffer_capacity,
  }
  if config.epochs:  # Each device's share of a rollout splits in minibatches.
    shares['learner minibatch (batch_size // minibatches)'] = (
      config.batch_size // config.minibatches
    )
  if devices is None:
    devices = mesh_lib.pick_devices(shares, config.num_devices, config.num_runs)
  mesh_lib.check_shares(shares, len(devices), config.num_runs)
  mesh = mesh_lib.make_mesh(
    devices, mesh_lib.seed_shards(config.num_runs, len(devices))
  )
  num = mesh.shape[AXIS]
  per_device = config.num_envs // num
  env, host_envs, jittable_env = environment(config, per_device, env)
  nets.check_observation_spec(
    config.net,
    env.single_observation_spec(),
    f'env {config.env!r} (its single_observation_spec())',
  )
  agent = agent_lib.Agent(
    single_observation_spec=env.single_observation_spec(),
    single_action_spec=env.single_action_spec(),
    agent_settings=config.run_agent_settings(),
    batch_axis_name=AXIS,
  )
  return EvalSetup(
    config=config,
    devices=tuple(devices),
    mesh=mesh,
    env=env,
    host_envs=host_envs,
    jittable_env=jittable_env,
    agent=agent,
    envs_per_device=per_device,
    batch_per_device=config.batch_size // num,
    capacity_per_device=config.buffer_capacity // num,
    log_keys=log_keys(
      config.rule, bool(config.warm_start_steps), config.policy_target
    ),
    seed_keys=seed_keys(config),
    rates=mesh_lib.place(
      np.asarray([run.learning_rate for run in config.runs], np.float32),
      mesh_lib.shardings(mesh, P(SEED)),
    ),
  )


def seed_keys(config: config_lib.EvalConfig) -> chex.PRNGKey:
  """[S, 2]: the key of each run, `PRNGKey(run.seed)` (runs of one seed
  at several rates share it: they differ in the rate alone)."""
  return jnp.stack([jax.random.PRNGKey(run.seed) for run in config.runs])


def example_rollout(
  setup: EvalSetup, timestep: types.EnvironmentTimestep
) -> types.ActorRollout:
  """Zeros shaped like one device's [T, E, ...] stored rollout, from its
  environments' [E, ...] `timestep` (traced: shapes only)."""
  agent, config = setup.agent, setup.config
  key = jax.random.PRNGKey(0)
  params = jax.eval_shape(agent.initial_learner_state, key).params
  actor_state = jax.eval_shape(agent.initial_actor_state, key)
  recorded, _ = jax.eval_shape(
    agent.actor_step, params, key, timestep, actor_state
  )
  rollout = replay.keep_outputs(
    types.ActorRollout.from_timestep(recorded), config.behaviour_outputs
  )
  return jax.tree.map(
    lambda s: jnp.zeros((config.rollout_len,) + s.shape, s.dtype), rollout
  )
