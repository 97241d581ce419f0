# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Environments written in pure JAX, so that whole rollouts can be jitted."""

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from ml_collections import config_dict

from disco_rl.environments import base
from disco_rl.environments.wrappers import batched_jittable_env

# Layout of the Catch state vector (int32).
_BALL_Y, _BALL_X, _PADDLE_Y, _PADDLE_X = range(4)
_NUM_ACTIONS = 3


class _SingleStreamCatch:
  """One stream of Catch as pure functions of an int32 state vector.

  The state is [ball_y, ball_x, paddle_y, paddle_x]. A ball starts in the top
  row of a random column and falls one row per step; the paddle sits on the
  bottom row and moves by `action - 1` (left, stay, right). The episode ends
  when the ball reaches the bottom row, with reward +1 if it lands on the
  paddle and -1 otherwise.
  """

  def __init__(self, rows: int = 10, columns: int = 5):
    base.check_board(rows, columns, 'Catch')
    self._rows, self._columns = rows, columns

  @property
  def num_actions(self) -> int:
    """Left, stay, right."""
    return _NUM_ACTIONS

  def initial_state(self, rng):
    """A new episode: ball at the top of a random column, paddle centred."""
    ball_x = jax.random.randint(rng, (), 0, self._columns)
    return jnp.stack(
      [
        jnp.int32(0),
        ball_x.astype(jnp.int32),
        jnp.int32(self._rows - 1),
        jnp.int32(self._columns // 2),
      ]
    )

  def step(self, rng, state, action):
    """Moves the paddle (clipped to the board) and drops the ball one row."""
    del rng  # Catch is deterministic between resets.
    paddle_x = jnp.clip(state[_PADDLE_X] + action - 1, 0, self._columns - 1)
    return (
      state.at[_BALL_Y].add(1).at[_PADDLE_X].set(paddle_x.astype(state.dtype))
    )

  def episode_reset(self, rng, state):
    """The state a finished episode continues from (independent of `state`)."""
    del state
    return self.initial_state(rng)

  def is_terminal(self, state):
    return state[_BALL_Y] == self._rows - 1

  def render(self, state):
    """A float32 [rows, columns, 1] board with ones at the ball and paddle."""
    ys = jnp.arange(self._rows)[:, None]
    xs = jnp.arange(self._columns)[None, :]
    ball = (ys == state[_BALL_Y]) & (xs == state[_BALL_X])
    paddle = (ys == state[_PADDLE_Y]) & (xs == state[_PADDLE_X])
    return (ball | paddle).astype(jnp.float32)[..., None]

  def reward(self, state):
    caught = state[_BALL_X] == state[_PADDLE_X]
    on_paddle_row = self.is_terminal(state)
    return jnp.where(on_paddle_row, jnp.where(caught, 1.0, -1.0), 0.0).astype(
      jnp.float32
    )


class CatchJittableEnvironment(batched_jittable_env.BatchedJittableEnvironment):
  """A batch of jittable Catch games (settings: `rows`, `columns`)."""

  def __init__(
    self, batch_size: int, env_settings: config_dict.ConfigDict
  ) -> None:
    super().__init__(_SingleStreamCatch, batch_size, env_settings)


def get_config_catch() -> config_dict.ConfigDict:
  """Default settings of `CatchJittableEnvironment`: an 8x8 board."""
  return config_dict.ConfigDict(dict(rows=8, columns=8))


def make_catch(
  name: str, batch_size: int, settings: Mapping[str, Any], seed: int
) -> CatchJittableEnvironment:
  """`CatchJittableEnvironment` by the registry's `make` signature.

  Args:
    name: 'jittable_catch' (unused).
    batch_size: the number of games (>= 1).
    settings: `rows` and `columns`.
    seed: unused (the keys come with `reset`).
  """
  del name, seed
  return CatchJittableEnvironment(batch_size, settings)
