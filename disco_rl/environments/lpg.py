# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The 'lpg:' family: LPG's training environments (Oh et al. 2020).

  'lpg:<config>'                a gridworld of `lpg_gridworld.CONFIGS`
                                ('lpg:dense', 'lpg:rand_small', 'lpg:all')
  'lpg:delayed_chain_<variant>' a delayed chain of `delayed_chain.CONFIGS`
                                ('lpg:delayed_chain_short', ...)

Settings (`env_kwargs`, or a task's brackets, e.g.
'lpg:dense[layout_seed=3]'): both take `layout_seed` (default 0; -1: a
layout per reset key); the gridworlds also `observation` ('state' or
'map') and `max_steps`, the chains `length`.
"""

from collections.abc import Mapping
from typing import Any

from disco_rl.environments import base
from disco_rl.environments import delayed_chain
from disco_rl.environments import lpg_gridworld

PREFIX = 'lpg:'
CHAIN = 'delayed_chain_'
GRID_SETTINGS = ('layout_seed', 'observation', 'max_steps')
CHAIN_SETTINGS = ('layout_seed', 'length')


def lpg_names() -> list[str]:
  """Every name of the family: the gridworlds, then the chains."""
  return [PREFIX + n for n in lpg_gridworld.CONFIGS] + [
    PREFIX + CHAIN + n for n in delayed_chain.CONFIGS
  ]


def make(
  name: str, batch_size: int, settings: Mapping[str, Any], seed: int
) -> base.Environment:
  """The environment called `name` ('lpg:<id>') by the registry's `make`.

  Args:
    name: a name of `lpg_names()`.
    batch_size: the number of instances (>= 1).
    settings: `GRID_SETTINGS` of a gridworld or `CHAIN_SETTINGS` of a
      chain, each optional.
    seed: unused (the keys come with `reset`; the layout's with
      `layout_seed`).

  Raises:
    ValueError: an unknown id or setting.
  """
  del seed
  env_id = name[len(PREFIX) :]
  settings = dict(settings)
  if env_id.startswith(CHAIN) and env_id[len(CHAIN) :] in delayed_chain.CONFIGS:
    base.check_setting_keys(settings, CHAIN_SETTINGS, repr(name))
    return delayed_chain.DelayedChain(
      batch_size,
      delayed_chain.CONFIGS[env_id[len(CHAIN) :]],
      name=name,
      **settings,
    )
  if env_id in lpg_gridworld.CONFIGS:
    base.check_setting_keys(settings, GRID_SETTINGS, repr(name))
    return lpg_gridworld.LPGGridworld(
      batch_size, lpg_gridworld.CONFIGS[env_id], name=name, **settings
    )
  raise ValueError(
    f'Unknown LPG environment {name!r}; expected one of {lpg_names()}.'
  )
