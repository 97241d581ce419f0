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

Several processes (hosts) join one mesh after `initialize_distributed`; then
every process runs the same program and sees the same replicated results.
"""

import atexit
from collections.abc import Callable, Mapping, Sequence
import dataclasses
import math
import os
import sys
import threading
import time

import jax
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec
import numpy as np

from disco_rl import utils

AXIS = utils.DEFAULT_AXIS_NAME
SEED_AXIS = 'seed'

# Environment variables read by `initialize_distributed` (flags win).
ENV_COORDINATOR = 'DISCO_RL_COORDINATOR'
ENV_NUM_PROCESSES = 'DISCO_RL_NUM_PROCESSES'
ENV_PROCESS_ID = 'DISCO_RL_PROCESS_ID'
# A process stops, with one `error:` line, when another has given no sign
# of life for this long (its own heartbeat: every `_BEAT_S`); JAX's own
# heartbeat check, which aborts the process, waits longer.
PEER_TIMEOUT_S = 60
_BEAT_S = 2.0
_JAX_HEARTBEAT_TIMEOUT_S = 2 * PEER_TIMEOUT_S
EXIT_LOST_PEER = 2


def seed_shards(num_seeds: int, num_devices: int) -> int:
  """Groups of devices that the runs of `num_seeds` seeds are split into on
  `num_devices` devices: their greatest common divisor. Each group runs
  `num_seeds / k` of the seeds on `num_devices / k` devices (k = 1: every
  device holds a share of every run)."""
  return math.gcd(num_seeds, num_devices)


def pick_devices(shares: Mapping[str, int], num_devices: int | None = None,
                 num_seeds: int = 1) -> list[jax.Device]:
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
          d for d in range(1, len(available) + 1)
          if all(s % (d // seed_shards(num_seeds, d)) == 0
                 for s in shares.values()))
  if not 1 <= num_devices <= len(available):
    raise ValueError(f'num_devices={num_devices} but {len(available)} '
                     'devices are available.')
  if multi_process and num_devices != len(available):
    raise ValueError(
        f'num_devices={num_devices}: with {jax.process_count()} processes '
        f'every one of the {len(available)} devices must take part.')
  check_shares(shares, num_devices, num_seeds)
  return list(available[:num_devices])


def check_shares(shares: Mapping[str, int], num_devices: int,
                 num_seeds: int = 1) -> None:
  """Raises ValueError naming a share that does not split evenly across
  the devices of a seed group (see `pick_devices`)."""
  groups = seed_shards(num_seeds, num_devices)
  for name, size in shares.items():
    utils.check_divisible(size, num_devices // groups, name if groups == 1
                          else f'{name} (the {num_seeds} seeds split '
                          f'{num_devices} devices into {groups} groups)')


def make_mesh(devices: Sequence[jax.Device],
              num_seed_shards: int | None = None) -> Mesh:
  """A one-axis mesh named `AXIS` over `devices`; with `num_seed_shards`,
  a [num_seed_shards, devices / num_seed_shards] mesh (`SEED_AXIS`,
  `AXIS`): group g is devices g * n ... (g + 1) * n - 1."""
  devices = np.asarray(list(devices))
  if num_seed_shards is None:
    return Mesh(devices, (AXIS,))
  return Mesh(devices.reshape(num_seed_shards, -1), (SEED_AXIS, AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
  """Every device holds the whole value."""
  return NamedSharding(mesh, PartitionSpec())


def shardings(mesh: Mesh, specs):
  """A tree of `NamedSharding`s from a tree (prefix) of `PartitionSpec`s."""
  return jax.tree.map(lambda spec: NamedSharding(mesh, spec), specs,
                      is_leaf=lambda x: isinstance(x, PartitionSpec))


def map_per_device(fn, specs, tree):
  """Applies `fn` to the parts of `tree` whose spec starts with `AXIS`
  (`PartitionSpec(AXIS)`, `PartitionSpec(AXIS, SEED_AXIS)`).

  Inside `shard_map` those parts arrive as one device's [1, ...] block:
  `map_per_device(local_block, specs, state)` gives [...] and
  `map_per_device(device_block, specs, state)` turns it back.
  """
  return jax.tree.map(
      lambda spec, sub: fn(sub) if spec[:1] == (AXIS,) else sub,
      specs, tree, is_leaf=lambda x: isinstance(x, PartitionSpec))


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
    return jax.make_array_from_callback(x.shape, sharding,
                                        lambda index: x[index])

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


@dataclasses.dataclass(frozen=True)
class DistributedConfig:
  """Where a process finds the others (see `initialize_distributed`).

  Attributes:
    coordinator_address: 'host:port' of process 0's coordinator service.
    num_processes: how many processes join.
    process_id: this process's index, 0 .. num_processes - 1.
  """

  coordinator_address: str | None = None
  num_processes: int | None = None
  process_id: int | None = None

  @classmethod
  def from_environment(cls, **overrides) -> 'DistributedConfig':
    """Values from `overrides` where not None, else DISCO_RL_* variables."""

    def pick(name, env, cast):
      value = overrides.get(name)
      if value is None and os.environ.get(env):
        try:
          value = cast(os.environ[env])
        except ValueError:
          raise ValueError(f'{env}={os.environ[env]!r} is not a valid '
                           f'{name}.') from None
      return value

    return cls(
        coordinator_address=pick('coordinator_address', ENV_COORDINATOR, str),
        num_processes=pick('num_processes', ENV_NUM_PROCESSES, int),
        process_id=pick('process_id', ENV_PROCESS_ID, int))

  @property
  def enabled(self) -> bool:
    return self.num_processes is not None and self.num_processes > 1


def initialize_distributed(config: DistributedConfig,
                           peer_timeout_s: float = PEER_TIMEOUT_S) -> bool:
  """Joins the other processes of a run; returns whether it did.

  Call before anything touches a device. With `num_processes` of 1 or unset
  nothing happens. On CPU the processes exchange data with gloo. A process
  whose peer dies or stops answering (no sign of life for
  `peer_timeout_s`) prints one `error:` line and exits with status
  `EXIT_LOST_PEER`, wherever it waits (`watch_peers`).

  Raises:
    ValueError: naming a missing or out-of-range setting.
  """
  if not config.enabled:
    return False
  if not config.coordinator_address:
    raise ValueError(
        f'num_processes={config.num_processes} needs a coordinator address '
        f'(--coordinator-address HOST:PORT or ${ENV_COORDINATOR}).')
  if config.process_id is None or not (
      0 <= config.process_id < config.num_processes):
    raise ValueError(
        f'process_id must be in [0, {config.num_processes}) with '
        f'num_processes={config.num_processes}, got {config.process_id} '
        f'(--process-id or ${ENV_PROCESS_ID}).')
  jax.config.update('jax_cpu_collectives_implementation', 'gloo')
  # JAX's preemption service installs a C++ SIGTERM handler in place of
  # Python's, so a run would never see SIGTERM (`disco_rl.signals`).
  jax.config.update('jax_enable_preemption_service', False)
  jax.distributed.initialize(
      coordinator_address=config.coordinator_address,
      num_processes=config.num_processes, process_id=config.process_id,
      heartbeat_timeout_seconds=max(_JAX_HEARTBEAT_TIMEOUT_S,
                                    int(2 * peer_timeout_s)))
  watch_peers(config.process_id, config.num_processes, peer_timeout_s)
  return True


def _lost_peer(why: str) -> None:
  why = ' '.join(why.split())[:500]
  print(f'error: {why}; stopping this process (the run keeps its last '
        'checkpoint: start every process again with --resume)',
        file=sys.stderr, flush=True)
  sys.stdout.flush()
  os._exit(EXIT_LOST_PEER)  # pylint: disable=protected-access


def watch_peers(me: int, count: int, timeout_s: float,
                on_lost: Callable[[str], None] = _lost_peer) -> None:
  """Starts a thread that beats for this process and watches the others'
  beats (in JAX's key-value store); `on_lost(why)` when one is silent for
  `timeout_s` or the coordinator is gone. A process that exits normally
  says so first (its peers stop watching it)."""
  from jax._src import distributed  # pylint: disable=g-import-not-at-top
  client = distributed.global_state.client
  stopped = threading.Event()

  def key(process: int) -> str:
    return f'disco_rl/alive/{process}'

  def beat(value: str) -> None:
    client.key_value_set(key(me), value, allow_overwrite=True)

  def peek(process: int) -> str | None:
    try:
      return client.key_value_try_get(key(process))
    except Exception as e:  # pylint: disable=broad-exception-caught
      if 'NOT_FOUND' in str(e):
        return None  # Not started yet.
      raise

  def watch():
    seen = {p: (None, time.monotonic()) for p in range(count) if p != me}
    count_beats = 0
    while not stopped.is_set():
      try:
        count_beats += 1
        beat(str(count_beats))
        now = time.monotonic()
        for process, (last, since) in list(seen.items()):
          value = peek(process)
          if value == 'done':
            del seen[process]
          elif value != last:
            seen[process] = (value, now)
          elif now - since > timeout_s and not stopped.is_set():
            return on_lost(f'process {process} of {count} has given no sign '
                           f'of life for {timeout_s:.0f} s')
      except Exception as e:  # pylint: disable=broad-exception-caught
        if not stopped.is_set():
          return on_lost(f'lost contact with the coordinator ({e})')
        return None
      stopped.wait(_BEAT_S)
    return None

  def done():  # At exit, before JAX's shutdown (atexit runs in reverse).
    stopped.set()
    try:
      beat('done')
    except Exception:  # pylint: disable=broad-exception-caught
      pass

  atexit.register(done)
  threading.Thread(target=watch, daemon=True, name='disco_rl peers').start()
