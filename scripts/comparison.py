# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Comparing update rules over seeds: runs that resume, final returns with
confidence intervals, learning curves.

What the benchmark scripts (MinAtar, meta-training suites) share:

  summary = run_or_resume(EvalConfig(...), path)   # done: read back
  curves = read_seed_curves(path)                  # {seed: [N] env_steps, ...}
  mean, half = mean_ci([final_return(c) for c in curves.values()])
  plot_rules(path.png, title, {'Disco103': list(curves.values()), ...})
"""

import json
import math
import pathlib
from typing import Any

import numpy as np

from disco_rl.loops import reporting
from disco_rl.loops import run_dir as run_files
from disco_rl.loops import trainer


class Interrupted(Exception):
  """A run stopped by a signal before its end: the script stops too (exit
  status 130, one `stopped:` line); the same command resumes the run."""


def run_or_resume(config, path: pathlib.Path, overwrite: bool = False,
                  **trainer_args) -> dict[str, Any]:
  """Trains one eval run (unless it is done) and returns its summary.

  A run that finished is read back; one that was interrupted (it has a
  checkpoint) is resumed; anything else starts afresh.

  Args:
    config: the run's `EvalConfig`.
    path: its output directory.
    overwrite: run again even if `path` holds a finished run.
    **trainer_args: more `Trainer` arguments (e.g. `rule_params`).
  """
  path = pathlib.Path(path)
  done = path / 'summary.json'
  if done.is_file() and not overwrite:
    summary = json.loads(done.read_text())
    if not summary.get('interrupted') and summary['steps'] == config.num_steps:
      return summary
  checkpoints = path / run_files.CHECKPOINTS
  resume = (not overwrite and (path / run_files.SETTINGS).is_file()
            and checkpoints.is_dir() and any(checkpoints.iterdir()))
  trainer_args.setdefault('progress', False)
  trainer_args.setdefault('log_every', max(1, config.num_steps // 10))
  run = trainer.Trainer(config, path, resume=resume, overwrite=not resume,
                        **trainer_args)
  summary = run.fit()
  run.close()
  return summary


def add_run_flags(parser, out: str) -> None:
  """--seeds, --out and --overwrite of a benchmark that compares rules."""
  parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
  parser.add_argument('--out', default=out)
  parser.add_argument('--overwrite', action='store_true',
                      help='run again the runs already done in --out')


def mean_ci(values) -> tuple[float, float]:
  """(mean, half-width of the 95% t interval); NaN values are dropped."""
  from scipy import stats  # pylint: disable=g-import-not-at-top
  x = np.asarray(values, float)
  x = x[np.isfinite(x)]
  if not len(x):
    return float('nan'), float('nan')
  if len(x) == 1:
    return float(x[0]), float('nan')
  half = stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
  return float(x.mean()), float(half)


def read_seed_curves(path) -> dict[int, dict[str, np.ndarray]]:
  """{seed: [N] step, env_steps, avg_return and episodes} of a run's
  metrics.csv (one row per step and seed; `EvalConfig.num_seeds` seeds in
  parallel, or one)."""
  metrics = reporting.read_metrics(pathlib.Path(path) / 'metrics.csv')
  seeds = metrics['seed'].astype(int)
  return {int(s): {k: np.asarray(metrics[k][seeds == s], float)
                   for k in ('step', 'env_steps', 'avg_return', 'episodes')}
          for s in np.unique(seeds)}


def final_return(curve: dict[str, np.ndarray], fraction: float = 0.1
                 ) -> float:
  """Mean return of the episodes ending in the last `fraction` of steps.

  Each row's `avg_return` is weighted by its `episodes` (NaN: none ended).
  """
  steps = curve['env_steps']
  last = (steps > steps[-1] * (1 - fraction)) & (curve['episodes'] > 0)
  if not last.any():
    return float('nan')
  return float(np.average(curve['avg_return'][last],
                          weights=curve['episodes'][last]))


def plot_rules(path, title: str, curves: dict[str, list[dict]],
               x: str = 'env_steps', xlabel: str = 'environment steps'
               ) -> pathlib.Path:
  """Per rule, the mean return over seeds and its 95% interval (a PNG).

  Args:
    path: the PNG to write.
    title: the plot's title.
    curves: {label: [each seed's curve, `read_seed_curves`]}.
    x: the curves' key on the x axis.
    xlabel: its label.
  """
  fig, ax = reporting.new_figure()
  for label, runs in curves.items():
    length = min(len(c[x]) for c in runs)
    window = max(1, length // 50)
    ys = np.stack([reporting.smoothed(c['avg_return'][:length], window)
                   for c in runs])
    stats = [mean_ci(ys[:, i]) for i in range(length)]
    mean = np.array([m for m, _ in stats])
    half = np.nan_to_num(np.array([h for _, h in stats]))
    xs = runs[0][x][:length]
    ax.plot(xs, mean, label=f'{label} ({len(runs)} seeds)')
    ax.fill_between(xs, mean - half, mean + half, alpha=0.25)
  return reporting.save_figure(fig, ax, path, xlabel, 'average episode return',
                               title, dpi=120)
