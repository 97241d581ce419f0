# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Several processes (hosts) in one run: joining them, and noticing a peer
that is gone.

  from disco_rl.runtime import distributed
  distributed.initialize(distributed.DistributedConfig.from_environment())

Call `initialize` in every process before anything touches a device; then
every device of every process joins one mesh (`disco_rl.runtime.mesh`). The
commands do it from `--coordinator-address`, `--num-processes` and
`--process-id` (or the DISCO_RL_* variables below).
"""

import atexit
from collections.abc import Callable
import dataclasses
import math
import os
import sys
import threading
import time
from typing import Any

import jax

# Environment variables read by `initialize_distributed` (flags win).
ENV_COORDINATOR = 'DISCO_RL_COORDINATOR'
ENV_NUM_PROCESSES = 'DISCO_RL_NUM_PROCESSES'
ENV_PROCESS_ID = 'DISCO_RL_PROCESS_ID'
ENV_PEER_TIMEOUT = 'DISCO_RL_PEER_TIMEOUT_S'
# A process stops, with one `error:` line, when another has given no sign
# of life for this long (its own heartbeat: every `_BEAT_S`); JAX's own
# heartbeat check, which aborts the process, waits longer.
PEER_TIMEOUT_S = 60
_BEAT_S = 2.0
_JAX_HEARTBEAT_TIMEOUT_S = 2 * PEER_TIMEOUT_S
EXIT_LOST_PEER = 2


@dataclasses.dataclass(frozen=True)
class DistributedConfig:
  """Where a process finds the others (see `initialize_distributed`).

  Attributes:
    coordinator_address: 'host:port' of process 0's coordinator service.
    num_processes: how many processes join.
    process_id: this process's index, 0 .. num_processes - 1.
    peer_timeout_s: seconds without a sign of life from another process
      after which this one stops with one `error:` line.
  """

  coordinator_address: str | None = None
  num_processes: int | None = None
  process_id: int | None = None
  peer_timeout_s: float = PEER_TIMEOUT_S

  @classmethod
  def from_environment(cls, **overrides) -> 'DistributedConfig':
    """Values from `overrides` where not None, else DISCO_RL_* variables."""

    def pick(name, env, cast):
      value = overrides.get(name)
      if value is None and os.environ.get(env):
        try:
          value = cast(os.environ[env])
        except ValueError:
          raise ValueError(
            f'{env}={os.environ[env]!r} is not a valid {name}.'
          ) from None
      return value

    timeout = pick('peer_timeout_s', ENV_PEER_TIMEOUT, float)
    return cls(
      coordinator_address=pick('coordinator_address', ENV_COORDINATOR, str),
      num_processes=pick('num_processes', ENV_NUM_PROCESSES, int),
      process_id=pick('process_id', ENV_PROCESS_ID, int),
      peer_timeout_s=PEER_TIMEOUT_S if timeout is None else timeout,
    )

  @property
  def enabled(self) -> bool:
    return self.num_processes is not None and self.num_processes > 1


def initialize(config: DistributedConfig) -> bool:
  """Joins the other processes of a run; returns whether it did.

  Call before anything touches a device. With `num_processes` of 1 or unset
  nothing happens. On CPU the processes exchange data with gloo. A process
  whose peer dies or stops answering (no sign of life for
  `config.peer_timeout_s`) prints one `error:` line and exits with status
  `EXIT_LOST_PEER`, wherever it waits (`watch_peers`).

  Raises:
    ValueError: naming a missing or out-of-range setting.
  """
  if not config.enabled:
    return False
  assert config.num_processes is not None  # `enabled`
  if not config.coordinator_address:
    raise ValueError(
      f'num_processes={config.num_processes} needs a coordinator address '
      f'(--coordinator-address HOST:PORT or ${ENV_COORDINATOR}).'
    )
  if config.process_id is None or not (
    0 <= config.process_id < config.num_processes
  ):
    raise ValueError(
      f'process_id must be in [0, {config.num_processes}) with '
      f'num_processes={config.num_processes}, got {config.process_id} '
      f'(--process-id or ${ENV_PROCESS_ID}).'
    )
  peer_timeout_s = config.peer_timeout_s
  if not (
    isinstance(peer_timeout_s, (int, float))
    and math.isfinite(peer_timeout_s)
    and peer_timeout_s >= 2 * _BEAT_S
  ):
    raise ValueError(
      f'peer_timeout_s must be a number of seconds >= {2 * _BEAT_S:g} '
      f'(processes beat every {_BEAT_S:g} s), got {peer_timeout_s!r} '
      f'(--peer-timeout-s or ${ENV_PEER_TIMEOUT}).'
    )
  jax.config.update('jax_cpu_collectives_implementation', 'gloo')
  # JAX's preemption service installs a C++ SIGTERM handler in place of
  # Python's, so a run would never see SIGTERM (`disco_rl.runtime.signals`).
  jax.config.update('jax_enable_preemption_service', False)
  jax.distributed.initialize(
    coordinator_address=config.coordinator_address,
    num_processes=config.num_processes,
    process_id=config.process_id,
    heartbeat_timeout_seconds=max(
      _JAX_HEARTBEAT_TIMEOUT_S, int(2 * peer_timeout_s)
    ),
  )
  watch_peers(config.process_id, config.num_processes, peer_timeout_s)
  return True


def _lost_peer(why: str) -> None:
  why = ' '.join(why.split())[:500]
  print(
    f'error: {why}; stopping this process (the run keeps its last '
    'checkpoint: start every process again with --resume)',
    file=sys.stderr,
    flush=True,
  )
  sys.stdout.flush()
  os._exit(EXIT_LOST_PEER)  # pylint: disable=protected-access


def _beat_key(process: int) -> str:
  """A process's heartbeat in JAX's key-value store."""
  return f'disco_rl/alive/{process}'


def _last_beat(client: Any, process: int) -> str | None:
  """`process`'s last heartbeat (None: it has not beaten yet)."""
  try:
    return client.key_value_try_get(_beat_key(process))
  except Exception as e:  # pylint: disable=broad-exception-caught
    if 'NOT_FOUND' in str(e):
      return None
    raise


