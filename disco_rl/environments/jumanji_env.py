# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Any Jumanji environment with one discrete action as a batched `Environment`.

`JumanjiEnvironment` wraps a Jumanji environment (jumanji >= 1.1, e.g.
Sokoban, Game2048, Snake, Maze, PacMan) in Jumanji's `AutoResetWrapper` and
runs `batch_size` instances with `jax.vmap`:

* `reset(rng)` splits `rng` into one key per instance and resets instance b
  with key b. Jumanji keeps each instance's key in its state; steps need
  none.
* The step that ends an episode reports `LAST` and that episode's last
  reward, while its observation and state already belong to the next
  episode (`AutoResetWrapper`: the package's convention for every
  environment). Jumanji's discount is dm_env's: 0 where the episode
  terminated, 1 where it was truncated (a time limit) and on every other
  step; `step_with_info` reports both, as for gymnax.
* Observations (a NamedTuple or dataclass of arrays, e.g. Sokoban's `grid`
  [10, 10, 2] and `step_count`) become a dict by field name, nested fields
  joined with '/'. Bytes (uint8, bool: Sokoban's grid, action masks) stay
  uint8, the rest is float32, every array of rank >= 1
  (`observations.as_stored`). The image networks take the one [H, W, C]
  field as the image and the other fields beside it.
* Actions: one `DiscreteArray` (n actions). Environments with several
  discrete actions at once (`MultiDiscreteArray`: Tetris, Minesweeper,
  RubiksCube, Cleaner) or continuous ones are refused, naming the spec.

Names: 'jumanji:<id>' for every id `jumanji.registered_environments()`
lists (`pip install 'disco_rl[jumanji]'`). Keyword arguments go to the
environment's constructor (e.g. `time_limit`); Sokoban's `generator` also
takes a name: 'toy' (Jumanji's two toy levels, no download), 'simple'
(`SimpleSolveGenerator`) or a Boxoban dataset of
huggingface.co/InstaDeepAI/boxoban-levels ('unfiltered-train', the default
of Jumanji, 'unfiltered-valid', 'unfiltered-test', 'medium-train',
'medium-test', 'hard'), downloaded on first use.
"""

from collections.abc import Mapping
import inspect
from typing import Any

import chex
from dm_env import specs
import jax
import jax.numpy as jnp
import numpy as np

from disco_rl.environments import base
from disco_rl.environments import observations
from disco_rl.environments import packages

PREFIX = 'jumanji:'
# The package, and what `pip install` takes for it.
PACKAGE = ('jumanji', 'disco_rl[jumanji]')
SOKOBAN_GENERATORS = (
  'toy',
  'simple',
  'unfiltered-train',
  'unfiltered-valid',
  'unfiltered-test',
  'medium-train',
  'medium-test',
  'hard',
)


class DownloadError(OSError, ValueError):
  """Data an environment needs could not be downloaded.

  Also a ValueError: to the command-line jobs it is bad input (one line).
  """


@chex.dataclass(mappable_dataclass=False)
class JumanjiState:
  """The batch's state: the wrapped environments' states, each [B, ...]."""

  env_state: Any


def action_spec_from_jumanji(spec: Any, what: str) -> specs.BoundedArray:
  """The scalar int32 action spec of a Jumanji `DiscreteArray`.

  Raises:
    ValueError: for any other spec (several discrete actions at once,
      continuous), naming `what`, the spec and what is expected.
  """
  num_values = getattr(spec, 'num_values', None)
  if (
    num_values is None
    or np.ndim(num_values) != 0
    or tuple(getattr(spec, 'shape', ())) != ()
    or int(num_values) < 1
  ):
    raise ValueError(
      f'{what}: expected one discrete action (a Jumanji DiscreteArray), '
      f'got {type(spec).__name__} {spec!r}. Disco103 and the actor-critic '
      'agent choose one of n actions; several actions at once '
      '(MultiDiscreteArray) and continuous actions are not supported.'
    )
  return base.discrete_action_spec(int(num_values))


def _name(key: Any) -> str:
  for attr in ('name', 'key', 'idx'):
    if hasattr(key, attr):
      return str(getattr(key, attr))
  return str(key)


def observation_dict(observation: Any) -> dict[str, chex.Array]:
  """A Jumanji observation as {field name: array}, nested names joined by
  '/' (e.g. PacMan's 'player_locations/x'), arrays as stored
  (`observations.as_stored`)."""
  leaves = jax.tree_util.tree_leaves_with_path(observation)
  if not leaves:
    raise ValueError(f'The observation holds no arrays: {observation!r}.')
  return {
    ('/'.join(_name(k) for k in path) or 'observation'): observations.as_stored(
      leaf, as_bytes=False
    )
    for path, leaf in leaves
  }


class JumanjiEnvironment(base.VmappedEnvironment[JumanjiState]):
  """`batch_size` instances of a Jumanji environment, auto-reset, vmapped.

  `reset` and `step` are pure and jittable; see the module docstring.

  Attributes:
    batch_size: the number of instances B.
    env: the wrapped environment (in `AutoResetWrapper`).
    name: the environment's name, for messages.
  """

  def __init__(self, env: Any, batch_size: int, name: str | None = None):
    """Derives the specs; raises unless the env takes one discrete action.

    Args:
      env: a Jumanji environment (not yet auto-reset).
      batch_size: the number of instances (>= 1).
      name: shown in messages (default: the class name).
    """
    from jumanji import wrappers  # pylint: disable=g-import-not-at-top

    self.batch_size = base.check_batch_size(batch_size)
    self.name = name or type(env).__name__
    self._single_action_spec = action_spec_from_jumanji(
      env.action_spec, repr(self.name)
    )
    self.env = wrappers.AutoResetWrapper(env)
    _, timestep = jax.eval_shape(self.env.reset, jax.random.PRNGKey(0))
    self._single_observation_spec = {
      k: specs.Array(shape=tuple(v.shape), dtype=np.dtype(v.dtype), name=k)
      for k, v in jax.eval_shape(observation_dict, timestep.observation).items()
    }

  def _reset_one(self, key: chex.PRNGKey):
    env_state, timestep = self.env.reset(key)
    return (
      JumanjiState(env_state=env_state),
      base.restart(observation_dict(timestep.observation)),
    )

  def _step_one(self, state: JumanjiState, action: chex.Array):
    env_state, timestep = self.env.step(state.env_state, action)
    terminated, truncated = base.episode_ends(
      timestep.last(), jnp.reshape(timestep.discount, ())
    )
    step, info = base.transition(
      observation_dict(timestep.observation),
      jnp.reshape(timestep.reward, ()),
      terminated,
      truncated,
    )
    return JumanjiState(env_state=env_state), step, info


# ----------------------------------------------------------------------------
# Construction by name.


def jumanji_names() -> list[str]:
  """'jumanji:<id>' for every environment Jumanji registers."""
  jumanji = packages.import_optional(PREFIX, PACKAGE)
  return sorted(PREFIX + n for n in jumanji.registered_environments())


def _sokoban_generator(value: Any) -> Any:
  """A Sokoban generator from its name (see the module docstring)."""
  from jumanji.environments.routing.sokoban import generator  # pylint: disable=g-import-not-at-top

  if not isinstance(value, str):
    return value  # A Generator object, from Python.
  if value not in SOKOBAN_GENERATORS:
    raise ValueError(
      f'env_kwargs generator={value!r} is not a Sokoban '
      f'generator; expected one of {SOKOBAN_GENERATORS}.'
    )
  if value == 'toy':
    return generator.ToyGenerator()
  if value == 'simple':
    return generator.SimpleSolveGenerator()
  return _boxoban(value)


def _boxoban(dataset: str) -> Any:
  from jumanji.environments.routing.sokoban import generator  # pylint: disable=g-import-not-at-top

  try:
    return generator.HuggingFaceDeepMindGenerator(dataset)
  except Exception as e:  # pylint: disable=broad-except
    # huggingface_hub raises its own errors (offline, not found).
    raise DownloadError(
      f'Sokoban levels {dataset!r} could not be downloaded from '
      f'huggingface.co/InstaDeepAI/boxoban-levels ({type(e).__name__}: '
      f'{str(e).splitlines()[0] if str(e) else ""}); with no network, '
      "use env_kwargs generator=toy (Jumanji's two toy levels)."
    ) from e


def make(
  name: str,
  batch_size: int,
  env_kwargs: Mapping[str, Any] | None = None,
  seed: int = 0,
) -> JumanjiEnvironment:
  """The environment named 'jumanji:<id>', batched.

  Args:
    name: e.g. 'jumanji:Sokoban-v0', 'jumanji:Game2048-v1'.
    batch_size: the number of instances (>= 1).
    env_kwargs: the environment's constructor arguments, by name (Sokoban's
      `generator` also by name, see the module docstring).
    seed: unused (the keys come with `reset`); the registry's `make`
      signature.

  Raises:
    packages.MissingPackageError: jumanji is not installed (naming the
      extra).
    DownloadError: data the environment needs could not be downloaded.
    ValueError: an unknown id (with close matches), unknown keyword
      arguments, a bad batch size or an action spec that is not one
      discrete action.
  """
  del seed
  base.check_batch_size(batch_size)
  prefix, _, env_id = name.partition(':')
  if prefix + ':' != PREFIX:
    raise ValueError(
      f"{name!r} is not a jumanji name; expected '{PREFIX}<id>'."
    )
  jumanji = packages.import_optional(PREFIX, PACKAGE)
  if env_id not in jumanji.registered_environments():
    raise packages.unknown_id_error(name, jumanji_names())
  kwargs = dict(env_kwargs or {})
  # The constructor, to check the names before anything is built (Sokoban's
  # default generator downloads its levels when built).
  entry_point = jumanji.registration._REGISTRY[env_id].entry_point  # pylint: disable=protected-access
  taken = inspect.signature(jumanji.registration.load(entry_point)).parameters
  unknown = sorted(set(kwargs) - set(taken))
  if unknown:
    raise ValueError(
      f'env_kwargs {unknown} are not settings of {name}: expected '
      f'constructor arguments {sorted(taken) or "(none)"}.'
    )
  if env_id.startswith('Sokoban'):
    kwargs['generator'] = (
      _sokoban_generator(kwargs['generator'])
      if 'generator' in kwargs
      else _boxoban('unfiltered-train')
    )
  return JumanjiEnvironment(
    jumanji.make(env_id, **kwargs), batch_size, name=name
  )
