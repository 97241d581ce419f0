# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Drives a compiled loop call by call: progress, metrics rows, timing.

`scan_up_to` is the compiled side (a fixed-length scan that runs a dynamic
number of steps); `drive` the host side.
"""

from collections.abc import Callable
import dataclasses
import os
import signal
import sys
import threading
import time
from typing import Any

import jax
import jax.numpy as jnp

from disco_rl.loops import reporting

# run(state, count) -> (state, {name: [count] array}).
RunFn = Callable[[Any, int], tuple[Any, dict[str, Any]]]
# to_rows(metrics, first_step) -> the rows of the call's steps (one or more
# per step).
RowsFn = Callable[[dict[str, Any], int], list[dict[str, float]]]
# after_call(state, new rows, rows so far) -> True to stop.
AfterCallFn = Callable[[Any, list[dict[str, float]], list[dict[str, float]]],
                       bool]


@dataclasses.dataclass
class Timing:
  """Wall-clock figures of a driven run.

  Attributes:
    first_call_s: the first call, compilation included.
    steady_steps: steps run after the first call.
    steady_s: the time those took.
  """

  first_call_s: float = float('nan')
  steady_steps: int = 0
  steady_s: float = 0.0

  @property
  def steps_per_second(self) -> float:
    """Steps per second after the first call (NaN if there were none)."""
    if not self.steady_steps:
      return float('nan')
    return self.steady_steps / self.steady_s


def drive(run: RunFn, state, num_steps: int, steps_per_call: int,
          to_rows: RowsFn, writer: reporting.MetricsWriter | None,
          desc: str, progress: bool = True,
          postfix: Callable[[list[dict[str, float]]], dict[str, str]]
          | None = None, log_every: int = 0, first_step: int = 0,
          after_call: AfterCallFn | None = None):
  """Runs steps `first_step`..`num_steps - 1` in calls of <= `steps_per_call`.

  After each call its rows (plus `rss_mb` and `time_s`) go to `writer`
  (None: not written, e.g. in processes other than 0), the progress bar
  moves, and `after_call(state, new rows, rows)` may stop the run early by
  returning True (checkpoints, signals, early stopping); `postfix(rows so
  far)` gives the bar's summary, also printed as a line about every
  `log_every` steps (0: never) by process 0.

  Returns:
    (final state, the rows of this drive (from `first_step`), Timing).
  """
  import tqdm  # pylint: disable=g-import-not-at-top
  timing = Timing()
  rows = []
  start = time.perf_counter()
  bar = tqdm.tqdm(total=num_steps, initial=first_step, desc=desc,
                  disable=not (progress and jax.process_index() == 0))
  done = first_step
  try:
    while done < num_steps:
      count = min(steps_per_call, num_steps - done)
      call_start = time.perf_counter()
      state, metrics = run(state, count)
      now = time.perf_counter()
      if done > first_step:
        timing.steady_steps += count
        timing.steady_s += now - call_start
      else:
        timing.first_call_s = now - call_start
      new = to_rows(metrics, done)
      rss = reporting.resident_memory_mb()
      for row in new:
        row.update(rss_mb=rss, time_s=now - start)
      if writer is not None:
        writer.write_rows(new)
      rows.extend(new)
      bar.update(count)
      done += count
      if postfix is not None:
        summary = postfix(rows)
        bar.set_postfix(summary)
        if (log_every and jax.process_index() == 0
            and done // log_every != (done - count) // log_every):
          print(f'step {done}/{num_steps} ' + ' '.join(
              f'{k}={v}' for k, v in summary.items()) + f' rss={rss:.0f}MB',
                flush=True)
      if after_call is not None and after_call(state, new, rows):
        break
  finally:
    bar.close()
  return state, rows, timing


class StopOnSignal:
  """Turns SIGINT and SIGTERM into a request to stop at the next safe point.

  A compiled call cannot be interrupted; the run stops cleanly at the next
  point that checks `signal_name` (before the first call, between calls).
  Outside the main thread it installs nothing.

  A second signal stops at once. By default it raises KeyboardInterrupt in
  the main thread, with `second_signal` naming it, when Python code next
  runs (a notebook's kernel survives it). With `on_second_signal` (a
  command-line program), a watcher thread counts the signals as the
  operating system delivers them, so two signals during a compilation or a
  compiled call are two, not one: on the second it calls
  `on_second_signal(name)` and ends the process at once with the status it
  returns (checkpoints are written whole or not at all, so the last one
  stays usable).

  Entered while another is active (e.g. the CLI's around `Trainer.fit`'s),
  it returns the active one, so a signal that came during start-up or
  compilation is seen by the run.

  Usage:
    with StopOnSignal() as stop:
      ... if stop.signal_name: break ...
  """

  SIGNALS = (signal.SIGINT, signal.SIGTERM)
  _active: 'StopOnSignal | None' = None

  def __init__(self, on_second_signal: Callable[[str], int] | None = None):
    self.signal_name: str | None = None
    self.second_signal: str | None = None
    self._on_second_signal = on_second_signal
    self._previous = {}
    self._outer: 'StopOnSignal | None' = None
    self._wakeup: tuple[int, int] | None = None  # (previous fd, write end)

  def _note(self, signum: int):
    """Records one delivered signal; the second ends the run."""
    name = signal.Signals(signum).name
    if self.signal_name is None:
      self.signal_name = name
      print(f'\n{name}: stopping at the next safe point (again to stop now).',
            flush=True)
      return
    self.second_signal = name
    if self._on_second_signal is None:
      raise KeyboardInterrupt
    status = self._on_second_signal(name)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # pylint: disable=protected-access

  def _handle(self, signum, frame):
    del frame
    if self._wakeup is None:  # Otherwise the watcher thread counts it.
      self._note(signum)

  def _watch(self, read_fd: int):
    """The watcher thread: one byte per delivered signal, until closed."""
    with os.fdopen(read_fd, 'rb', buffering=0) as pipe:
      while data := pipe.read(64):
        for signum in data:
          if signum in self.SIGNALS:
            self._note(signum)

  def __enter__(self) -> 'StopOnSignal':
    active = StopOnSignal._active
    if active is not None:
      self._outer = active
      return active
    if threading.current_thread() is threading.main_thread():
      for sig in self.SIGNALS:
        self._previous[sig] = signal.signal(sig, self._handle)
      if self._on_second_signal is not None:
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        self._wakeup = (previous, write_fd)
        threading.Thread(target=self._watch, args=(read_fd,), daemon=True,
                         name='StopOnSignal').start()
      StopOnSignal._active = self
    return self

  def __exit__(self, *exc):
    if self._outer is not None:
      self._outer = None
      return
    if self._wakeup is not None:
      previous, write_fd = self._wakeup
      signal.set_wakeup_fd(previous)
      os.close(write_fd)  # The watcher reads the end of the pipe and stops.
      self._wakeup = None
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)
    if self._previous:
      StopOnSignal._active = None
    self._previous = {}


def scan_up_to(step, state, num_steps, length: int, *operands):
  """Runs `step(state, *operands) -> (state, metrics)` `num_steps` times.

  Traced (inside `jit`): one program serves every `num_steps` <= `length`;
  steps past `num_steps` leave the state alone and give NaN metrics (0 for
  integer ones). `step` is traced once.

  Returns:
    (state, metrics with a leading [length] axis).
  """
  step = jax.jit(step)  # Its trace is cached: the NaN branch reuses it.
  if length == 1:  # num_steps is 1: no scan, no branch.
    state, metrics = step(state, *operands)
    return state, jax.tree.map(lambda x: x[None], metrics)

  def skip(state, *operands):
    shapes = jax.eval_shape(step, state, *operands)[1]
    return state, jax.tree.map(
        lambda s: jnp.full(s.shape, jnp.nan if jnp.issubdtype(
            s.dtype, jnp.inexact) else 0, s.dtype), shapes)

  def body(state, index):
    return jax.lax.cond(index < num_steps, step, skip, state, *operands)

  return jax.lax.scan(body, state, jnp.arange(length))
