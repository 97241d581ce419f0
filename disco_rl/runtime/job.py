# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What a job hands the runtime: its computation and its report.

A `Job` is the one interface the host side knows (`host_loop.run`, the
`Trainer`): how to make the initial state, the compiled call that advances
it and what to checkpoint beside it (the computation, its fields), and
how to turn a call's metrics into rows, figures and files (`Report`).
Every field is a function of explicit state; nothing here knows which job
it is.
"""

from collections.abc import Callable
import dataclasses
from typing import Generic, Protocol, TypeVar

import jax
import numpy as np

from disco_rl.runtime import run_dir as run_dir_lib

StateT = TypeVar('StateT')
SetupT = TypeVar('SetupT')
StateC = TypeVar('StateC', contravariant=True)
# One row per loop step: its `step` and the job's figures.
Row = dict[str, float]
Rows = list[Row]
# A call's outputs by name, [count, ...] NumPy arrays.
Metrics = dict[str, np.ndarray]


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
    return (
      self.steady_steps / self.steady_s if self.steady_steps else float('nan')
    )


class Program(Protocol[StateC]):
  """The compiled program of a job (`compiled.Program`)."""

  def compile(self, state: StateC) -> float:
    """Compiles before the first call; the seconds it took."""
    ...

  def lower(self, state: StateC) -> jax.stages.Lowered:
    """The program lowered (cost and memory analysis)."""
    ...


class HostState(Protocol):
  """State kept on the host (a dm_env's boards), checkpointed beside the
  device state as JSON."""

  def save(self) -> dict[str, str]: ...

  def load(self, saved: dict[str, str]) -> None: ...


@dataclasses.dataclass(frozen=True)
class Report(Generic[StateT]):
  """How a job's metrics become rows, figures and files (on the host).

  Attributes:
    rows: `(metrics, first_step) -> rows` of the steps of one call.
    summary: `(state, rows, Timing) -> figures`: the run's figures (every
      process calls it: it may read sharded state).
    outputs: `(state, rows, RunDir, lead) -> {name: path}`: plots and the
      rule's file (every process calls it; the `lead` one writes).
    progress: `(rows) -> {name: text}`: the progress bar's figures.
    description: the progress bar's title.
  """

  rows: Callable[[Metrics, int], Rows]
  summary: Callable[[StateT, Rows, Timing], dict[str, object]]
  outputs: Callable[[StateT, Rows, run_dir_lib.RunDir, bool], dict[str, str]]
  progress: Callable[[Rows], dict[str, str]]
  description: str = ''


@dataclasses.dataclass(frozen=True)
class Job(Generic[SetupT, StateT]):
  """A job as `run` and the `Trainer` see it: its computation (the fields
  below `setup`) and its `report`.

  A step is a loop step: an eval iteration (act, store, maybe learn, in
  every run of the program) or a meta-step. Every row carries its `step`.

  Attributes:
    name: 'eval' or 'meta_train' (recorded in the run's `run.json`).
    setup: what it was built from (its config, devices, mesh,
      environments, agents); `run` and the `Trainer` never read it; the
      job's module functions (`evaluate`, `rule`) do.
    init: `() -> state`, the initial state on the mesh.
    state_shapes: `() -> state` of `jax.ShapeDtypeStruct`s (with their
      shardings): what a checkpoint is restored into.
    step: `(state, count) -> (state, metrics)`: `count` (<=
      `steps_per_call`) steps in one call; the state given is donated.
      Raises `RolloutError` or `DivergedError` at the first step whose
      rollout or learning went wrong, carrying the call's metrics and
      its steps before that one (`divergence.keep_good`), whose rows
      `run` keeps.
    program: the compiled program (`compile(state)` before the first
      call, `lower(state)` for cost and memory analysis).
    steps_per_call: the most steps of one call.
    report: rows, summary, outputs and progress.
    warmup: loop steps before the job's steps count (an eval job's
      iterations that only fill its replay buffer; 0 for meta-training).
    host_state: state kept on the host, or None.
  """

  name: str
  setup: SetupT
  init: Callable[[], StateT]
  state_shapes: Callable[[], StateT]
  step: Callable[[StateT, int], tuple[StateT, Metrics]]
  program: Program[StateT]
  steps_per_call: int
  report: Report[StateT]
  warmup: int = 0
  host_state: HostState | None = None
