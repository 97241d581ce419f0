# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Statistics over few runs and several tasks (Agarwal et al. 2021).

The definitions of the `rliable` package, written here with numpy:
rliable 1.2.0 (the newest) pins `arch<8`, and arch 7.x does not import with
pandas 3 (`deprecate_kwarg() missing 1 required positional argument`), which
this project installs. Scores are [runs, tasks] arrays, one per algorithm:

  point = iqm(scores)                                  # []
  low, high = interval(scores, iqm)                    # stratified bootstrap
  d = iqm_difference(scores_x, scores_y)               # IQM(X) - IQM(Y)
  low, high = interval((scores_x, scores_y), iqm_difference)
  p = probability_of_improvement(scores_x, scores_y)   # P(X > Y)
  low, high = interval((scores_x, scores_y), probability_of_improvement)
  profile, low, high = profile_intervals(scores, taus) # [taus] each
  value, low, high = curve_intervals(curves, iqm)      # [points] each
  run = most_extreme_run(scores_x, scores_y)           # sensitivity: the
  at_median(scores_x, run['run'], run['task'])         # outlier taken out

`mean`, `median` and `optimality_gap` are rliable's other aggregates.

Intervals are percentile intervals of the stratified bootstrap: every
resample draws, for each task independently, as many runs as it has, with
replacement (rliable's `StratifiedBootstrap`; `StratifiedIndependentBootstrap`
for a pair of algorithms, each resampled on its own).

