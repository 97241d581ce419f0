# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What the remaining study scripts share: runs that resume, random play,
compact learning curves and a mean-and-band line.

  summary = run_or_resume(EvalConfig(...), path)   # done: read back
  random = random_return(env)                      # uniform random play
  rows = compact_curves(metrics, bin_size)         # per seed, to commit
  curves = read_curves(results)                    # {seed: {column: [N]}}
  draw_band(ax, x, runs, label)                    # mean, bootstrap band

The comparison of rules itself (final return, rates, normalisation,
statistics, tables, figures) is the study facility's (`disco_rl.studies`,
`python -m disco_rl.examples.study`); this module goes when the scripts
that import it have moved onto it too.
"""

import json
import math
import pathlib
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
