# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Atari through envpool, as a batched host `Environment`: 'envpool:<Game>-v5'.

`EnvpoolEnvironment` steps `batch_size` Atari games in envpool's C++ thread
pool (synchronously: one call steps the whole batch) and hands NumPy arrays
to the eval job's host acting (`jobs/eval/acting.py`), like the dm_env
Catch.

Preprocessing (envpool's Atari pipeline, with these defaults; each is an
`env_kwargs` name):

  frame_skip=4                  each action repeated for 4 frames
  (always)                      the last two frames max-pooled
  img_height=84, img_width=84   resized (INTER_AREA), gray_scale=True
  stack_num=4                   the last 4 frames stacked as channels
  repeat_action_probability=0.25  sticky actions (Machado et al. 2018)
  full_action_space=True        all 18 actions, in every game
  episodic_life=False           a lost life neither ends an episode nor
                                zeroes the discount
  max_episode_steps=27000       108,000 frames: a time limit (truncation)
  noop_max=30                   up to 30 no-ops at each start
  reward_clip=False             rewards as the game gives them

Episode ends follow the package's convention: the step that ends an episode
reports `LAST` with its last reward, and its observation is already the
next episode's first (the ended games are reset at once). Termination gives
dm_env discount 0, the time limit (truncation) discount 1
(`step_with_info`). Observations are {'observation': uint8 [84, 84, 4]}
(height, width, stacked frames; a `BoundedArray` of 0..255, so the agent
networks divide them by 255, `networks.nets.with_observation_scales`).

The game's state lives in envpool and cannot be saved: a resumed run
restarts its games (everything else resumes exactly), see `__setstate__`.
"""

from collections.abc import Mapping
from typing import Any
import warnings

import chex
from dm_env import specs
import numpy as np

from disco_rl import types
from disco_rl.environments import base
from disco_rl.environments import gymnax_env
from disco_rl.environments import packages

PREFIX = 'envpool:'
# The package, and what `pip install` takes for it.
PACKAGE = ('envpool', 'disco_rl[atari]')
ATARI_SUFFIX = '-v5'
# The preprocessing this package sets (see the module docstring); envpool's
# own defaults for the rest.
ATARI_DEFAULTS = dict(
  frame_skip=4,
  img_height=84,
  img_width=84,
  gray_scale=True,
  stack_num=4,
  repeat_action_probability=0.25,
  full_action_space=True,
  episodic_life=False,
  max_episode_steps=27000,
  noop_max=30,
  reward_clip=False,
)
# Settings the adapter owns.
_RESERVED = (
  'num_envs',
  'batch_size',
  'seed',
  'env_type',
  'num_threads',
  'max_num_players',
  'base_path',
  'env_seed',
  'gym_reset_return_info',
)


class EnvpoolState:
  """Placeholder state: the games keep their state in envpool."""


def atari_names() -> list[str]:
  """'envpool:<Game>-v5' for every Atari game envpool has."""
  envpool = packages.import_optional(PREFIX, PACKAGE)
  specs_by_id = envpool.registration.registry.specs
  return sorted(
    PREFIX + n
    for n, entry in specs_by_id.items()
    if n.endswith(ATARI_SUFFIX) and entry[0] == 'envpool.atari'
  )


def check_kwargs(
  task_id: str, env_kwargs: Mapping[str, Any], name: str
) -> None:
  """Raises ValueError naming settings envpool's Atari config lacks."""
  envpool = packages.import_optional(PREFIX, PACKAGE)
  known = set(envpool.make_spec(task_id).config._fields) - set(_RESERVED)
  unknown = sorted(set(env_kwargs) - known)
  if unknown:
    raise ValueError(
      f'env_kwargs {unknown} are not settings of {name}: '
      f'expected some of {sorted(known)}.'
    )


