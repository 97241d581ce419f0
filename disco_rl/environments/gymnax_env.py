# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Any gymnax-style environment with discrete actions, batched.

`GymnaxEnvironment` wraps one gymnax environment object (gymnax >= 1.0, or
anything with its `reset(key, params)` / `step(key, state, action, params)`
/ `action_space(params)` / `observation_space(params)` methods, such as
Craftax) and runs `batch_size` instances with `jax.vmap`:

* `reset(rng)` splits `rng` into one key per instance; instance b keeps
  `jax.random.split(key_b)[0]` as its state's key and resets with `[1]`.
  Every later step splits the instance's key the same way:
  `next_key, step_key = jax.random.split(key)`; `step_key` goes to the
  wrapped `step`.
* The wrapped `step` restarts finished episodes itself (gymnax and Craftax
  auto-reset): the step that ends an episode reports `LAST` and that
  episode's last reward, while its observation and state already belong to
  the next episode. This is how every environment of the package encodes an
  episode end (the agent records discount 0 there and resets its recurrent
  state).
* Termination and truncation both end the episode (`LAST`). They differ in
  the dm_env discount, returned by `step_with_info`: 0 on termination, 1
  on truncation (a time limit: the return could have continued) and on
  every other step. gymnax >= 1.0 reports `terminated` and `truncated`;
  the older five-value API (Craftax) reports `done` and `info['discount']`.
* Observations are float32, but bytes stay bytes, as uint8: bool and uint8
  arrays, and MinAtar's 0/1 channels (float32 in gymnax; `byte_observations`
  of the '-MinAtar' ids). The replay buffer stores them in a quarter of the
  space and the networks convert them to floats. A discrete
  observation space (an index, e.g. FrozenLake) becomes a one-hot vector, a
  scalar one a vector of one.

