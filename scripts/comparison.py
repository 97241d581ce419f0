# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Comparing update rules over seeds: runs that resume, final returns with
confidence intervals, learning curves.

What the benchmark scripts (MinAtar, meta-training suites) share:

  summary = run_or_resume(EvalConfig(...), path)   # done: read back
  curves = read_seed_curves(path)                  # {seed: [N] env_steps, ...}
  mean, half = mean_ci([final_return(c) for c in curves.values()])
  plot_rules(path.png, title, {'disco_103': list(curves.values()), ...})
  plot_rules_grid(path.png, title, {(setting, env): {rule: curves}, ...})

A rule is drawn in its colour and named as `disco_rl.plots` says
(`RULE_COLOURS`, `RULE_NAMES`).
"""

import json
import math
import pathlib
import textwrap
from typing import Any

import numpy as np

from disco_rl import metrics as metrics_lib
from disco_rl import plots
from disco_rl.loops import run_dir as run_files
from disco_rl.loops import trainer


class Interrupted(Exception):
  """A run stopped by a signal before its end: the script stops too (exit
  status 130, one `stopped:` line); the same command resumes the run."""


def run_or_resume(
  config, path: pathlib.Path, overwrite: bool = False, **trainer_args
) -> dict[str, Any]:
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
  resume = (
    not overwrite
    and (path / run_files.SETTINGS).is_file()
    and checkpoints.is_dir()
    and any(checkpoints.iterdir())
  )
  trainer_args.setdefault('progress', False)
  trainer_args.setdefault('log_every', max(1, config.num_steps // 10))
  run = trainer.Trainer(
    config, path, resume=resume, overwrite=not resume, **trainer_args
  )
  summary = run.fit()
  run.close()
  return summary


def add_run_flags(parser, out: str) -> None:
  """--seeds, --out and --overwrite of a benchmark that compares rules."""
  parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
  parser.add_argument('--out', default=out)
  parser.add_argument(
    '--overwrite',
    action='store_true',
    help='run again the runs already done in --out',
  )


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


def mean_range(values) -> str:
  """'mean (min to max)' of per-seed values, 3 decimals: the spread that
  few seeds can support (a t interval over 3 can run past the returns
  possible)."""
  return f'{np.mean(values):.3f} ({min(values):.3f} to {max(values):.3f})'


def read_seed_curves(path) -> dict[int, dict[str, np.ndarray]]:
  """{seed: [N] step, env_steps, avg_return and episodes} of a run's
  metrics.csv (one row per step and seed; `EvalConfig.num_seeds` seeds in
  parallel, or one)."""
  metrics = metrics_lib.read_metrics(pathlib.Path(path) / 'metrics.csv')
  seeds = metrics['seed'].astype(int)
  return {
    int(s): {
      k: np.asarray(metrics[k][seeds == s], float)
      for k in ('step', 'env_steps', 'avg_return', 'episodes')
    }
    for s in np.unique(seeds)
  }


def final_return(curve: dict[str, np.ndarray], fraction: float = 0.1) -> float:
  """Mean return of the episodes ending in the last `fraction` of steps.

  Each row's `avg_return` is weighted by its `episodes` (NaN: none ended).
  """
  steps = curve['env_steps']
  last = (steps > steps[-1] * (1 - fraction)) & (curve['episodes'] > 0)
  if not last.any():
    return float('nan')
  return float(
    np.average(curve['avg_return'][last], weights=curve['episodes'][last])
  )


def random_play_returns(env, steps: int = 5000, seed: int = 0) -> np.ndarray:
  """Returns of the episodes that uniform random play ends in `steps` steps
  of `env`, a batched jittable environment (`disco_rl.environments`), every
  instance's, in order of their ends: [episodes]."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  num_envs = env.batch_size
  num_actions = int(env.single_action_spec().maximum) + 1

  @jax.jit
  def play(key):
    state, _ = env.reset(key)

    def step(carry, key):
      state, acc = carry
      action = jax.random.randint(key, (num_envs,), 0, num_actions)
      state, timestep = env.step(state, action)
      acc = acc + timestep.reward
      last = timestep.step_type == 2  # dm_env.StepType.LAST
      return (state, jnp.where(last, 0.0, acc)), (acc, last)

    _, (acc, last) = jax.lax.scan(
      step, (state, jnp.zeros(num_envs)), jax.random.split(key, steps)
    )
    return acc, last

  acc, last = jax.device_get(play(jax.random.PRNGKey(seed)))
  return np.asarray(acc, float)[np.asarray(last, bool)]


