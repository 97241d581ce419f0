# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.loops.driver: calls, rows, timing and progress lines."""

import math

import numpy as np

from disco_rl.loops import driver
from disco_rl.loops import reporting


def _fake_run(state, count):
  """A loop whose state counts steps and whose metric is the step index."""
  return state + count, {'value': np.arange(state, state + count, dtype=float)}


def _rows(metrics, first_step):
  return [dict(step=first_step + i, value=v)
          for i, v in enumerate(metrics['value'])]


def test_drive_runs_in_calls_and_writes_every_row(tmp_path, capsys):
  calls = []

  def run(state, count):
    calls.append(count)
    return _fake_run(state, count)

  with reporting.MetricsWriter(tmp_path / 'm.csv') as writer:
    state, rows, timing = driver.drive(
        run, 0, num_steps=7, steps_per_call=3, to_rows=_rows, writer=writer,
        desc='fake', progress=False,
        postfix=lambda rows: dict(last=f'{rows[-1]["value"]:.0f}'),
        log_every=3)
  assert calls == [3, 3, 1] and state == 7
  assert [r['step'] for r in rows] == list(range(7))
  assert all(r['value'] == r['step'] for r in rows)
  assert all('rss_mb' in r and 'time_s' in r for r in rows)
  written = reporting.read_metrics(tmp_path / 'm.csv')
  np.testing.assert_array_equal(written['step'], np.arange(7))
  # The first call is timed apart (it compiles); 4 steps after it.
  assert timing.steady_steps == 4 and timing.first_call_s >= 0
  assert timing.steps_per_second > 0
  # A line each time the step count passes a multiple of log_every.
  lines = capsys.readouterr().out.splitlines()
  assert [l.split()[:2] for l in lines] == [['step', '3/7'], ['step', '6/7']]
  assert 'last=5' in lines[1]


def test_one_call_leaves_no_steady_speed():
  _, rows, timing = driver.drive(_fake_run, 0, num_steps=2, steps_per_call=5,
                                 to_rows=_rows, writer=None, desc='fake',
                                 progress=False)
  assert len(rows) == 2 and timing.steady_steps == 0
  assert math.isnan(timing.steps_per_second)