Environments are named 'gymnax:<id>' (any id in `gymnax.registered_envs`)
or 'craftax:<id>' (`CRAFTAX_NAMES`, with `pip install 'disco_rl[craftax]'`).
Their keyword arguments go to the environment's constructor or, by field
name, into its `EnvParams` (e.g. `size` of DeepSea, `max_steps_in_episode`).
"""

from collections.abc import Callable, Mapping
import dataclasses
import difflib
import inspect
import math
import numbers
from typing import Any

import chex
from dm_env import specs
import jax
import jax.numpy as jnp
import numpy as np

from disco_rl.environments import base
from disco_rl.environments import observations
from disco_rl.environments import packages

GYMNAX_PREFIX = 'gymnax:'
CRAFTAX_PREFIX = 'craftax:'
# The package behind each prefix, and what `pip install` takes for it.
GYMNAX_PACKAGE = ('gymnax', 'disco_rl')
CRAFTAX_PACKAGE = ('craftax', 'disco_rl[craftax]')
# Craftax environments that restart episodes on their own.
CRAFTAX_NAMES = (
  'Craftax-Classic-Symbolic-v1',
  'Craftax-Classic-Pixels-v1',
  'Craftax-Symbolic-v1',
  'Craftax-Pixels-v1',
)
# gymnax's ids with continuous actions (a Box): not listed as known ids,
# refused with what is expected (tests check the list against gymnax).
CONTINUOUS_ACTION_IDS = (
  'Pendulum-v1',
  'MountainCarContinuous-v0',
  'PointRobot-misc',
  'Reacher-misc',
  'Swimmer-misc',
)
# gymnax's MinAtar ids end so; their observations are 0/1 channels.
MINATAR_SUFFIX = '-MinAtar'


@chex.dataclass(mappable_dataclass=False)
class GymnaxState:
  """The batch's state: the wrapped environments' states and keys, each
  [B, ...]."""

  env_state: Any
  rng: chex.PRNGKey


# ----------------------------------------------------------------------------
# Spaces.


def is_discrete(space: Any) -> bool:
  """Whether a gymnax-style space is one integer in [0, n)."""
  return hasattr(space, 'n') and tuple(getattr(space, 'shape', ())) == ()


def action_spec_from_space(space: Any, what: str) -> specs.BoundedArray:
  """The scalar int32 action spec of a discrete space.

  Raises:
    ValueError: for any other space (continuous, multi-dimensional), naming
      `what`, the space and what is expected.
  """
  if not is_discrete(space) or int(space.n) < 1:
    raise ValueError(
      f'{what}: expected a discrete action space (a gymnax '
      f'spaces.Discrete with n >= 1), got {space!r}. Disco103 and the '
      'actor-critic agent choose one of n actions; continuous and '
      'multi-dimensional action spaces are not supported.'
    )
  return base.discrete_action_spec(int(space.n))


def _observation_fn(
  space: Any, as_bytes: bool = False
) -> Callable[[chex.ArrayTree], chex.ArrayTree]:
  """One instance's observation -> arrays of rank >= 1
  (`observations.as_stored`)."""
  if is_discrete(space):
    return lambda obs: jax.nn.one_hot(obs, int(space.n), dtype=jnp.float32)
  return lambda obs: jax.tree.map(
    lambda x: observations.as_stored(x, as_bytes), obs
  )


# ----------------------------------------------------------------------------
# The batched environment.


def _episode_end(
  outputs: tuple[Any, ...], what: str
) -> tuple[chex.Array, chex.Array]:
  """(terminated, truncated) of one wrapped `step`'s outputs."""
  # gymnax >= 1.0: obs, state, reward, terminated, truncated, info.
  if len(outputs) == 6:
    terminated, truncated = (jnp.asarray(x, bool) for x in outputs[3:5])
    return terminated, truncated
  if len(outputs) == 5:  # obs, state, reward, done, info (Craftax)
    done, info = jnp.asarray(outputs[3], bool), outputs[4]
    # Without a discount, every end is a termination.
    discount = (
      jnp.asarray(info['discount'])
      if isinstance(info, Mapping) and 'discount' in info
      else 0.0
    )
    return base.episode_ends(done, discount)
  raise ValueError(
    f'{what}.step must return (obs, state, reward, terminated, '
    'truncated, info) as gymnax >= 1.0 does, or (obs, state, reward, '
    f'done, info); got {len(outputs)} values.'
  )


def _step_info(outputs: tuple[Any, ...], what: str) -> base.StepInfo:
  """The `StepInfo` of one wrapped `step`'s outputs."""
  return base.step_info(*_episode_end(outputs, what))


class GymnaxEnvironment(base.VmappedEnvironment[GymnaxState]):
  """`batch_size` instances of a gymnax-style environment, vmapped.

  `reset` and `step` are pure and jittable. See the module docstring for
  the keys, the episode ends and the observations.

  Attributes:
    batch_size: the number of instances B.
    env: the wrapped (single) environment.
    env_params: its parameters, used at every reset and step.
    name: the environment's name, for messages.
  """

  def __init__(
    self,
    env: Any,
    env_params: Any,
    batch_size: int,
    name: str | None = None,
    byte_observations: bool = False,
  ):
    """Derives the specs; raises if the action space is not discrete.

    Args:
      env: a gymnax-style environment object.
      env_params: its parameters (e.g. `env.default_params`).
      batch_size: the number of instances (>= 1).
      name: shown in messages (default: the class name).
      byte_observations: the observations hold whole numbers in [0, 255]
        whatever their dtype (MinAtar's 0/1 channels): keep them as uint8.
    """
    self.batch_size = base.check_batch_size(batch_size)
    self.env, self.env_params = env, env_params
    self.name = name or type(env).__name__
    self._single_action_spec = action_spec_from_space(
      env.action_space(env_params), repr(self.name)
    )
    self._observe = _observation_fn(
      env.observation_space(env_params), byte_observations
    )
    obs, _ = jax.eval_shape(
      lambda key: env.reset(key, env_params), jax.random.PRNGKey(0)
    )
    self._single_observation_spec = observations.observation_spec(
      jax.eval_shape(self._observe, obs)
    )

  def _reset_one(self, key: chex.PRNGKey):
    carry, reset_key = jax.random.split(key)
    obs, env_state = self.env.reset(reset_key, self.env_params)
    return (
      GymnaxState(env_state=env_state, rng=carry),
      base.restart(self._observe(obs)),
    )

  def _step_one(self, state: GymnaxState, action: chex.Array):
    carry, step_key = jax.random.split(state.rng)
    outputs = self.env.step(step_key, state.env_state, action, self.env_params)
    terminated, truncated = _episode_end(outputs, repr(self.name))
    timestep, info = base.transition(
      self._observe(outputs[0]), outputs[2], terminated, truncated
    )
    return GymnaxState(env_state=outputs[1], rng=carry), timestep, info