def random_return(env, steps: int = 5000, seed: int = 0) -> float:
  """Mean return of the episodes that uniform random play ends in `steps`
  steps of `env` (`random_play_returns`; 0 if none ended): 0-for-learning on
  a normalised scale."""
  returns = random_play_returns(env, steps, seed)
  return float(returns.mean()) if returns.size else 0.0


CURVE_POINTS = 120  # Points per seed of a committed curves.csv.


def compact_curves(metrics: dict[str, np.ndarray], bin_size: int) -> list[dict]:
  """Per seed (in seed order), the metrics of every `bin_size` iterations:
  the iteration and environment steps at the bin's end, the learner
  updates so far, the episodes that ended in it, their mean return (NaN if
  none) and the mean policy entropy of its updates."""
  rows = []
  for seed in np.unique(metrics['seed']):
    seed_rows = metrics['seed'] == seed
    step = metrics['step'][seed_rows]
    env_steps = metrics['env_steps'][seed_rows]
    episodes = metrics['episodes'][seed_rows]
    returns = np.nan_to_num(metrics['avg_return'][seed_rows]) * episodes
    updates = np.cumsum(metrics['learned'][seed_rows])
    entropy = np.where(
      metrics['learned'][seed_rows] > 0, metrics['entropy'][seed_rows], np.nan
    )
    for start in range(0, len(step), bin_size):
      part = slice(start, start + bin_size)
      count = episodes[part].sum()
      learned = np.isfinite(entropy[part])
      rows.append(
        dict(
          seed=int(seed),
          step=int(step[part][-1]),
          env_steps=int(env_steps[part][-1]),
          updates=int(updates[part][-1]),
          episodes=float(count),
          avg_return=float(returns[part].sum() / count) if count else math.nan,
          entropy=(
            float(entropy[part][learned].mean()) if learned.any() else math.nan
          ),
        )
      )
  return rows


def read_curves(results: pathlib.Path) -> dict[int, dict[str, np.ndarray]]:
  """{seed: {column: [points]}} of a run's curves.csv (`compact_curves`)."""
  table = metrics_lib.read_metrics(results / 'curves.csv')
  return {
    int(s): {k: v[table['seed'] == s] for k, v in table.items()}
    for s in np.unique(table['seed'])
  }


def draw_band(
  ax, x, runs, label: str, alpha: float = 0.25, colour: str | None = None
) -> None:
  """Draws on `ax` the mean over runs of [R, N] curves (NaN points
  skipped) and its 95% percentile-bootstrap band, in `colour` (default:
  matplotlib's next)."""
  import warnings  # pylint: disable=g-import-not-at-top

  runs = np.asarray(runs, float)
  low, high = plots.bootstrap_band(runs)
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', RuntimeWarning)  # All-NaN points.
    (line,) = ax.plot(x, np.nanmean(runs, axis=0), label=label, color=colour)
  ax.fill_between(x, low, high, alpha=alpha, color=line.get_color())


