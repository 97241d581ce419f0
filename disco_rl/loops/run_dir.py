# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A run's directory: every file in it, when it may be written, checkpoints.

A run directory holds `run.json` (the job and its settings), `metrics.csv`,
`summary.json`, plots (`*.png`), `checkpoints/` and, for meta-training, the
learned rule. `RunDir` owns all of it: the names, the checks (made once,
when it is made, before anything is created), the settings record and the
checkpoints. A directory that holds a run is never written over unless the
caller says so (`overwrite=True`: the previous run's files are removed
first, nothing else) or continues that run (`resume=True`).

Checkpoints (`Checkpointer`) hold a job's whole state (a pytree of
`jax.Array`s, sharded over the mesh as it is) and a small JSON record
(`extra`: the metrics rows written, a host environment's pickled state).
orbax writes each into a temporary directory and renames it when complete,
so a process killed while writing leaves the previous one usable. Every
process of a multi-process run takes part in `save` and `restore`.
"""

import base64
import dataclasses
import json
import math
import pathlib
import pickle
import shutil
import tempfile
from typing import Any

import jax
import numpy as np

SETTINGS = 'run.json'
METRICS = 'metrics.csv'
SUMMARY = 'summary.json'
CHECKPOINTS = 'checkpoints'
RULE = 'update_rule_params.npz'
# What a run writes (removed by overwrite=True; nothing else is touched).
_RUN_FILES = (SETTINGS, METRICS, SUMMARY, CHECKPOINTS, RULE)
_PLOTS = '*.png'
_SYSTEM_ROOTS = ('/proc', '/sys', '/dev')
# Settings a resumed run may change: they do not change its numbers.
RESUMABLE_CHANGES = ('num_steps',)


def check_writable(path) -> pathlib.Path:
  """The absolute path, if a directory can be created or written there.

  Raises:
    ValueError: naming the path if it is a file, lies under a system
      directory (/proc, /sys, /dev) or cannot be written.
  """
  path = pathlib.Path(path).expanduser().absolute()
  if any(path == pathlib.Path(root) or pathlib.Path(root) in path.parents
         for root in _SYSTEM_ROOTS):
    raise ValueError(f'output directory {path} is inside a system directory '
                     f'({", ".join(_SYSTEM_ROOTS)}); expected a directory '
                     'for run files.')
  if path.exists() and not path.is_dir():
    raise ValueError(f'output directory {path} is a file; expected a '
                     'directory (or a path that does not exist yet).')
  existing = path
  while not existing.exists():
    existing = existing.parent
  if not existing.is_dir():
    raise ValueError(f'output directory {path} cannot be created: '
                     f'{existing} is a file.')
  try:  # Root passes os.access everywhere: write a probe file instead.
    with tempfile.TemporaryFile(dir=existing):
      pass
  except OSError as e:
    raise ValueError(f'output directory {path} cannot be written: '
                     f'{existing}: {e.strerror or e}.') from None
  return path


def json_safe(value):
  """NaN and infinities as None (JSON has no NaN), containers recursed."""
  if isinstance(value, dict):
    return {k: json_safe(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [json_safe(v) for v in value]
  if isinstance(value, (float, np.floating)):
    return float(value) if math.isfinite(value) else None
  if isinstance(value, np.integer):
    return int(value)
  return value


class RunDir:
  """One run's directory (see the module's docstring).

  Attributes:
    path: the absolute path.
    resume: whether the run there is being continued.
  """

  def __init__(self, path, *, overwrite: bool = False, resume: bool = False,
               read_only: bool = False):
    """Checks, changing nothing, that `path` can take a new or resumed run
    (`read_only`: that it holds a run to read).

    Raises:
      ValueError: if the path cannot be used (`check_writable`), holds a
        run and neither flag is set, has no run to resume or read, or both
        flags are set.
    """
    if overwrite and resume:
      raise ValueError('overwrite and resume exclude each other: resume '
                       'continues the run that overwrite would remove.')
    self.path = (pathlib.Path(path).expanduser().absolute() if read_only
                 else check_writable(path))
    self.resume, self._overwrite = resume, overwrite
    self._record = None
    if (resume or read_only) and not (self.path / SETTINGS).is_file():
      raise ValueError(f'{"No run" if read_only else "Nothing to resume"} in '
                       f'{self.path}: it has no {SETTINGS} (the record every '
                       'run writes when it starts).')
    if not (resume or read_only) and self.holds_run() and not overwrite:
      raise ValueError(
          f'output directory {self.path} already holds a run; resume it '
          '(--resume / resume=True), replace it (--overwrite / '
          'overwrite=True) or choose another directory.')

  def holds_run(self) -> bool:
    return self.path.is_dir() and any(
        (self.path / name).exists() for name in (SETTINGS, METRICS,
                                                 CHECKPOINTS))

  def file(self, name: str) -> pathlib.Path:
    """The path of one of the run's files (e.g. METRICS, 'returns.png')."""
    return self.path / name

  # -- The settings record. --------------------------------------------------

  def record(self) -> tuple[str, dict[str, Any]]:
    """(job, {field: value}): what the run was started as and with, read
    once (lists read back as tuples).

    Raises:
      ValueError: the record is unreadable.
    """
    if self._record is None:
      file = self.path / SETTINGS
      try:
        record = json.loads(file.read_text())
        job, values = record['job'], dict(record['settings'])
      except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f'Cannot read the run record {file}: {e}.') from None
      self._record = job, {k: tuple(v) if isinstance(v, list) else v
                           for k, v in values.items()}
    return self._record

  def saved_settings(self, job: str) -> dict[str, Any]:
    """The settings of the run, which must be a `job` run."""
    recorded, values = self.record()
    if recorded != job:
      raise ValueError(f'{self.path} holds a {recorded} run, not a {job} '
                       'run.')
    return values

  def check_same_settings(self, saved: dict[str, Any],
                          given: dict[str, Any],
                          changeable=RESUMABLE_CHANGES) -> None:
    """Raises ValueError naming each setting `given` that differs from the
    saved ones (but `changeable`), or that the record does not know."""
    unknown = sorted(set(given) - set(saved))
    if unknown:
      raise ValueError(f'{self.path / SETTINGS} has no settings {unknown} '
                       '(written by another version?).')
    differ = [f'{name}: saved {saved[name]!r}, given {value!r}'
              for name, value in given.items()
              if name not in changeable and saved[name] != value]
    if differ:
      raise ValueError('A resumed run keeps the settings it was started '
                       'with; these differ: ' + '; '.join(differ) + '.')

  def start(self, job: str, config) -> None:
    """A new run: the previous run's files removed (overwrite), the
    directory made and the settings recorded (by one process alone)."""
    if self.holds_run() and self._overwrite:
      for name in _RUN_FILES:
        target = self.path / name
        if target.is_dir():
          shutil.rmtree(target)
        elif target.exists():
          target.unlink()
      for target in self.path.glob(_PLOTS):
        target.unlink()
    self.path.mkdir(parents=True, exist_ok=True)
    record = dict(job=job, settings={
        f.name: (list(v) if isinstance(v, tuple) else v)
        for f in dataclasses.fields(config)
        for v in (getattr(config, f.name),)})
    self._write(SETTINGS, json.dumps(record, indent=2) + '\n')

  def write_summary(self, summary: dict[str, Any]) -> dict[str, Any]:
    """Writes `summary.json` (NaN as null); returns the JSON-safe summary."""
    summary = json_safe(summary)
    self._write(SUMMARY, json.dumps(summary, indent=2, allow_nan=False)
                + '\n')
    return summary

  def _write(self, name: str, text: str) -> None:
    """Writes a file whole or not at all."""
    tmp = self.path / (name + '.tmp')
    tmp.write_text(text)
    tmp.replace(self.path / name)

  def checkpoints(self, keep: int = 3) -> 'Checkpointer':
    return Checkpointer(self.path / CHECKPOINTS, keep)


