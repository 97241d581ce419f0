# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.replay: the on-device FIFO buffer of trajectories."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco_rl import replay
from disco_rl import types


def _rollout(t, b, offset):
  """A rollout whose trajectory j carries the value offset + j everywhere."""
  ids = jnp.broadcast_to(offset + jnp.arange(b, dtype=jnp.float32), (t, b))
  return types.ActorRollout(
    observations=ids[..., None],
    actions=ids.astype(jnp.int32),
    rewards=ids,
    discounts=jnp.ones((t, b), bool),
    agent_outs={'logits': jnp.stack([ids] * 3, -1), 'q': ids[..., None]},
    states={},
    logits=jnp.stack([ids] * 3, -1),
  )


class ReplayTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_add_is_fifo_and_wraps(self):
    add = self.variant(replay.add)
    buffer = replay.init(_rollout(4, 3, 0), capacity=5)
    self.assertEqual(int(buffer.size), 0)
    buffer = add(buffer, _rollout(4, 3, 0))  # ids 0, 1, 2
    buffer = add(buffer, _rollout(4, 3, 10))  # ids 10, 11, 12
    self.assertEqual(int(buffer.size), 5)
    self.assertEqual(int(buffer.next_index), 1)
    # Slot 0 was overwritten by the sixth trajectory (id 12), FIFO order.
    np.testing.assert_array_equal(buffer.data.rewards[:, 0], [12, 1, 2, 10, 11])
    # Trajectories are stored whole: [capacity, T, ...].
    self.assertEqual(buffer.data.observations.shape, (5, 4, 1))
    np.testing.assert_array_equal(buffer.data.rewards[3], [10] * 4)

  @chex.variants(with_jit=True, without_jit=True)
  def test_sample_returns_stored_trajectories_time_major(self):
    sample = self.variant(replay.sample, static_argnums=2)
    buffer = replay.init(_rollout(4, 2, 0), capacity=8)
    buffer = replay.add(buffer, _rollout(4, 2, 5))  # ids 5, 6
    batch = sample(buffer, jax.random.PRNGKey(0), 64)
    self.assertEqual(batch.rewards.shape, (4, 64))
    ids = np.asarray(batch.rewards[0])
    self.assertEqual(set(ids.tolist()), {5.0, 6.0})  # Never an empty slot.
    # Each sampled column is one whole trajectory.
    np.testing.assert_array_equal(batch.rewards, np.broadcast_to(ids, (4, 64)))
    np.testing.assert_array_equal(batch.logits[..., 2], batch.rewards)


def test_keep_outputs_trims_agent_outputs_and_names_missing_ones():
  rollout = _rollout(2, 2, 0)
  kept = replay.keep_outputs(rollout, ('logits',))
  assert set(kept.agent_outs) == {'logits'}
  # The behaviour logits are stored once, and come back on restore.
  assert kept.logits is None
  np.testing.assert_array_equal(replay.restore(kept).logits, rollout.logits)
  assert replay.keep_outputs(rollout, None) is rollout
  assert replay.restore(rollout) is rollout
  with pytest.raises(ValueError, match=r"behaviour_outputs \['pi'\] are not"):
    replay.keep_outputs(rollout, ('pi',))


def test_bytes_per_trajectory_counts_every_stored_field():
  buffer = replay.init(
    replay.keep_outputs(_rollout(4, 3, 0), ('logits',)), capacity=5
  )
  # Per step: observation 4 + action 4 + reward 4 + discount 1 + logits 12
  # bytes (stored once).
  assert replay.bytes_per_trajectory(buffer) == 4 * (4 + 4 + 4 + 1 + 12)


def test_capacity_must_be_positive():
  with pytest.raises(ValueError, match='capacity must be >= 1, got 0'):
    replay.init(_rollout(2, 2, 0), capacity=0)
