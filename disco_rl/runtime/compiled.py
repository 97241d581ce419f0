# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The one builder of the compiled programs: jit(shard_map(scan(step))).

Both jobs run `steps` of their step function in one `jax.jit` program
over the device mesh (`jax.shard_map`), traced at the run's float32 matmul
precision (JAX's `default_matmul_precision`: 'default' lets the backend
choose, e.g. TF32 on recent NVIDIA GPUs; 'highest' is full float32; CPUs
compute in full at every setting). The state, the program's first
argument, is donated, so a replay buffer is updated in place.

One program serves every count of steps up to its length: steps past the
count leave the state alone (a `lax.cond`), and their outputs are cut off
before they leave `Program.__call__`, so nobody sees them. A tail call of
another length would compile a second program.
"""

from collections.abc import Callable
import functools
import time
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from disco_rl.runtime import mesh as mesh_lib


def traced_with(precision: str, fn: Callable[..., Any]) -> Callable[..., Any]:
  """`fn` whose matrix products are traced at `precision` ('default',
  'high' or 'highest'), wherever it is traced from."""

  @functools.wraps(fn)
  def wrapped(*args, **kwargs):
    with jax.default_matmul_precision(precision):
      return fn(*args, **kwargs)

  return wrapped


class Program:
  """A jitted program of `length` steps: `(state, count, *operands) ->
  (state, outputs [count, ...] as NumPy)`, compiled ahead if asked.

  `bind(*operands)` gives the same program with operands fixed (e.g. the
  runs' learning rates), called as `(state, count)`.
  """

  def __init__(self, jitted, length: int, operands=(), compiled=None):
    self._jitted, self.length, self._operands = jitted, length, operands
    # [the executable or None], shared with the bound programs.
    self._compiled = [None] if compiled is None else compiled

  def bind(self, *operands) -> 'Program':
    """This program with `operands` given after the state and count."""
    return Program(
      self._jitted, self.length, self._operands + operands, self._compiled
    )

  def lower(self, state, *operands) -> jax.stages.Lowered:
    """The program lowered for these arguments (cost analysis)."""
    return self._jitted.lower(
      state, jnp.int32(self.length), *self._operands, *operands
    )

  def compile(self, state, *operands) -> float:
    """Compiles now (a point where a run can stop before any step); later
    calls run this executable. Returns the seconds (0.0 if done before)."""
    if self._compiled[0] is not None:
      return 0.0
    start = time.perf_counter()
    self._compiled[0] = self.lower(state, *operands).compile()
    return time.perf_counter() - start

  def __call__(self, state, count: int, *operands):
    if not 0 < count <= self.length:
      raise ValueError(f'count must be in [1, {self.length}], got {count}.')
    run = self._jitted if self._compiled[0] is None else self._compiled[0]
    state, outputs = run(state, jnp.int32(count), *self._operands, *operands)
    return state, jax.tree.map(lambda x: x[:count], mesh_lib.fetch(outputs))


def program(
  step: Callable[..., tuple[Any, Any]],
  *,
  length: int,
  mesh: jax.sharding.Mesh,
  state_specs,
  operand_specs=(),
  output_specs=None,
  precision: str,
) -> Program:
  """jit(shard_map(scan of `step` over up to `length` steps)).

  Parts of the state, the operands and the outputs whose spec starts with
  the mesh's batch axis (`mesh.AXIS`: one row per device) reach `step`
  without that axis, as one device's own; the rest as they are.

  Args:
    step: `(state, *operands) -> (state, outputs)`, one step on one
      device's view; traced once.
    length: the most steps of one call.
    mesh: the devices.
    state_specs, operand_specs: the `PartitionSpec` trees (prefixes) of the
      state and of the other arguments.
    output_specs: the spec (prefix) of one step's outputs (None:
      replicated, `P()`); the scan adds a leading [length] axis.
    precision: the float32 matmul precision.
  """

  output_specs = P() if output_specs is None else output_specs

  def scanned(state, count, *operands):
    state, operands = mesh_lib.map_per_device(
      mesh_lib.local_block, (state_specs, operand_specs), (state, operands)
    )
    one_step = jax.jit(step)  # Traced once: `skip` reuses its trace.

    def skip(state, *operands):
      outputs = jax.eval_shape(one_step, state, *operands)[1]
      return state, jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), outputs)

    def body(state, index):
      return jax.lax.cond(index < count, one_step, skip, state, *operands)

    state, outputs = jax.lax.scan(body, state, jnp.arange(length))
    return (
      mesh_lib.map_per_device(mesh_lib.device_block, state_specs, state),
      mesh_lib.map_per_device(
        lambda part: jax.tree.map(lambda x: x[:, None], part),
        output_specs,
        outputs,
      ),
    )

  mapped = jax.shard_map(
    traced_with(precision, scanned),
    mesh=mesh,
    in_specs=(state_specs, P(), *operand_specs),
    out_specs=(
      state_specs,
      jax.tree.map(
        lambda s: P(None, *s), output_specs, is_leaf=lambda x: isinstance(x, P)
      ),
    ),
    check_vma=False,
  )
  return Program(jax.jit(mapped, donate_argnums=0), length)


def placed(fn: Callable[..., Any], shardings, precision: str):
  """`jit(fn)` with its results placed by `shardings` (an initial state)."""
  return jax.jit(traced_with(precision, fn), out_shardings=shardings)
