# Copyright 2025 The disco_rl authors. Licensed under Apache-2.0.
"""Environments: host (dm_env) and pure-JAX Catch, and a factory for them."""

from ml_collections import config_dict

from disco_rl.environments import base
from disco_rl.environments import catch
from disco_rl.environments import jittable_envs

# name -> (environment class, default settings function)
_ENVIRONMENTS = {
    'catch': (catch.CatchEnvironment, catch.get_config),
    'jittable_catch': (jittable_envs.CatchJittableEnvironment,
                       jittable_envs.get_config_catch),
}


def get_environment(
    name: str,
    batch_size: int,
    env_settings: config_dict.ConfigDict | None = None,
) -> base.Environment:
  """Builds the environment called `name`.

  Args:
    name: 'catch' (host dm_env Catch) or 'jittable_catch' (pure-JAX Catch).
    batch_size: the number of parallel instances (>= 1).
    env_settings: the environment's settings; its module's defaults if None.

  Returns:
    The batched environment.

  Raises:
    ValueError: on an unknown name, a bad batch size or unknown settings.
  """
  if name not in _ENVIRONMENTS:
    valid = ', '.join(repr(n) for n in sorted(_ENVIRONMENTS))
    raise ValueError(f'Unknown environment {name!r}; valid names are {valid}.')
  env_class, default_settings = _ENVIRONMENTS[name]
  base.check_batch_size(batch_size)
  if env_settings is None:
    env_settings = default_settings()
  return env_class(batch_size=batch_size, env_settings=env_settings)
