# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Statistics over few runs and several tasks (Agarwal et al. 2021).

The definitions of the `rliable` package, written here with numpy and scipy:
rliable 1.2.0 (the newest) pins `arch<8`, and arch 7.x does not import with
pandas 3 (`deprecate_kwarg() missing 1 required positional argument`), which
this project installs. Scores are [runs, tasks] arrays, one per algorithm:

  point = iqm(scores)                                  # []
  low, high = interval(scores, iqm)                    # stratified bootstrap
  d = iqm_difference(scores_x, scores_y)               # IQM(X) - IQM(Y)
  low, high = interval((scores_x, scores_y), iqm_difference)
  p = probability_of_improvement(scores_x, scores_y)   # P(X > Y)
  low, high = interval((scores_x, scores_y), probability_of_improvement)
  run = most_extreme_run(scores_x, scores_y)           # sensitivity: the
  at_median(scores_x, run['run'], run['task'])         # outlier taken out

Intervals are percentile intervals of the stratified bootstrap: every
resample draws, for each task independently, as many runs as it has, with
replacement (rliable's `StratifiedBootstrap`; `StratifiedIndependentBootstrap`
for a pair of algorithms, each resampled on its own).
"""

from collections.abc import Callable

import numpy as np
from scipy import stats


def _check_scores(scores, what: str = 'scores') -> np.ndarray:
  scores = np.asarray(scores, float)
  if scores.ndim != 2 or not scores.size:
    raise ValueError(f'{what} must be a [runs, tasks] array, got shape '
                     f'{scores.shape}.')
  if not np.isfinite(scores).all():
    raise ValueError(f'{what} must be finite, got {scores.tolist()}.')
  return scores


def mean(scores) -> float:
  """Mean over every run and task of [runs, tasks] scores."""
  return float(np.mean(_check_scores(scores)))


def iqm(scores) -> float:
  """Interquartile mean: the mean of the middle 50% of all run-task scores
  (25% cut from each end, as `scipy.stats.trim_mean`)."""
  return float(stats.trim_mean(_check_scores(scores), 0.25, axis=None))


def iqm_difference(scores_x, scores_y) -> float:
  """IQM(X) - IQM(Y) of [runs, tasks] scores of two algorithms."""
  return iqm(scores_x) - iqm(scores_y)


def task_probability(runs_x, runs_y) -> float:
  """P(x > y) + P(x = y) / 2 for a run x of X and a run y of Y on one task
  (the Mann-Whitney U statistic over n m); the runs are 1-D arrays."""
  x = np.asarray(runs_x, float)[:, None]
  y = np.asarray(runs_y, float)[None, :]
  return float((np.sum(x > y) + 0.5 * np.sum(x == y)) / (x.size * y.size))


def _check_pair(scores_x, scores_y) -> tuple[np.ndarray, np.ndarray]:
  x = _check_scores(scores_x, 'scores_x')
  y = _check_scores(scores_y, 'scores_y')
  if x.shape[1] != y.shape[1]:
    raise ValueError(f'scores_x and scores_y must have the same tasks, got '
                     f'{x.shape[1]} and {y.shape[1]}.')
  return x, y


def probability_of_improvement(scores_x, scores_y) -> float:
  """P(X > Y): the mean over tasks of `task_probability`.

  Args:
    scores_x: [n, tasks] scores of algorithm X.
    scores_y: [m, tasks] scores of algorithm Y, the same tasks.
  """
  x, y = _check_pair(scores_x, scores_y)
  return float(np.mean([task_probability(x[:, t], y[:, t])
                        for t in range(x.shape[1])]))


def most_extreme_run(scores_x, scores_y) -> dict:
  """The run farthest from its task's median, over both algorithms.

  Args:
    scores_x: [n, tasks] scores of algorithm X.
    scores_y: [m, tasks] scores of algorithm Y, the same tasks.

  Returns:
    dict(side='x' or 'y', run, task (indices), score, median: the median of
    that algorithm's runs on that task); the first such run on a tie.
  """
  x, y = _check_pair(scores_x, scores_y)
  best = None
  for side, scores in (('x', x), ('y', y)):
    medians = np.median(scores, axis=0)
    distance = np.abs(scores - medians)
    run, task = np.unravel_index(np.argmax(distance), scores.shape)
    if best is None or distance[run, task] > best['distance']:
      best = dict(side=side, run=int(run), task=int(task),
                  score=float(scores[run, task]),
                  median=float(medians[task]),
                  distance=float(distance[run, task]))
  del best['distance']
  return best


def at_median(scores, run: int, task: int) -> np.ndarray:
  """A copy of [runs, tasks] `scores` with one run's score on `task` set to
  that task's median: the run's outlying value taken out while every task
  keeps its number of runs (so an IQM trims as many scores as before)."""
  scores = _check_scores(scores).copy()
  scores[run, task] = np.median(scores[:, task])
  return scores


def _resample(scores: np.ndarray, rng: np.random.Generator) -> np.ndarray:
  """Each task's runs drawn with replacement, independently per task."""
  runs, tasks = scores.shape
  picks = rng.integers(0, runs, size=(runs, tasks))
  return np.take_along_axis(scores, picks, axis=0)


def interval(scores, statistic: Callable[..., float], *,
             confidence: float = 0.95, reps: int = 2000,
             seed: int = 0) -> tuple[float, float]:
  """Percentile interval of `statistic` under the stratified bootstrap.

  Args:
    scores: [runs, tasks] scores, or a tuple of such arrays (one per
      argument of `statistic`; each resampled on its own).
    statistic: e.g. `iqm`, `mean` or `probability_of_improvement`.
    confidence: the interval's level.
    reps: bootstrap resamples.
    seed: the resampling's seed.

  Returns:
    (lower, upper).
  """
  if not 0 < confidence < 1:
    raise ValueError(f'confidence must be in (0, 1), got {confidence}.')
  if reps < 1:
    raise ValueError(f'reps must be >= 1, got {reps}.')
  arrays = scores if isinstance(scores, tuple) else (scores,)
  arrays = tuple(_check_scores(a) for a in arrays)
  rng = np.random.default_rng(seed)
  values = np.array([statistic(*(_resample(a, rng) for a in arrays))
                     for _ in range(reps)])
  tail = 100 * (1 - confidence) / 2
  low, high = np.percentile(values, [tail, 100 - tail])
  return float(low), float(high)


def curve_intervals(curves, statistic: Callable[..., float], **kwargs
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """`statistic` and its interval at each point of [runs, tasks, points]
  curves: ([points] value, [points] lower, [points] upper)."""
  curves = np.asarray(curves, float)
  if curves.ndim != 3:
    raise ValueError(f'curves must be [runs, tasks, points], got shape '
                     f'{curves.shape}.')
  value, low, high = [], [], []
  for i in range(curves.shape[2]):
    value.append(statistic(curves[:, :, i]))
    bounds = interval(curves[:, :, i], statistic, **kwargs)
    low.append(bounds[0])
    high.append(bounds[1])
  return np.array(value), np.array(low), np.array(high)
