# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The host loop: a `Job` run call by call (Stoix's `run_experiment`).

`make_eval` and `make_meta_train` each return a `Job`, the one interface
the host side knows: how to make the initial state, the compiled call that
advances it, the rows of its metrics, the summary and the outputs. `run`
drives any job: for each call, `state, metrics = job.step(state, k)`; its
rows are kept (`on_call` writes them); a checkpoint is saved when due; the
run stops when a callback asks or a signal arrives
(`disco_rl.runtime.signals`) in any process.
Nothing here knows which job it runs.

`run` is the one place that watches for a stop while a job runs, and it
decides once why the run stopped. With several processes every decision is
agreed (the first process's reason wins), so all processes take the same
path through the collectives of the steps, checkpoints and outputs.
"""

from collections.abc import Callable
import dataclasses
import functools
import operator
import time
from typing import Any, Protocol

import jax
import numpy as np
import tqdm

from disco_rl.runtime import checkpoints as checkpoints_lib
from disco_rl.runtime import divergence
from disco_rl.runtime import job as job_lib
from disco_rl.runtime import mesh
from disco_rl.runtime import metrics as metrics_lib
from disco_rl.runtime import signals

Rows = job_lib.Rows


class HasRows(Protocol):
  """What `stop_when`'s callback reads of a `Trainer`: the rows so far."""

  rows: Rows


# Why a run stopped early, as agreed across processes (0: it did not).
REASONS = (None, 'SIGINT', 'SIGTERM', 'callback')


def steps_done(rows: Rows) -> int:
  """The loop steps that `rows` cover (each row names its `step`)."""
  return int(rows[-1]['step']) + 1 if rows else 0


def save_checkpoint(
  checkpoints: Any,
  job: job_lib.Job,
  state: Any,
  rows: Rows,
  extra: dict[str, Any] | None = None,
) -> int:
  """Checkpoints a job's whole state after `rows` (every process calls it):
  the device state, its step, the number of rows, the host state and
  `extra` (JSON-able, e.g. the run's settings). Returns the checkpoint's
  step."""
  step, host = steps_done(rows), job.host_state
  record = dict(
    extra or {}, rows=len(rows), step=step, **(host.save() if host else {})
  )
  checkpoints.save(step, state, record)
  return step


def restore_checkpoint(
  checkpoints: Any,
  job: job_lib.Job,
  step: int | None = None,
  on_fallback: Callable[[str], None] | None = None,
  check: Callable[[int, int, dict[str, Any]], Any] | None = None,
) -> tuple[Any, int, int, dict[str, Any], Any]:
  """A job's state at checkpoint `step` (default: the newest that reads),
  its host state loaded: (state, step, the number of rows it follows, its
  record, what `check` returned).

  A checkpoint that cannot be read (damaged: e.g. a data file cut short)
  or whose rows `check(step, rows, record)` refuses (`metrics.RowsError`:
  e.g. the rows it counts are not all whole in metrics.csv) is passed over
  for the one before it, `on_fallback(message)` saying so.

  Raises:
    FileNotFoundError: no checkpoint (or no checkpoint `step`).
    ValueError: none of them reads (naming the newest, why and the way
      out), or they are of another run (`CheckpointMismatch`: other
      shapes; or other settings, from `check`).
  """
  if step is None:
    checkpoints.resolve_step(None)  # Raises if there is none.
    steps = checkpoints.steps()[::-1]
  else:
    steps = [checkpoints.resolve_step(step)]
  failed: list[tuple[int, Exception]] = []
  for candidate in steps:
    try:
      state, extra = checkpoints.restore(job.state_shapes(), candidate)
      count = int(extra['rows'])
      checked = None if check is None else check(candidate, count, extra)
      if job.host_state is not None:
        job.host_state.load(extra)
    except checkpoints_lib.CheckpointMismatch:
      raise  # Every checkpoint of the run has its shapes.
    except Exception as e:  # pylint: disable=broad-exception-caught
      failed.append((candidate, e))
      continue
    if failed and on_fallback is not None:
      on_fallback(
        f'{_why_not(checkpoints, *failed[0])}; the run continues from '
        f'checkpoint {candidate}, the newest that can be resumed.'
      )
    return state, candidate, count, extra, checked
  newest = failed[0][0]
  raise ValueError(
    _why_not(checkpoints, *failed[0])
    + ('' if len(failed) == 1 else '; nor can the ones before it be resumed')
    + f'. Remove {checkpoints.directory / str(newest)} to resume from an '
    'earlier checkpoint, if one is left, or start the run again '
    '(--overwrite).'
  )


def _why_not(checkpoints: Any, step: int, error: Exception) -> str:
  """Why checkpoint `step` cannot be resumed, in a line."""
  if isinstance(error, metrics_lib.RowsError):
    return f'checkpoint {step} cannot be resumed: ' + ' '.join(
      str(error).split()
    ).rstrip('.')
  return (
    f'checkpoint {step} in {checkpoints.directory} cannot be read '
    f'({checkpoints_lib.short_error(error)})'
  )


@dataclasses.dataclass
class Outcome:
  """How `run` ended.

  Attributes:
    state: the job's state.
    timing: the run's wall-clock figures.
    interrupted: why it stopped early ('SIGINT', 'SIGTERM', 'callback') or
      None; a signal during `finish` counts (the run is then complete).
    finished: what `finish` returned, with `interrupted`, `completed`
      (whether `target` steps are done) and, if interrupted,
      `stopped_at_step` (the job's steps done, warm-up steps not counted).
  """

  state: Any
  timing: job_lib.Timing
  interrupted: str | None
  finished: dict[str, Any]


def _agreed(reason: str | None) -> str | None:
  """The first process's reason to stop (every process calls this)."""
  return REASONS[mesh.first_over_processes(REASONS.index(reason))]


def run(
  job: job_lib.Job,
  state: Any,
  target: int,
  rows: Rows,
  *,
  save: Callable[[Any, int], None] | None = None,
  checkpoint_every: int = 0,
  on_call: Callable[[Any, Rows], bool] | None = None,
  finish: Callable[[Any, job_lib.Timing], dict[str, Any]] | None = None,
  progress: bool = True,
  log_every: int = 0,
) -> Outcome:
  """Runs `job` from the step `rows` end at until `target` steps are done.

  Args:
    job: the job.
    state: its state after the steps `rows` hold (donated to its calls).
    target: the steps the run has in all when this returns (unless
      stopped).
    rows: the run's rows so far; the new ones are appended.
    save: `save(state, steps)` checkpoints; called every
      `checkpoint_every` steps (rounded up to whole calls; 0: never), not
      after the last call.
    on_call: `on_call(state, new rows)` after every call (e.g. writes
      them; `rows` holds them already); True stops. A call that raises
      for a problem at one of its steps (`divergence.good_steps`) gives
      the rows of the steps before it so (with the state given to the
      call; what it returns is not asked) before the error goes on.
    finish: `finish(state, timing)` after the last call, still under the
      signal rule (the final checkpoint and outputs); its dict is returned.
    progress: show a progress bar (process 0).
    log_every: also print a line about every `log_every` steps (0: never).

  Returns:
    The `Outcome`. Safe points, where a stop is seen: before compiling,
    after compiling, after every call, after `finish`.
  """
  done, first = steps_done(rows), steps_done(rows)
  timing, start = job_lib.Timing(), time.perf_counter()
  lead = jax.process_index() == 0
  with signals.StopOnSignal() as seen:
    stop = _Stop(seen)
    compile_s = 0.0
    if done < target and not stop():
      compile_s = job.program.compile(state)
    bar = tqdm.tqdm(
      total=target,
      initial=done,
      desc=job.report.description,
      disable=not (progress and lead),
    )
    try:
      while done < target and not stop():
        count = min(job.steps_per_call, target - done)
        call_start = time.perf_counter()
        keep = functools.partial(_keep, job, rows, done, start)
        state, metrics = _call(job, state, count, keep, bar, on_call)
        seconds = time.perf_counter() - call_start
        _count_time(timing, count, seconds, compile_s, done == first)
        new = keep(metrics)
        done += count
        figures = job.report.progress(rows)
        bar.update(count)
        bar.set_postfix(figures)
        if lead and _crossed(done, count, log_every):
          print(_log_line(done, target, figures, new[-1]), flush=True)
        if stop('callback' if on_call and on_call(state, new) else None):
          break
        if save and done < target and _crossed(done, count, checkpoint_every):
          save(state, done)
    finally:
      bar.close()
    finished = {} if finish is None else finish(state, timing)
    if stop.reason is None:  # A signal after the last call.
      stop()
  finished = dict(finished, interrupted=stop.reason, completed=done >= target)
  if stop.reason is not None:
    finished['stopped_at_step'] = max(0, done - job.warmup)
  return Outcome(state, timing, stop.reason, finished)


class _Stop:
  """`stop(reason=None) -> bool`: whether the run stops, for `reason` or
  a signal seen, agreed by every process (the first process's reason);
  `reason`: the last agreed one."""

  def __init__(self, seen: signals.StopOnSignal) -> None:
    self.seen = seen
    self.reason: str | None = None

  def __call__(self, reason: str | None = None) -> bool:
    self.reason = _agreed(reason or self.seen.signal_name)
    return self.reason is not None


def _keep(
  job: job_lib.Job, rows: Rows, done: int, start: float, metrics: Any
) -> Rows:
  """The rows of a call's `metrics` (from step `done`), with the memory
  and time now, appended to `rows`; returns them."""
  new = job.report.rows(metrics, done)
  rss, now = metrics_lib.resident_memory_mb(), time.perf_counter()
  for row in new:
    row.update(rss_mb=rss, time_s=now - start)
  rows.extend(new)
  return new


def _call(
  job: job_lib.Job,
  state: Any,
  count: int,
  keep: Callable[[Any], Rows],
  bar: tqdm.tqdm,
  on_call: Callable[[Any, Rows], bool] | None,
) -> tuple[Any, job_lib.Metrics]:
  """One call of `count` steps. A problem at one of its steps
  (`divergence.good_steps`) keeps the rows of the steps before it (and
  gives them to `on_call`, which writes them) before the error goes on."""
  try:
    return job.step(state, count)
  except Exception as error:
    good = divergence.good_steps(error)
    if good is not None and good.count:
      new = keep(good.kept())
      bar.update(good.count)
      if on_call is not None:
        on_call(state, new)
    raise


def _count_time(
  timing: job_lib.Timing,
  count: int,
  seconds: float,
  compile_s: float,
  first_call: bool,
) -> None:
  """Adds a call's `seconds` to `timing`: the first call's with the
  compilation, the others' to the steady figures."""
  if first_call:
    timing.first_call_s = seconds + compile_s
  else:
    timing.steady_steps += count
    timing.steady_s += seconds


def _crossed(done: int, count: int, every: int) -> bool:
  """Whether the call of steps (done - count, done] crossed a multiple of
  `every` (never when `every` is 0)."""
  return bool(every) and done // every != (done - count) // every


def _log_line(
  done: int, target: int, figures: dict[str, str], row: job_lib.Row
) -> str:
  """'step 40/100 avg_return=0.12 rss=512MB'."""
  text = ' '.join(f'{k}={v}' for k, v in figures.items())
  return f'step {done}/{target} {text} rss={row["rss_mb"]:.0f}MB'


def stop_when(
  metric: str,
  *,
  above: float | None = None,
  below: float | None = None,
  window: int = 1,
) -> Callable[[HasRows, Rows], bool]:
  """A `Trainer.fit` callback that stops the run once the mean of `metric`
  over the last `window` steps' rows (of every run in the program; NaN
  skipped) is >= `above` or <= `below` (exactly one of them)."""
  if above is not None and below is None:
    bound, reached = above, operator.ge
  elif below is not None and above is None:
    bound, reached = below, operator.le
  else:
    raise ValueError('stop_when needs exactly one of above= or below=.')
  if window < 1:
    raise ValueError(f'window must be >= 1, got {window}.')

  def callback(trainer: HasRows, new_rows: Rows) -> bool:
    del new_rows
    first = steps_done(trainer.rows) - window
    values = np.asarray(
      [r[metric] for r in trainer.rows if r['step'] >= first], float
    )
    if first < 0 or not np.isfinite(values).any():
      return False
    return reached(float(np.nanmean(values)), bound)

  return callback
