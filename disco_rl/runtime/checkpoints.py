# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Checkpoints of a job's whole state, with orbax.

A checkpoint holds a pytree of `jax.Array`s, sharded over the mesh as it is,
and a small JSON record (`extra`: e.g. the metrics rows written, a host
environment's pickled state). orbax writes each into a temporary directory
and renames it when complete, so a process killed while writing leaves the
previous one usable. Every process of a multi-process run takes part in
`save` and `restore`.

A save that fails (a full disk) raises one `OSError` naming the checkpoint
and what failed, its partial files removed; the messages orbax's threads
print meanwhile are kept out of the terminal (one process).
"""

import base64
import contextlib
import errno
import logging
import os
import pathlib
import pickle
import re
import shutil
import sys
import tempfile
from typing import Any

import jax


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


class CheckpointMismatch(ValueError):
  """A checkpoint of another run (other shapes or settings), not a damaged
  one: every checkpoint of the run is refused alike."""


def short_error(e: BaseException) -> str:
  """An exception as one short line (orbax's and tensorstore's messages
  carry whole specs: cut at the first '[' detail and at 300 characters)."""
  text = ' '.join(str(e).split())
  text = re.sub(r' \[(tensorstore_spec|source locations)=.*', '', text)
  if len(text) > 300:
    text = text[:300] + '...'
  return text or type(e).__name__


def _no_space(error: BaseException) -> bool:
  """Whether `error` (or what caused it) is a full disk."""
  e: BaseException | None = error
  while e is not None:
    if isinstance(e, OSError) and e.errno == errno.ENOSPC:
      return True
    if 'No space left on device' in str(e):
      return True
    e = e.__cause__ or e.__context__
  return False


@contextlib.contextmanager
def _quiet():
  """Holds back what is written to the terminal's stderr (fd 2) meanwhile:
  printed after a call that returns, dropped after one that raises (orbax's
  threads print a traceback per failed write), with orbax's and asyncio's
  later log lines about it. Only in a run of one process (a peer's last
  words must not be held back)."""
  if jax.process_count() > 1:
    yield
    return
  try:
    held = tempfile.TemporaryFile()
  except OSError:  # A full disk: the noise goes nowhere.
    held = open(os.devnull, 'w+b')  # pylint: disable=consider-using-with
  with held:
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(held.fileno(), 2)
    failed = True
    try:
      yield
      failed = False
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      if failed:
        for name in ('absl', 'asyncio', 'orbax'):
          logging.getLogger(name).setLevel(logging.CRITICAL + 1)
      else:
        held.seek(0)
        text = held.read().decode('utf-8', 'replace')
        if text:
          sys.stderr.write(text)
          sys.stderr.flush()


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
        max_to_keep=keep, create=True, enable_async_checkpointing=False
      ),
    )

  def steps(self) -> list[int]:
    """The steps of the complete checkpoints, oldest first."""
    return sorted(self._manager.all_steps())

  def latest_step(self) -> int | None:
    steps = self.steps()
    return steps[-1] if steps else None

  def resolve_step(self, step: int | None = None) -> int:
    """`step`, the step of a checkpoint here; None: the latest's.

    Raises:
      FileNotFoundError: if there is no such checkpoint (or none at all).
    """
    if step is None:
      latest = self.latest_step()
      if latest is None:
        raise FileNotFoundError(f'No checkpoint in {self.directory}.')
      return latest
    if step not in self._manager.all_steps():
      raise FileNotFoundError(
        f'No checkpoint {step} in {self.directory}; it has {self.steps()}.'
      )
    return step

  def save(self, step: int, state, extra: dict[str, Any]) -> None:
    """Writes `state` and `extra` (JSON-able) as checkpoint `step`.

    Saving a step that exists replaces it (a run stopped right after a
    periodic checkpoint saves the same step again).

    Raises:
      OSError: the checkpoint could not be written (ENOSPC: a full disk),
        naming it and the complete ones before it; its partial files are
        removed.
    """
    ocp = _orbax()
    if step in self._manager.all_steps():
      self._manager.delete(step)
    try:
      with _quiet():
        self._manager.save(
          step,
          args=ocp.args.Composite(
            **{
              _STATE: ocp.args.StandardSave(state),
              _EXTRA: ocp.args.JsonSave(extra),
            }
          ),
        )
        self._manager.wait_until_finished()
    except Exception as e:  # pylint: disable=broad-exception-caught
      for partial in self.directory.glob(f'{step}.orbax-checkpoint-tmp*'):
        shutil.rmtree(partial, ignore_errors=True)
      kept = self.steps()
      why = 'no space left on device' if _no_space(e) else short_error(e)
      raise OSError(
        errno.ENOSPC
        if _no_space(e)
        else getattr(e, 'errno', None) or errno.EIO,
        f'cannot write checkpoint {step} in {self.directory}: {why} (the '
        'checkpoints before it are complete: '
        f'{", ".join(map(str, kept)) or "none"})',
      ) from e

  def restore(self, target, step: int | None = None):
    """The state of checkpoint `step` (default: the latest), and its extra.

    Args:
      target: the state's structure, shapes, dtypes and shardings, e.g.
        `jax.eval_shape` of the job's `init`.
      step: which checkpoint.

    Raises:
      FileNotFoundError: if there is no such checkpoint.
      CheckpointMismatch: (a ValueError) if the checkpoint holds a state
        of other shapes than `target` (another version of the package or
        other settings).
      Exception: whatever orbax raises for a damaged checkpoint.
    """
    ocp = _orbax()
    step = self.resolve_step(step)
    self._check_shapes(step, target)
    with _quiet():
      restored = self._manager.restore(
        step,
        args=ocp.args.Composite(
          **{
            _STATE: ocp.args.StandardRestore(target),
            _EXTRA: ocp.args.JsonRestore(),
          }
        ),
      )
    return restored[_STATE], restored[_EXTRA]

  def read(self, step: int | None = None) -> dict[str, Any]:
    """The state of checkpoint `step` (default: the latest) as NumPy arrays
    in nested dicts (the saved structure), whatever devices and processes
    saved it: for reading a run's results, not for resuming it.

    Raises:
      FileNotFoundError: if there is no such checkpoint.
    """
    ocp = _orbax()
    import numpy as np  # pylint: disable=g-import-not-at-top

    path = self.directory / str(self.resolve_step(step)) / _STATE
    tree = ocp.StandardCheckpointHandler().metadata(path).tree
    return ocp.PyTreeCheckpointer().restore(
      path,
      restore_args=jax.tree.map(
        lambda _: ocp.RestoreArgs(restore_type=np.ndarray), tree
      ),
    )

  def _check_shapes(self, step: int, target) -> None:
    """Raises ValueError, naming the first part, if checkpoint `step` holds
    arrays of other shapes than `target` (checked before orbax reads any)."""
    saved = _shapes_by_path(
      _orbax()
      .StandardCheckpointHandler()
      .metadata(self.directory / str(step) / _STATE)
    )
    wanted = _shapes_by_path(target)
    differ = [
      f"its {'/'.join(path)} has shape {saved[path]}, this run's {shape}"
      for path, shape in wanted.items()
      if path in saved and saved[path] != shape
    ]
    differ += [f'it has no {"/".join(p)}' for p in wanted if p not in saved]
    differ += [
      f'this run has no {"/".join(p)}' for p in saved if p not in wanted
    ]
    if differ:
      raise CheckpointMismatch(
        f'Checkpoint {step} in {self.directory} cannot be resumed by this '
        f'run: {differ[0]}. It was written by another version of disco_rl '
        'or with other settings; start a new run.'
      )

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
    tree, is_leaf=lambda x: hasattr(x, 'shape')
  )
  return {
    tuple(name(k) for k in path): tuple(leaf.shape)
    for path, leaf in leaves
    if hasattr(leaf, 'shape')
  }
