# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.runtime.signals: one rule for SIGINT and SIGTERM from a job's
first line.

In-process: nesting, the watcher thread of the command-line mode, an
inherited ignored SIGINT. Then the command-line jobs signalled while
importing (0.5 s) and while training (after their first rows), started as
a foreground job (SIGINT honoured) and as a shell script's background job
(`cmd &`: SIGINT inherited as ignored, and respected for the whole run).
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
from smoke_env import fast_jax_env
import tiny

from disco_rl.runtime import signals

TIMEOUT_S = 600


def test_stop_on_signal_nests_and_restores_the_handlers():
  before = signal.getsignal(signal.SIGINT)
  with signals.StopOnSignal() as outer:
    with signals.StopOnSignal() as inner:
      assert inner is outer
    assert signal.getsignal(signal.SIGINT) != before  # Still the outer's.
    os.kill(os.getpid(), signal.SIGINT)
    assert outer.signal_name == 'SIGINT'
    with pytest.raises(KeyboardInterrupt):
      os.kill(os.getpid(), signal.SIGTERM)
    assert outer.second_signal == 'SIGTERM'
  assert signal.getsignal(signal.SIGINT) == before


def test_the_suite_started_with_sigint_ignored_still_tests_sigint():
  """A shell's background job (`make test &` in a script) starts with SIGINT
  ignored; conftest.py restores Python's handler, so the SIGINT tests test
  SIGINT instead of waiting for a stop that never comes (without it, the
  test above fails: the handler before is SIG_IGN)."""
  test = f'{__file__}::test_stop_on_signal_nests_and_restores_the_handlers'
  # SIGINT ignored, then exec: the ignore is inherited, as from a shell.
  # (Not preexec_fn, which runs Python in a fork of this multithreaded
  # process: JAX warns that it may deadlock.)
  start = (
    'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); '
    'os.execv(sys.executable, [sys.executable] + sys.argv[1:])'
  )
  done = subprocess.run(
    [
      sys.executable,
      '-c',
      start,
      '-m',
      'pytest',
      '-q',
      '-p',
      'no:cacheprovider',
      '-p',
      'no:xdist',
      test,
    ],
    cwd=pathlib.Path(__file__).parent.parent,
    capture_output=True,
    text=True,
    check=False,
    timeout=TIMEOUT_S,
  )
  assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
  assert '1 passed' in done.stdout


_TWO_SIGNALS_IN_ONE_C_CALL = """
import hashlib, os, signal, sys
from disco_rl.runtime import signals

def stopped_at_once(name):
  print('stopped at once by', name, flush=True)
  return 7

with signals.StopOnSignal(on_second_signal=stopped_at_once) as stop:
  print('ready', flush=True)
  # One long C call that runs no Python code (as a compilation): Python's
  # own handler would only run after it, once for both signals.
  hashlib.pbkdf2_hmac('sha256', b'key', b'salt', 10_000_000)
  print('survived', stop.signal_name, stop.second_signal, flush=True)
"""


def test_stop_on_signal_with_a_watcher_counts_signals_inside_a_c_call():
  """The CLI's mode: the second of two signals delivered during one long C
  call (a compilation, a compiled step) ends the process at once."""
  proc = subprocess.Popen(
    [sys.executable, '-c', _TWO_SIGNALS_IN_ONE_C_CALL],
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )
  try:
    assert proc.stdout.readline() == 'ready\n'
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.1)
    proc.send_signal(signal.SIGINT)  # The same signal: one pending flag.
    stdout, stderr = proc.communicate(timeout=120)
  finally:
    proc.kill()
  assert proc.returncode == 7, (stdout, stderr)
  assert 'SIGINT: stopping at the next safe point' in stdout
  assert stdout.strip().splitlines()[-1] == 'stopped at once by SIGINT'
  assert 'survived' not in stdout


def test_stop_on_signal_with_a_watcher_restores_the_wakeup_fd():
  before = signal.set_wakeup_fd(-1)
  signal.set_wakeup_fd(before)
  with signals.StopOnSignal(on_second_signal=lambda name: 3) as stop:
    os.kill(os.getpid(), signal.SIGINT)
    deadline = time.monotonic() + 10
    while stop.signal_name is None and time.monotonic() < deadline:
      time.sleep(0.01)
    assert stop.signal_name == 'SIGINT' and stop.second_signal is None
  assert signal.set_wakeup_fd(before) == before


