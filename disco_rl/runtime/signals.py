# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""SIGINT and SIGTERM: one rule from a job's first line to its end.

The first signal asks the run to stop at its next safe point (before it
starts, after compiling, between compiled calls, after the last one); the
run then saves what it has and says so. A second one stops at once: a
command-line job ends with the status `on_second_signal` gives, a notebook
gets a KeyboardInterrupt.

A SIGINT the process inherited as ignored stays ignored for the whole run:
bash starts the commands of a script's `cmd &` and `nohup cmd` with SIGINT
ignored, so that a Ctrl-C meant for the terminal's foreground job does not
reach them (the Unix convention). SIGTERM always counts.

No JAX here: a job calls `catch_from_here` before it imports anything heavy.
"""

from collections.abc import Callable
import os
import signal
import sys
import threading
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# A signal's handler as `signal.signal` returns it.
_Handler = Callable[[int, FrameType | None], Any] | int | None


class StopOnSignal:
  """Turns SIGINT and SIGTERM into a request to stop at the next safe point.

  `signal_name` holds the first signal's name. Outside the main thread it
  installs nothing; a signal whose handler is SIG_IGN when entered stays
  ignored (see the module's docstring).

  With `on_second_signal` (a command-line job), a watcher thread counts the
  signals as the operating system delivers them, so two signals during one
  long C call (a compilation, a compiled step) are two, not one: on the
  second it calls `on_second_signal(name)` and ends the process with the
  status it returns (checkpoints are written whole or not at all). Without
  it, the second raises KeyboardInterrupt in the main thread.

  Entered while another is active (e.g. the job's, from its first line),
  it returns the active one, so the run sees a signal that came earlier.

  Usage:
    with StopOnSignal() as stop:
      ... if stop.signal_name: break ...
  """

  _active: 'StopOnSignal | None' = None

  def __init__(self, on_second_signal: Callable[[str], int] | None = None):
    self.signal_name: str | None = None
    self.second_signal: str | None = None
    self._on_second_signal = on_second_signal
    # signal -> its handler before `__enter__`.
    self._previous: dict[int, _Handler] = {}
    self._outer: StopOnSignal | None = None
    self._wakeup: tuple[int, int] | None = None  # (previous fd, write end)

  def _note(self, signum: int):
    """Records one delivered signal; the second ends the run."""
    name = signal.Signals(signum).name
    if self.signal_name is None:
      self.signal_name = name
      print(
        f'\n{name}: stopping at the next safe point (again to stop now).',
        flush=True,
      )
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
          if signum in SIGNALS and signum in self._previous:
            self._note(signum)

  def __enter__(self) -> 'StopOnSignal':
    active = StopOnSignal._active
    if active is not None:
      self._outer = active
      return active
    if threading.current_thread() is threading.main_thread():
      for sig in SIGNALS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
          self._previous[sig] = signal.signal(sig, self._handle)
      if self._on_second_signal is not None:
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        self._wakeup = (previous, write_fd)
        threading.Thread(
          target=self._watch, args=(read_fd,), daemon=True, name='StopOnSignal'
        ).start()
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
    if StopOnSignal._active is self:
      StopOnSignal._active = None
    self._previous = {}


def received() -> str | None:
  """The first signal the active rule has seen (None: none, or no rule is
  active, e.g. a job's `main` called from Python)."""
  active = StopOnSignal._active  # pylint: disable=protected-access
  return None if active is None else active.signal_name


def name_received() -> str:
  """`received()` for code that has seen it true (a rule stays active, and
  its first signal set, until its `with` block ends).

  Raises:
    RuntimeError: no signal was received (the caller's mistake).
  """
  name = received()
  if name is None:
    raise RuntimeError('No signal was received.')
  return name


def exit_at_once(name: str) -> int:
  """A command-line job's second signal: one error line; 128 + its number."""
  print(
    f'error: stopped at once by a second {name}; the run keeps its last '
    'checkpoint (continue it with --resume)',
    file=sys.stderr,
  )
  return 128 + signal.Signals[name].value


def catch_from_here(module_name: str) -> StopOnSignal | None:
  """A job's first line: the rule holds from here to the process's end.

  Only when the job runs as a command (`module_name == '__main__'`); a job
  imported as a module (tests, notebooks) leaves the signals alone until
  its `main` runs.

  Returns:
    The process's `StopOnSignal` (never exited), or None.
  """
  if module_name != '__main__':
    return None
  return StopOnSignal(on_second_signal=exit_at_once).__enter__()
