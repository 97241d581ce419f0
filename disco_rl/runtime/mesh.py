# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Devices: the mesh, one picker, placing and fetching, several processes.

The loops run as one `jax.jit` program over a `jax.sharding.Mesh` whose
batch axis is named `AXIS`, the agent's `batch_axis_name`, so the
collectives inside the agent (`pmean` of gradients and statistics) work
unchanged under `jax.shard_map`. State the devices share (parameters,
optimiser states) is replicated (`PartitionSpec()`); state each device owns
(environments, replay buffer) carries a leading device axis sharded over
the mesh (`PartitionSpec(AXIS)`), one row per device.

The eval loop's mesh has a second axis, `SEED_AXIS`, in front: the runs of
several seeds are split into `seed_shards` groups of devices, each group
running its share of the seeds on its own (`seed_shards`: 1 when every
device holds a share of every run).

Several processes (hosts) join one mesh after `distributed.initialize`;
then every process runs the same program and sees the same replicated
results, and `sync` and `first_over_processes` keep their host code in step.
"""

from collections.abc import Mapping, Sequence
import math

import jax
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec
import numpy as np

from disco_rl import utils

AXIS = utils.DEFAULT_AXIS_NAME
SEED_AXIS = 'seed'


def seed_shards(num_seeds: int, num_devices: int) -> int:
  """Groups of devices that the runs of `num_seeds` seeds are split into on
  `num_devices` devices: their greatest common divisor. Each group runs
  `num_seeds / k` of the seeds on `num_devices / k` devices (k = 1: every
  device holds a share of every run)."""
  return math.gcd(num_seeds, num_devices)


def pick_devices(
  shares: Mapping[str, int], num_devices: int | None = None, num_seeds: int = 1
) -> list[jax.Device]:
  """The devices of a run; every share must split evenly across them.

  Args:
    shares: sizes that are split across devices, by name (for messages),
      e.g. {'batch_size': 64}: across the devices of a seed group
      (`seed_shards`), all of them when `num_seeds` is 1.
    num_devices: how many devices; None picks the most that divide every
      share (with several processes: all devices of all processes).
    num_seeds: runs in the program.

  Returns:
    The first `num_devices` of `jax.devices()`.

  Raises:
    ValueError: naming the share that does not divide, or the device count
      that is not available.
  """
  available = jax.devices()
  multi_process = jax.process_count() > 1
  if num_devices is None:
    if multi_process:
      num_devices = len(available)
    else:
      num_devices = max(
        d
        for d in range(1, len(available) + 1)
        if all(
          s % (d // seed_shards(num_seeds, d)) == 0 for s in shares.values()
        )
      )
  if not 1 <= num_devices <= len(available):
    raise ValueError(
      f'num_devices={num_devices} but {len(available)} devices are available.'
    )
  if multi_process and num_devices != len(available):
    raise ValueError(
      f'num_devices={num_devices}: with {jax.process_count()} processes '
      f'every one of the {len(available)} devices must take part.'
    )
  check_shares(shares, num_devices, num_seeds)
  return list(available[:num_devices])


def check_shares(
  shares: Mapping[str, int], num_devices: int, num_seeds: int = 1
) -> None:
  """Raises ValueError naming a share that does not split evenly across
  the devices of a seed group (see `pick_devices`)."""
  groups = seed_shards(num_seeds, num_devices)
  for name, size in shares.items():
    utils.check_divisible(
      size,
      num_devices // groups,
      name
      if groups == 1
      else f'{name} (the {num_seeds} seeds split '
      f'{num_devices} devices into {groups} groups)',
    )


def make_mesh(
  devices: Sequence[jax.Device], num_seed_shards: int | None = None
) -> Mesh:
  """A one-axis mesh named `AXIS` over `devices`; with `num_seed_shards`,
  a [num_seed_shards, devices / num_seed_shards] mesh (`SEED_AXIS`,
  `AXIS`): group g is devices g * n ... (g + 1) * n - 1."""
  grid = np.asarray(list(devices))
  if num_seed_shards is None:
    return Mesh(grid, (AXIS,))
  return Mesh(grid.reshape(num_seed_shards, -1), (SEED_AXIS, AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
  """Every device holds the whole value."""
  return NamedSharding(mesh, PartitionSpec())


def shardings(mesh: Mesh, specs):
  """A tree of `NamedSharding`s from a tree (prefix) of `PartitionSpec`s."""
  return jax.tree.map(
    lambda spec: NamedSharding(mesh, spec),
    specs,
    is_leaf=lambda x: isinstance(x, PartitionSpec),
  )


def map_per_device(fn, specs, tree):
  """Applies `fn` to the parts of `tree` whose spec starts with `AXIS`
  (`PartitionSpec(AXIS)`, `PartitionSpec(AXIS, SEED_AXIS)`).

  Inside `shard_map` those parts arrive as one device's [1, ...] block:
  `map_per_device(local_block, specs, state)` gives [...] and
  `map_per_device(device_block, specs, state)` turns it back.
  """
  return jax.tree.map(
    lambda spec, sub: fn(sub) if spec[:1] == (AXIS,) else sub,
    specs,
    tree,
    is_leaf=lambda x: isinstance(x, PartitionSpec),
  )


def local_block(tree):
  """One device's [1, ...] block of per-device leaves as [...]."""
  return jax.tree.map(lambda x: x[0], tree)


def device_block(tree):
  """[...] -> [1, ...]: one device's block of per-device leaves."""
  return jax.tree.map(lambda x: x[None], tree)


def place(tree, sharding: NamedSharding):
  """Puts host values (the same in every process) onto the mesh.

  Each process copies only the pieces its own devices hold, so this works
  with one process or many.
  """

  def _place(x):
    x = np.asarray(x)
    return jax.make_array_from_callback(
      x.shape, sharding, lambda index: x[index]
    )

  return jax.tree.map(_place, tree)


def fetch(tree):
  """Results as NumPy arrays on the host (any process): replicated ones
  from this process's copy, sharded ones gathered from every process."""

  def _fetch(x):
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
      if x.sharding.is_fully_replicated:
        return np.asarray(x.addressable_shards[0].data)
      return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)

  return jax.tree.map(_fetch, tree)


# ----------------------------------------------------------------------------
# Several processes.


def first_over_processes(code: int) -> int:
  """The first nonzero `code` in process order (0: none); every process
  must call it, and all get the same answer."""
  if jax.process_count() == 1:
    return int(code)
  codes = multihost_utils.process_allgather(np.asarray(code, np.int32))
  nonzero = np.flatnonzero(np.asarray(codes))
  return int(codes[nonzero[0]]) if nonzero.size else 0


def sync(name: str) -> None:
  """Waits until every process reaches the point called `name` (a no-op in
  one process)."""
  if jax.process_count() > 1:
    multihost_utils.sync_global_devices(name)