def test_an_inherited_ignored_sigint_stays_ignored():
  """A background job's SIGINT (ignored when the process started) is left
  alone; SIGTERM still stops the run; the handlers are restored."""
  previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
  try:
    with signals.StopOnSignal() as stop:
      assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
      os.kill(os.getpid(), signal.SIGINT)
      time.sleep(0.05)
      assert stop.signal_name is None
      os.kill(os.getpid(), signal.SIGTERM)
      assert stop.signal_name == 'SIGTERM'
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
  finally:
    signal.signal(signal.SIGINT, previous)


def test_a_job_module_run_as_a_command_catches_signals_from_its_first_line():
  """Imported (tests, notebooks), a job's module leaves the signals alone."""
  before = signal.getsignal(signal.SIGTERM)
  assert signals.catch_from_here('disco_rl.cli.eval') is None
  assert signal.getsignal(signal.SIGTERM) is before


# ----------------------------------------------------------------------------
# The jobs as commands, signalled at several delays.

EVAL_FOREVER = tiny.eval_flags(
  num_steps=100000, rollout_len=6, steps_per_call=2, checkpoint_every=0
)
# (how the job is started, the signal, when): while Python starts and
# imports (0.5 s after the start), and while it trains (TRAINING: once it
# has written TRAINING_ROWS rows; a fixed delay long enough for a loaded
# machine, 15 s, kept three processes training for most of it). A signal
# during compilation: tests/test_examples.py (the eval CLI; 4 s cases here
# were two more processes compiling the same program at once).
TRAINING = 'training'
TRAINING_ROWS = 3
# Two jobs train; the others stop before they start. The background SIGINT
# job is given SIGINT at both delays (it trains on), then SIGTERM while it
# trains: SIGTERM's handling is the same in both modes (only SIGINT's
# inherited disposition differs), so it also stands for a foreground
# SIGTERM while training, which was a third training process here (and a
# fourth, a background SIGINT while training: 2026-12-04, 8 s of CPU each).
CASES = [
  ('foreground', signal.SIGINT, 0.5),
  ('foreground', signal.SIGINT, TRAINING),
  ('background', signal.SIGINT, 0.5),
  ('background', signal.SIGTERM, 0.5),
]


def _rows(out: pathlib.Path) -> int:
  try:
    return max(0, len((out / 'metrics.csv').read_text().splitlines()) - 1)
  except FileNotFoundError:
    return 0


class _Job:
  """An eval command that would run for hours, started in `mode`: as a
  foreground job (SIGINT at its default) or by bash as `cmd &` (bash starts
  background commands of a script with SIGINT ignored)."""

  def __init__(self, mode, sig, delay, tmp_path, env):
    self.mode, self.sig, self.delay = mode, sig, delay
    self.out = tmp_path / f'{mode}_{sig.name}_{delay}'
    command = [
      sys.executable,
      '-m',
      'disco_rl.cli.eval',
      *EVAL_FOREVER,
      '--out',
      str(self.out),
    ]
    if mode == 'background':
      script = ' '.join(f"'{a}'" for a in command) + ' & echo $!; wait $!'
      command = ['bash', '-c', script]
    self.proc = subprocess.Popen(
      command,
      cwd=tmp_path,
      env=env,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
    )
    self.start = time.monotonic()
    self.pid = (
      int(self.proc.stdout.readline())
      if mode == 'background'
      else self.proc.pid
    )
    self.signalled_at_rows = None

  def signal(self):
    self.signalled_at_rows = _rows(self.out)
    os.kill(self.pid, self.sig)

  def wait_for_the_rule(self):
    """Waits until the command's first line holds (it catches SIGTERM:
    /proc's SigCgt), and counts the delay from there: before it, the
    interpreter is still starting (a window no Python code can close,
    longer than the earliest delay on a loaded machine)."""
    deadline = time.monotonic() + TIMEOUT_S
    while not _catches(self.pid, signal.SIGTERM):
      assert self.proc.poll() is None and time.monotonic() < deadline
      time.sleep(0.01)
    self.start = time.monotonic()


