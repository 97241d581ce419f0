# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The interface every (batched) environment of the package implements.

Also holds the argument checks the concrete environments share.
"""

import abc
from collections.abc import Collection
from typing import Any, Generic, TypeVar

import chex
import dm_env
from dm_env import specs
import jax
import jax.numpy as jnp
from ml_collections import config_dict
import numpy as np

from disco_rl import types
from disco_rl import utils

# The state an environment hands back from `reset` and `step` and takes in
# `step`: each environment class names its own (`Environment[GridState]`).
_StateT = TypeVar('_StateT')


class Environment(abc.ABC, Generic[_StateT]):
  """A batch of `batch_size` environment instances driven in lock step.

  Implementations are functional in appearance: `reset` and `step` return the
  (possibly unused) environment state next to an `EnvironmentTimestep` whose
  leaves carry a leading batch axis. The class is generic in the type of
  that state (`Environment[MyState]`).
  """

  batch_size: int  # Number of instances; leads every timestep leaf.
  # Stepped in Python on the host (NumPy arrays, e.g. the dm_env Catch,
  # envpool) rather than compiled into the program with `jax.jit`.
  on_host: bool = False

  @abc.abstractmethod
  def reset(
    self, rng_key: chex.PRNGKey
  ) -> tuple[_StateT, types.EnvironmentTimestep]:
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
    return utils.broadcast_specs(
      self.single_observation_spec(), self.batch_size
    )

  def batched_action_spec(self) -> types.ActionSpec:
    """`single_action_spec` with a leading axis of size `batch_size`."""
    return utils.broadcast_specs(self.single_action_spec(), self.batch_size)


@chex.dataclass(mappable_dataclass=False)
class StepInfo:
  """How each instance's step ended, all [B].

  Attributes:
    terminated: the episode reached a terminal state.
    truncated: the episode was cut (a time limit) without terminating.
    discount: dm_env's discount, float32: 0 where `terminated`, else 1.
  """

  terminated: chex.Array
  truncated: chex.Array
  discount: chex.Array


def restart(
  observation: chex.ArrayTree, shape: tuple[int, ...] = (), xp: Any = jnp
) -> types.EnvironmentTimestep:
  """The timestep that opens episodes: step types FIRST, rewards 0.

  Args:
    observation: the episodes' first observations, as the agent sees them.
    shape: the shape of the step types and rewards: () for one instance
      (inside a `jax.vmap`), (B,) for a batch.
    xp: the array module: `jax.numpy` (traced code) or `numpy` (host
      environments, which hand NumPy arrays to the host loop).

  Returns:
    The timestep: int32 step types and float32 rewards of `shape`.
  """
  return types.EnvironmentTimestep(
    observation=observation,
    step_type=xp.full(shape, dm_env.StepType.FIRST, xp.int32),
    reward=xp.zeros(shape, xp.float32),
  )


def transition(
  observation: chex.ArrayTree,
  reward: chex.Array,
  terminated: chex.Array,
  truncated: chex.Array,
  xp: Any = jnp,
) -> tuple[types.EnvironmentTimestep, StepInfo]:
  """A step's timestep and `StepInfo`, by the package's convention.

  The step that terminates or truncates an episode ends it: step type
  LAST, else MID. dm_env's discount is 0 where the episode terminated and
  1 elsewhere (a truncation, a time limit, could have gone on). The
  adapters' wrapped libraries restart finished episodes themselves, so
  `observation` of a LAST step is already the next episode's first.

  Args:
    observation: the observations, as the agent sees them.
    reward: the rewards, [] for one instance or [B] (cast to float32).
    terminated: whether each episode reached a terminal state, like
      `reward` (bool).
    truncated: whether each episode was cut, like `reward` (bool), as the
      wrapped library reports it (it may also be true where `terminated`
      is).
    xp: the array module: `jax.numpy` (traced code) or `numpy` (host
      environments).

  Returns:
    (timestep: int32 step types and float32 rewards of `reward`'s shape,
    `StepInfo` of that shape).
  """
  info = step_info(terminated, truncated, xp)
  ended = info.terminated | info.truncated
  timestep = types.EnvironmentTimestep(
    observation=observation,
    step_type=xp.where(ended, dm_env.StepType.LAST, dm_env.StepType.MID).astype(
      xp.int32
    ),
    reward=xp.asarray(reward, xp.float32),
  )
  return timestep, info


def step_info(
  terminated: chex.Array, truncated: chex.Array, xp: Any = jnp
) -> StepInfo:
  """The `StepInfo` of episode ends: dm_env's discount 0 where
  `terminated`, else 1.

  Args:
    terminated: bool, whether each episode reached a terminal state.
    truncated: bool, of `terminated`'s shape, whether each was cut.
    xp: the array module: `jax.numpy` (traced code) or `numpy`.

  Returns:
    The `StepInfo`, of `terminated`'s shape (discount float32).
  """
  terminated = xp.asarray(terminated, bool)
  return StepInfo(
    terminated=terminated,
    truncated=xp.asarray(truncated, bool),
    discount=xp.where(terminated, 0.0, 1.0).astype(xp.float32),
  )


def episode_ends(
  ended: chex.Array, discount: chex.Array
) -> tuple[chex.Array, chex.Array]:
  """(terminated, truncated) of episode ends reported with dm_env's discount.

  An episode that ended with discount 0 terminated; one that ended with
  any other discount was truncated (a time limit).

  Args:
    ended: bool, whether each episode ended (any shape).
    discount: the discounts, of `ended`'s shape.

  Returns:
    (terminated, truncated), bool of `ended`'s shape, never both true.
  """
  terminated = ended & (discount == 0)
  return terminated, ended & ~terminated


class AdapterEnvironment(Environment[_StateT]):
  """An environment of another package (gymnax, Jumanji, envpool) adapted.

  Subclasses set `_single_observation_spec` and `_single_action_spec` when
  built and implement `step_with_info`; `step` is it without the
  `StepInfo`.
  """

  _single_observation_spec: types.Specs
  _single_action_spec: types.ActionSpec

  @abc.abstractmethod
  def step_with_info(
    self, state: _StateT, actions: chex.Array
  ) -> tuple[_StateT, types.EnvironmentTimestep, StepInfo]:
    """`step`, and how each episode ended (terminated, truncated, discount).

    Args:
      state: the batch's state.
      actions: [B] integer actions in [0, num_actions).

    Returns:
      (next state, timestep with [B] leaves, `StepInfo` [B]).
    """

  def step(  # pytype: disable=signature-mismatch
    self, state: _StateT, actions: chex.Array
  ) -> tuple[_StateT, types.EnvironmentTimestep]:
    """Steps every instance with its action ([B]); LAST ends an episode."""
    state, timestep, _ = self.step_with_info(state, actions)
    return state, timestep

  def single_observation_spec(self) -> types.Specs:
    return self._single_observation_spec

  def single_action_spec(self) -> types.ActionSpec:
    return self._single_action_spec


class VmappedEnvironment(AdapterEnvironment[_StateT]):
  """An adapted environment of pure-JAX instances run with `jax.vmap`.

  Subclasses implement one instance's `_reset_one(key) -> (state,
  timestep)` and `_step_one(state, action) -> (state, timestep, StepInfo)`.
  """

  @abc.abstractmethod
  def _reset_one(
    self, key: chex.PRNGKey
  ) -> tuple[_StateT, types.EnvironmentTimestep]:
    """One instance's reset."""

  @abc.abstractmethod
  def _step_one(
    self, state: _StateT, action: chex.Array
  ) -> tuple[_StateT, types.EnvironmentTimestep, StepInfo]:
    """One instance's step, with its `StepInfo`."""

  def reset(  # pytype: disable=signature-mismatch
    self, rng_key: chex.PRNGKey
  ) -> tuple[_StateT, types.EnvironmentTimestep]:
    """Starts B episodes, instance b with `split(rng_key, B)[b]`: step
    types FIRST [B], rewards 0 [B]."""
    return jax.vmap(self._reset_one)(jax.random.split(rng_key, self.batch_size))

  def step_with_info(
    self, state: _StateT, actions: chex.Array
  ) -> tuple[_StateT, types.EnvironmentTimestep, StepInfo]:
    """`step`, and how each episode ended; [B] actions in [0, A)."""
    chex.assert_shape(actions, (self.batch_size,))
    return jax.vmap(self._step_one)(state, jax.numpy.asarray(actions, np.int32))


# ----------------------------------------------------------------------------
# Argument checks.


def check_batch_size(batch_size: Any) -> int:
  """Returns `batch_size` as an int, or raises if it is not a positive int."""
  is_int = isinstance(batch_size, (int, np.integer)) and not isinstance(
    batch_size, (bool, np.bool_)
  )
  if not is_int or batch_size < 1:
    raise ValueError(
      f'batch_size must be a positive integer, got {batch_size!r}.'
    )
  return int(batch_size)


def check_board(rows: Any, columns: Any, what: str) -> None:
  """Raises a ValueError unless the board is at least 2x2 (integers)."""
  for name, value in (('rows', rows), ('columns', columns)):
    if (
      not isinstance(value, (int, np.integer))
      or isinstance(value, bool)
      or value < 2
    ):
      raise ValueError(
        f'{what} {name} must be an integer >= 2 (a board of at '
        f'least 2x2), got {value!r}.'
      )


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
      f'Unknown {what} setting(s) {names}; accepted keys are {valid}.'
    )
  missing = [k for k in required if k not in given]
  if missing:
    names = ', '.join(repr(k) for k in missing)
    raise ValueError(
      f'Missing {what} setting(s) {names}; expected keys are {valid}.'
    )


# ----------------------------------------------------------------------------
# Checks of an environment object (e.g. a user's own), before anything runs.


def discrete_action_spec(num_actions: int) -> specs.BoundedArray:
  """The action spec the agents take: one of `num_actions` actions, a scalar
  int32 in [0, num_actions - 1] (what `check_action_spec` accepts)."""
  if int(num_actions) < 1:
    raise ValueError(f'num_actions must be >= 1, got {num_actions!r}.')
  return specs.BoundedArray(
    shape=(),
    dtype=np.int32,
    minimum=0,
    maximum=int(num_actions) - 1,
    name='action',
  )


def check_action_spec(spec: Any, what: str = 'single_action_spec()') -> None:
  """Raises unless `spec` is a scalar int32 BoundedArray with minimum 0.

  The agent acts with one of `maximum + 1` discrete actions.
  """
  shape = getattr(spec, 'shape', None)
  dtype = getattr(spec, 'dtype', None)
  if (
    shape is None
    or tuple(shape) != ()
    or dtype != np.int32
    or not hasattr(spec, 'maximum')
    or not hasattr(spec, 'minimum')
  ):
    raise ValueError(
      f'{what}: expected a scalar int32 dm_env.specs.BoundedArray '
      '(one discrete action per instance, no batch axis), got '
      f'{type(spec).__name__} of shape {shape} and dtype {dtype}.'
    )
  minimum, maximum = np.asarray(spec.minimum), np.asarray(spec.maximum)
  if minimum.shape or maximum.shape or minimum != 0 or maximum < 0:
    raise ValueError(
      f'{what}: expected minimum 0 and a scalar maximum >= 0 '
      f'(actions 0..maximum), got minimum {spec.minimum!r} '
      f'and maximum {spec.maximum!r}.'
    )


def _shapes(tree: Any) -> str:
  return str(jax.tree.map(lambda x: (tuple(x.shape), str(x.dtype)), tree))


def check_timestep(
  timestep: Any, observation_spec: types.Specs, batch_size: int, what: str
) -> None:
  """Raises unless `timestep` (abstract or not) fits the specs, batched.

  Args:
    timestep: what `reset` or `step` returned (second element).
    observation_spec: the environment's `single_observation_spec()`.
    batch_size: B, the leading axis of every leaf.
    what: the call, for messages (e.g. 'env.step(state, actions)').
  """
  if not isinstance(timestep, types.EnvironmentTimestep):
    raise ValueError(
      f'{what} must return (state, types.EnvironmentTimestep),'
      f' got a {type(timestep).__name__} as the timestep.'
    )
  expected = jax.tree.leaves(observation_spec)
  got = jax.tree.leaves(timestep.observation)
  if len(got) != len(expected):
    raise ValueError(
      f'{what}.observation: expected {len(expected)} array(s), one per '
      f'leaf of single_observation_spec() {observation_spec}, got '
      f'{len(got)}: {_shapes(timestep.observation)}.'
    )
  for spec, leaf in zip(expected, got, strict=False):
    want = ((batch_size,) + tuple(spec.shape), np.dtype(spec.dtype))
    have = (tuple(leaf.shape), np.dtype(leaf.dtype))
    if want != have:
      raise ValueError(
        f'{what}.observation: expected shape {want[0]} and dtype '
        f'{want[1]} ([batch_size={batch_size}] + '
        f'single_observation_spec() {tuple(spec.shape)}), got shape '
        f'{have[0]} and dtype {have[1]}.'
      )
  for field, kind, kind_name in (
    ('step_type', np.integer, 'an integer'),
    ('reward', np.floating, 'a floating'),
  ):
    leaf = getattr(timestep, field)
    shape, dtype = tuple(np.shape(leaf)), np.dtype(leaf.dtype)
    if shape != (batch_size,) or not np.issubdtype(dtype, kind):
      raise ValueError(
        f'{what}.{field}: expected shape ({batch_size},) with {kind_name} '
        f'dtype, got shape {shape} and dtype {dtype}.'
      )


def check_jittable_environment(env: Any, what: str = 'env') -> None:
  """Checks an environment the fused loops will compile, without running it.

  Traces `reset` and `step` abstractly (`jax.eval_shape`) and compares what
  they return with the specs; a mistake is reported here, naming the call,
  the expected and the received value, instead of deep inside XLA.

  Args:
    env: an `Environment` whose `reset`/`step` are traceable.
    what: its name in messages.

  Raises:
    TypeError: `env` is not an `Environment`.
    ValueError: a bad batch size or action spec, a timestep that does not
      match the specs, a `step` state unlike `reset`'s, or a `reset`/`step`
      that cannot be traced.
  """
  if not isinstance(env, Environment):
    raise TypeError(
      f'{what} must be a disco_rl.environments.base.'
      f'Environment, got {type(env).__name__}.'
    )
  try:
    batch = check_batch_size(getattr(env, 'batch_size', None))
  except ValueError as e:
    raise ValueError(f'{what}.{e}') from None
  check_action_spec(env.single_action_spec(), f'{what}.single_action_spec()')
  obs_spec = env.single_observation_spec()
  calls = (f'{what}.reset(rng)', f'{what}.step(state, actions)')
  try:
    state, timestep = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
  except Exception as e:  # pylint: disable=broad-except
    raise ValueError(
      f'{calls[0]} cannot be traced by JAX (the fused loops '
      f'compile it): {type(e).__name__}: {e}'
    ) from e
  check_timestep(timestep, obs_spec, batch, calls[0])
  actions = jax.ShapeDtypeStruct((batch,), np.int32)
  try:
    next_state, timestep = jax.eval_shape(env.step, state, actions)
  except Exception as e:  # pylint: disable=broad-except
    raise ValueError(
      f'{calls[1]} cannot be traced by JAX with [{batch}] '
      f'int32 actions: {type(e).__name__}: {e}'
    ) from e
  check_timestep(timestep, obs_spec, batch, calls[1])
  try:
    chex.assert_trees_all_equal_shapes_and_dtypes(next_state, state)
  except (AssertionError, ValueError) as e:
    raise ValueError(
      f'{calls[1]} must return a state of the same structure, shapes and '
      f'dtypes as {calls[0]} (it is carried through a lax.scan): '
      f'expected {_shapes(state)}, got {_shapes(next_state)}.'
    ) from e
