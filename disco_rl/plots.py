# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The figures people look at: learning curves, several runs with a
bootstrap band of their mean, drawn off-screen (Agg) to PNG files.

Every figure of the project draws a rule in its colour of `RULE_COLOURS`
and names it as `RULE_NAMES` does; lines that are not rules (seeds,
conditions or tasks of one rule) take `OTHER_COLOURS`, which no rule uses.
"""

import pathlib
from typing import Any
import warnings

import numpy as np

# One colour and one name per rule, in every figure (the rule meta-trained
# here: 'learned'; random play's level: 'random').
RULE_COLOURS = {
  'learned': 'tab:blue',
  'disco_103': 'tab:orange',
  'actor_critic': 'tab:green',
  'policy_gradient': 'tab:red',
  'ppo': 'magenta',
  'random': 'tab:gray',
}
RULE_NAMES = {
  'learned': 'meta-trained here',
  'disco_103': 'Disco103',
  'actor_critic': 'actor-critic',
  'policy_gradient': 'policy gradient',
  'ppo': 'PPO',
  'random': 'random play',
}
OTHER_COLOURS = (
  'tab:purple',
  'tab:brown',
  'tab:pink',
  'tab:olive',
  'tab:cyan',
  'navy',
  'darkgoldenrod',
  'teal',
)


def rule_colour(rule: str) -> str:
  """The colour of `rule` (a key of `RULE_COLOURS`) in every figure."""
  if rule not in RULE_COLOURS:
    raise ValueError(
      f'no colour for rule {rule!r}: one of {sorted(RULE_COLOURS)}.'
    )
  return RULE_COLOURS[rule]


def other_colour(i: int) -> str:
  """The `i`-th colour of lines that are not rules (it cycles)."""
  return OTHER_COLOURS[i % len(OTHER_COLOURS)]


def random_play_line(ax, value: float, label: str = RULE_NAMES['random']):
  """Draws random play's return `value` on `ax` as every figure does: a
  dashed horizontal line in its colour, labelled `label`."""
  return ax.axhline(
    value, color=rule_colour('random'), linestyle='--', linewidth=1, label=label
  )


def rule_title(rule: str, given_parameters: bool = False) -> str:
  """How a figure's title names the rule that trained its agent: 'Disco103',
  'actor-critic'; with parameters given (a meta-trained rule's file, say),
  'a given rule (disco_103 layout)': they need not be Disco103's."""
  if given_parameters:
    return f'a given rule ({rule} layout)'
  return RULE_NAMES.get(rule, rule)


def plot_runs(
  x,
  runs: dict[str, Any],
  path,
  xlabel: str,
  ylabel: str,
  title: str,
  smooth: int = 0,
  seed: int = 0,
) -> pathlib.Path:
  """Saves the curves of runs at the same `x` as PNG.

  One run: `plot_curve`. Several: each run's `smooth`-point moving average
  (thin), their mean and a 95% percentile-bootstrap band of the mean over
  runs (1,000 resamples of the runs, drawn with `seed`).
  """
  if len(runs) == 1:
    return plot_curve(
      x, next(iter(runs.values())), path, xlabel, ylabel, title, smooth
    )
  fig, ax = new_figure()
  x = np.asarray(x)
  curves = np.stack(
    [
      smoothed(y, smooth) if smooth else np.asarray(y, float)
      for y in runs.values()
    ]
  )
  for i, (label, curve) in enumerate(zip(runs, curves, strict=True)):
    ax.plot(
      x, curve, linewidth=0.8, alpha=0.45, label=label, color=other_colour(i)
    )
  low, high = bootstrap_band(curves, seed=seed)
  with np.errstate(all='ignore'), warnings.catch_warnings():
    warnings.simplefilter('ignore', RuntimeWarning)  # All-NaN columns.
    mean = np.nanmean(curves, axis=0)
  ax.plot(
    x, mean, color='black', linewidth=1.8, label=f'mean of {len(runs)} runs'
  )
  ax.fill_between(
    x, low, high, color='black', alpha=0.15, label='95% bootstrap interval'
  )
  suffix = f' ({smooth}-step mean)' if smooth else ''
  return save_figure(fig, ax, path, xlabel, ylabel + suffix, title)


def bootstrap_band(
  curves, confidence: float = 0.95, resamples: int = 1000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
  """Percentile-bootstrap interval of the mean of [R, N] curves over R runs.

  Returns:
    ([N] lower, [N] upper) bounds (NaN where every run is NaN).
  """
  curves = np.asarray(curves, float)
  rng = np.random.default_rng(seed)
  picks = rng.integers(0, len(curves), size=(resamples, len(curves)))
  with np.errstate(all='ignore'), warnings.catch_warnings():
    warnings.simplefilter('ignore', RuntimeWarning)  # All-NaN columns.
    means = np.nanmean(curves[picks], axis=1)  # [resamples, N]
    tail = 100 * (1 - confidence) / 2
    return (
      np.nanpercentile(means, tail, axis=0),
      np.nanpercentile(means, 100 - tail, axis=0),
    )


def smoothed(y, window: int) -> np.ndarray:
  """The trailing `window`-point mean of `y`, NaNs skipped (pandas)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  return (
    pd.Series(np.asarray(y, float))
    .rolling(window, min_periods=1)
    .mean()
    .to_numpy()
  )


def new_figure():
  """(figure, axes) of a 7x4 inch plot drawn off-screen (Agg)."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  return plt.subplots(figsize=(7, 4))


def save_figure(
  fig, ax, path, xlabel: str, ylabel: str, title: str, dpi: int = 100
) -> pathlib.Path:
  """Labels, grid and legend on `ax`; `fig` saved as PNG to `path`, closed."""
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.set_title(title)
  ax.grid(alpha=0.3)
  ax.legend()
  fig.tight_layout()
  path = pathlib.Path(path)
  fig.savefig(path, dpi=dpi)
  plt.close(fig)
  return path


def plot_curve(
  x, y, path, xlabel: str, ylabel: str, title: str, smooth: int = 0
) -> pathlib.Path:
  """Saves a line plot as PNG, with a `smooth`-point moving average if > 0."""
  fig, ax = new_figure()
  x, y = np.asarray(x), np.asarray(y, dtype=float)
  ax.plot(
    x, y, alpha=0.35 if smooth else 1.0, label=ylabel, color=other_colour(0)
  )
  if smooth and len(y) >= smooth:
    avg = smoothed(y, smooth)
    ax.plot(
      x[smooth - 1 :],
      avg[smooth - 1 :],
      color='black',
      label=f'{ylabel} ({smooth}-step mean)',
    )
  return save_figure(fig, ax, path, xlabel, ylabel, title)
