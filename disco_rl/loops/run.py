# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The host loop: a `Job` run call by call (Stoix's `run_experiment`).

`make_eval` and `make_meta_train` each return a `Job`, the one interface
the host side knows: how to make the initial state, the compiled call that
advances it, the rows of its metrics, the summary and the outputs. `run`
drives any job: for each call, `state, metrics = job.step(state, k)`; its
rows are written; a checkpoint is saved when due; the run stops when a
callback asks, a signal arrives (`disco_rl.signals`) or another process
stops. Nothing here knows which job it runs.
"""

from collections.abc import Callable
import dataclasses
import time
from typing import Any

import jax
import tqdm

from disco_rl.loops import mesh
from disco_rl import metrics as metrics_lib
from disco_rl import signals

Rows = list[dict[str, float]]


@dataclasses.dataclass
class Timing:
  """Wall-clock figures of a run.

  Attributes:
    first_call_s: the compilation and the first call.
    steady_steps: steps run after the first call.
    steady_s: the time those took.
  """

  first_call_s: float = float('nan')
  steady_steps: int = 0
  steady_s: float = 0.0

  @property
  def steps_per_second(self) -> float:
    """Steps per second after the first call (NaN if there were none)."""
    return (self.steady_steps / self.steady_s if self.steady_steps
            else float('nan'))


def _nothing(*args) -> dict[str, Any]:
  del args
  return {}


@dataclasses.dataclass(frozen=True)
class Job:
  """A job as `run` and the `Trainer` see it (functions of explicit state).

  A step is a loop step: an eval iteration (act, store, maybe learn, in
  every seed's run) or a meta-step.

  Attributes:
    name: 'eval' or 'meta_train' (recorded in the run's `run.json`).
    config: its settings.
    setup: what it was built from (devices, mesh, environment, agents), for
      users; `run` and the `Trainer` never read it.
    init: `() -> state`, the initial state on the mesh.
    state_shapes: `() -> state` of `jax.ShapeDtypeStruct`s (with their
      shardings): what a checkpoint is restored into; nothing is computed
      or loaded.
    step: `(state, count) -> (state, {name: [count, ...] NumPy})`: `count`
      (<= `steps_per_call`) steps in one compiled call; the state given is
      donated. Raises `RolloutError` or `DivergedError` at the first step
      whose rollout or learning went wrong.
    compile: `(state) -> seconds`: compiles `step` before its first call.
    lower: `(state) -> jax.stages.Lowered` of the compiled program, for
      cost and memory analysis (None: the host steps the environments).
    rows: `(metrics, first_step) -> rows`, `rows_per_step` per step.
    summary: `(state, rows, Timing) -> dict`: the run's figures.
    outputs: `(state, rows, RunDir, lead) -> {name: path}`: plots and the
      rule's file (every process calls it; the `lead` one writes).
    progress: `(rows) -> {name: text}`: the progress bar's figures.
    evaluate: `(state, **kwargs) -> dict` (see the makers).
    rule: `(state) -> params`: the rule's meta-parameters on the host.
    steps_per_call: the most steps of one call.
    rows_per_step: metrics rows per step (an eval job's `num_seeds`).
    warmup: steps before the first learner step (filling a replay buffer).
    description: the progress bar's title.
    host_state: `() -> dict`: JSON-able state kept on the host (a dm_env's
      boards), checkpointed beside the device state.
    load_host_state: `(dict) -> None`: puts it back.
  """

  name: str
  config: Any
  setup: Any
  init: Callable[[], Any]
  state_shapes: Callable[[], Any]
  step: Callable[[Any, int], tuple[Any, dict[str, Any]]]
  compile: Callable[[Any], float]
  lower: Callable[[Any], Any] | None
  rows: Callable[[dict[str, Any], int], Rows]
  summary: Callable[[Any, Rows, Timing], dict[str, Any]]
  outputs: Callable[..., dict[str, Any]]
  progress: Callable[[Rows], dict[str, str]]
  evaluate: Callable[..., dict[str, Any]]
  rule: Callable[[Any], Any]
  steps_per_call: int
  rows_per_step: int = 1
  warmup: int = 0
  description: str = ''
  host_state: Callable[[], dict[str, Any]] = _nothing
  load_host_state: Callable[[dict[str, Any]], Any] = _nothing


def run(job: Job, state, target: int, rows: Rows, *,
        write: Callable[[Rows], None] | None = None,
        save: Callable[[Any, int], None] | None = None,
        checkpoint_every: int = 0,
        on_call: Callable[[Any, Rows], bool] | None = None,
        progress: bool = True, log_every: int = 0
        ) -> tuple[Any, Timing, str | None]:
  """Runs `job` from the step `rows` ends at until `target` steps are done.

  Args:
    job: the job.
    state: its state after the steps `rows` hold (donated to its calls).
    target: the steps the run has in all when this returns (unless
      stopped).
    rows: the run's rows so far; the new ones are appended.
    write: writes new rows (None: not written, e.g. processes but 0).
    save: `save(state, steps)` checkpoints; called every
      `checkpoint_every` steps (rounded up to whole calls; 0: never), not
      after the last call.
    on_call: `on_call(state, new rows)` after every call; True stops.
    progress: show a progress bar (process 0).
    log_every: also print a line about every `log_every` steps (0: never).

  Returns:
    (state, Timing, why it stopped early: the signal's name, 'callback',
    'another process', or None). Safe points, where a stop is seen: before
    compiling, after compiling, after every call.
  """
  done = len(rows) // job.rows_per_step
  timing, start = Timing(), time.perf_counter()
  interrupted = None
  lead = jax.process_index() == 0
  with signals.StopOnSignal() as signal_seen:

    def should_stop(reason: str | None = None) -> bool:
      nonlocal interrupted
      interrupted = interrupted or reason or signal_seen.signal_name
      stop = mesh.any_process(interrupted is not None)
      interrupted = interrupted or ('another process' if stop else None)
      return stop

    compile_s = 0.0
    if done < target and not should_stop():
      compile_s = job.compile(state)
    bar = tqdm.tqdm(total=target, initial=done, desc=job.description,
                    disable=not (progress and lead))
    first = done
    try:
      while done < target and not should_stop():
        count = min(job.steps_per_call, target - done)
        call_start = time.perf_counter()
        state, metrics = job.step(state, count)
        now = time.perf_counter()
        if done > first:
          timing.steady_steps += count
          timing.steady_s += now - call_start
        else:
          timing.first_call_s = now - call_start + compile_s
        new = job.rows(metrics, done)
        rss = metrics_lib.resident_memory_mb()
        for row in new:
          row.update(rss_mb=rss, time_s=now - start)
        if write is not None:
          write(new)
        rows.extend(new)
        done += count
        figures = job.progress(rows)
        bar.update(count)
        bar.set_postfix(figures)
        if log_every and lead and done // log_every != (done - count) // (
            log_every):
          print(f'step {done}/{target} ' + ' '.join(
              f'{k}={v}' for k, v in figures.items()) + f' rss={rss:.0f}MB',
                flush=True)
        if should_stop('callback' if on_call is not None
                       and on_call(state, new) else None):
          break
        if (save is not None and checkpoint_every and done < target
            and done // checkpoint_every != (done - count) // (
                checkpoint_every)):
          save(state, done)
    finally:
      bar.close()
  return state, timing, interrupted
