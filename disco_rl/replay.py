# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A FIFO replay buffer of whole trajectories, kept on the device.

Pure functions of a `ReplayState`, so they compose inside `jit`, `scan` and
`shard_map` (each device keeps its own buffer).
"""

import dataclasses
from typing import Any

import chex
import jax
import jax.numpy as jnp

from disco_rl import types


@chex.dataclass
class ReplayState:
  """Stored trajectories; every leaf of `data` is [capacity, T, ...].

  Attributes:
    data: the stored `ActorRollout` fields, trajectory-major.
    next_index: [] int32, the slot the next trajectory goes to.
    size: [] int32, how many slots hold data.
  """

  data: Any
  next_index: chex.Array
  size: chex.Array


def init(example: types.ActorRollout, capacity: int) -> ReplayState:
  """An empty buffer for rollouts shaped like `example` ([T, B, ...])."""
  if capacity < 1:
    raise ValueError(f'capacity must be >= 1, got {capacity}.')
  data = jax.tree.map(
    lambda x: jnp.zeros((capacity, x.shape[0]) + x.shape[2:], x.dtype), example
  )
  return ReplayState(
    data=data,
    next_index=jnp.zeros((), jnp.int32),
    size=jnp.zeros((), jnp.int32),
  )


def capacity_of(buffer: ReplayState) -> int:
  return jax.tree.leaves(buffer.data)[0].shape[0]


def add(buffer: ReplayState, rollout: types.ActorRollout) -> ReplayState:
  """Stores the B trajectories of a [T, B, ...] rollout, evicting the oldest."""
  capacity = capacity_of(buffer)
  batch = rollout.rewards.shape[1]
  slots = (buffer.next_index + jnp.arange(batch)) % capacity
  data = jax.tree.map(
    lambda store, x: store.at[slots].set(jnp.swapaxes(x, 0, 1)),
    buffer.data,
    rollout,
  )
  return ReplayState(
    data=data,
    next_index=(buffer.next_index + batch) % capacity,
    size=jnp.minimum(buffer.size + batch, capacity),
  )


def sample(
  buffer: ReplayState, rng: chex.PRNGKey, batch_size: int
) -> types.ActorRollout:
  """`batch_size` stored trajectories, uniformly with replacement, [T, B].

  A whole `ActorRollout` (its `logits` restored, see `keep_outputs`).
  """
  index = jax.random.randint(rng, (batch_size,), 0, buffer.size)
  return restore(
    jax.tree.map(lambda store: jnp.swapaxes(store[index], 0, 1), buffer.data)
  )


def keep_outputs(
  rollout: types.ActorRollout, keep: tuple[str, ...] | None
) -> types.ActorRollout:
  """The rollout as the buffer stores it: only the agent outputs in `keep`.

  The behaviour logits are stored once: where `keep` holds 'logits',
  `rollout.logits` (the same array as `agent_outs['logits']`) is dropped
  (set to None) and `restore` puts it back.

  Args:
    rollout: an acted [T, B, ...] rollout.
    keep: the agent outputs to keep (None: all of them, and `logits` too).

  Raises:
    ValueError: naming the outputs of `keep` that the agent does not have.
  """
  if keep is None:
    return rollout
  missing = [k for k in keep if k not in rollout.agent_outs]
  if missing:
    raise ValueError(
      f'behaviour_outputs {missing} are not agent outputs '
      f'({sorted(rollout.agent_outs)}).'
    )
  return dataclasses.replace(
    rollout,
    agent_outs={k: rollout.agent_outs[k] for k in keep},
    logits=None if 'logits' in keep else rollout.logits,
  )


def restore(stored: types.ActorRollout) -> types.ActorRollout:
  """A stored rollout (`keep_outputs`) with its `logits` field back."""
  if stored.logits is not None:
    return stored
  return dataclasses.replace(stored, logits=stored.agent_outs['logits'])


def bytes_per_trajectory(buffer: ReplayState) -> int:
  """Bytes one stored trajectory takes."""
  return sum(x.dtype.itemsize * x[0].size for x in jax.tree.leaves(buffer.data))