`interval(..., seed=s)` draws the very resamples rliable 1.2.0 draws after
`np.random.seed(s)`, so its intervals are rliable's, not only alike (tests/
test_studies_stats.py pins them to numbers rliable produced, in
tests/data/rliable_expected/). rliable's bootstraps draw their indices with
numpy's global legacy generator, `np.random.choice(runs, shape)` once per
resample and per array in argument order, and ignore the `random_state`
they are given (arch's generator, which they never call);
`create_performance_profile` takes no seed at all. Here each call makes its
own `np.random.RandomState(seed)` and makes the same calls, and the
percentiles are taken as arch's `conf_int(method='percentile')` takes them.
The legacy generator's stream is frozen by numpy, so the match does not
depend on numpy's version.
"""

from collections.abc import Callable
from typing import Any, TypedDict, overload

import numpy as np
import numpy.typing as npt

# Scores as the functions take them: a [runs, tasks] array, or anything
# `np.asarray` makes one of (nested lists of numbers).
Scores = npt.ArrayLike


def _check_scores(scores: Scores, what: str = 'scores') -> np.ndarray:
  scores = np.asarray(scores, float)
  if scores.ndim != 2 or not scores.size:
    raise ValueError(
      f'{what} must be a [runs, tasks] array, got shape {scores.shape}.'
    )
  if not np.isfinite(scores).all():
    raise ValueError(f'{what} must be finite, got {scores.tolist()}.')
  return scores


def mean(scores: Scores) -> float:
  """The mean over tasks of each task's mean over runs (rliable's
  `aggregate_mean`; with as many runs on every task, the mean of all scores).

  Args:
    scores: [runs, tasks] scores.
  """
  return float(np.mean(np.mean(_check_scores(scores), axis=0)))


def median(scores: Scores) -> float:
  """The median over tasks of each task's mean over runs (rliable's
  `aggregate_median`).

  Args:
    scores: [runs, tasks] scores.
  """
  return float(np.median(np.mean(_check_scores(scores), axis=0)))


def optimality_gap(scores: Scores, gamma: float = 1.0) -> float:
  """How far the scores fall short of `gamma`, on average: gamma minus the
  mean of the scores clipped at gamma (rliable's `aggregate_optimality_gap`;
  lower is better).

  Args:
    scores: [runs, tasks] scores.
    gamma: the score counted as good enough (1 for normalised scores: the
      reference's).
  """
  if not np.isfinite(gamma):
    raise ValueError(f'gamma must be a finite number, got {gamma}.')
  return float(gamma - np.mean(np.minimum(_check_scores(scores), gamma)))


def iqm(scores: Scores) -> float:
  """Interquartile mean: the mean of the middle 50% of all run-task scores
  (25% cut from each end, as `scipy.stats.trim_mean`; rliable's
  `aggregate_iqm`).

  Args:
    scores: [runs, tasks] scores.
  """
  # scipy.stats.trim_mean(scores, 0.25, axis=None), as rliable computes
  # it, without its overhead (a tenth of the time for a few scores; the
  # bootstrap calls it thousands of times): the same scores are kept, only
  # the order they are summed in (so the last bits) may differ.
  flat = np.sort(_check_scores(scores), axis=None)
  cut = int(0.25 * flat.size)
  return float(np.mean(flat[cut : flat.size - cut]))


def iqm_difference(scores_x: Scores, scores_y: Scores) -> float:
  """IQM(X) - IQM(Y).

  Args:
    scores_x: [n, tasks] scores of algorithm X.
    scores_y: [m, tasks] scores of algorithm Y, the same tasks.
  """
  x, y = _check_pair(scores_x, scores_y)
  return iqm(x) - iqm(y)


def task_probability(runs_x: npt.ArrayLike, runs_y: npt.ArrayLike) -> float:
  """P(x > y) + P(x = y) / 2 for a run x of X and a run y of Y on one task
  (the Mann-Whitney U statistic over n m).

  Args:
    runs_x: [n] scores of X's runs on the task.
    runs_y: [m] scores of Y's runs on the task.
  """
  for what, runs in (('runs_x', runs_x), ('runs_y', runs_y)):
    shape = np.shape(runs)
    if len(shape) != 1 or not shape[0]:
      raise ValueError(
        f'{what} must be a non-empty [runs] array, got shape {shape}.'
      )
  x = np.asarray(runs_x, float)[:, None]
  y = np.asarray(runs_y, float)[None, :]
  return float((np.sum(x > y) + 0.5 * np.sum(x == y)) / (x.size * y.size))


def _check_pair(
  scores_x: Scores, scores_y: Scores
) -> tuple[np.ndarray, np.ndarray]:
  x = _check_scores(scores_x, 'scores_x')
  y = _check_scores(scores_y, 'scores_y')
  if x.shape[1] != y.shape[1]:
    raise ValueError(
      f'scores_x and scores_y must have the same tasks, got '
      f'{x.shape[1]} and {y.shape[1]}.'
    )
  return x, y


def probability_of_improvement(scores_x: Scores, scores_y: Scores) -> float:
  """P(X > Y): the mean over tasks of `task_probability` (rliable's
  `probability_of_improvement`).

  Args:
    scores_x: [n, tasks] scores of algorithm X.
    scores_y: [m, tasks] scores of algorithm Y, the same tasks.
  """
  x, y = _check_pair(scores_x, scores_y)
  x, y = x[:, None, :], y[None, :, :]  # [n, 1, tasks], [1, m, tasks]
  per_task = (
    np.sum(x > y, axis=(0, 1)) + 0.5 * np.sum(x == y, axis=(0, 1))
  ) / (x.shape[0] * y.shape[1])
  return float(np.mean(per_task))


def _check_taus(taus: npt.ArrayLike) -> np.ndarray:
  taus = np.asarray(taus, float)
  if taus.ndim != 1 or not taus.size or not np.isfinite(taus).all():
    raise ValueError(
      f'taus must be a non-empty [taus] array of finite '
      f'thresholds, got {taus.tolist()}.'
    )
  return taus


def performance_profile(
  scores: Scores, taus: npt.ArrayLike, *, task_means: bool = False
) -> np.ndarray:
  """The fraction of run-task scores above each threshold (rliable's score
  distribution, `create_performance_profile`'s default).

  Args:
    scores: [runs, tasks] scores.
    taus: [taus] thresholds.
    task_means: the fraction of tasks whose mean over runs is above each
      threshold instead (rliable's `use_score_distribution=False`).

  Returns:
    [taus] fractions in [0, 1]: of scores strictly greater than tau.
  """
  scores = _check_scores(scores)
  taus = _check_taus(taus)
  values = np.mean(scores, axis=0) if task_means else scores.ravel()
  return np.mean(values[None, :] > taus[:, None], axis=1)


class ExtremeRun(TypedDict):
  """`most_extreme_run`'s answer."""

  side: str  # 'x' or 'y'
  run: int  # Its index in that side's scores,
  task: int  # and the task's.
  score: float
  median: float  # Of that side's runs on that task.


def most_extreme_run(scores_x: Scores, scores_y: Scores) -> ExtremeRun:
  """The run farthest from its task's median, over both algorithms.

  Args:
    scores_x: [n, tasks] scores of algorithm X.
    scores_y: [m, tasks] scores of algorithm Y, the same tasks.

  Returns:
    dict(side='x' or 'y', run, task (indices), score, median: the median of
    that algorithm's runs on that task); the first such run on a tie.
  """
  x, y = _check_pair(scores_x, scores_y)
  best: ExtremeRun | None = None
  farthest = 0.0  # best's distance from its median.
  for side, scores in (('x', x), ('y', y)):
    medians = np.median(scores, axis=0)
    distance = np.abs(scores - medians)
    run, task = np.unravel_index(np.argmax(distance), scores.shape)
    if best is None or distance[run, task] > farthest:
      farthest = float(distance[run, task])
      best = ExtremeRun(
        side=side,
        run=int(run),
        task=int(task),
        score=float(scores[run, task]),
        median=float(medians[task]),
      )
  assert best is not None  # The loop ran (two sides), the first set it.
  return best


def at_median(scores: Scores, run: int, task: int) -> np.ndarray:
  """A copy of [runs, tasks] `scores` with one run's score on `task` set to
  that task's median: the run's outlying value taken out while every task
  keeps its number of runs (so an IQM trims as many scores as before)."""
  scores = _check_scores(scores).copy()
  scores[run, task] = np.median(scores[:, task])
  return scores


def _resample(scores: np.ndarray, rng: np.random.RandomState) -> np.ndarray:
  """Each task's runs drawn with replacement, independently per task (and
  per point of a curve): rliable's `StratifiedBootstrap.update_indices`."""
  picks = rng.choice(scores.shape[0], size=scores.shape, replace=True)
  return np.take_along_axis(scores, picks, axis=0)


def _check_resampled(scores: npt.ArrayLike, what: str) -> np.ndarray:
  scores = np.asarray(scores, float)
  if scores.ndim < 2 or not scores.size:
    raise ValueError(
      f'{what} must be a [runs, tasks] (or [runs, tasks, '
      f'...]) array, got shape {scores.shape}.'
    )
  if not np.isfinite(scores).all():
    raise ValueError(f'{what} must be finite, got {scores.tolist()}.')
  return scores


@overload
def interval(
  scores: npt.ArrayLike | tuple[npt.ArrayLike, ...],
  statistic: Callable[..., float],
  *,
  confidence: float = ...,
  reps: int = ...,
  seed: int | np.random.RandomState = ...,
) -> tuple[float, float]: ...


@overload
def interval(
  scores: npt.ArrayLike | tuple[npt.ArrayLike, ...],
  statistic: Callable[..., np.ndarray],
  *,
  confidence: float = ...,
  reps: int = ...,
  seed: int | np.random.RandomState = ...,
) -> tuple[np.ndarray, np.ndarray]: ...


@overload
def interval(
  scores: npt.ArrayLike | tuple[npt.ArrayLike, ...],
  statistic: Callable[..., float | np.ndarray],
  *,
  confidence: float = ...,
  reps: int = ...,
  seed: int | np.random.RandomState = ...,
) -> tuple[float, float] | tuple[np.ndarray, np.ndarray]: ...


def interval(
  scores: npt.ArrayLike | tuple[npt.ArrayLike, ...],
  statistic: Callable[..., float | np.ndarray],
  *,
  confidence: float = 0.95,
  reps: int = 2000,
  seed: int | np.random.RandomState = 0,
) -> tuple[float, float] | tuple[np.ndarray, np.ndarray]:
  """Percentile interval of `statistic` under the stratified bootstrap.

  The same as rliable's `get_interval_estimates(..., method='percentile')`
  after `np.random.seed(seed)`, resample for resample (see the module's
  docstring).

  Args:
    scores: [runs, tasks] scores (or [runs, tasks, ...]: each task and each
      further index resampled on its own), or a tuple of such arrays, one
      per argument of `statistic`, each resampled on its own.
    statistic: e.g. `iqm`, `mean` or `probability_of_improvement`: a number,
      or a [k] array of them (e.g. a performance profile).
    confidence: the interval's level.
    reps: bootstrap resamples.
    seed: the resampling's seed, or a `np.random.RandomState` to draw from
      (and leave advanced: rliable's `get_interval_estimates` over several
      algorithms draws them one after the other from one such stream).

  Returns:
    (lower, upper): numbers, or [k] arrays for a [k] statistic.
  """
  return _interval(
    scores,
    statistic,
    _BATCHED.get(statistic),
    confidence=confidence,
    reps=reps,
    seed=seed,
  )


def _interval(
  scores: npt.ArrayLike | tuple[npt.ArrayLike, ...],
  statistic: Callable[..., float | np.ndarray],
  batched: Callable[..., np.ndarray] | None,
  *,
  confidence: float = 0.95,
  reps: int = 2000,
  seed: int | np.random.RandomState = 0,
) -> tuple[float, float] | tuple[np.ndarray, np.ndarray]:
  """`interval`, with `statistic`'s batched form (of [reps, ...] resamples,
  the same numbers) or None."""
  if not 0 < confidence < 1:
    raise ValueError(f'confidence must be in (0, 1), got {confidence}.')
  if (
    isinstance(reps, bool)
    or not isinstance(reps, (int, np.integer))
    or (reps < 1)
  ):
    raise ValueError(f'reps must be an integer >= 1, got {reps!r}.')
  if isinstance(seed, np.random.RandomState):
    rng = seed
  elif (
    isinstance(seed, (int, np.integer))
    and not isinstance(seed, bool)
    and 0 <= seed < 2**32
  ):
    rng = np.random.RandomState(seed)
  else:
    raise ValueError(
      f'seed must be an integer in [0, 2**32) or a '
      f'np.random.RandomState, got {seed!r}.'
    )
  given = scores if isinstance(scores, tuple) else (scores,)
  what = 'scores' if len(given) == 1 else 'each of scores'
  arrays = tuple(_check_resampled(a, what) for a in given)
  # Every resample is drawn first, in rliable's order (per resample, each
  # array in turn); a statistic with a batched form then takes them all at
  # once ([reps, ...] each), with the same numbers as one by one.
  resamples = [tuple(_resample(a, rng) for a in arrays) for _ in range(reps)]
  if batched is not None:
    values = np.asarray(
      batched(*(np.stack(a) for a in zip(*resamples, strict=True))), float
    )
  else:
    values = np.array([statistic(*r) for r in resamples], float)
  alpha = (1.0 - confidence) / 2
  low, high = np.percentile(values, [100 * alpha, 100 * (1.0 - alpha)], axis=0)
  if values.ndim == 1:
    return float(low), float(high)
  return low, high


def _iqm_batched(scores: np.ndarray) -> np.ndarray:
  """[reps] `iqm` of [reps, runs, tasks] scores: each resample's sorted
  scores and the mean of its middle half, as `iqm` computes them (the
  same sums, row by row)."""
  flat = np.sort(scores.reshape(scores.shape[0], -1), axis=1)
  cut = int(0.25 * flat.shape[1])
  return np.mean(flat[:, cut : flat.shape[1] - cut], axis=1)


def _probability_batched(x: np.ndarray, y: np.ndarray) -> np.ndarray:
  """[reps] `probability_of_improvement` of [reps, n, tasks] and [reps, m,
  tasks] scores."""
  x, y = x[:, :, None, :], y[:, None, :, :]  # [reps, n, 1, t], [reps, 1, m, t]
  per_task = (
    np.sum(x > y, axis=(1, 2)) + 0.5 * np.sum(x == y, axis=(1, 2))
  ) / (x.shape[1] * y.shape[2])
  return np.mean(per_task, axis=1)


# The statistics `interval` computes over all resamples at once.
_BATCHED: dict[Callable[..., Any], Callable[..., np.ndarray]] = {
  iqm: _iqm_batched,
  iqm_difference: lambda x, y: _iqm_batched(x) - _iqm_batched(y),
  probability_of_improvement: _probability_batched,
}


def profile_intervals(
  scores: Scores,
  taus: npt.ArrayLike,
  *,
  task_means: bool = False,
  **kwargs: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """A performance profile and its band (rliable's
  `create_performance_profile` after `np.random.seed(seed)`).

  Args:
    scores: [runs, tasks] scores.
    taus: [taus] thresholds.
    task_means: as `performance_profile`.
    **kwargs: `interval`'s confidence, reps and seed.

  Returns:
    ([taus] profile, [taus] lower, [taus] upper): every threshold's
    fraction from the same resamples.
  """
  taus = _check_taus(taus)
  profile = performance_profile(scores, taus, task_means=task_means)
  low, high = interval(
    _check_scores(scores),
    lambda s: performance_profile(s, taus, task_means=task_means),
    **kwargs,
  )
  return profile, low, high


def curve_intervals(
  curves: npt.ArrayLike, statistic: Callable[..., float], **kwargs: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """`statistic` and its interval at each point of curves.

  Each resample draws every task's runs anew at each point, as rliable does
  for [runs, tasks, points] scores (`get_interval_estimates` with a
  statistic of every point).

  Args:
    curves: [runs, tasks, points] scores.
    statistic: of [runs, tasks] scores, e.g. `iqm`.
    **kwargs: `interval`'s confidence, reps and seed.

  Returns:
    ([points] value, [points] lower, [points] upper).
  """
  curves = np.asarray(curves, float)
  if curves.ndim != 3 or not curves.size:
    raise ValueError(
      f'curves must be a [runs, tasks, points] array, got shape {curves.shape}.'
    )

  def per_point(c: np.ndarray) -> np.ndarray:
    return np.array([statistic(c[:, :, i]) for i in range(c.shape[2])])

  batched = _BATCHED.get(statistic)

  def per_point_batched(c: np.ndarray) -> np.ndarray:
    """[reps, runs, tasks, points] -> [reps, points]."""
    assert batched is not None
    reps, points = c.shape[0], c.shape[3]
    by_point = np.moveaxis(c, 3, 1).reshape(reps * points, *c.shape[1:3])
    return batched(by_point).reshape(reps, points)

  low, high = _interval(
    curves, per_point, batched and per_point_batched, **kwargs
  )
  return per_point(curves), np.asarray(low), np.asarray(high)
