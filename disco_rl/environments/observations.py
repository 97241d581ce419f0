# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Observations as the package keeps them, for the environment adapters.

Bytes stay bytes (uint8: a quarter of a float32 in the replay buffer); the
agent networks convert them to float32 (`networks.nets.float_observations`).
Everything else is float32. Every array has rank >= 1.
"""

from collections.abc import Mapping

import chex
from dm_env import specs
import jax
import jax.numpy as jnp
import numpy as np

from disco_rl import types


def as_stored(x: chex.Array, as_bytes: bool) -> chex.Array:
  """One observation array as the package keeps it, rank >= 1: bytes as
  uint8 (arrays that are bool or uint8, and every array where `as_bytes`,
  e.g. MinAtar's 0/1 channels, which gymnax gives as float32), anything else
  as float32. Networks turn bytes into floats
  (`networks.nets.float_observations`), so the replay buffer holds a byte
  where a float would take four."""
  x = jnp.atleast_1d(jnp.asarray(x))
  if as_bytes or x.dtype in (jnp.bool_, jnp.uint8):
    return x.astype(jnp.uint8)
  return x.astype(jnp.float32)


def observation_spec(example: chex.ArrayTree) -> types.Specs:
  """{'observation': spec} of one array, or one spec per leaf of a mapping."""

  def spec(x):
    return specs.Array(shape=tuple(x.shape), dtype=np.dtype(x.dtype))

  if isinstance(example, Mapping):
    return jax.tree.map(spec, dict(example))
  return {'observation': spec(example)}