# ----------------------------------------------------------------------------
# Checkpoints.


def _orbax():
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top
  return ocp


def encode_object(obj: Any) -> str:
  """A picklable host object (e.g. a dm_env's state) as JSON-safe text."""
  return base64.b64encode(pickle.dumps(obj)).decode('ascii')


def decode_object(text: str) -> Any:
  """The object `encode_object` encoded (only load checkpoints you trust)."""
  return pickle.loads(base64.b64decode(text.encode('ascii')))


_STATE, _EXTRA = 'state', 'extra'


class Checkpointer:
  """Numbered checkpoints in one directory.

  Usage:
    ckpt = Checkpointer(run_dir / 'checkpoints', keep=3)
    ckpt.save(step, state, {'rows': step})
    state, extra = ckpt.restore(jax.eval_shape(init))  # the latest
  """

  def __init__(self, directory, keep: int = 3):
    if keep < 1:
      raise ValueError(f'keep must be >= 1 checkpoint, got {keep}.')
    ocp = _orbax()
    self.directory = pathlib.Path(directory).absolute()
    self._manager = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(
            max_to_keep=keep, create=True, enable_async_checkpointing=False))

  def steps(self) -> list[int]:
    """The steps of the complete checkpoints, oldest first."""
    return sorted(self._manager.all_steps())

  def latest_step(self) -> int | None:
    steps = self.steps()
    return steps[-1] if steps else None

  def save(self, step: int, state, extra: dict[str, Any]) -> None:
    """Writes `state` and `extra` (JSON-able) as checkpoint `step`.

    Saving a step that exists replaces it (a run stopped right after a
    periodic checkpoint saves the same step again).
    """
    ocp = _orbax()
    if step in self._manager.all_steps():
      self._manager.delete(step)
    self._manager.save(step, args=ocp.args.Composite(**{
        _STATE: ocp.args.StandardSave(state),
        _EXTRA: ocp.args.JsonSave(extra)}))
    self._manager.wait_until_finished()

  def restore(self, target, step: int | None = None):
    """The state of checkpoint `step` (default: the latest), and its extra.

    Args:
      target: the state's structure, shapes, dtypes and shardings, e.g.
        `jax.eval_shape` of the job's `init`.
      step: which checkpoint.

    Raises:
      FileNotFoundError: if there is no such checkpoint.
      ValueError: if the checkpoint holds a state of other shapes than
        `target` (another version of the package or other settings).
    """
    ocp = _orbax()
    if step is None:
      step = self.latest_step()
      if step is None:
        raise FileNotFoundError(f'No checkpoint in {self.directory}.')
    elif step not in self._manager.all_steps():
      raise FileNotFoundError(
          f'No checkpoint {step} in {self.directory}; it has {self.steps()}.')
    self._check_shapes(step, target)
    restored = self._manager.restore(step, args=ocp.args.Composite(**{
        _STATE: ocp.args.StandardRestore(target),
        _EXTRA: ocp.args.JsonRestore()}))
    return restored[_STATE], restored[_EXTRA]

  def _check_shapes(self, step: int, target) -> None:
    """Raises ValueError, naming the first part, if checkpoint `step` holds
    arrays of other shapes than `target` (checked before orbax reads any)."""
    saved = _shapes_by_path(_orbax().StandardCheckpointHandler().metadata(
        self.directory / str(step) / _STATE))
    wanted = _shapes_by_path(target)
    differ = [f'its {"/".join(path)} has shape {saved[path]}, this run\'s '
              f'{shape}' for path, shape in wanted.items()
              if path in saved and saved[path] != shape]
    differ += [f'it has no {"/".join(p)}' for p in wanted if p not in saved]
    differ += [f'this run has no {"/".join(p)}' for p in saved
               if p not in wanted]
    if differ:
      raise ValueError(
          f'Checkpoint {step} in {self.directory} cannot be resumed by this '
          f'run: {differ[0]}. It was written by another version of disco_rl '
          'or with other settings; start a new run.')

  def close(self) -> None:
    self._manager.close()


def _shapes_by_path(tree) -> dict[tuple[str, ...], tuple[int, ...]]:
  """{(key, ...): shape} of every leaf with a shape (arrays, metadata)."""
  def name(key) -> str:
    for attr in ('key', 'name', 'idx'):
      if hasattr(key, attr):
        return str(getattr(key, attr))
    return str(key)
  leaves = jax.tree_util.tree_leaves_with_path(
      tree, is_leaf=lambda x: hasattr(x, 'shape'))
  return {tuple(name(k) for k in path): tuple(leaf.shape)
          for path, leaf in leaves if hasattr(leaf, 'shape')}
