# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Adapts one `dm_env.Environment` to the package's `Environment` interface.

Episodes restart on their own: the step that ends an episode already shows the
first observation of the next one, while still reporting `LAST` and the final
reward.
"""

import chex
import dm_env
import numpy as np

from disco_rl import types
from disco_rl.environments import base


def _as_env_timestep(ts: dm_env.TimeStep) -> types.EnvironmentTimestep:
  # A dm_env `restart` carries reward None; report it as zero.
  reward = 0.0 if ts.reward is None else ts.reward
  return types.EnvironmentTimestep(
    observation=ts.observation,
    step_type=np.array(ts.step_type, dtype=np.int32),
    reward=np.array(reward),
  )


class UnusedEnvState:
  """Placeholder state: a stateful host environment keeps its own state."""


class SingleStreamEnv(base.Environment[UnusedEnvState]):
  """A single, self-resetting stream of a `dm_env.Environment`."""

  def __init__(self, env: dm_env.Environment):
    """Wraps `env` (anything with dm_env's reset/step/spec methods)."""
    self._env = env  # Stateful: episodes advance inside it.

  def step(
    self, state: UnusedEnvState | None, action: chex.Numeric
  ) -> tuple[UnusedEnvState, types.EnvironmentTimestep]:
    """Steps once; an episode's last step also starts the next episode."""
    del state
    timestep = _as_env_timestep(self._env.step(action))
    if timestep.step_type != dm_env.StepType.LAST:
      return UnusedEnvState(), timestep
    # The wrapped env restarts on the step after termination (the action is
    # ignored there); take that first observation but keep the terminal
    # step type and reward.
    restarted = _as_env_timestep(self._env.step(action))
    return UnusedEnvState(), types.EnvironmentTimestep(
      observation=restarted.observation,
      step_type=timestep.step_type,
      reward=timestep.reward,
    )

  def reset(
    self, rng_key: chex.PRNGKey
  ) -> tuple[UnusedEnvState, types.EnvironmentTimestep]:
    """Restarts the episode; `rng_key` is ignored (the env seeds itself)."""
    del rng_key
    return UnusedEnvState(), _as_env_timestep(self._env.reset())

  def single_observation_spec(self) -> types.Specs:
    return self._env.observation_spec()

  def single_action_spec(self) -> types.ActionSpec:
    return self._env.action_spec()
