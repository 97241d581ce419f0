# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.runtime.host_loop: the host loop over any Job (calls, rows, timing,
progress lines, checkpoints when due, stops)."""

import contextlib
import dataclasses
import math
import os
import signal

import numpy as np
import pytest

from disco_rl.runtime import divergence
from disco_rl.runtime import host_loop
from disco_rl.runtime import job as job_lib
from disco_rl.runtime import metrics as metrics_lib
from disco_rl.runtime import signals


def _job(calls=None, steps_per_call=3, rows_per_step=1):
  """A job whose state counts steps and whose metric is the step index."""

  def step(state, count):
    if calls is not None:
      calls.append(count)
    return state + count, {
      'value': np.arange(state, state + count, dtype=float)
    }

  def rows(metrics, first_step):
    return [
      dict(step=first_step + i, value=v)
      for i, v in enumerate(metrics['value'])
      for _ in range(rows_per_step)
    ]

  class Program:
    def compile(self, state):
      del state
      return 0.0

  return job_lib.Job(
    name='fake',
    setup=None,
    init=lambda: 0,
    state_shapes=lambda: 0,
    step=step,
    program=Program(),
    steps_per_call=steps_per_call,
    report=job_lib.Report(
      rows=rows,
      summary=lambda *args: {},
      outputs=lambda *a: {},
      progress=lambda rows: dict(last=f'{rows[-1]["value"]:.0f}'),
    ),
  )


def _run(*args, **kwargs):
  """(state, timing, why it stopped) of `host_loop.run`."""
  outcome = host_loop.run(*args, **kwargs)
  return outcome.state, outcome.timing, outcome.interrupted


def test_a_run_goes_in_calls_and_writes_every_row(tmp_path, capsys):
  calls, rows = [], []
  with metrics_lib.MetricsWriter(tmp_path / 'm.csv') as writer:
    state, timing, stopped = _run(
      _job(calls),
      0,
      7,
      rows,
      on_call=lambda state, new: writer.write_rows(new),
      progress=False,
      log_every=3,
    )
  assert calls == [3, 3, 1] and state == 7 and stopped is None
  assert [r['step'] for r in rows] == list(range(7))
  assert all(r['value'] == r['step'] for r in rows)
  assert all('rss_mb' in r and 'time_s' in r for r in rows)
  written = metrics_lib.read_metrics(tmp_path / 'm.csv')
  np.testing.assert_array_equal(written['step'], np.arange(7))
  # The first call is timed apart (it compiles); 4 steps after it.
  assert timing.steady_steps == 4 and timing.first_call_s >= 0
  assert timing.steps_per_second > 0
  # A line each time the step count passes a multiple of log_every.
  lines = capsys.readouterr().out.splitlines()
  assert [ln.split()[:2] for ln in lines] == [['step', '3/7'], ['step', '6/7']]
  assert 'last=5' in lines[1]


def test_a_run_continues_from_its_rows_and_one_call_leaves_no_speed():
  rows = [dict(step=0, value=0.0), dict(step=1, value=1.0)]  # Two steps.
  state, timing, _ = _run(_job(), 2, 4, rows, progress=False)
  assert state == 4 and len(rows) == 4 and timing.steady_steps == 0
  assert math.isnan(timing.steps_per_second)


def test_checkpoints_when_due_but_not_after_the_last_call():
  saved = []
  host_loop.run(
    _job(steps_per_call=2),
    0,
    9,
    [],
    progress=False,
    save=lambda state, steps: saved.append(steps),
    checkpoint_every=4,
  )
  assert saved == [4, 8]  # Not at 9: the caller saves the end itself.


def test_a_callback_stops_the_run_after_its_call():
  rows = []
  state, _, stopped = _run(
    _job(rows_per_step=2),
    0,
    9,
    rows,
    progress=False,
    on_call=lambda state, new: state >= 6,
  )
  assert stopped == 'callback' and state == 6 and len(rows) == 12
  # Its ending: not complete, stopped after 6 steps, 2 of them warm-up.
  outcome = host_loop.run(
    dataclasses.replace(_job(), warmup=2),
    0,
    9,
    [],
    progress=False,
    on_call=lambda state, new: state >= 6,
  )
  assert outcome.finished == dict(
    interrupted='callback', completed=False, stopped_at_step=4
  )
  assert host_loop.run(_job(), 0, 3, [], progress=False).finished == dict(
    interrupted=None, completed=True
  )


def test_a_signal_stops_the_run_at_the_next_safe_point():
  calls = []
  job = _job(calls)

  def signalled(state, new):
    os.kill(os.getpid(), signal.SIGTERM)
    return False

  with signals.StopOnSignal():
    state, _, stopped = _run(job, 0, 9, [], progress=False, on_call=signalled)
  assert stopped == 'SIGTERM' and state == 3 and calls == [3]
  # A signal before the run starts: no call at all.
  with signals.StopOnSignal():
    os.kill(os.getpid(), signal.SIGINT)
    state, _, stopped = _run(job, 0, 9, [], progress=False)
  assert stopped == 'SIGINT' and state == 0 and calls == [3]


def test_finish_runs_under_the_rule_and_a_signal_in_it_is_the_reason():
  """The final checkpoint and outputs (`finish`) still defer a signal: the
  run is complete, and the signal is why it stopped (decided once)."""

  def finish(state, timing):
    os.kill(os.getpid(), signal.SIGTERM)
    return dict(final=state, timing=timing)

  with signals.StopOnSignal():
    outcome = host_loop.run(_job(), 0, 4, [], progress=False, finish=finish)
  assert outcome.state == 4 and outcome.interrupted == 'SIGTERM'
  assert outcome.finished['final'] == 4
  # The ending, decided here once, is in what the run returns.
  assert outcome.finished['interrupted'] == 'SIGTERM'
  assert (
    outcome.finished['completed'] and outcome.finished['stopped_at_step'] == 4
  )
  outcome = host_loop.run(_job(), 0, 4, [], progress=False, finish=finish)
  assert outcome.interrupted == 'SIGTERM'  # Its own rule, entered by run.


def test_a_call_that_stops_at_a_step_keeps_the_rows_before_it(tmp_path):
  """A call of steps 3-5 diverges at step 5: rows 0-4 are kept and written
  (the earlier call's and the call's own good steps), then the error goes
  on as raised."""
  job = _job()

  def step(state, count):
    new_state, metrics = job.step(state, count)
    if new_state > 5:
      with divergence.keep_good(metrics, 5 - state):
        raise divergence.DivergedError('learning diverged at step 5.')
    return new_state, metrics

  rows, written = [], []

  def on_call(state, new):
    written.extend(new)
    writer.write_rows(new)

  with metrics_lib.MetricsWriter(tmp_path / 'm.csv') as writer:
    with pytest.raises(
      divergence.DivergedError, match='^learning diverged at step 5.$'
    ):
      host_loop.run(
        dataclasses.replace(job, step=step),
        0,
        9,
        rows,
        on_call=on_call,
        progress=False,
      )
  assert [r['step'] for r in rows] == [0, 1, 2, 3, 4]
  assert all(r['value'] == r['step'] for r in rows) and written == rows
  assert all('rss_mb' in r and 'time_s' in r for r in rows)
  np.testing.assert_array_equal(
    metrics_lib.read_metrics(tmp_path / 'm.csv')['step'], np.arange(5)
  )


@pytest.mark.parametrize('keeps', [0, None])
def test_an_error_that_keeps_no_step_adds_no_rows(keeps):
  """A problem at the call's first step (0 good steps), or an error that
  carries none, keeps nothing of the call and calls no on_call for it."""
  job = _job()

  def step(state, count):
    new_state, metrics = job.step(state, count)
    if new_state > 3:
      with (
        contextlib.nullcontext()
        if keeps is None
        else divergence.keep_good(metrics, keeps)
      ):
        raise divergence.DivergedError('diverged')
    return new_state, metrics

  rows, calls = [], []
  with pytest.raises(divergence.DivergedError):
    host_loop.run(
      dataclasses.replace(job, step=step),
      0,
      9,
      rows,
      on_call=lambda state, new: calls.append(new),
      progress=False,
    )
  assert [r['step'] for r in rows] == [0, 1, 2] and len(calls) == 1


def test_steps_done_reads_the_rows_step():
  assert host_loop.steps_done([]) == 0
  assert (
    host_loop.steps_done(
      [dict(step=0), dict(step=0), dict(step=1), dict(step=1)]
    )
    == 2
  )
