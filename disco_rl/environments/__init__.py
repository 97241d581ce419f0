# Copyright 2025 The disco_rl authors. Licensed under Apache-2.0.
"""Environments by name: Catch (host dm_env and pure JAX), gymnax, Craftax,
Jumanji and envpool's Atari, and any family registered with `register`.

  get_environment('jittable_catch', 8)
  get_environment('gymnax:Breakout-MinAtar', 8)
  get_environment('gymnax:DeepSea-bsuite', 8, {'size': 10})
  get_environment('craftax:Craftax-Classic-Symbolic-v1', 8)  # [craftax] extra
  get_environment('jumanji:Sokoban-v0', 8)                   # [jumanji] extra
  get_environment('envpool:Breakout-v5', 8)   # [atari] extra; on the host

A new family is one module with a `make(name, batch_size, settings, seed)`
function and one `register` call (docs/environments.md):

  register('toy:', make_toy)
"""

import argparse
import ast
from collections.abc import Iterable, Mapping
import re
from typing import Any

from ml_collections import config_dict

from disco_rl import utils
from disco_rl.environments import base
from disco_rl.environments import catch
from disco_rl.environments import envpool_env
from disco_rl.environments import gymnax_env
from disco_rl.environments import jittable_envs
from disco_rl.environments import jumanji_env
from disco_rl.environments import lpg
from disco_rl.environments import registry

Family = registry.Family
register = registry.register
unregister = registry.unregister
family = registry.family
families = registry.families

# The built-in families, one line each.
register(
  'catch',
  catch.make,
  on_host=True,
  jittable='jittable_catch',
  defaults=catch.get_config,
)
register(
  'jittable_catch',
  jittable_envs.make_catch,
  defaults=jittable_envs.get_config_catch,
)
register(
  gymnax_env.GYMNAX_PREFIX,
  gymnax_env.make,
  names=gymnax_env.gymnax_names,
  package=gymnax_env.GYMNAX_PACKAGE,
  refuse=gymnax_env.refuse_continuous,
)
register(
  gymnax_env.CRAFTAX_PREFIX,
  gymnax_env.make,
  names=gymnax_env.craftax_names,
  package=gymnax_env.CRAFTAX_PACKAGE,
)
register(
  jumanji_env.PREFIX,
  jumanji_env.make,
  names=jumanji_env.jumanji_names,
  package=jumanji_env.PACKAGE,
)
register(
  envpool_env.PREFIX,
  envpool_env.make,
  on_host=True,
  names=envpool_env.atari_names,
  package=envpool_env.PACKAGE,
)
register(lpg.PREFIX, lpg.make, names=lpg.lpg_names)

# The settings key that seeds a host family (`make`'s `seed`).
SEED_KEY = 'random_seed'


def __getattr__(name: str) -> Any:
  # PREFIXES: the registered prefixes ('gymnax:', ...), as registered now.
  if name == 'PREFIXES':
    return registry.prefixes()
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def parse_value(text: str) -> Any:
  """'10' -> 10, '0.5' -> 0.5, 'true'/'false' -> bool, anything else: str."""
  text = text.strip()
  if text.lower() in ('true', 'false'):
    return text.lower() == 'true'
  try:
    value = ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text
  return value if isinstance(value, (int, float, str)) else text


def parse_kwargs(text: str) -> dict[str, Any]:
  """'size=10,deterministic=false' -> {'size': 10, 'deterministic': False}.

  Raises:
    argparse.ArgumentTypeError: (a ValueError) for text that is not
      comma-separated name=value pairs.
  """
  kwargs = {}
  for item in (i for i in text.split(',') if i.strip()):
    key, sep, value = item.partition('=')
    if not sep or not key.strip().isidentifier():
      raise argparse.ArgumentTypeError(
        f'expected comma-separated name=value pairs such as '
        f'size=10,max_steps_in_episode=500, got {text!r}'
      )
    kwargs[key.strip()] = parse_value(value)
  return kwargs


_SPEC = re.compile(r'^([^\[\]\s]+)(?:\[([^\[\]]*)\])?$')


def parse_spec(text: str) -> tuple[str, dict[str, Any]]:
  """'gymnax:DeepSea-bsuite[size=8]' -> ('gymnax:DeepSea-bsuite',
  {'size': 8}): an environment's name and settings written as one text.

  Raises:
    ValueError: text that is not NAME or NAME[key=value,...].
  """
  match = _SPEC.match(text.strip())
  if not match:
    raise ValueError(
      f'malformed environment {text!r}; expected NAME or '
      'NAME[key=value,...], e.g. catch[rows=7,columns=5] or '
      'gymnax:DeepSea-bsuite[size=8].'
    )
  name, settings = match.groups()
  try:
    return name, parse_kwargs(settings or '')
  except argparse.ArgumentTypeError as e:
    raise ValueError(f'malformed settings in {text!r}: {e}.') from None


def format_spec(
  name: str, settings: Mapping[str, Any] | Iterable[tuple[str, Any]]
) -> str:
  """('catch', {'rows': 5}) -> 'catch[rows=5]' (`parse_spec`'s inverse;
  no settings: the name alone)."""
  items = ','.join(f'{k}={v}' for k, v in dict(settings).items())
  return f'{name}[{items}]' if items else name


def check_name(name: Any, what: str = 'environment') -> None:
  """Raises a ValueError (with close matches) unless `name` can be built.

  For a prefix family whose ids are listed ('gymnax:', 'jumanji:', ...)
  this looks the id up (importing the package); a
  `packages.MissingPackageError` names the extra to install.

  Args:
    name: the environment's name.
    what: the argument's name in messages (e.g. 'env').
  """
  registry.family(name, what).check(name, what)


def with_defaults(name: str, settings: Mapping[str, Any]) -> dict[str, Any]:
  """`settings` of environment `name` with its family's defaults filled in
  for those not given (what `get_environment` builds with)."""
  found = registry.family(name)
  if found.defaults is None:
    return dict(settings)
  return {**dict(found.defaults()), **settings}


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
      `pip install 'disco_rl[atari]'`), or a name of a family added with
      `register`.
    batch_size: the number of parallel instances (>= 1).
    env_settings: the environment's settings; the family's defaults fill
      in those not given (Catch: its module's); for gymnax/Craftax keyword
      arguments of the environment's constructor or fields of its
      `EnvParams` (e.g. {'size': 10} for DeepSea,
      {'max_steps_in_episode': 500}). For a family stepped on the host,
      `random_seed` (default 0) is `make`'s seed.

  Returns:
    The batched environment.

  Raises:
    ValueError: on an unknown name (listing close matches), a bad batch
      size, unknown settings or a continuous action space.
    packages.MissingPackageError: (an ImportError) when the package a name
      needs is not installed, naming the pip extra.
  """
  found = registry.family(name)
  settings = utils.as_config(
    env_settings or {}, f'{name} env_settings'
  ).to_dict()
  settings = with_defaults(name, settings)
  base.check_batch_size(batch_size)
  found.check(name)
  seed = settings.pop(SEED_KEY, 0) if found.on_host else 0
  return found.make(name, batch_size, settings, seed)