class EnvpoolEnvironment(base.AdapterEnvironment[EnvpoolState]):
  """`batch_size` Atari games in an envpool pool, stepped on the host.

  Attributes:
    batch_size: the number of games B.
    name: 'envpool:<Game>-v5'.
    settings: envpool's settings (the defaults above with `env_kwargs`).
    seed: envpool's seed (game b gets seed + b).
  """

  on_host = True

  def __init__(
    self,
    name: str,
    batch_size: int,
    env_kwargs: Mapping[str, Any] | None = None,
    seed: int = 0,
  ):
    self.batch_size = base.check_batch_size(batch_size)
    prefix, _, task_id = name.partition(':')
    if prefix + ':' != PREFIX:
      raise ValueError(
        f"{name!r} is not an envpool name; expected '{PREFIX}<Game>-v5'."
      )
    if PREFIX + task_id not in atari_names():
      raise packages.unknown_id_error(name, atari_names())
    check_kwargs(task_id, dict(env_kwargs or {}), name)
    self.name, self.seed = name, int(seed)
    self.settings = {**ATARI_DEFAULTS, **dict(env_kwargs or {})}
    self._task_id = task_id
    self._pool = self._make_pool()
    space = self._pool.action_space
    self._single_action_spec = gymnax_env.action_spec_from_space(
      space, repr(name)
    )
    channels, height, width = self._pool.observation_space.shape
    self._single_observation_spec = {
      'observation': specs.BoundedArray(
        (height, width, channels), np.uint8, 0, 255, name='observation'
      )
    }

  def _make_pool(self):
    envpool = packages.import_optional(PREFIX, PACKAGE)
    return envpool.make(
      self._task_id,
      env_type='gymnasium',
      num_envs=self.batch_size,
      batch_size=self.batch_size,
      seed=self.seed,
      **self.settings,
    )

  @staticmethod
  def _observation(frames: np.ndarray) -> dict[str, np.ndarray]:
    """envpool's [B, C, H, W] frames as {'observation': [B, H, W, C]}."""
    return {
      'observation': np.ascontiguousarray(
        np.moveaxis(np.asarray(frames, np.uint8), 1, -1)
      )
    }

  def reset(  # pytype: disable=signature-mismatch
    self, rng_key: chex.PRNGKey | None = None
  ) -> tuple[EnvpoolState, types.EnvironmentTimestep]:
    """Restarts every game: step types FIRST, rewards 0. `rng_key` is
    ignored (envpool seeds its games from `seed`)."""
    del rng_key
    frames, _ = self._pool.reset()
    return EnvpoolState(), base.restart(
      self._observation(frames), (self.batch_size,), np
    )

  def step_with_info(
    self, state: EnvpoolState | None, actions: chex.Array
  ) -> tuple[EnvpoolState, types.EnvironmentTimestep, base.StepInfo]:
    """Steps every game with its action ([B]); resets the games that ended.

    Returns:
      (state, timestep with [B] leaves, `StepInfo` [B] of NumPy arrays).
    """
    del state
    actions = np.asarray(actions).reshape(-1)
    if actions.shape != (self.batch_size,):
      raise ValueError(
        f'actions must be [{self.batch_size}], got shape {np.shape(actions)}.'
      )
    frames, reward, terminated, truncated, _ = self._pool.step(
      actions.astype(np.int32)
    )
    terminated = np.asarray(terminated, bool)
    ended = terminated | np.asarray(truncated, bool)
    frames = np.array(frames)
    if ended.any():
      ids = np.flatnonzero(ended)
      first, _ = self._pool.reset(ids)
      frames[ids] = first
    timestep, info = base.transition(
      self._observation(frames), reward, terminated, ended & ~terminated, np
    )
    return EnvpoolState(), timestep, info

  # Checkpoints: envpool cannot save its games, so a checkpoint keeps the
  # settings and a restored environment starts new games.

  def __getstate__(self) -> dict[str, Any]:
    return dict(
      name=self.name,
      batch_size=self.batch_size,
      settings=self.settings,
      seed=self.seed,
    )

  def __setstate__(self, saved: dict[str, Any]) -> None:
    """Rebuilds the pool and restarts its games (their emulator states are
    not saved): the first episode of each game after a resume is a new
    one, though the agent's last observation was of the old one."""
    kwargs = {
      k: v
      for k, v in saved['settings'].items()
      if ATARI_DEFAULTS.get(k, object()) != v
    }
    EnvpoolEnvironment.__init__(
      self, saved['name'], saved['batch_size'], kwargs, saved['seed']
    )
    self.reset()
    warnings.warn(
      f'{self.name}: restored from a checkpoint, the {self.batch_size} '
      'Atari games restart (envpool cannot save them); the agent, '
      'replay buffer and keys resume exactly.',
      stacklevel=2,
    )


def make(
  name: str,
  batch_size: int,
  env_kwargs: Mapping[str, Any] | None = None,
  seed: int = 0,
) -> EnvpoolEnvironment:
  """The Atari games named 'envpool:<Game>-v5', `batch_size` of them.

  Raises:
    packages.MissingPackageError: envpool is not installed (naming the
      extra).
    ValueError: an unknown game (with close matches), unknown settings or a
      bad batch size.
  """
  return EnvpoolEnvironment(name, batch_size, env_kwargs, seed)
