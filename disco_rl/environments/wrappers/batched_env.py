# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Runs a batch of host (numpy) single-stream environments one after another."""

from collections.abc import Callable
import copy

import chex
import jax
from ml_collections import config_dict
import numpy as np

from disco_rl import types
from disco_rl import utils
from disco_rl.environments import base


def _per_env_seeds(seed: int, count: int) -> list[int]:
  """`count` seeds in [0, int32 max) derived from one seed with JAX's RNG."""
  high = np.iinfo(np.int32).max
  draws = jax.random.randint(jax.random.key(seed), (count,), 0, high)
  return [int(s) for s in np.asarray(draws)]


class UnusedEnvState:
  """Placeholder state: the wrapped host environments keep their own state."""


class BatchedSingleStreamEnvironment(base.Environment[UnusedEnvState]):
  """A batched `Environment` made of `batch_size` single-stream ones.

  The instances are stepped sequentially on the host. When the settings hold a
  `random_seed`, each instance gets its own seed drawn from it.

  Attributes:
    batch_size: the number of instances.
  """

  on_host = True

  def __init__(
    self,
    env_class: Callable[..., base.Environment],
    batch_size: int,
    env_settings: config_dict.ConfigDict,
  ) -> None:
    """Builds the instances and resets them.

    Args:
      env_class: called as `env_class(env_settings=...)` to build one
        single-stream instance.
      batch_size: the number of instances (>= 1).
      env_settings: the instances' settings.
    """
    self.batch_size = base.check_batch_size(batch_size)
    self._num_envs = self.batch_size
    self._shape_prefix = (self.batch_size,)

    if 'random_seed' in env_settings:
      seeds = _per_env_seeds(env_settings.random_seed, self._num_envs)
      per_env_settings = []
      for seed in seeds:
        settings = copy.deepcopy(env_settings)
        settings.random_seed = seed
        per_env_settings.append(settings)
    else:
      per_env_settings = [env_settings] * self._num_envs
    self._envs = tuple(env_class(env_settings=s) for s in per_env_settings)

    self._single_action_spec = self._envs[0].single_action_spec()
    self._single_observation_spec = self._envs[0].single_observation_spec()
    self._timesteps = self._reset_all()

  def _reset_all(self) -> list[types.EnvironmentTimestep]:
    unused_key = jax.random.key(0)  # Host environments seed themselves.
    return [env.reset(unused_key)[1] for env in self._envs]

  def _stacked(self) -> types.EnvironmentTimestep:
    stacked = jax.tree.map(
      lambda *xs: np.stack(xs).reshape(self._shape_prefix + np.shape(xs[0])),
      *self._timesteps,
    )
    return utils.cast_to_single_precision(stacked, host_data=True)

  def step(
    self, state: UnusedEnvState | None, actions: chex.ArrayTree
  ) -> tuple[UnusedEnvState, types.EnvironmentTimestep]:
    """Steps every instance with its slice of `actions` ([B, ...])."""
    del state
    chex.assert_tree_shape_prefix(actions, self._shape_prefix)
    # Same flattening as the reference: [B, ...] -> [B, *shape[2:]], which is
    # a no-op for the usual [B] actions.
    actions = jax.tree.map(
      lambda a: np.asarray(a).reshape((self._num_envs,) + np.shape(a)[2:]),
      actions,
    )
    self._timesteps = [
      env.step(None, jax.tree.map(lambda a, i=i: a[i], actions))[1]
      for i, env in enumerate(self._envs)
    ]
    return UnusedEnvState(), self._stacked()

  def reset(
    self, rng_key: chex.PRNGKey
  ) -> tuple[UnusedEnvState, types.EnvironmentTimestep]:
    """Restarts every instance; `rng_key` is ignored (they seed themselves)."""
    del rng_key
    self._timesteps = self._reset_all()
    return UnusedEnvState(), self._stacked()

  def single_observation_spec(self) -> types.Specs:
    return self._single_observation_spec

  def single_action_spec(self) -> types.ActionSpec:
    return self._single_action_spec
