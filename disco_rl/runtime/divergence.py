# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Stops a run whose learning diverged: a non-finite loss or parameters.

The compiled loops add `KEY` to each step's metrics, 1.0 while every
parameter is finite (`all_finite`, a cheap reduction); on the host
`raise_if_diverged` pops it and raises `DivergedError` naming the first step
whose loss (or another named quantity) or parameters are not finite. Always
on: unlike the rollout checks, it costs nothing worth switching off, and a
diverged run only wastes what follows.

A call that stops at a problem (a divergence, a rollout that failed the
debug checks) still ran the steps before it, which are sound: `keep_good`
gives its error the call's metrics and how many leading steps are good
(`good_steps` reads them), and the host loop (`run.run`) keeps those
steps' rows before the error goes on.
"""

from collections.abc import Iterator, Sequence
import contextlib
import dataclasses

import chex
import jax
import jax.numpy as jnp
import numpy as np

from disco_rl import rollout_checks

KEY = 'params_finite'


class DivergedError(ValueError):
  """Learning produced a non-finite loss or non-finite parameters."""


@dataclasses.dataclass(frozen=True)
class GoodSteps:
  """The sound part of a call that stopped at a problem.

  Attributes:
    metrics: the call's host metrics, {name: [K, ...]} (the checks'
      entries dropped), as `Job.rows` reads them.
    count: how many of the K steps, from the first, came before the
      problem (0: none).
  """

  metrics: dict[str, np.ndarray]
  count: int

  def kept(self) -> dict[str, np.ndarray]:
    """The metrics of the good steps alone, {name: [count, ...]}."""
    return {k: np.asarray(v)[: self.count] for k, v in self.metrics.items()}


_GOOD = '_disco_rl_good_steps'


def good_steps(error: BaseException) -> GoodSteps | None:
  """What `keep_good` gave `error` (None: nothing)."""
  found = getattr(error, _GOOD, None)
  return found if isinstance(found, GoodSteps) else None


@contextlib.contextmanager
def keep_good(metrics: dict[str, np.ndarray], count: int) -> Iterator[None]:
  """Gives an exception raised inside (`DivergedError`, `RolloutError`) the
  call's `metrics` and the `count` of its good leading steps
  (`GoodSteps`), then lets it go on. The metrics are read when it is
  raised (the checks inside drop their entries from the same dict)."""
  try:
    yield
  except Exception as error:
    drop = (KEY, rollout_checks.KEY)
    setattr(
      error,
      _GOOD,
      GoodSteps({k: v for k, v in metrics.items() if k not in drop}, count),
    )
    raise


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


def first_diverged(
  metrics: dict[str, np.ndarray],
  names: Sequence[str],
  active: np.ndarray | None = None,
  until: int | None = None,
) -> int | None:
  """The index of the first diverged step of [K] host `metrics` (`KEY`
  read, not popped), as `raise_if_diverged` finds it; None: none."""
  found = _first_bad(metrics, metrics.get(KEY), names, 'params', active, until)
  return None if found is None else found[0]


def _first_bad(
  metrics: dict[str, np.ndarray],
  flag: np.ndarray | None,
  names: Sequence[str],
  params: str,
  active: np.ndarray | None,
  until: int | None,
) -> tuple[int, list[str]] | None:
  """(index, what is not finite there) of the first diverged step."""
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
      return int(i), bad
  return None


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
  found = _first_bad(metrics, flag, names, params, active, until)
  if found is not None:
    i, bad = found
    raise DivergedError(
      f'learning diverged at {what} {first_step + i}: '
      + ', '.join(bad)
      + '.'
      + (f' {hint}' if hint else '')
    )
