# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The float32 matrix-product precision of the compiled programs.

JAX's `default_matmul_precision`: 'default' lets the backend choose (full
float32 on CPUs, TF32 products on recent NVIDIA GPUs: inputs rounded to a
10-bit mantissa, float32 accumulation; bfloat16 passes on TPUs), 'high' an
intermediate precision where the backend has one, 'highest' full float32
everywhere. It applies to every matrix product and convolution traced
without an explicit precision, which is all of them here (the agent
network, the meta-network, the value function).
"""

from collections.abc import Callable
import functools
from typing import Any

import jax

MATMUL_PRECISIONS = ('default', 'high', 'highest')


def check(value: Any, name: str = 'matmul_precision') -> None:
  """Raises ValueError unless `value` is one of `MATMUL_PRECISIONS`."""
  if value not in MATMUL_PRECISIONS:
    raise ValueError(f'Unknown {name} {value!r}; expected one of '
                     f'{MATMUL_PRECISIONS}.')


def traced_with(precision: str, fn: Callable[..., Any]) -> Callable[..., Any]:
  """`fn` whose matrix products are traced at `precision`.

  The context is entered inside the function, so it holds whenever `fn` is
  traced (by `jax.jit`, `shard_map`, `lax.scan`) wherever it is called
  from, and a jitted wrapper's cache key does not depend on the caller's
  context.

  Args:
    precision: one of `MATMUL_PRECISIONS`.
    fn: any function of arrays.
  """
  check(precision)

  @functools.wraps(fn)
  def wrapped(*args, **kwargs):
    with jax.default_matmul_precision(precision):
      return fn(*args, **kwargs)

  return wrapped
