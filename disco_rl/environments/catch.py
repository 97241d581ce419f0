# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Catch on the host: a `dm_env.Environment` and its batched version."""

from collections.abc import Mapping
from typing import Any

import dm_env
from dm_env import specs
from ml_collections import config_dict
import numpy as np

from disco_rl import utils
from disco_rl.environments import base
from disco_rl.environments.wrappers import batched_env
from disco_rl.environments.wrappers import single_stream_env

# Paddle displacement per action index: left, stay, right.
_ACTIONS = (-1, 0, 1)

_SETTING_KEYS = ('rows', 'columns', 'random_seed')


class SingleStreamCatch:
  """One Catch game with dm_env's reset/step/spec methods.

  A ball falls from a random column of the top row, one row per step; the
  agent moves a paddle along the bottom row. Reaching the bottom row ends the
  episode: +1 if the ball is on the paddle, -1 otherwise. The observation is a
  float32 [rows, columns] board with ones at the ball and the paddle.
  """

  def __init__(self, env_settings: config_dict.ConfigDict):
    """Reads `rows`, `columns` and `random_seed` from `env_settings`."""
    base.check_board(env_settings.rows, env_settings.columns, 'Catch')
    self._rows, self._columns = env_settings.rows, env_settings.columns
    self._paddle_y = self._rows - 1
    self._board = np.zeros((self._rows, self._columns), np.float32)
    self._rng = np.random.RandomState(seed=env_settings.random_seed)
    # The positions; set by `reset`, which `step` calls first.
    self._paddle_x = 0
    self._ball_y = 0
    self._ball_x = 0
    self._needs_reset = True

  def reset(self) -> dm_env.TimeStep:
    """Starts an episode: ball in a random column, paddle centred."""
    self._needs_reset = False
    self._paddle_x = self._columns // 2
    self._ball_y, self._ball_x = 0, self._rng.randint(self._columns)
    return dm_env.restart(self._render())

  def step(self, action: int) -> dm_env.TimeStep:
    """Moves the paddle and drops the ball; after a LAST step, resets."""
    if self._needs_reset:
      return self.reset()
    self._paddle_x = np.clip(
      self._paddle_x + _ACTIONS[action], 0, self._columns - 1
    )
    self._ball_y += 1
    if self._ball_y != self._paddle_y:
      return dm_env.transition(reward=0.0, observation=self._render())
    self._needs_reset = True
    reward = 1.0 if self._ball_x == self._paddle_x else -1.0
    return dm_env.termination(reward=reward, observation=self._render())

  def observation_spec(self) -> specs.Array:
    return specs.Array(
      shape=self._board.shape, dtype=self._board.dtype, name='board'
    )

  def action_spec(self) -> specs.BoundedArray:
    return specs.BoundedArray((), np.int32, 0, len(_ACTIONS) - 1)

  def _render(self) -> np.ndarray:
    board = self._board
    board[:] = 0.0
    board[self._ball_y, self._ball_x] = 1.0
    board[self._paddle_y, self._paddle_x] = 1.0
    return board.copy()


def _make_stream(
  env_settings: config_dict.ConfigDict,
) -> single_stream_env.SingleStreamEnv:
  return single_stream_env.SingleStreamEnv(env=SingleStreamCatch(env_settings))


class CatchEnvironment(batched_env.BatchedSingleStreamEnvironment):
  """`batch_size` host Catch games, each seeded from `random_seed`."""

  def __init__(
    self, batch_size: int, env_settings: config_dict.ConfigDict
  ) -> None:
    base.check_batch_size(batch_size)
    env_settings = utils.as_config(env_settings, 'Catch env_settings')
    base.check_setting_keys(
      env_settings, _SETTING_KEYS, 'Catch', required=_SETTING_KEYS
    )
    super().__init__(_make_stream, batch_size, env_settings)


def get_config() -> config_dict.ConfigDict:
  """Default settings of `CatchEnvironment`: 8x8 board, seed 1."""
  return config_dict.ConfigDict(dict(rows=8, columns=8, random_seed=1))


def make(
  name: str, batch_size: int, settings: Mapping[str, Any], seed: int
) -> CatchEnvironment:
  """`CatchEnvironment` by the registry's `make` signature.

  Args:
    name: 'catch' (unused).
    batch_size: the number of games (>= 1).
    settings: `rows` and `columns`.
    seed: the games' `random_seed` (it replaces one in `settings`).
  """
  del name
  return CatchEnvironment(batch_size, {**settings, 'random_seed': seed})
