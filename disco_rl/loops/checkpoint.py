# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Checkpoints of a loop's whole state, written with orbax-checkpoint.

A checkpoint holds the loop state (any pytree of `jax.Array`s, e.g. an
`EvalState` or a `PopulationState`, sharded over the mesh as it is) and a
small JSON record (`extra`: how many metrics rows the run had written, a
host environment's pickled state, ...). orbax writes each checkpoint into a
temporary directory and renames it when complete, so a process killed while
writing leaves the previous checkpoint usable; the last `keep` are kept.
Every process of a multi-process run takes part in `save` and `restore`.
"""

import base64
import pathlib
import pickle
from typing import Any

import jax

_STATE, _EXTRA = 'state', 'extra'


def _orbax():
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top
  return ocp


def abstract_like(state):
  """Shapes, dtypes and shardings of `state`: the target of a restore."""
  return jax.tree.map(
      lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype,
                                     sharding=getattr(x, 'sharding', None)),
      state)


def encode_object(obj: Any) -> str:
  """A picklable host object (e.g. a dm_env's state) as JSON-safe text."""
  return base64.b64encode(pickle.dumps(obj)).decode('ascii')


def decode_object(text: str) -> Any:
  """The object `encode_object` encoded (only load checkpoints you trust)."""
  return pickle.loads(base64.b64decode(text.encode('ascii')))


class Checkpointer:
  """Numbered checkpoints in one directory.

  Usage:
    ckpt = Checkpointer(run_dir / 'checkpoints', keep=3)
    ckpt.save(step, state, {'rows': step})
    state, extra = ckpt.restore(abstract_like(state))  # the latest
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
        `abstract_like(loop.init(key))` or `jax.eval_shape` of it.
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
    for path, shape in _shapes_by_path(target).items():
      if path in saved and saved[path] != shape:
        raise ValueError(
            f'Checkpoint {step} in {self.directory} cannot be resumed by this '
            f'run: its {"/".join(path)} has shape {saved[path]}, this run\'s '
            f'{shape}. It was written by another version of disco_rl (eval '
            'runs before seeds in parallel had no seed axis) or with other '
            'settings; start a new run.')

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
