# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Batches a pure-JAX single-stream environment with `jax.vmap`.

The wrapped class must provide `num_actions`, `initial_state(rng)`,
`episode_reset(rng, state)`, `step(rng, state, action)`, `is_terminal(state)`,
`reward(state)` and `render(state)`, all traceable. Finished episodes restart
inside `step`: the terminal step reports `LAST` and the final reward, but its
observation and the returned state already belong to the next episode.
"""

from collections.abc import Callable
import inspect
from typing import Any

import chex
import dm_env
from dm_env import specs
import jax
import jax.numpy as jnp
from ml_collections import config_dict
import numpy as np

from disco_rl import types
from disco_rl import utils
from disco_rl.environments import base


@chex.dataclass(mappable_dataclass=False)
class EnvState:
  """Per-instance state: the env's own state and its RNG key."""

  state: chex.ArrayTree
  rng: chex.PRNGKey


def _make_timestep(
  observation: chex.Array, reward: chex.Array, is_terminal: chex.Array
) -> types.EnvironmentTimestep:
  step_type = jnp.where(
    is_terminal, jnp.int32(dm_env.StepType.LAST), jnp.int32(dm_env.StepType.MID)
  )
  return types.EnvironmentTimestep(
    observation=observation.astype(jnp.float32),
    step_type=step_type,
    reward=jnp.asarray(reward).astype(jnp.float32),
  )


def _accepted_settings(env_class: Callable[..., Any]) -> set[str] | None:
  """Keyword arguments `env_class` takes; None if it takes any (**kwargs)."""
  params = inspect.signature(env_class).parameters.values()
  if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
    return None
  return {
    p.name
    for p in params
    if p.kind
    in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
  }


class BatchedJittableEnvironment(base.Environment[EnvState]):
  """`batch_size` copies of a jittable environment, vectorised with vmap.

  `reset` and `step` are pure functions of their inputs and can be wrapped in
  `jax.jit` (and `jax.vmap`) by the caller.
  """

  def __init__(
    self,
    env_class: Callable[..., Any],
    batch_size: int,
    env_settings: config_dict.ConfigDict,
  ):
    """Builds the single-stream env and derives the specs.

    Args:
      env_class: the single-stream environment, built as
        `env_class(**env_settings)`.
      batch_size: the number of instances (>= 1).
      env_settings: keyword arguments of `env_class`.
    """
    self.batch_size = base.check_batch_size(batch_size)
    what = type(self).__name__
    env_settings = utils.as_config(env_settings, f'{what} env_settings')
    accepted = _accepted_settings(env_class)
    if accepted is not None:
      base.check_setting_keys(env_settings, accepted, what)
    self._env = env_class(**env_settings.to_dict())

    self._single_action_spec = specs.BoundedArray(
      shape=(), dtype=np.int32, minimum=0, maximum=self._env.num_actions - 1
    )
    # Render one state abstractly to learn the observation's shape and dtype.
    example = jax.eval_shape(
      lambda key: self._env.render(self._env.initial_state(key)),
      jax.random.key(0),
    )
    self._single_observation_spec = {
      'observation': specs.Array(shape=example.shape, dtype=example.dtype),
    }

    self._vmapped_step = jax.vmap(self._step_one)
    self._vmapped_reset = jax.vmap(self._reset_one)

  def _reset_one(
    self, rng_key: chex.PRNGKey
  ) -> tuple[EnvState, types.EnvironmentTimestep]:
    carry_rng, episode_rng = jax.random.split(rng_key)
    state = self._env.initial_state(episode_rng)
    timestep = _make_timestep(
      self._env.render(state),
      self._env.reward(state),
      self._env.is_terminal(state),
    )
    return EnvState(state=state, rng=carry_rng), timestep

  def _step_one(
    self, env_state: EnvState, action: chex.Array
  ) -> tuple[EnvState, types.EnvironmentTimestep]:
    carry_rng, step_rng = jax.random.split(env_state.rng)
    moved = self._env.step(step_rng, env_state.state, action)
    reward, done = self._env.reward(moved), self._env.is_terminal(moved)
    # On termination continue from a fresh episode, keeping `done`/`reward`
    # of the finished one for the timestep.
    fresh = self._env.episode_reset(step_rng, moved)
    following = jax.tree.map(lambda f, m: jnp.where(done, f, m), fresh, moved)
    timestep = _make_timestep(self._env.render(following), reward, done)
    return EnvState(state=following, rng=carry_rng), timestep

  def step(  # pytype: disable=signature-mismatch
    self, state: EnvState, actions: chex.Array
  ) -> tuple[EnvState, types.EnvironmentTimestep]:
    """Steps every instance; `state` and `actions` lead with the batch axis."""
    return self._vmapped_step(state, actions)

  def reset(  # pytype: disable=signature-mismatch
    self, rng_key: chex.PRNGKey
  ) -> tuple[EnvState, types.EnvironmentTimestep]:
    """Starts `batch_size` episodes from keys split off `rng_key`."""
    return self._vmapped_reset(jax.random.split(rng_key, self.batch_size))

  def single_observation_spec(self) -> types.Specs:
    return self._single_observation_spec

  def single_action_spec(self) -> types.ActionSpec:
    return self._single_action_spec
