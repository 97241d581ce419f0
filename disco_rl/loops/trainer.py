# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""One object for a run: build from a config, fit, checkpoint, resume.

  trainer = Trainer(EvalConfig(num_steps=500), 'runs/catch')
  summary = trainer.fit()          # metrics.csv, returns.png, checkpoints/

  trainer = Trainer(EvalConfig(num_steps=1000), 'runs/catch', resume=True)
  trainer.fit()                    # continues from the last checkpoint

An `EvalConfig` gives the eval job (an agent trained by a fixed rule), a
`MetaTrainConfig` meta-training. The whole loop state (parameters,
optimisers, the rule's state, actors, environments, replay buffer, key,
step) is checkpointed with orbax every `checkpoint_every` steps, at the end
of `fit`, and when the process gets SIGINT or SIGTERM (the run stops after
the current compiled call, then writes its plots and, for meta-training,
the learned rule). A resumed run gives the same metrics rows and parameters
as one that was never interrupted, bit for bit.

Steps: one row of metrics per loop step (an eval iteration, a meta-step).
`fit(num_steps)` counts learner steps for the eval job (the first
iterations only fill the replay buffer) and meta-steps for meta-training.
"""

from collections.abc import Callable, Sequence
import json
import math
import pathlib
from typing import Any

import jax
import numpy as np

from disco_rl.loops import checkpoint as checkpoint_lib
from disco_rl.loops import config as config_lib
from disco_rl.loops import devices as devices_lib
from disco_rl.loops import driver
from disco_rl.loops import eval_job
from disco_rl.loops import meta_job
from disco_rl.loops import reporting
from disco_rl.loops import run_dir

# callback(trainer, new rows) -> True to stop the run early.
Callback = Callable[['Trainer', list[dict[str, float]]], bool | None]
SUMMARY = 'summary.json'


def _job_for(config):
  if isinstance(config, config_lib.EvalConfig):
    return eval_job.EvalJob
  if isinstance(config, config_lib.MetaTrainConfig):
    return meta_job.MetaTrainJob
  raise TypeError('config must be an EvalConfig or a MetaTrainConfig, got '
                  f'{type(config).__name__}.')


def _json_safe(value):
  """NaN and infinities as None (JSON has no NaN), containers recursed."""
  if isinstance(value, dict):
    return {k: _json_safe(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_json_safe(v) for v in value]
  if isinstance(value, (float, np.floating)):
    return float(value) if math.isfinite(value) else None
  if isinstance(value, np.integer):
    return int(value)
  return value


def _checkpointed(state, rule_params):
  """What a checkpoint holds: the loop state, and the rule's parameters when
  they are apart from it (the eval job's; None for meta-training, whose rule
  is in its state)."""
  return dict(loop=state, rule=rule_params)


# Settings a resumed run may change: they do not change its numbers.
RESUMABLE_CHANGES = ('num_steps',)


def check_same_settings(saved, given, changeable=RESUMABLE_CHANGES) -> None:
  """Raises ValueError naming each setting that differs from the saved run."""
  differ = [f'{name}: saved {getattr(saved, name)!r}, given '
            f'{getattr(given, name)!r}'
            for name in vars(saved) if name not in changeable
            and getattr(saved, name) != getattr(given, name)]
  if differ:
    raise ValueError('A resumed run keeps the settings it was started with; '
                     'these differ: ' + '; '.join(differ) + '.')


def stop_when(metric: str, *, above: float | None = None,
              below: float | None = None, window: int = 1) -> Callback:
  """A callback that stops `fit` when a metric's recent mean crosses a bound.

  Args:
    metric: a metrics column, e.g. 'avg_return' or 'pos_rewards'.
    above: stop once the mean of the last `window` steps' rows is >=
      `above` (with `num_seeds` runs, the rows of all runs).
    below: stop once it is <= `below`.
    window: steps averaged (NaN rows skipped).
  """
  if (above is None) == (below is None):
    raise ValueError('stop_when needs exactly one of above= or below=.')
  if window < 1:
    raise ValueError(f'window must be >= 1, got {window}.')

  def callback(trainer: 'Trainer', new_rows) -> bool:
    del new_rows
    count = window * trainer.job.rows_per_step
    values = np.asarray([r[metric] for r in trainer.rows[-count:]], float)
    if len(values) < count or not np.isfinite(values).any():
      return False
    mean = float(np.nanmean(values))
    return mean >= above if above is not None else mean <= below

  return callback


class Trainer:
  """Runs an eval or meta-training job: fit, checkpoints, resume, outputs.

  Attributes:
    config: the run's settings.
    output_dir: where its files go (None: nothing is written).
    job: the job (`EvalJob` or `MetaTrainJob`) with its compiled loop.
    state: the loop state now (a pytree of arrays on the mesh).
    rows: the metrics rows so far, `job.rows_per_step` per loop step (one
      per run of an eval job's `num_seeds`).
  """

  def __init__(self, config, output_dir=None, *, rule_params=None,
               resume: bool = False, overwrite: bool = False,
               checkpoint_every: int | None = None, keep_checkpoints: int = 3,
               progress: bool = True, log_every: int = 0, devices=None,
               env=None):
    """Builds the job and its initial state (or the resumed one).

    Args:
      config: an `EvalConfig` or a `MetaTrainConfig`.
      output_dir: the run directory (metrics, plots, checkpoints); None
        writes nothing (checkpoints then need `save(directory)`).
      rule_params: meta-parameters of the rule (default: see the job).
      resume: continue the run in `output_dir` from its last checkpoint;
        `config` must equal the run's saved settings but for `num_steps`.
      overwrite: replace a run already in `output_dir`.
      checkpoint_every: save every this many loop steps (rounded up to whole
        calls); None: 10 times per run; 0: only at the end and on signals.
      keep_checkpoints: how many checkpoints to keep.
      progress: show a progress bar (process 0).
      log_every: print a line about every `log_every` steps (0: never).
      devices: the devices to use (default: the config's choice).
      env: eval job only: the jittable `Environment` of
        `EvalConfig(env='custom')`, or a function of `batch_size` that
        builds it (called with one device's share of the environments);
        see `disco_rl.examples.custom_env`. Give it again on resume.

    Raises:
      ValueError: bad settings, an output directory that cannot be used, a
        resumed run whose settings differ (nothing is created then).
    """
    job_cls = _job_for(config)  # The config checked itself when made.
    if checkpoint_every is not None and checkpoint_every < 0:
      raise ValueError(f'checkpoint_every must be >= 0, got '
                       f'{checkpoint_every}.')
    self.config = config
    self.output_dir = None
    self._lead = jax.process_index() == 0
    if output_dir is not None:
      # Every check before anything is built or created.
      path = run_dir.check(output_dir, overwrite=overwrite, resume=resume)
      if resume:
        check_same_settings(
            run_dir.read_settings(path, job_cls.name, type(config)), config)
      self.output_dir = path
    elif resume:
      raise ValueError('resume=True needs the output_dir of the run.')
    if env is not None and not isinstance(config, config_lib.EvalConfig):
      raise ValueError('env= is for an EvalConfig run (env=\'custom\'); '
                       f'got a {type(config).__name__}.')
    env_arg = {} if env is None else dict(env=env)
    self.job = job_cls(config, rule_params=rule_params, devices=devices,
                       restoring=resume, **env_arg)
    self.progress, self.log_every = progress, log_every
    self.checkpoint_every = checkpoint_every
    self.keep_checkpoints = keep_checkpoints
    self.state = self.job.init()
    self.rows: list[dict[str, float]] = []
    self._checkpointer = None
    self.interrupted: str | None = None
    if self.output_dir is not None:
      if resume:
        try:
          self.restore()
        except BaseException:
          self.close()  # No checkpoint I/O left pending at exit.
          raise
      else:
        run_dir.prepare(self.output_dir, overwrite=overwrite)
        if self._lead:
          run_dir.write_settings(self.output_dir, job_cls.name, config)

  @property
  def loop(self):
    """The compiled loop (`EvalLoop`, `HostEvalLoop` or `MetaTrainLoop`)."""
    return self.job.loop

  # -- Progress ---------------------------------------------------------------

  @property
  def step(self) -> int:
    """Loop steps done."""
    return len(self.rows) // self.job.rows_per_step

  @property
  def learner_steps(self) -> int:
    """Learner steps (eval) or meta-steps done."""
    return self.job.learner_steps(self.step)

  # -- Checkpoints -----------------------------------------------------------

  def _checkpoints(self, directory=None) -> checkpoint_lib.Checkpointer:
    if directory is not None:
      return checkpoint_lib.Checkpointer(directory, self.keep_checkpoints)
    if self.output_dir is None:
      raise ValueError('This Trainer has no output_dir: pass a directory.')
    if self._checkpointer is None:
      self._checkpointer = checkpoint_lib.Checkpointer(
          self.output_dir / run_dir.CHECKPOINTS, self.keep_checkpoints)
    return self._checkpointer

  def save(self, directory=None) -> int:
    """Checkpoints the whole state now (default: `output_dir/checkpoints`).

    Returns:
      The checkpoint's step (loop steps done).
    """
    extra = dict(rows=len(self.rows), **self.job.host_state())
    checkpoints = self._checkpoints(directory)
    try:
      checkpoints.save(self.step, self._saved_state(), extra)
    finally:
      if directory is not None:  # A one-off directory: release its manager.
        checkpoints.close()
    return self.step

  def _saved_state(self):
    """The loop state and the rule's parameters when they are apart from it."""
    return _checkpointed(self.state, self.job.rule_params)

  def restore(self, directory=None, step: int | None = None) -> int:
    """Continues from a checkpoint (default: the latest in `output_dir`).

    The metrics rows after the checkpoint are dropped from `metrics.csv`
    (they will be computed again, identically).

    Returns:
      The restored step.
    """
    checkpoints = self._checkpoints(directory)
    target = checkpoint_lib.abstract_like(self._saved_state())
    try:
      saved, extra = checkpoints.restore(target, step)
    finally:
      if directory is not None:
        checkpoints.close()
    self.state = saved['loop']
    if saved['rule'] is not None:
      self.job.rule_params = saved['rule']
    self.job.set_host_state(extra)
    count = int(extra['rows'])
    if self.output_dir is not None and self._lead:
      self.rows = reporting.keep_rows(self.output_dir / run_dir.METRICS,
                                      count)
    else:  # Only process 0 keeps the rows: stand-ins count them.
      self.rows = [dict(row=i) for i in range(count)]
    return self.step

  # -- Running ---------------------------------------------------------------

  def _checkpoint_due(self, done: int, count: int) -> bool:
    every = self.checkpoint_every
    if every is None:
      every = max(1, self.job.iterations(self.config.num_steps) // 10)
    return bool(every) and done // every != (done - count) // every

  def fit(self, num_steps: int | None = None,
          callbacks: Sequence[Callback] = ()) -> dict[str, Any]:
    """Trains until `num_steps` steps are done in all (default: config's).

    Writes the metrics rows as they come, checkpoints on schedule, and stops
    early when a callback returns True or a SIGINT/SIGTERM arrives; then
    (and at the end) saves a checkpoint, the plots and the job's outputs.

    Args:
      num_steps: learner steps (eval) or meta-steps (meta-training) the run
        has in all when `fit` returns.
      callbacks: `callback(trainer, new_rows)` after every compiled call;
        True stops the run (e.g. `stop_when('avg_return', above=0.9)`).

    Returns:
      The job's summary (JSON-safe: NaN as None), with `interrupted` (the
      signal's name, 'callback', 'another process' or None), `completed`
      (all `num_steps` done), `stopped_at_step` (the steps done, when
      interrupted) and the output paths; also written to
      `output_dir/summary.json`. A signal stops the run at the first safe
      point: before compiling, after compiling (before any step), or after
      the compiled call that was running.
    """
    num_steps = self.config.num_steps if num_steps is None else num_steps
    if num_steps < 1:
      raise ValueError(f'num_steps must be >= 1, got {num_steps}.')
    target = self.job.iterations(num_steps)
    self.interrupted = None
    writer = None
    if self.output_dir is not None and self._lead:
      writer = reporting.MetricsWriter(self.output_dir / run_dir.METRICS,
                                       append=True)
    first = self.step

    def stop_requested() -> bool:
      """Whether a callback or a signal asks to stop (any process)."""
      if signals.signal_name and self.interrupted is None:
        self.interrupted = signals.signal_name
      stop = devices_lib.any_process(self.interrupted is not None)
      if stop and self.interrupted is None:
        self.interrupted = 'another process'
      return stop

    def after_call(state, new_rows, rows) -> bool:
      self.state = state
      self.rows.extend(new_rows)
      del rows
      stop = False
      for callback in callbacks:
        stop = bool(callback(self, new_rows)) or stop
      if stop:
        self.interrupted = 'callback'
      stop = stop_requested()
      if (self.output_dir is not None and not stop
          and self._checkpoint_due(self.step,
                                   len(new_rows) // self.job.rows_per_step)
          and self.step < target):
        self.save()
      return stop

    timing = driver.Timing()
    try:
      with driver.StopOnSignal() as signals:
        # Safe points before any step: a signal during start-up (building,
        # restoring) or compilation stops the run here.
        compile_s = 0.0
        if self.step < target and not stop_requested():
          compile_s = self.job.compile(self.state)
        if self.step < target and not stop_requested():
          _, _, timing = driver.drive(
              self.job.run, self.state, target, self.job.steps_per_call,
              self.job.to_rows, writer, self.job.description, self.progress,
              postfix=self.job.postfix,
              log_every=self.log_every, first_step=first,
              after_call=after_call)
          timing.first_call_s += compile_s
        return self._finish(timing, target, signals)
    finally:
      if writer is not None:
        writer.close()

  def _finish(self, timing: driver.Timing, target: int,
              signals: driver.StopOnSignal) -> dict[str, Any]:
    """Final checkpoint, outputs and summary (process 0's is complete).

    `stopped_at_step` (learner or meta-steps done) is in the summary
    whenever `interrupted` is set, also when the stop came after the last
    step. A signal that arrives while the outputs are written is reported
    too.
    """
    summary = (self.job.summary(self.state, self.rows, timing) if self._lead
               else {})
    if self.output_dir is not None:
      if self._checkpoints().latest_step() != self.step:
        self.save()
      summary.update(self.job.write_outputs(self.state, self.rows,
                                            self.output_dir, self._lead))
      summary['output_dir'] = str(self.output_dir)
      summary['metrics_csv'] = str(self.output_dir / run_dir.METRICS)
      summary['checkpoint_step'] = self.step
    if signals.signal_name and self.interrupted is None:
      # It came after the last call, while the outputs were written.
      self.interrupted = signals.signal_name
    summary['interrupted'] = self.interrupted
    summary['completed'] = self.step >= target
    if self.interrupted is not None:
      summary['stopped_at_step'] = self.learner_steps
    summary = _json_safe(summary)
    if self.output_dir is not None and self._lead:
      (self.output_dir / SUMMARY).write_text(
          json.dumps(summary, indent=2, allow_nan=False) + '\n')
    return summary

  def evaluate(self, params=None, env=None, **kwargs) -> dict[str, Any]:
    """Evaluates without changing the run.

    Eval job: the agent's policy (default: its current parameters) acting in
    `env` (a jittable Environment; default: the run's board) without
    learning: {'avg_return', 'episodes'}; `num_rollouts`, `seed`.
    Meta-training: a fresh agent trained by the rule (default: the current
    one) under `env` (an `EvalConfig`; default 200 learner steps on the
    run's board): that eval run's summary.
    """
    if isinstance(self.job, meta_job.MetaTrainJob):
      params, config = self.job.rule_eval_config(self.state, params, env)
      kwargs.setdefault('progress', False)
      return Trainer(config, rule_params=params, **kwargs).fit()
    return self.job.evaluate(self.state, params, env, **kwargs)

  def close(self) -> None:
    if self._checkpointer is not None:
      self._checkpointer.close()
      self._checkpointer = None


def read_rule(output_dir, step: int | None = None
              ) -> tuple[dict[str, dict[str, np.ndarray]], int]:
  """A meta-training run's rule as it was at one of its checkpoints.

  Reads only: nothing in `output_dir` changes (resuming from an earlier
  checkpoint would drop the metrics rows after it), and no rule file is
  loaded (the checkpoint holds the rule).

    params, step = read_rule('runs/meta_train', step=750)
    meta_objective.save_params(params, 'rule_750.npz')

  Args:
    output_dir: the directory of a meta-training run (finished, interrupted
      or still running).
    step: the checkpoint's meta-step (default: the latest checkpoint).

  Returns:
    The rule's meta-parameters as NumPy arrays, {module: {name: array}} (the
    layout of `disco_103.npz` and of the run's `update_rule_params.npz`),
    and the checkpoint's meta-step.

  Raises:
    ValueError: `output_dir` holds no run, or an eval run.
    FileNotFoundError: the run has no checkpoint `step` (the message lists
      the ones it has) or none at all.
  """
  path = pathlib.Path(output_dir).expanduser().absolute()
  if not (path / run_dir.SETTINGS).is_file():
    raise ValueError(f'No run in {path}: it has no {run_dir.SETTINGS} (the '
                     'record every run writes when it starts).')
  config = run_dir.read_settings(path, meta_job.MetaTrainJob.name,
                                 config_lib.MetaTrainConfig)
  if not (path / run_dir.CHECKPOINTS).is_dir():
    raise FileNotFoundError(f'No checkpoint in {path}: the run has no '
                            f'{run_dir.CHECKPOINTS}/ directory.')
  job = meta_job.MetaTrainJob(config, restoring=True)
  checkpoints = checkpoint_lib.Checkpointer(path / run_dir.CHECKPOINTS)
  try:
    if step is None:
      step = checkpoints.latest_step()
    saved, _ = checkpoints.restore(checkpoint_lib.abstract_like(
        _checkpointed(job.init(), job.rule_params)), step)
  finally:
    checkpoints.close()
  return job.loop.params(saved['loop']), int(step)


def run_eval(config: config_lib.EvalConfig, output_dir, rule_params=None,
             progress: bool = True, log_every: int = 0, **trainer_args
             ) -> dict[str, Any]:
  """Trains an agent with the configured rule; writes metrics and a plot.

  `Trainer(config, output_dir, ...).fit()`.

  Args:
    config: the run's settings (`num_steps` learner steps).
    output_dir: where `metrics.csv`, `returns.png` and checkpoints go
      (process 0 writes the files); it must not hold another run unless
      `overwrite=True` or `resume=True` is passed.
    rule_params: the rule's meta-parameters; default: the Disco103 weights
      (found by `disco_rl.weights`) for 'disco_103', none needed otherwise.
    progress: show a tqdm progress bar (in process 0).
    log_every: also print a line about every `log_every` steps (0: never).
    **trainer_args: more `Trainer` arguments (overwrite, resume,
      checkpoint_every, ...).

  Returns:
    The summary of `EvalJob.summary` and the output paths.
  """
  return Trainer(config, output_dir, rule_params=rule_params,
                 progress=progress, log_every=log_every, **trainer_args).fit()


def run_meta_train(config: config_lib.MetaTrainConfig, output_dir,
                   progress: bool = True, update_rule_params=None,
                   **trainer_args) -> dict[str, Any]:
  """Meta-trains a rule; writes metrics.csv, plots and the learned rule.

  `Trainer(config, output_dir, ...).fit()`.

  Returns:
    The summary of `MetaTrainJob.summary` and the output paths (process 0
    writes the files).
  """
  return Trainer(config, output_dir, rule_params=update_rule_params,
                 progress=progress, **trainer_args).fit()