def watch_peers(
  me: int,
  count: int,
  timeout_s: float,
  on_lost: Callable[[str], None] = _lost_peer,
) -> None:
  """Starts a thread that beats for this process and watches the others'
  beats (in JAX's key-value store); `on_lost(why)` when one is silent for
  `timeout_s` or the coordinator is gone. A process that exits normally
  says so first (its peers stop watching it)."""
  from jax._src import distributed as jax_distributed  # pylint: disable=g-import-not-at-top

  client = jax_distributed.global_state.client
  if client is None:
    raise RuntimeError('watch_peers needs jax.distributed.initialize first.')
  stopped = threading.Event()

  def beat(value: str) -> None:
    client.key_value_set(_beat_key(me), value, allow_overwrite=True)

  def peek(process: int) -> str | None:
    return _last_beat(client, process)

  def watch() -> None:
    # process -> (its last beat, when it changed)
    seen: dict[int, tuple[str | None, float]] = {
      p: (None, time.monotonic()) for p in range(count) if p != me
    }
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
            return on_lost(
              f'process {process} of {count} has given no sign '
              f'of life for {timeout_s:.0f} s'
            )
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


def silent_peers(wait_s: float = 3 * _BEAT_S) -> list[int]:
  """The processes of this run whose heartbeat (`watch_peers`) did not
  change over `wait_s` seconds, or all of them if the coordinator cannot be
  reached: what tells a failed collective's cause, a peer gone, from an
  error of this process. [] outside a run of several processes."""
  from jax._src import distributed as jax_distributed  # pylint: disable=g-import-not-at-top

  client = jax_distributed.global_state.client
  me, count = jax.process_index(), jax.process_count()
  if client is None or count == 1:
    return []
  others = [p for p in range(count) if p != me]

  def beats() -> dict[int, str | None]:
    return {p: _last_beat(client, p) for p in others}

  try:
    before = beats()
    time.sleep(wait_s)
    after = beats()
  except Exception:  # pylint: disable=broad-exception-caught
    return others  # The coordinator is gone.
  return [p for p in others if after[p] == before[p] and after[p] != 'done']