# ----------------------------------------------------------------------------
# Construction by name.


def gymnax_names() -> list[str]:
  """'gymnax:<id>' for every environment with discrete actions that gymnax
  registers (not `CONTINUOUS_ACTION_IDS`)."""
  gymnax = packages.import_optional(GYMNAX_PREFIX, GYMNAX_PACKAGE)
  return [
    GYMNAX_PREFIX + n
    for n in gymnax.registered_envs
    if n not in CONTINUOUS_ACTION_IDS
  ]


def refuse_continuous(name: str) -> None:
  """Raises `action_spec_from_space`'s ValueError for a gymnax id with
  continuous actions (which `gymnax_names` leaves out): what is expected
  rather than 'unknown'."""
  env_id = name.partition(':')[2]
  if name.startswith(GYMNAX_PREFIX) and env_id in CONTINUOUS_ACTION_IDS:
    gymnax = packages.import_optional(GYMNAX_PREFIX, GYMNAX_PACKAGE)
    env, params = gymnax.make(env_id)
    action_spec_from_space(env.action_space(params), repr(name))


def craftax_names() -> list[str]:
  """'craftax:<id>' of the auto-resetting Craftax environments."""
  return [CRAFTAX_PREFIX + n for n in CRAFTAX_NAMES]


def split_kwargs(
  constructor: Callable[..., Any],
  params: Any,
  env_kwargs: Mapping[str, Any],
  what: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
  """Splits keyword arguments into constructor ones and `EnvParams` fields.

  Raises:
    ValueError: on a key that is neither, naming the accepted ones.
  """
  taken = inspect.signature(constructor).parameters
  fields = (
    {f.name for f in dataclasses.fields(params)}
    if dataclasses.is_dataclass(params)
    else set()
  )
  unknown = sorted(set(env_kwargs) - set(taken) - fields)
  if unknown:
    matches = [
      m
      for k in unknown
      for m in difflib.get_close_matches(k, set(taken) | fields, 1)
    ]
    hint = f' Did you mean {matches}?' if matches else ''
    raise ValueError(
      f'env_kwargs {unknown} are not settings of {what}: expected '
      f'constructor arguments {sorted(taken) or "(none)"} or EnvParams '
      f'fields {sorted(fields) or "(none)"}.{hint}'
    )
  ctor = {k: v for k, v in env_kwargs.items() if k in taken}
  return ctor, {k: v for k, v in env_kwargs.items() if k not in taken}


def defaults_of(constructor: Callable[..., Any], params: Any) -> dict[str, Any]:
  """The default of every setting a gymnax-style environment takes: its
  constructor's arguments (those with a default) and its `EnvParams`
  fields."""
  defaults = {
    k: p.default
    for k, p in inspect.signature(constructor).parameters.items()
    if p.default is not inspect.Parameter.empty
  }
  if dataclasses.is_dataclass(params):
    defaults.update(
      {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
    )
  return defaults


def check_settings(
  defaults: Mapping[str, Any], settings: Mapping[str, Any], what: str
) -> None:
  """`settings` checked against their `defaults` (`defaults_of`): a bool
  where the default is one, an integer where it is one (>= 1 where the
  default is >= 1: a size, a count, an interval or the episode limit
  `max_steps_in_episode`; else >= 0), a finite number where it is a float.
  Settings whose default is None, text or an array are the environment's
  to check.

  Raises:
    ValueError: naming the setting, the expected and the received value.
  """
  for key, value in settings.items():
    default = defaults.get(key)
    is_bool = isinstance(value, (bool, np.bool_))
    if isinstance(default, bool):
      ok, expected = is_bool, 'True or False'
    elif isinstance(default, int):
      least = 1 if default >= 1 else 0
      ok = isinstance(value, numbers.Integral) and not is_bool
      ok = ok and value >= least
      expected = f'an integer >= {least}'
    elif isinstance(default, float):
      ok = isinstance(value, numbers.Real) and not is_bool
      ok = ok and math.isfinite(value)
      expected = 'a finite number'
    else:
      continue
    if not ok:
      raise ValueError(
        f'{what} setting {key} must be {expected} (default {default!r}), '
        f'got {value!r}.'
      )


def _make_gymnax(env_id: str, env_kwargs: Mapping[str, Any], name: str):
  gymnax = packages.import_optional(GYMNAX_PREFIX, GYMNAX_PACKAGE)
  refuse_continuous(name)
  if env_id not in gymnax.registered_envs:
    raise packages.unknown_id_error(name, gymnax_names())
  env, params = gymnax.make(env_id)
  ctor, fields = split_kwargs(type(env), params, env_kwargs, name)
  check_settings(defaults_of(type(env), params), env_kwargs, name)
  if ctor:
    env, params = gymnax.make(env_id, **ctor)
  return env, params.replace(**fields) if fields else params


def _make_craftax(env_id: str, env_kwargs: Mapping[str, Any], name: str):
  if env_id not in CRAFTAX_NAMES:  # Known without the package.
    raise packages.unknown_id_error(name, craftax_names())
  packages.import_optional(CRAFTAX_PREFIX, CRAFTAX_PACKAGE)
  from craftax import craftax_env  # pylint: disable=g-import-not-at-top

  env = craftax_env.make_craftax_env_from_name(env_id, auto_reset=True)
  params = env.default_params
  _, fields = split_kwargs(type(env), params, env_kwargs, name)
  check_settings(defaults_of(type(env), params), fields, name)
  return env, params.replace(**fields) if fields else params


def make(
  name: str,
  batch_size: int,
  env_kwargs: Mapping[str, Any] | None = None,
  seed: int = 0,
) -> GymnaxEnvironment:
  """The environment named 'gymnax:<id>' or 'craftax:<id>', batched.

  Args:
    name: e.g. 'gymnax:Breakout-MinAtar', 'craftax:Craftax-Classic-Symbolic-v1'.
    batch_size: the number of instances (>= 1).
    env_kwargs: constructor arguments or `EnvParams` fields, by name.
    seed: unused (the keys come with `reset` and `step`); the registry's
      `make` signature.

  Raises:
    MissingPackageError: the package is not installed (naming the extra).
    ValueError: an unknown id (with close matches), unknown keyword
      arguments, a bad batch size or a non-discrete action space.
  """
  del seed
  base.check_batch_size(batch_size)
  prefix, _, env_id = name.partition(':')
  builders = {GYMNAX_PREFIX: _make_gymnax, CRAFTAX_PREFIX: _make_craftax}
  if prefix + ':' not in builders:
    raise ValueError(
      f'{name!r} is not a gymnax or craftax name; expected '
      f"'{GYMNAX_PREFIX}<id>' or '{CRAFTAX_PREFIX}<id>'."
    )
  env, params = builders[prefix + ':'](env_id, dict(env_kwargs or {}), name)
  return GymnaxEnvironment(
    env,
    params,
    batch_size,
    name=name,
    byte_observations=name.endswith(MINATAR_SUFFIX),
  )