def _catches(pid: int, sig: signal.Signals) -> bool:
  """Whether process `pid` has a handler for `sig` (Linux's /proc)."""
  try:
    status = pathlib.Path(f'/proc/{pid}/status').read_text()
  except FileNotFoundError:
    return False
  caught = next(
    int(line.split()[1], 16)
    for line in status.splitlines()
    if line.startswith('SigCgt:')
  )
  return bool(caught >> (sig.value - 1) & 1)


def test_one_rule_for_signals_at_every_delay(tmp_path):
  """SIGTERM stops the run at the next safe point at any time, and so does
  SIGINT in a foreground job: exit 128 + the signal's number, no traceback,
  the summary (once the run started) naming the signal. A background job
  ignores SIGINT at any delay (it trains on) until SIGTERM stops it."""
  env = dict(
    os.environ,
    **fast_jax_env(num_devices=1),
    JAX_PLATFORMS='cpu',
    MPLBACKEND='Agg',
  )
  # The jobs start as a user's do: under `make coverage`, coverage.py's
  # start-up in each process would delay a command's first line past the
  # earliest signal (its code is measured by the other signal tests).
  env.pop('COVERAGE_PROCESS_CONFIG', None)
  env.pop('COVERAGE_PROCESS_START', None)

  def wait_for_rows(job, count):
    deadline = time.monotonic() + TIMEOUT_S
    while _rows(job.out) < count:
      assert job.proc.poll() is None and time.monotonic() < deadline
      time.sleep(0.05)

  def signal_at(jobs, delay):
    for job in jobs:
      job.wait_for_the_rule()
    for job in jobs:
      time.sleep(max(0.0, job.start + delay - time.monotonic()))
      job.signal()

  ignores = ('background', signal.SIGINT, 0.5)
  at_start_up = [c for c in CASES if c[2] != TRAINING and c != ignores]
  (trains,) = [c for c in CASES if c[2] == TRAINING]
  jobs = []
  try:
    jobs += [_Job(*case, tmp_path, env) for case in at_start_up + [trains]]
    signal_at(jobs[:-1], 0.5)
    wait_for_rows(jobs[-1], TRAINING_ROWS)
    jobs[-1].signal()
    # The background SIGINT job starts once the first has compiled the
    # program (its rows), and reads it from the session's compilation cache
    # instead of compiling it beside it: SIGINT at start-up, again while it
    # trains (it trains on after each), then SIGTERM.
    jobs.append(_Job(*ignores, tmp_path, env))
    signal_at(jobs[-1:], 0.5)
    wait_for_rows(jobs[-1], TRAINING_ROWS)
    jobs[-1].signal()
    wait_for_rows(jobs[-1], jobs[-1].signalled_at_rows + 3)
    os.kill(jobs[-1].pid, signal.SIGTERM)
    outputs = [job.proc.communicate(timeout=TIMEOUT_S) for job in jobs]
  finally:
    for job in jobs:
      job.proc.kill()
  for job, (stdout, stderr) in zip(jobs, outputs, strict=True):
    what = f'{job.mode} {job.sig.name} at {job.delay} s: {stderr[-3000:]}'
    stopped_by = signal.SIGTERM if job.mode == 'background' else job.sig
    assert job.proc.returncode == 128 + stopped_by.value, what
    assert 'Traceback' not in stderr, what
    summary = job.out / 'summary.json'
    if summary.is_file():
      written = json.loads(summary.read_text())
      assert written['interrupted'] == stopped_by.name, what
      assert not written['completed'], what
      assert f'interrupted by {stopped_by.name} after step' in stdout, what
    else:  # Before the run started: one line, nothing written.
      assert stderr.strip().splitlines()[-1] == (
        f'interrupted by {stopped_by.name} before the run started: nothing '
        'was written'
      ), what
      assert not (job.out / 'run.json').exists(), what
    if job.mode == 'background' and job.sig == signal.SIGINT:
      assert _rows(job.out) > job.signalled_at_rows, what
