# Copyright 2025 The disco_rl authors. Licensed under Apache-2.0.
"""Environments: Catch (host dm_env and pure JAX), gymnax, Craftax and
Jumanji by name.

  get_environment('jittable_catch', 8)
  get_environment('gymnax:Breakout-MinAtar', 8)
  get_environment('gymnax:DeepSea-bsuite', 8, {'size': 10})
  get_environment('craftax:Craftax-Classic-Symbolic-v1', 8)  # [craftax] extra
  get_environment('jumanji:Sokoban-v0', 8)                   # [jumanji] extra
  get_environment('envpool:Breakout-v5', 8)   # [atari] extra; on the host
"""

from collections.abc import Mapping
from typing import Any

from ml_collections import config_dict

from disco_rl import utils
from disco_rl.environments import base
from disco_rl.environments import catch
from disco_rl.environments import envpool_env
from disco_rl.environments import gymnax_env
from disco_rl.environments import jittable_envs
from disco_rl.environments import jumanji_env
from disco_rl.environments import packages

# name -> (environment class, default settings function)
_ENVIRONMENTS = {
    'catch': (catch.CatchEnvironment, catch.get_config),
    'jittable_catch': (jittable_envs.CatchJittableEnvironment,
                       jittable_envs.get_config_catch),
}
# The Catch names: the jittable one (stepped on the device) and the dm_env
# one (stepped on the host).
CATCH_NAMES = ('jittable_catch', 'catch')


def steps_on_host(name: str) -> bool:
  """Whether environment `name` is stepped in Python on the host (the
  dm_env Catch, envpool's Atari) rather than compiled into the program."""
  return name == 'catch' or (isinstance(name, str) and name.startswith(
      packages.ENVPOOL_PREFIX))
# Names of environments from other packages start with one of these.
PREFIXES = packages.PREFIXES


def is_package_name(name: str) -> bool:
  """Whether `name` is a 'gymnax:<id>', 'craftax:<id>' or 'jumanji:<id>'
  name."""
  return isinstance(name, str) and name.startswith(PREFIXES)


def _unknown_name(name: Any, what: str = 'environment') -> ValueError:
  """The error for an unknown name: the valid ones and the close matches."""
  known = sorted(_ENVIRONMENTS)
  matches = packages.close_matches(
      str(name), known + gymnax_env.known_names())
  hint = (f' Close matches: {", ".join(map(repr, matches))}.' if matches
          else '')
  valid = ', '.join(repr(n) for n in known)
  return ValueError(
      f'Unknown {what} {name!r}; valid names are {valid}, '
      "'gymnax:<id>' (any id gymnax registers, e.g. "
      "'gymnax:Breakout-MinAtar'), 'craftax:<id>' (e.g. "
      "'craftax:Craftax-Classic-Symbolic-v1') and 'jumanji:<id>' (e.g. "
      "'jumanji:Sokoban-v0') and 'envpool:<Game>-v5' (Atari, e.g. "
      f"'envpool:Breakout-v5').{hint}")


def check_name(name: Any, what: str = 'environment') -> None:
  """Raises a ValueError (with close matches) unless `name` can be built.

  For 'gymnax:'/'craftax:' names this imports the package and looks the id
  up; a `packages.MissingPackageError` names the extra to install.

  Args:
    name: the environment's name.
    what: the argument's name in messages (e.g. 'env').
  """
  if isinstance(name, str) and name in _ENVIRONMENTS:
    return
  if not is_package_name(name):
    raise _unknown_name(name, what)
  prefix = name.split(':', 1)[0] + ':'
  if prefix == packages.ENVPOOL_PREFIX:
    if name not in envpool_env.atari_names():
      raise packages.unknown_id_error(name, envpool_env.atari_names(), what)
    return
  if prefix == packages.JUMANJI_PREFIX:
    packages.import_optional(prefix)
    if name not in jumanji_env.jumanji_names():
      raise packages.unknown_id_error(name, jumanji_env.jumanji_names(), what)
    return
  if (prefix == packages.CRAFTAX_PREFIX
      and name not in gymnax_env.craftax_names()):
    # Craftax's names are known without the package: say so first.
    raise packages.unknown_id_error(name, gymnax_env.craftax_names(), what)
  packages.import_optional(prefix)
  if name not in gymnax_env.known_names():
    raise packages.unknown_id_error(
        name, [n for n in gymnax_env.known_names() if n.startswith(prefix)],
        what)


def get_environment(
    name: str,
    batch_size: int,
    env_settings: config_dict.ConfigDict | Mapping[str, Any] | None = None,
) -> base.Environment:
  """Builds the environment called `name`.

  Args:
    name: 'catch' (host dm_env Catch), 'jittable_catch' (pure-JAX Catch),
      'gymnax:<id>' (any gymnax environment with discrete actions, e.g.
      'gymnax:Breakout-MinAtar', 'gymnax:CartPole-v1',
      'gymnax:DeepSea-bsuite'), 'craftax:<id>' (e.g.
      'craftax:Craftax-Classic-Symbolic-v1'; `pip install
      'disco_rl[craftax]'`) or 'jumanji:<id>' (one discrete action, e.g.
      'jumanji:Sokoban-v0'; `pip install 'disco_rl[jumanji]'`) or
      'envpool:<Game>-v5' (Atari on the host, e.g. 'envpool:Breakout-v5';
      `pip install 'disco_rl[atari]'`; `random_seed` seeds the games).
    batch_size: the number of parallel instances (>= 1).
    env_settings: the environment's settings; for Catch its module's
      defaults if None; for gymnax/Craftax keyword arguments of the
      environment's constructor or fields of its `EnvParams` (e.g.
      {'size': 10} for DeepSea, {'max_steps_in_episode': 500}).

  Returns:
    The batched environment.

  Raises:
    ValueError: on an unknown name (listing close matches), a bad batch
      size, unknown settings or a continuous action space.
    packages.MissingPackageError: (an ImportError) when the package a name
      needs is not installed, naming the pip extra.
  """
  if is_package_name(name):
    settings = utils.as_config(env_settings or {},
                               f'{name} env_settings').to_dict()
    if name.startswith(packages.JUMANJI_PREFIX):
      return jumanji_env.make(name, batch_size, settings)
    if name.startswith(packages.ENVPOOL_PREFIX):
      seed = settings.pop('random_seed', 0)
      return envpool_env.make(name, batch_size, settings, seed=seed)
    return gymnax_env.make(name, batch_size, settings)
  if name not in _ENVIRONMENTS:
    raise _unknown_name(name)
  env_class, default_settings = _ENVIRONMENTS[name]
  base.check_batch_size(batch_size)
  if env_settings is None:
    env_settings = default_settings()
  return env_class(batch_size=batch_size, env_settings=env_settings)
