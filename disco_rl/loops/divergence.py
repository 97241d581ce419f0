# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Stops a run whose learning diverged: a non-finite loss or parameters.

The compiled loops add `KEY` to each step's metrics, 1.0 while every
parameter is finite (`all_finite`, a cheap reduction); on the host
`raise_if_diverged` pops it and raises `DivergedError` naming the first step
whose loss (or another named quantity) or parameters are not finite. Always
on: unlike the rollout checks, it costs nothing worth switching off, and a
diverged run only wastes what follows.
"""

from collections.abc import Sequence

import chex
import jax
import jax.numpy as jnp
import numpy as np

KEY = 'params_finite'


class DivergedError(ValueError):
  """Learning produced a non-finite loss or non-finite parameters."""


def all_finite(tree: chex.ArrayTree) -> chex.Array:
  """[] float32: 1.0 if every entry of every floating leaf is finite."""
  flags = [
    jnp.all(jnp.isfinite(x))
    for x in jax.tree.leaves(tree)
    if jnp.issubdtype(jnp.asarray(x).dtype, jnp.inexact)
  ]
  if not flags:
    return jnp.ones((), jnp.float32)
  return jnp.all(jnp.stack(flags)).astype(jnp.float32)


def raise_if_diverged(
  metrics: dict[str, np.ndarray],
  names: Sequence[str],
  first_step: int,
  what: str,
  params: str,
  active: np.ndarray | None = None,
  hint: str = '',
  until: int | None = None,
) -> None:
  """Pops `KEY` from [K] host `metrics`; raises at the first diverged step.

  Args:
    metrics: {name: [K]} for the K steps `first_step`.. of one call.
    names: the quantities that must be finite (e.g. 'total_loss').
    first_step: the number of the first of the K steps.
    what: the steps' name in the message (e.g. 'loop step').
    params: the parameters `KEY` is about, for the message.
    active: [K] bool, the steps that learned (default: all); the others
      carry NaN placeholders and are not checked.
    hint: appended to the message (e.g. which setting to lower).
    until: check only the steps before this index (e.g. the first step
      whose acting failed the rollout checks: that came first).

  Raises:
    DivergedError: naming the step, the quantity and its value.
  """
  flag = metrics.pop(KEY, None)
  count = len(next(iter(metrics.values()))) if metrics else 0
  active = np.ones(count, bool) if active is None else np.asarray(active, bool)
  if until is not None:
    active = active & (np.arange(count) < until)
  for i in np.flatnonzero(active):
    bad = [
      f'{name} = {float(metrics[name][i])}'
      for name in names
      if name in metrics and not np.isfinite(metrics[name][i])
    ]
    if flag is not None and not flag[i]:
      bad.append(f'{params} not finite')
    if bad:
      raise DivergedError(
        f'learning diverged at {what} {first_step + int(i)}: '
        + ', '.join(bad)
        + '.'
        + (f' {hint}' if hint else '')
      )
