# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""One object for a run: fit, save, restore, resume.

  trainer = Trainer(EvalConfig(num_steps=500), 'runs/catch')
  summary = trainer.fit()          # metrics.csv, returns.png, checkpoints/
  trainer = Trainer.resume('runs/catch', dict(num_steps=1000))
  trainer.fit()                    # continues from the last checkpoint

The config's type picks the job's maker; the `Trainer` runs the `Job`
with the host loop (`run.run`), checkpoints it (every `checkpoint_every`
steps, at the end, on a signal) and resumes it bit for bit. Every process
makes the same calls; process 0 writes the files. A job's own results:
`eval.evaluate(trainer.job, trainer.state)`, `meta.rule(...)` alike.
"""

from collections.abc import Callable, Sequence
import contextlib
import numbers
import os
import sys
from typing import Any

import jax
import numpy as np

from disco_rl import types
from disco_rl.environments import base as env_base
from disco_rl.jobs import config as config_lib
from disco_rl.jobs import records
from disco_rl.jobs.eval import job as eval_lib
from disco_rl.jobs.meta import config as meta_config
from disco_rl.jobs.meta import job as meta_lib
from disco_rl.runtime import checkpoints as checkpoints_lib
from disco_rl.runtime import host_loop
from disco_rl.runtime import job as job_lib
from disco_rl.runtime import mesh
from disco_rl.runtime import metrics as metrics_lib
from disco_rl.runtime import run_dir as run_dir_lib

# The job each config makes: (its name in run.json, its maker).
JOBS: dict[type[config_lib.RunConfig], tuple[str, Callable[..., job_lib.Job]]]
JOBS = {
  config_lib.EvalConfig: ('eval', eval_lib.make_eval),
  meta_config.MetaTrainConfig: ('meta_train', meta_lib.make_meta_train),
}
CONFIGS = {name: cls for cls, (name, _) in JOBS.items()}
# callback(trainer, new rows) -> True stops the run (e.g. run.stop_when).
Callback = Callable[['Trainer', job_lib.Rows], bool | None]
Directory = str | os.PathLike[str]
# EvalConfig(env='custom')'s environment, or a function of its batch size.
CustomEnv = env_base.Environment | Callable[[int], env_base.Environment]


# The arguments of `Trainer`, `Trainer.resume` and `Trainer.fit` checked by
# type where given: {name: (type, least value or None, may be None)}.
ARGUMENTS: dict[str, tuple[type, int | None, bool]] = {
  'resume': (bool, None, False),
  'overwrite': (bool, None, False),
  'checkpoint_every': (int, 0, True),
  'keep_checkpoints': (int, 1, False),
  'progress': (bool, None, False),
  'log_every': (int, 0, False),
  'num_steps': (int, 1, False),
  'loggers': (list, None, False),
}
_WORDS = {
  bool: 'True or False',
  int: 'an integer',
  list: "a list of logger names (e.g. ['tensorboard'])",
}


def checked_argument(name: str, value: Any) -> Any:
  """`value` of the argument `name` (see `ARGUMENTS`) as the Trainer keeps
  it (a NumPy integer or bool as Python's, loggers as a tuple).

  Raises:
    ValueError: naming the argument, what it must be and the value given
      (no conversion: '5', 5.0 and True are not an integer, 'no' is not
      False, 'tensorboard' is not a list of names), or the least it may be.
  """
  kind, least, optional = ARGUMENTS[name]
  if value is None and optional:
    return None
  is_bool = isinstance(value, (bool, np.bool_))
  if kind is bool:
    ok, kept = is_bool, bool(value) if is_bool else value
  elif kind is int:
    ok = isinstance(value, numbers.Integral) and not is_bool
    kept = int(value) if ok else value
  else:  # Names: any sequence of texts but a text itself.
    ok = isinstance(value, (list, tuple)) and all(
      isinstance(v, str) for v in value
    )
    kept = tuple(value) if ok else value
  if not ok:
    raise ValueError(
      f'{name} must be {_WORDS[kind]}{" or None" if optional else ""}, '
      f'got {value!r} ({type(value).__name__}).'
    )
  if least is not None and kept < least:
    raise ValueError(f'{name} must be >= {least}, got {kept}.')
  return kept


def _check_output_dir(output_dir: Any, optional: bool = True) -> None:
  """Raises ValueError unless `output_dir` is a path (text or
  `os.PathLike`), a `RunDir` or (where `optional`) None."""
  if isinstance(output_dir, (str, os.PathLike, run_dir_lib.RunDir)) or (
    optional and output_dir is None
  ):
    return
  raise ValueError(
    "output_dir must be the run's directory (a path or a RunDir"
    f'{" or None" if optional else ""}), got {output_dir!r} '
    f'({type(output_dir).__name__}).'
  )


def _open_run_dir(
  output_dir: Any, overwrite: bool, resume: bool
) -> run_dir_lib.RunDir | None:
  """The run's `RunDir` (locked by the first process), from a path, a
  `RunDir` or None (nothing is written)."""
  _check_output_dir(output_dir)
  if output_dir is None or isinstance(output_dir, run_dir_lib.RunDir):
    return output_dir
  return run_dir_lib.RunDir(
    output_dir,
    overwrite=overwrite,
    resume=resume,
    lock=jax.process_index() == 0,
  )


def _job_config(
  run_dir: run_dir_lib.RunDir | None, config: Any, resume: bool
) -> config_lib.RunConfig:
  """The job's config: `config`, or with `resume` the run's saved settings
  with those of `config` (a config or a dict) given again."""
  if resume:
    if run_dir is None:
      raise ValueError('resume=True needs the output_dir of the run.')
    config = records.resumed_config(run_dir, config, CONFIGS)
  if not isinstance(config, config_lib.RunConfig) or type(config) not in JOBS:
    raise TypeError(
      'config must be an EvalConfig or a MetaTrainConfig, '
      f'got {type(config).__name__}.'
    )
  return config


def _check_job_arguments(
  name: str,
  config: config_lib.RunConfig,
  run_dir: run_dir_lib.RunDir | None,
  loggers: Sequence[str],
  env: Any,
) -> None:
  """Raises ValueError for loggers without a directory and a custom
  environment for a job other than eval."""
  if loggers and run_dir is None:
    raise ValueError(
      f"loggers {list(loggers)} write into the run's directory: pass "
      'output_dir.'
    )
  if env is not None and name != 'eval':
    raise ValueError(
      "env= is for an EvalConfig run (env='custom'); got a "
      f'{type(config).__name__}.'
    )


class Trainer:
  """Runs a job: fit, checkpoints, resume.

  Attributes:
    config: the run's settings.
    run_dir: the run's directory (`RunDir`; None: nothing is written).
    job: the `Job` (its `setup` holds the devices, agents, environments).
    state: the job's state now (a pytree of arrays on the mesh).
    rows: the metrics rows so far (every process holds them all).
    interrupted: why the last `fit` stopped early, or None.
  """

  def __init__(
    self,
    config: config_lib.RunConfig | dict[str, Any],
    output_dir: Directory | run_dir_lib.RunDir | None = None,
    *,
    rule_params: types.MetaParams | None = None,
    resume: bool = False,
    overwrite: bool = False,
    checkpoint_every: int | None = None,
    keep_checkpoints: int = 3,
    progress: bool = True,
    log_every: int = 0,
    devices: Sequence[jax.Device] | None = None,
    env: CustomEnv | None = None,
    loggers: Sequence[str] = (),
  ) -> None:
    """Builds the job and its state: the initial one, or the resumed one.

    Args:
      config: an `EvalConfig` or a `MetaTrainConfig` (with `resume`, also a
        dict of settings given again; the saved ones fill in the rest).
      output_dir: the run directory (a path or a `RunDir`; None: nothing is
        written); `resume` continues its run (settings as saved but for
        `num_steps`), `overwrite` replaces it.
      rule_params: the rule's meta-parameters (default: see the makers).
      checkpoint_every: save every this many steps (whole calls; None: 10
        times per run; 0: at the end and on signals).
      keep_checkpoints: the checkpoints kept.
      progress: a progress bar.
      log_every: a line every `log_every` steps.
      devices: the devices (default: the config's choice).
      env: eval job only: a `CustomEnv` (built again on resume).
      loggers: live curves besides the CSV: 'tensorboard', 'wandb'.

    Raises:
      ValueError: bad arguments (each checked by type and range where
        given: `checked_argument`), an unusable output directory, a
        resumed run whose settings differ (before anything is built).
    """
    resume = checked_argument('resume', resume)
    overwrite = checked_argument('overwrite', overwrite)
    checkpoint_every = checked_argument('checkpoint_every', checkpoint_every)
    keep_checkpoints = checked_argument('keep_checkpoints', keep_checkpoints)
    progress = checked_argument('progress', progress)
    log_every = checked_argument('log_every', log_every)
    loggers = checked_argument('loggers', loggers)
    self.run_dir = _open_run_dir(output_dir, overwrite, resume)
    self._checkpointer: checkpoints_lib.Checkpointer | None = None
    try:
      config = _job_config(self.run_dir, config, resume)
      name, maker = JOBS[type(config)]
      self.loggers = metrics_lib.check_loggers(loggers)
      _check_job_arguments(name, config, self.run_dir, self.loggers, env)
      custom = {} if env is None else dict(env=env)
      self.config, self.progress, self.log_every = config, progress, log_every
      self.job = maker(
        config, rule_params=rule_params, devices=devices, **custom
      )
      self.checkpoint_every = checkpoint_every
      self.keep_checkpoints = keep_checkpoints
      self._lead = jax.process_index() == 0
      self.interrupted: str | None = None
      self.rows: job_lib.Rows = []
      self.state: Any = None
      mesh.sync('disco_rl: run directory checked')  # Before anything writes.
      if resume:
        self.restore()
      else:
        self.state = self.job.init()
        if self.run_dir is not None and self._lead:
          self.run_dir.start(name, config)
      mesh.sync('disco_rl: run directory ready')
    except BaseException:
      self.close()  # No checkpoint I/O left pending, the lock released.
      raise

  @classmethod
  def resume(
    cls,
    output_dir: Directory | run_dir_lib.RunDir,
    changes: dict[str, Any] | None = None,
    config_cls: type[config_lib.RunConfig] | None = None,
    **kwargs: Any,
  ) -> 'Trainer':
    """Continues the run in `output_dir` as saved; `changes` may raise
    `num_steps`; `config_cls`: the job it must be (default: any)."""
    _check_output_dir(output_dir, optional=False)
    if changes is not None and not isinstance(changes, dict):
      raise ValueError(
        'changes must be a dict of settings (e.g. dict(num_steps=1000)) or '
        f'None, got {changes!r} ({type(changes).__name__}).'
      )
    if config_cls is not None and config_cls not in JOBS:
      raise ValueError(
        'config_cls must be EvalConfig, MetaTrainConfig or None, got '
        f'{config_cls!r}.'
      )
    for name in (ARGUMENTS.keys() - {'num_steps'}) & kwargs.keys():
      # Checked before the run directory's lock is taken.
      kwargs[name] = checked_argument(name, kwargs[name])
    if not isinstance(output_dir, run_dir_lib.RunDir):
      output_dir = run_dir_lib.RunDir(
        output_dir, resume=True, lock=jax.process_index() == 0
      )
    if config_cls is not None:
      try:
        output_dir.saved_settings(JOBS[config_cls][0])  # Raises for another.
      except BaseException:
        output_dir.release()
        raise
    return cls(changes or {}, output_dir, resume=True, **kwargs)

  @property
  def step(self) -> int:  # Loop steps done.
    return host_loop.steps_done(self.rows)

  def _checkpoints(
    self, directory: Directory | None
  ) -> contextlib.AbstractContextManager[checkpoints_lib.Checkpointer]:
    """A context of the run's checkpoints, or a one-off directory's."""
    if directory is not None:
      return contextlib.closing(
        checkpoints_lib.Checkpointer(directory, self.keep_checkpoints)
      )
    if self.run_dir is None:
      raise ValueError('This Trainer has no output_dir: pass a directory.')
    if self._checkpointer is None:
      self._checkpointer = self.run_dir.checkpoints(self.keep_checkpoints)
    return contextlib.nullcontext(self._checkpointer)

  def save(self, directory: Directory | None = None) -> int:
    """Checkpoints the whole state now (default: the run's `checkpoints/`;
    every process calls it). Returns the checkpoint's step."""
    with self._checkpoints(directory) as checkpoints:
      return host_loop.save_checkpoint(
        checkpoints,
        self.job,
        self.state,
        self.rows,
        run_dir_lib.checkpoint_record(self.config),
      )

  def restore(
    self, directory: Directory | None = None, step: int | None = None
  ) -> int:
    """Continues from a checkpoint (default: the run's newest that reads,
    saying so if a damaged one was passed over); the rows after it leave
    `metrics.csv` (they come again, the same). Returns the restored step.

    Raises:
      ValueError: no checkpoint reads; the run's settings differ from
        those the checkpoint recorded; `metrics.csv` does not hold the
        checkpoint's rows whole (each naming the file and the way out).
    """

    def fallback(message: str) -> None:
      if self._lead:
        print(f'note: {message}', file=sys.stderr, flush=True)

    run_dir = self.run_dir

    def rows(step: int, count: int, extra: dict[str, Any]) -> job_lib.Rows:
      if run_dir is None:  # Rows not kept: stand-ins count the steps.
        per_step = max(1, count // max(1, step))
        return [dict(step=i // per_step) for i in range(count)]
      run_dir.check_checkpoint_settings(extra, self.config, step)
      # Every process reads them; process 0 cuts the file (to the rows of
      # the checkpoint resumed), so all read the same.
      return run_dir.rows(count, cut=self._lead, step=step)

    with self._checkpoints(directory) as checkpoints:
      state, step, _, _, kept = host_loop.restore_checkpoint(
        checkpoints, self.job, step, on_fallback=fallback, check=rows
      )
    self.state, self.rows = state, kept
    return self.step

  def fit(
    self, num_steps: int | None = None, callbacks: Sequence[Callback] = ()
  ) -> dict[str, Any]:
    """Trains until `num_steps` steps are done in all (default: the
    config's), writing rows and checkpoints, until a callback returns True
    (`run.stop_when`) or a signal comes; then saves a checkpoint and the
    outputs. Returns the summary (JSON-safe, in `summary.json`) with the
    output paths and `run.Outcome.finished`'s `interrupted`, `completed`
    and `stopped_at_step`."""
    num_steps = checked_argument(
      'num_steps', self.config.num_steps if num_steps is None else num_steps
    )
    target = num_steps + self.job.warmup
    every = self.checkpoint_every
    every = max(1, target // 10) if every is None else every  # The default.
    writers = []
    if self.run_dir is not None and self._lead:
      writers = self.run_dir.writers(self.loggers, self.config)

    def on_call(state: Any, new_rows: job_lib.Rows) -> bool:
      self.state = state
      for writer in writers:
        writer.write_rows(new_rows)
      return any([bool(callback(self, new_rows)) for callback in callbacks])

    def save(state: Any, step: int | None = None) -> None:
      del step
      self.state = state
      for writer in writers:  # The rows it counts on the disk first.
        if isinstance(writer, metrics_lib.MetricsWriter):
          writer.sync()
      self.save()

    def finish(state: Any, timing: job_lib.Timing) -> dict[str, Any]:
      summary = self.job.report.summary(state, self.rows, timing)  # In every
      if self.run_dir is None:  # process: each enters its collectives.
        return summary
      with self._checkpoints(None) as checkpoints:
        if checkpoints.latest_step() != self.step:
          save(state)
      return dict(
        summary,
        **self.job.report.outputs(state, self.rows, self.run_dir, self._lead),
        output_dir=str(self.run_dir.path),
        metrics_csv=str(self.run_dir.file(run_dir_lib.METRICS)),
        checkpoint_step=self.step,
      )

    try:
      outcome = host_loop.run(
        self.job,
        self.state,
        target,
        self.rows,
        save=None if self.run_dir is None else save,
        checkpoint_every=every,
        on_call=on_call,
        finish=finish,
        progress=self.progress,
        log_every=self.log_every,
      )
    finally:
      for writer in writers:
        writer.close()
    self.state, self.interrupted = outcome.state, outcome.interrupted
    if self.run_dir is not None and self._lead:
      return self.run_dir.write_summary(outcome.finished)
    return metrics_lib.json_safe(outcome.finished)

  def close(self) -> None:
    """Finishes pending checkpoint I/O and releases the run directory's
    lock (held from the Trainer's making: no other process writes there)."""
    try:
      if self._checkpointer is not None:
        self._checkpointer.close()
        self._checkpointer = None
    finally:
      if self.run_dir is not None:
        self.run_dir.release()
