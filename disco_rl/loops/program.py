# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The loops' compiled programs, assembled in one place.

`over_mesh` is `jax.jit` of `jax.shard_map` over the device mesh, the
function traced at the run's matmul precision, the loop state (its first
argument) donated; `on_mesh` the same without `shard_map`, for programs
that place their outputs themselves (the initial states). Both return a
`Program`, which can also be compiled ahead of its first call (`compile`,
a point where a run can stop before any step) and then runs that
executable.
"""

from collections.abc import Callable
import time
from typing import Any

import jax

from disco_rl.loops import precision


class Program:
  """A jitted function, optionally compiled ahead for given arguments."""

  def __init__(self, jitted):
    self._jitted = jitted
    self._compiled = None

  def lower(self, *args) -> jax.stages.Lowered:
    """The program lowered for `args` (`.compile()`, cost analysis)."""
    return self._jitted.lower(*args)

  def compile(self, *args) -> float:
    """Compiles the program for `args` now; later calls run it.

    Returns:
      The seconds it took (0.0 if it was compiled before).
    """
    if self._compiled is not None:
      return 0.0
    start = time.perf_counter()
    self._compiled = self._jitted.lower(*args).compile()
    return time.perf_counter() - start

  def __call__(self, *args):
    return (self._jitted if self._compiled is None else self._compiled)(*args)


def over_mesh(fn: Callable[..., Any], mesh: jax.sharding.Mesh, in_specs,
              out_specs, matmul_precision: str,
              donate_state: bool = False) -> Program:
  """`jit(shard_map(fn))`: `fn` runs on each device's block.

  Args:
    fn: the per-device function.
    mesh: the device mesh.
    in_specs, out_specs: `PartitionSpec` trees of the arguments and results.
    matmul_precision: the float32 matmul precision `fn` is traced at.
    donate_state: donate the first argument (the loop state: its buffers
      are reused for the new one).
  """
  mapped = jax.shard_map(precision.traced_with(matmul_precision, fn),
                         mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                         check_vma=False)
  return Program(jax.jit(mapped, donate_argnums=0 if donate_state else ()))


def on_mesh(fn: Callable[..., Any], out_shardings,
            matmul_precision: str) -> Program:
  """`jit(fn)` with its results placed by `out_shardings` (e.g. a state)."""
  return Program(jax.jit(precision.traced_with(matmul_precision, fn),
                         out_shardings=out_shardings))
