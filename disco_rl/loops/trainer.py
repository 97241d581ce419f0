# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""One object for a run: fit, save, restore, resume.

  trainer = Trainer(EvalConfig(num_steps=500), 'runs/catch')
  summary = trainer.fit()          # metrics.csv, returns.png, checkpoints/

  trainer = Trainer.resume('runs/catch', dict(num_steps=1000))
  trainer.fit()                    # continues from the last checkpoint

The config says the job (`make_eval` for an `EvalConfig`, `make_meta_train`
for a `MetaTrainConfig`); the `Trainer` runs the `Job` it gets with the one
host loop (`run.run`) and knows nothing else about it. The whole state is
checkpointed every `checkpoint_every` steps, at the end of `fit`, and when a
signal stops the run (`disco_rl.signals`); a resumed run gives the same
metrics rows and state as one never interrupted, bit for bit. With several
processes every process makes the same calls (each collective is entered by
all); process 0 writes the rows, plots and summary.

Steps: one loop step is an eval iteration (of every run in the program) or
a meta-step. `fit(num_steps)` counts learner steps for the eval job (its
first iterations only fill the replay buffer) and meta-steps for
meta-training. A job's own results: `eval.evaluate(trainer.job,
trainer.state)`, `meta.rule(trainer.job, trainer.state)`, ...
"""

from collections.abc import Callable, Mapping, Sequence
import dataclasses
from typing import Any

import jax
import numpy as np

from disco_rl.loops import config as config_lib
from disco_rl.loops import eval as eval_lib
from disco_rl.loops import mesh
from disco_rl.loops import meta as meta_lib
from disco_rl.loops import run as run_lib
from disco_rl.loops import run_dir as run_dir_lib
from disco_rl import metrics as metrics_lib

# The job each config makes: (its name in run.json, its maker).
JOBS = {config_lib.EvalConfig: ('eval', eval_lib.make_eval),
        config_lib.MetaTrainConfig: ('meta_train', meta_lib.make_meta_train)}
CONFIGS = {name: cls for cls, (name, _) in JOBS.items()}
# callback(trainer, new rows) -> True to stop the run early.
Callback = Callable[['Trainer', run_lib.Rows], bool | None]


def stop_when(metric: str, *, above: float | None = None,
              below: float | None = None, window: int = 1) -> Callback:
  """A callback that stops `fit` when a metric's recent mean crosses a bound.

  Args:
    metric: a metrics column, e.g. 'avg_return' or 'pos_rewards'.
    above: stop once the mean of the last `window` steps' rows (of every
      run in the program) is >= `above`.
    below: stop once it is <= `below`.
    window: steps averaged (NaN rows skipped).
  """
  if (above is None) == (below is None):
    raise ValueError('stop_when needs exactly one of above= or below=.')
  if window < 1:
    raise ValueError(f'window must be >= 1, got {window}.')

  def callback(trainer: 'Trainer', new_rows) -> bool:
    del new_rows
    first = trainer.step - window
    if first < 0:
      return False
    values = np.asarray([r[metric] for r in trainer.rows
                         if r['step'] >= first], float)
    if not np.isfinite(values).any():
      return False
    mean = float(np.nanmean(values))
    return mean >= above if above is not None else mean <= below

  return callback


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

  def __init__(self, config, output_dir=None, *, rule_params=None,
               resume: bool = False, overwrite: bool = False,
               checkpoint_every: int | None = None, keep_checkpoints: int = 3,
               progress: bool = True, log_every: int = 0, devices=None,
               env=None, loggers: Sequence[str] = ()):
    """Builds the job and its state: the initial one, or the resumed one.

    Args:
      config: an `EvalConfig` or a `MetaTrainConfig`; with `resume`, also a
        dict of settings given again (the saved ones fill in the rest).
      output_dir: the run directory (a path or a `RunDir`); None writes
        nothing (checkpoints then need `save(directory)`).
      rule_params: the rule's meta-parameters (default: see the makers).
      resume: continue the run in `output_dir` from its last checkpoint;
        the settings given must equal the saved ones but for `num_steps`.
      overwrite: replace a run already in `output_dir`.
      checkpoint_every: save every this many steps (rounded up to whole
        calls); None: 10 times per run; 0: only at the end and on signals.
      keep_checkpoints: how many checkpoints to keep.
      progress: show a progress bar (process 0).
      log_every: print a line about every `log_every` steps (0: never).
      devices: the devices to use (default: the config's choice).
      env: eval job only: the jittable Environment of
        `EvalConfig(env='custom')`, or a function of `batch_size` that
        builds it; give it again on resume.
      loggers: live curves besides the CSV: 'tensorboard' (event files in
        `output_dir/tensorboard`) and 'wandb' (offline in `output_dir/wandb`
        unless `$WANDB_MODE` says otherwise); each needs its extra.

    Raises:
      ValueError: bad arguments, an output directory that cannot be used,
        a resumed run whose settings differ (all before anything is built).
    """
    for name, value, least in (('checkpoint_every', checkpoint_every, 0),
                               ('keep_checkpoints', keep_checkpoints, 1)):
      if value is not None and value < least:
        raise ValueError(f'{name} must be >= {least}, got {value}.')
    self.run_dir = output_dir
    if output_dir is not None and not isinstance(output_dir,
                                                 run_dir_lib.RunDir):
      self.run_dir = run_dir_lib.RunDir(output_dir, overwrite=overwrite,
                                        resume=resume)
    if resume and self.run_dir is None:
      raise ValueError('resume=True needs the output_dir of the run.')
    if resume:
      config = self._resumed_config(config)
    if type(config) not in JOBS:
      raise TypeError('config must be an EvalConfig or a MetaTrainConfig, '
                      f'got {type(config).__name__}.')
    name, maker = JOBS[type(config)]
    self.loggers = metrics_lib.check_loggers(loggers)
    if self.loggers and self.run_dir is None:
      raise ValueError(f'loggers {list(self.loggers)} write into the run\'s '
                       'directory: pass output_dir.')
    if env is not None and name != 'eval':
      raise ValueError("env= is for an EvalConfig run (env='custom'); got a "
                       f'{type(config).__name__}.')
    self.config = config
    self.job = maker(config, rule_params=rule_params, devices=devices,
                     **({} if env is None else dict(env=env)))
    self.progress, self.log_every = progress, log_every
    self.checkpoint_every, self.keep_checkpoints = (checkpoint_every,
                                                    keep_checkpoints)
    self._lead = jax.process_index() == 0
    self._checkpointer = None
    self.interrupted: str | None = None
    self.rows: run_lib.Rows = []
    mesh.sync('disco_rl: run directory checked')  # Before anything writes.
    if resume:
      try:
        self.restore()
      except BaseException:
        self.close()  # No checkpoint I/O left pending at exit.
        raise
    else:
      self.state = self.job.init()
      if self.run_dir is not None and self._lead:
        self.run_dir.start(name, config)
    mesh.sync('disco_rl: run directory ready')

  def _resumed_config(self, given):
    """The resumed run's config: the saved settings, checked (once) against
    those `given` (a config or a dict)."""
    if isinstance(given, Mapping):
      name = self.run_dir.record()[0]
      if name not in CONFIGS:
        raise ValueError(f'{self.run_dir.path} holds a {name!r} run, which '
                         'this version cannot resume.')
      cls, given = CONFIGS[name], dict(given)
    else:
      cls = type(given)
      name = JOBS[cls][0] if cls in JOBS else None
      given = {f.name: getattr(given, f.name)
               for f in dataclasses.fields(given)}
    saved = config_lib.upgrade_settings(cls, self.run_dir.saved_settings(
        name))
    self.run_dir.check_same_settings(saved, given)
    return cls(**{**saved, **given})

  @classmethod
  def resume(cls, output_dir, changes: dict[str, Any] | None = None,
             config_cls=None, **kwargs) -> 'Trainer':
    """Continues the run in `output_dir` with the settings it was started
    with; `changes` may raise `num_steps`; `config_cls`: the job the run
    must be (default: whichever it is)."""
    run_dir = output_dir if isinstance(output_dir, run_dir_lib.RunDir) else (
        run_dir_lib.RunDir(output_dir, resume=True))
    if config_cls is not None:
      run_dir.saved_settings(JOBS[config_cls][0])  # Raises for another job.
    return cls(changes or {}, run_dir, resume=True, **kwargs)

  @property
  def output_dir(self):
    """The run directory's path (None: nothing is written)."""
    return None if self.run_dir is None else self.run_dir.path

  @property
  def step(self) -> int:
    """Loop steps done."""
    return run_lib.steps_done(self.rows)

  @property
  def learner_steps(self) -> int:
    """Learner steps (eval) or meta-steps done."""
    return max(0, self.step - self.job.warmup)

  # -- Checkpoints. ----------------------------------------------------------

  def _checkpoints(self, directory=None) -> run_dir_lib.Checkpointer:
    if directory is not None:
      return run_dir_lib.Checkpointer(directory, self.keep_checkpoints)
    if self.run_dir is None:
      raise ValueError('This Trainer has no output_dir: pass a directory.')
    if self._checkpointer is None:
      self._checkpointer = self.run_dir.checkpoints(self.keep_checkpoints)
    return self._checkpointer

  def save(self, directory=None) -> int:
    """Checkpoints the whole state now (default: the run's `checkpoints/`;
    every process calls it). Returns the checkpoint's step."""
    checkpoints = self._checkpoints(directory)
    host = self.job.host_state
    try:
      checkpoints.save(self.step, self.state, dict(
          rows=len(self.rows), **(host.save() if host else {})))
    finally:
      if directory is not None:  # A one-off directory: release its manager.
        checkpoints.close()
    return self.step

  def restore(self, directory=None, step: int | None = None) -> int:
    """Continues from a checkpoint (default: the latest of the run). The
    metrics rows after it are dropped from `metrics.csv` (they will be
    computed again, identically). Returns the restored step."""
    checkpoints = self._checkpoints(directory)
    try:
      step = checkpoints.latest_step() if step is None else step
      self.state, extra = checkpoints.restore(self.job.state_shapes(), step)
    finally:
      if directory is not None:
        checkpoints.close()
    if self.job.host_state is not None:
      self.job.host_state.load(extra)
    count = int(extra['rows'])
    if self.run_dir is None:  # Rows not kept: stand-ins count the steps.
      per_step = max(1, count // max(1, step))
      self.rows = [dict(step=i // per_step) for i in range(count)]
    else:  # Every process reads them; process 0 also cuts the file (whole
      # or not at all), so all read the same first `count` rows.
      self.rows = metrics_lib.read_rows(
          self.run_dir.file(run_dir_lib.METRICS), count, cut=self._lead)
    return self.step

  # -- Running. ---------------------------------------------------------------

  def fit(self, num_steps: int | None = None,
          callbacks: Sequence[Callback] = ()) -> dict[str, Any]:
    """Trains until `num_steps` steps are done in all (default: config's).

    Writes the metrics rows as they come, checkpoints on schedule, and stops
    early when a callback returns True or a SIGINT/SIGTERM arrives (in any
    process); then (and at the end) saves a checkpoint and the outputs.

    Args:
      num_steps: learner steps (eval) or meta-steps the run has in all when
        `fit` returns.
      callbacks: `callback(trainer, new_rows)` after every compiled call;
        True stops the run (e.g. `stop_when('avg_return', above=0.9)`).

    Returns:
      The job's summary (JSON-safe: NaN as None) with `interrupted` (the
      signal's name, 'callback' or None), `completed`, `stopped_at_step`
      (when interrupted) and the output paths; also written to the run's
      `summary.json`.
    """
    num_steps = self.config.num_steps if num_steps is None else num_steps
    if num_steps < 1:
      raise ValueError(f'num_steps must be >= 1, got {num_steps}.')
    target = num_steps + self.job.warmup
    every = self.checkpoint_every
    if every is None:
      every = max(1, target // 10)
    writers = []
    if self.run_dir is not None and self._lead:
      writers.append(metrics_lib.MetricsWriter(
          self.run_dir.file(run_dir_lib.METRICS), append=True))
      writers += [metrics_lib.make_writer(
          logger, self.run_dir.path, self.run_dir.path.name,
          dataclasses.asdict(self.config)) for logger in self.loggers]

    def write(rows):
      for writer in writers:
        writer.write_rows(rows)

    def on_call(state, new_rows) -> bool:
      self.state = state
      return any([bool(callback(self, new_rows)) for callback in callbacks])

    def save(state, step):
      del step
      self.state = state
      self.save()

    def finish(state, timing):
      """The final checkpoint, the outputs and the job's summary (every
      process: each may enter collectives)."""
      self.state = state
      summary = self.job.summary(state, self.rows, timing)
      if self.run_dir is not None:
        if self._checkpoints().latest_step() != self.step:
          self.save()
        summary.update(self.job.outputs(state, self.rows, self.run_dir,
                                        self._lead))
        summary.update(output_dir=str(self.run_dir.path),
                       metrics_csv=str(self.run_dir.file(
                           run_dir_lib.METRICS)),
                       checkpoint_step=self.step)
      return summary

    try:
      outcome = run_lib.run(
          self.job, self.state, target, self.rows,
          write=write if writers else None,
          save=None if self.run_dir is None else save,
          checkpoint_every=every, on_call=on_call, finish=finish,
          progress=self.progress, log_every=self.log_every)
    finally:
      for writer in writers:
        writer.close()
    self.state, self.interrupted = outcome.state, outcome.interrupted
    summary = dict(outcome.finished, interrupted=self.interrupted,
                   completed=self.step >= target)
    if self.interrupted is not None:
      summary['stopped_at_step'] = self.learner_steps
    if self.run_dir is not None and self._lead:
      return self.run_dir.write_summary(summary)
    return run_dir_lib.json_safe(summary)

  def close(self) -> None:
    if self._checkpointer is not None:
      self._checkpointer.close()
      self._checkpointer = None


def read_rule(output_dir, step: int | None = None
              ) -> tuple[dict[str, dict[str, np.ndarray]], int]:
  """A meta-training run's rule at one of its checkpoints, read only:
  nothing in `output_dir` changes.

    params, step = read_rule('runs/meta_train', step=750)

  Returns:
    The rule's meta-parameters as NumPy arrays, {module: {name: array}} (the
    layout of `disco_103.npz`), and the checkpoint's meta-step.

  Raises:
    ValueError: `output_dir` holds no run, or an eval run.
    FileNotFoundError: the run has no checkpoint `step` (the message lists
      the ones it has) or none at all.
  """
  run_dir = run_dir_lib.RunDir(output_dir, read_only=True)
  config = config_lib.MetaTrainConfig(**config_lib.upgrade_settings(
      config_lib.MetaTrainConfig, run_dir.saved_settings('meta_train')))
  if not run_dir.file(run_dir_lib.CHECKPOINTS).is_dir():
    raise FileNotFoundError(f'No checkpoint in {run_dir.path}: the run has '
                            f'no {run_dir_lib.CHECKPOINTS}/ directory.')
  job = meta_lib.make_meta_train(config)
  checkpoints = run_dir.checkpoints()
  try:
    state, _ = checkpoints.restore(job.state_shapes(), step)
    step = checkpoints.latest_step() if step is None else step
  finally:
    checkpoints.close()
  return meta_lib.rule(job, state), int(step)
