# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""An eval run built from its config: devices, environment, agent, rule.

Every decision about an eval run is made here, once: which devices and how
the environments, the learner batch and the buffer are split over them; the
environment (a jittable one with a device's share of the environments, or
the host dm_env one with all of them); the agent; the rule's default
parameters; the learner scalars recorded. The result, an `EvalSetup`, is
what the pure functions of `eval_program` read.
"""

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from disco_rl import agent as agent_lib
from disco_rl import weights
from disco_rl.environments import base as base_env
from disco_rl.environments import get_environment
from disco_rl.loops import config as config_lib
from disco_rl.loops import devices as devices_lib
from disco_rl.networks import nets


@dataclasses.dataclass(frozen=True)
class EvalSetup:
  """What an eval run's program reads (static: not traced).

  Attributes:
    config: the run's settings.
    devices: the devices of the mesh.
    mesh: the [seed_shards, batch_devices] device mesh (`devices.SEED_AXIS`,
      `devices.AXIS`).
    seed_shards: groups of devices the runs are split into
      (`devices.seed_shards`): each runs `num_seeds / seed_shards` of them on
      `batch_devices` devices, as a run alone on as many devices would.
    env: the environment: jittable, `envs_per_device` instances (one
      device's share), or for `env='catch'` the host one with all
      `config.num_envs`.
    agent: the agent, learning under the mesh's batch axis.
    envs_per_device: environments per device and run (E).
    batch_per_device: learner batch per device and run.
    capacity_per_device: replay slots per device and run (C).
    log_keys: the learner scalars recorded per step.
  """

  config: config_lib.EvalConfig
  devices: tuple[jax.Device, ...]
  mesh: jax.sharding.Mesh
  seed_shards: int
  env: base_env.Environment
  agent: agent_lib.Agent
  envs_per_device: int
  batch_per_device: int
  capacity_per_device: int
  log_keys: tuple[str, ...]

  @property
  def num_devices(self) -> int:
    """All the devices of the run."""
    return len(self.devices)

  @property
  def batch_devices(self) -> int:
    """The devices each run's environments, batch and buffer split over
    (D, the leading axis of the state's per-device parts)."""
    return len(self.devices) // self.seed_shards

  @property
  def warmup_iterations(self) -> int:
    """Iterations that only act: until each buffer holds a learner batch."""
    return -(-self.batch_per_device // self.envs_per_device) - 1


def make_setup(config: config_lib.EvalConfig, devices=None,
               env: base_env.Environment | None = None) -> EvalSetup:
  """Builds the run's devices, environment and agent from `config`.

  Args:
    config: the run's settings.
    devices: the devices to use (default: as many as the environments, the
      batch and the buffer divide into, up to `config.num_devices`).
    env: with `config.env == 'custom'`, a jittable `Environment` of
      `batch_size // replay_ratio // devices` instances (one device's
      share), or a function of that number that builds one (e.g. the
      class); checked now (`base.check_jittable_environment`).

  Raises:
    ValueError: a custom environment that is missing, given
      without env='custom', or of the wrong size.
  """
  if not isinstance(config, config_lib.EvalConfig):
    raise TypeError('config must be an EvalConfig, got '
                    f'{type(config).__name__}.')
  if (env is None) != (config.env != config_lib.CUSTOM_ENV):
    raise ValueError(
        "An Environment object goes with env='custom' and env='custom' "
        'needs one: pass both EvalConfig(env=\'custom\', ...) and env= '
        f'(got env={config.env!r} and an env object: {env is not None}).')
  shares = {'number of environments (batch_size // replay_ratio)':
                config.num_envs,
            'batch_size': config.batch_size,
            'buffer_capacity': config.buffer_capacity}
  if devices is None:
    devices = devices_lib.pick_devices(shares, config.num_devices,
                                       config.num_seeds)
  else:
    devices_lib.check_shares(shares, len(devices), config.num_seeds)
  devices = tuple(devices)
  seed_shards = devices_lib.seed_shards(config.num_seeds, len(devices))
  num = len(devices) // seed_shards
  environment = _make_env(config, config.num_envs // num, env)
  return EvalSetup(
      config=config, devices=devices,
      mesh=devices_lib.make_mesh(devices, seed_shards),
      seed_shards=seed_shards,
      env=environment, agent=make_agent(config, environment),
      envs_per_device=config.num_envs // num,
      batch_per_device=config.batch_size // num,
      capacity_per_device=config.buffer_capacity // num,
      log_keys=default_log_keys(config.rule))


def _make_env(config: config_lib.EvalConfig, envs_per_device: int,
              env) -> base_env.Environment:
  """The run's environment (see `EvalSetup.env`)."""
  if config_lib.steps_on_host(config.env):  # All the environments.
    return get_environment(config.env, batch_size=config.num_envs,
                           env_settings=env_settings(config,
                                                     seed=config.seed))
  if env is None:
    return get_environment(config.env, batch_size=envs_per_device,
                           env_settings=env_settings(config))
  if callable(env) and not isinstance(env, base_env.Environment):
    env = env(envs_per_device)  # A factory of batch_size.
  base_env.check_jittable_environment(env)
  if env.batch_size != envs_per_device:
    raise ValueError(
        f'env.batch_size must be the environments per device, '
        f'batch_size // replay_ratio // devices = {config.batch_size}'
        f' // {config.replay_ratio} // {config.num_envs // envs_per_device}'
        f' = {envs_per_device}, got {env.batch_size}.')
  return env


def make_agent(config: config_lib.EvalConfig,
               env: base_env.Environment) -> agent_lib.Agent:
  """The agent of an eval run, learning under the mesh axis.

  Raises:
    ValueError: if the environment's observations do not fit `config.net`
      (e.g. 'conv' on vectors), naming the environment and the shapes.
  """
  nets.check_observation_spec(
      config.net, env.single_observation_spec(),
      f'env {config.env!r} (its single_observation_spec())')
  settings = config_lib.agent_settings(
      config.rule, config.learning_rate, config.dense, config.model_lstm_size,
      config.model_head_hiddens, config.precision, net=config.net,
      **config_lib.torso_args(config))
  return agent_lib.Agent(
      single_observation_spec=env.single_observation_spec(),
      single_action_spec=env.single_action_spec(),
      agent_settings=settings, batch_axis_name=devices_lib.AXIS)


def env_settings(config: config_lib.EvalConfig,
                 seed: int | None = None) -> dict[str, Any]:
  """The settings `get_environment` gets for `config.env`.

  Catch: its board (`rows`, `columns`), the host one also `random_seed`,
  plus `env_kwargs`; envpool: `env_kwargs` and `random_seed`; the others:
  `env_kwargs`.
  """
  settings = dict(config.env_kwargs)
  if config.env in config_lib.CATCH_ENVS:
    settings.update(rows=config.rows, columns=config.columns)
  if config_lib.steps_on_host(config.env) and seed is not None:
    settings['random_seed'] = seed
  return settings


def default_log_keys(rule: str) -> tuple[str, ...]:
  """The learner scalars the eval job records per step, for a rule."""
  common = ('total_loss', 'global_gradient_norm', 'global_update_norm',
            'entropy')
  if rule == 'disco_103':
    return common + ('pi_loss', 'q_loss', 'aux_kl_loss', 'pi_hat_entropy')
  return common + ('pg_advs', 'avg_value')


def default_rule_params(config: config_lib.EvalConfig,
                        agent: agent_lib.Agent, load: bool = True):
  """Disco103's weights, or the (empty) parameters of a hand-written rule.

  With `load=False` a fresh meta-network stands in for the weights (same
  structure; e.g. to be replaced by a checkpoint's).
  """
  return weights.starting_rule_params(
      agent.update_rule, config.rule == 'disco_103' and load)


def seed_keys(config: config_lib.EvalConfig) -> chex.PRNGKey:
  """[S, 2]: the key of each run, `PRNGKey(config.seed + i)`."""
  return jnp.stack([jax.random.PRNGKey(config.seed + i)
                    for i in range(config.num_seeds)])


def as_seed_keys(rngs: chex.PRNGKey, num_seeds: int) -> chex.PRNGKey:
  """[S, 2] keys (a single [2] key is one run's)."""
  rngs = jnp.asarray(rngs)
  if rngs.shape == (2,):
    rngs = rngs[None]
  if rngs.shape != (num_seeds, 2):
    raise ValueError(f'rngs must be [num_seeds={num_seeds}, 2] keys (one '
                     f'per run, see seed_keys), got shape {rngs.shape}.')
  return rngs


def rule_params_on_mesh(setup: EvalSetup, rule_params=None,
                        load_weights: bool = True):
  """The rule's parameters (default: `default_rule_params`), replicated on
  the mesh."""
  if rule_params is None:
    rule_params = default_rule_params(setup.config, setup.agent, load_weights)
  return devices_lib.place(rule_params, devices_lib.replicated(setup.mesh))
