# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The interface every (batched) environment of the package implements.

Also holds the argument checks the concrete environments share.
"""

import abc
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

import chex
from ml_collections import config_dict
import numpy as np

from disco_rl import types
from disco_rl import utils

_StateT = TypeVar('_StateT')


class Environment(abc.ABC):
  """A batch of `batch_size` environment instances driven in lock step.

  Implementations are functional in appearance: `reset` and `step` return the
  (possibly unused) environment state next to an `EnvironmentTimestep` whose
  leaves carry a leading batch axis.
  """

  batch_size: int  # Number of instances; leads every timestep leaf.

  @abc.abstractmethod
  def reset(
      self, rng_key: chex.PRNGKey
  ) -> tuple[Any, types.EnvironmentTimestep]:
    """Starts fresh episodes; returns the initial state and timestep."""

  @abc.abstractmethod
  def step(
      self, states: _StateT, actions: chex.ArrayTree
  ) -> tuple[_StateT, types.EnvironmentTimestep]:
    """Applies `actions` ([B, ...]) and returns the next state and timestep."""

  @abc.abstractmethod
  def single_observation_spec(self) -> types.Specs:
    """The observation spec of one instance (no batch axis)."""

  @abc.abstractmethod
  def single_action_spec(self) -> types.ActionSpec:
    """The action spec of one instance (no batch axis)."""

  def batched_observation_spec(self) -> types.Specs:
    """`single_observation_spec` with a leading axis of size `batch_size`."""
    return utils.broadcast_specs(self.single_observation_spec(),
                                 self.batch_size)

  def batched_action_spec(self) -> types.ActionSpec:
    """`single_action_spec` with a leading axis of size `batch_size`."""
    return utils.broadcast_specs(self.single_action_spec(), self.batch_size)


# ----------------------------------------------------------------------------
# Argument checks.


def check_batch_size(batch_size: Any) -> int:
  """Returns `batch_size` as an int, or raises if it is not a positive int."""
  is_int = isinstance(batch_size, (int, np.integer)) and not isinstance(
      batch_size, (bool, np.bool_))
  if not is_int or batch_size < 1:
    raise ValueError(
        f'batch_size must be a positive integer, got {batch_size!r}.')
  return int(batch_size)


def check_board(rows: Any, columns: Any, what: str) -> None:
  """Raises a ValueError unless the board is at least 2x2 (integers)."""
  for name, value in (('rows', rows), ('columns', columns)):
    if (not isinstance(value, (int, np.integer)) or isinstance(value, bool)
        or value < 2):
      raise ValueError(f'{what} {name} must be an integer >= 2 (a board of at '
                       f'least 2x2), got {value!r}.')


def as_config(settings: Any, what: str) -> config_dict.ConfigDict:
  """Accepts a `ConfigDict` (returned as is) or a plain mapping (wrapped)."""
  if isinstance(settings, config_dict.ConfigDict):
    return settings
  if isinstance(settings, Mapping):
    return config_dict.ConfigDict(dict(settings))
  raise ValueError(
      f'{what} settings must be an ml_collections ConfigDict or a mapping, '
      f'got {type(settings).__name__}.')


def check_setting_keys(
    settings: config_dict.ConfigDict,
    accepted: Collection[str],
    what: str,
    required: Collection[str] = (),
) -> None:
  """Raises a ValueError on keys outside `accepted` or missing `required` ones.

  Args:
    settings: the settings to check.
    accepted: every key the environment understands.
    what: the environment's name, for the message.
    required: keys that have no default.
  """
  given = list(settings.keys())
  valid = ', '.join(repr(k) for k in sorted(accepted))
  unknown = [k for k in given if k not in accepted]
  if unknown:
    names = ', '.join(repr(k) for k in unknown)
    raise ValueError(
        f'Unknown {what} setting(s) {names}; accepted keys are {valid}.')
  missing = [k for k in required if k not in given]
  if missing:
    names = ', '.join(repr(k) for k in missing)
    raise ValueError(
        f'Missing {what} setting(s) {names}; expected keys are {valid}.')
