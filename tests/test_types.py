# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.types: conversions between rollouts and timesteps."""

import chex
import dm_env
import jax.numpy as jnp
import numpy as np

from disco_rl import types


def _rollout():
  """[T=3, B=2] steps; stream 1 ends an episode at t=1."""
  discounts = np.array([[1, 1], [1, 0], [1, 1]], np.float32)
  return types.ActorRollout(
    observations={'board': jnp.arange(3 * 2 * 4.0).reshape(3, 2, 4)},
    actions=jnp.array([[0, 1], [2, 0], [1, 1]], jnp.int32),
    rewards=jnp.array([[0.0, 0.0], [0.0, -1.0], [1.0, 0.0]]),
    discounts=jnp.asarray(discounts),
    agent_outs={'logits': jnp.ones((3, 2, 3))},
    states={'lstm': jnp.arange(3 * 2 * 5.0).reshape(3, 2, 5)},
    logits=jnp.ones((3, 2, 3)),
  )


def test_env_timestep_of_a_rollout():
  rollout = _rollout()
  timestep = rollout.to_env_timestep()
  chex.assert_trees_all_equal(timestep.observation, rollout.observations)
  np.testing.assert_array_equal(timestep.reward, rollout.rewards)
  mid, last = dm_env.StepType.MID, dm_env.StepType.LAST
  np.testing.assert_array_equal(
    timestep.step_type, [[mid, mid], [mid, last], [mid, mid]]
  )


def test_rollout_round_trips_through_actor_timestep():
  rollout = _rollout()
  back = types.ActorRollout.from_timestep(
    types.ActorTimestep.from_rollout(rollout)
  )
  assert type(back) is types.ActorRollout
  chex.assert_trees_all_equal(back, rollout)


def test_first_state_takes_time_step_zero():
  """As the upstream's: index 0 on axis `time_axis - 1` (so 0 and 1 both
  mean the leading axis)."""
  rollout = _rollout()
  first = rollout.states['lstm'][0]
  for time_axis in (0, 1):
    np.testing.assert_array_equal(
      rollout.first_state(time_axis=time_axis)['lstm'], first
    )
  stacked = rollout.states['lstm'][None]  # [N=1, T, B, ...]
  np.testing.assert_array_equal(
    rollout.replace(states={'lstm': stacked}).first_state(time_axis=2)['lstm'],
    stacked[:, 0],
  )