def draw_rules(
  ax,
  curves: dict[str, list[dict]],
  x: str = 'env_steps',
  random: float | None = None,
) -> None:
  """Draws on `ax`, per rule, the mean return over seeds (each seed's curve
  smoothed over 1/50 of its length) and its 95% percentile-bootstrap band
  (unlike a t interval over few seeds, it stays within the returns seen).

  Args:
    ax: matplotlib axes.
    curves: {rule: [each seed's curve, `read_seed_curves`]}, a rule being
      a key of `plots.RULE_COLOURS` (its colour and name).
    x: the curves' key on the x axis.
    random: random play's mean return (`random_return`), drawn as a dashed
      line in its colour; None: no line.
  """
  if random is not None:
    plots.random_play_line(ax, random)
  for rule, runs in curves.items():
    length = min(len(c[x]) for c in runs)
    window = max(1, length // 50)
    ys = np.stack(
      [plots.smoothed(c['avg_return'][:length], window) for c in runs]
    )
    draw_band(
      ax,
      runs[0][x][:length],
      ys,
      f'{plots.RULE_NAMES[rule]} ({len(runs)} seeds)',
      colour=plots.rule_colour(rule),
    )


def plot_rules(
  path,
  title: str,
  curves: dict[str, list[dict]],
  x: str = 'env_steps',
  xlabel: str = 'environment steps',
  random: float | None = None,
) -> pathlib.Path:
  """Per rule, the mean return over seeds and its 95% bootstrap band (a PNG).

  Args:
    path: the PNG to write.
    title: the plot's title.
    curves: {rule: [each seed's curve, `read_seed_curves`]} (`draw_rules`).
    x: the curves' key on the x axis.
    xlabel: its label.
    random: random play's mean return, a dashed line (None: none).
  """
  fig, ax = plots.new_figure()
  draw_rules(ax, curves, x, random)
  return plots.save_figure(
    fig, ax, path, xlabel, 'average episode return', title, dpi=120
  )


def plot_rules_grid(
  path,
  title: str,
  panels: dict[tuple[str, str], dict[str, list[dict]]],
  x: str = 'env_steps',
  xlabel: str = 'environment steps',
  randoms: dict[str, float] | None = None,
) -> pathlib.Path:
  """`plot_rules` of several settings and environments in one PNG: a row
  per setting, a column per environment, one legend.

  Args:
    path: the PNG to write.
    title: the figure's title.
    panels: {(row label, column label): that panel's `curves`}; a missing
      pair leaves its panel empty.
    x: the curves' key on the x axis.
    xlabel: its label.
    randoms: {column label: random play's mean return}, a dashed line in
      that column's panels (a column not there: none).
  """
  randoms = randoms or {}
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use('Agg')
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  if not panels:
    raise ValueError('panels must hold at least one (row, column) pair.')
  rows = list(dict.fromkeys(r for r, _ in panels))
  columns = list(dict.fromkeys(c for _, c in panels))
  fig, axes = plt.subplots(
    len(rows),
    len(columns),
    squeeze=False,
    figsize=(4.2 * len(columns), 3.2 * len(rows) + 0.8),
  )
  for i, row in enumerate(rows):
    for j, column in enumerate(columns):
      ax = axes[i, j]
      if (row, column) not in panels:
        ax.set_axis_off()
        continue
      draw_rules(ax, panels[row, column], x, randoms.get(column))
      ax.set_title(f'{column}\n{row}', fontsize=9)
      ax.grid(alpha=0.3)
      ax.set_xlabel(xlabel, fontsize=9)
      if j == 0:
        ax.set_ylabel('average episode return')
      ax.xaxis.set_major_locator(ticker.MaxNLocator(5))
      ax.xaxis.set_major_formatter(ticker.EngFormatter())  # 50k, 1M
  legend = {}  # Every rule of any panel, in order of appearance.
  for ax in axes.flat:
    for handle, label in zip(*ax.get_legend_handles_labels(), strict=False):
      legend.setdefault(label, handle)
  handles, labels = list(legend.values()), list(legend)
  ncol = len(labels) if len(columns) > 1 else 1
  fig.legend(handles, labels, loc='lower center', ncol=ncol, frameon=False)
  fig.suptitle(textwrap.fill(title, 45 * len(columns)))
  fig.tight_layout(rect=(0, 0.03 * len(labels) / ncol / len(rows) * 2, 1, 1))
  path = pathlib.Path(path)
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path
