# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What a study measures of a run: its final return, random play's return,
normalised scores and a compact learning curve.

The input is a run's metrics rows as the eval job writes them (one row per
iteration and run, `disco_rl.jobs.eval.report.rows`): a DataFrame, a list
of row dicts or a dict of columns, with at least

  env_steps   environment steps of the run when the iteration ended
  episodes    episodes that ended in the iteration
  avg_return  their mean return (NaN when none ended)

and `seed` (plus `learning_rate` when runs differ in it) naming the run.

  final = final_return(rows_of_one_run)        # the one definition
  finals = final_returns(rows)                 # per run, a Series
  random = random_return(study / 'random_play.json', 'gymnax:Breakout-MinAtar')
  score = normalise(final, random, reference=28.0)
  table = normalised_scores(results, {env: random}, {env: reference})
  curve = compact_curves(rows, points=120)     # small enough to commit
  length = plateau(rows_of_one_run, num_actions=3)['plateau']
"""

from collections.abc import Mapping, Sequence
import json
import math
import os
import pathlib
from typing import Any, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np
import numpy.typing as npt
import pandas as pd

from disco_rl import environments
from disco_rl.environments import base

FINAL_FRACTION = 0.1  # The final return: the last 10% of environment steps.
CURVE_POINTS = 120  # Points per run of a committed compact curve.
# Random play: instances, steps of each and seed (the MinAtar study's and
# benchmark_meta_suite.py's committed random play was measured with these).
RANDOM_NUM_ENVS = 32
RANDOM_STEPS = 5000
RANDOM_SEED = 0
# What a random-play record states about how it was measured: a cached
# record is reused only when every one of these equals the request's.
RANDOM_SETTINGS = ('env', 'env_settings', 'num_envs', 'steps', 'seed')
ROW_COLUMNS = ('env_steps', 'episodes', 'avg_return')
RUN_KEYS = ('seed', 'learning_rate')  # The columns that name a run.
# The plateau (docs/studies/plateau.md): the return's start and end are its
# means over the first 5% and the last 10% of the learner updates; moving
# means span 25 iterations; the policy has left uniform once its entropy's
# moving mean is below 0.9 ln(actions).
PLATEAU_START, PLATEAU_END = 0.05, 0.1
PLATEAU_WINDOW = 25
UNIFORM_FRACTION = 0.9
# Metrics rows as the functions take them: a DataFrame, a list of row dicts
# or a dict of columns (anything `pd.DataFrame` makes a table of).
Rows: TypeAlias = pd.DataFrame | Sequence[Mapping[str, Any]] | Mapping[str, Any]


def _table(
  rows: Rows, what: str, columns: Sequence[str] = ROW_COLUMNS
) -> pd.DataFrame:
  """`rows` as a DataFrame with `columns` checked.

  Raises:
    ValueError: no rows, a missing column, negative or non-finite episode
      counts or environment steps, or a row with episodes but no finite
      return.
  """
  try:
    table = pd.DataFrame(rows)
  except (TypeError, ValueError) as e:
    raise ValueError(
      f'{what} must be rows (a DataFrame, a list of dicts or '
      f'a dict of columns), got {type(rows).__name__}: '
      f'{e}.'
    ) from None
  missing = [c for c in columns if c not in table.columns]
  if missing or table.empty:
    raise ValueError(
      f'{what} must be non-empty rows with columns '
      f'{list(columns)}; got {len(table)} rows with columns '
      f'{list(table.columns)} (missing {missing}).'
    )
  table = table.copy()
  for column in ('env_steps', 'episodes'):
    values = pd.to_numeric(table[column], errors='coerce')
    if not (np.isfinite(values) & (values >= 0)).all():
      raise ValueError(
        f'{what}: {column} must be finite and >= 0, got '
        f'{table[column].tolist()}.'
      )
    table[column] = values.astype(float)
  table['avg_return'] = pd.to_numeric(table['avg_return'], errors='coerce')
  ended = table['episodes'] > 0
  if not np.isfinite(table.loc[ended, 'avg_return']).all():
    raise ValueError(
      f'{what}: avg_return must be finite where episodes > 0, '
      f'got {table.loc[ended, "avg_return"].tolist()}.'
    )
  return table


def _check_fraction(fraction: float) -> float:
  if not (isinstance(fraction, (int, float)) and 0 < fraction <= 1):
    raise ValueError(f'fraction must be in (0, 1], got {fraction!r}.')
  return float(fraction)


def _run_keys(table: pd.DataFrame) -> list[str]:
  return [k for k in RUN_KEYS if k in table.columns]


def _check_one_run(table: pd.DataFrame, what: str) -> None:
  for key in _run_keys(table):
    if table[key].nunique(dropna=False) > 1:
      raise ValueError(
        f'{what} must be the rows of one run, got '
        f'{key} {sorted(table[key].unique().tolist())} '
        '(final_returns / compact_curves take several).'
      )


def _episode_mean(table: pd.DataFrame) -> float:
  """sum(avg_return * episodes) / sum(episodes) over rows with episodes
  (NaN if none)."""
  ended = table[table['episodes'] > 0]
  count = ended['episodes'].sum()
  if not count:
    return math.nan
  return float((ended['avg_return'] * ended['episodes']).sum() / count)


def final_return(rows: Rows, fraction: float = FINAL_FRACTION) -> float:
  """The final return of one run: the mean return of the episodes that
  ended in the last `fraction` of its environment steps.

  That is sum(avg_return * episodes) / sum(episodes) over the rows whose
  `env_steps` exceed (1 - fraction) times the run's last `env_steps`, so
  every episode weighs the same whichever iteration ended it. NaN when no
  episode ended there: a run whose episodes are longer than its final
  stretch has no final return, and no other number stands in for one.

  The one definition of the studies. The scripts had two:
  scripts/comparison.py's `final_return` (the script was retired on
  2026-12-04) was this one (the last 10% of environment steps, NaN if no
  episode ended there);
  the MinAtar study's former script (benchmark_minatar.py, whose final
  returns docs/results/minatar keeps) took the rows whose
  cumulative learner updates (`learned`) exceed 90% of the run's updates,
  and when no episode ended there fell back, silently, to the last
  iteration that ended one. The windows differ by the iterations before
  the first update (the replay buffer filling: they count toward
  environment steps, not updates), so the update window starts that many
  iterations later: at MinAtar's settings (58 environment steps per
  iteration, 3,007 iterations, the first update at iteration 7) the
  environment-steps window is iterations 2,706-3,006 and the updates window
  2,707-3,006, one iteration apart. The fallback gave a number from outside
  the final stretch (Freeway's 2,500-step episodes, or a tiny run) where
  this gives NaN.

  Args:
    rows: one run's metrics rows, with columns env_steps, episodes and
      avg_return (any order; a `seed` column, if any, holds one value).
    fraction: the final stretch, a fraction of the run's environment steps
      in (0, 1].

  Returns:
    The episode-weighted mean return, or NaN.

  Raises:
    ValueError: bad rows (see the module's docstring), rows of several
      runs, or a fraction outside (0, 1].
  """
  fraction = _check_fraction(fraction)
  table = _table(rows, 'rows')
  _check_one_run(table, 'rows')
  cut = (1.0 - fraction) * table['env_steps'].max()
  return _episode_mean(table[table['env_steps'] > cut])


def final_returns(rows: Rows, fraction: float = FINAL_FRACTION) -> pd.Series:
  """`final_return` of every run in `rows`.

  Args:
    rows: metrics rows of one or more runs, each named by its `seed` (and
      `learning_rate`, when that column is there).
    fraction: as `final_return`.

  Returns:
    A Series of final returns indexed by the run's seed (a MultiIndex of
    seed and learning_rate when rows have a learning_rate column), in
    sorted order.
  """
  fraction = _check_fraction(fraction)
  table = _table(rows, 'rows')
  keys = _run_keys(table)
  if not keys:
    raise ValueError(
      f'rows must have a column naming the run '
      f'({" or ".join(RUN_KEYS)}), got {list(table.columns)}.'
    )
  finals = {
    key: final_return(group, fraction)
    for key, group in table.groupby(keys if len(keys) > 1 else keys[0])
  }
  series = pd.Series(finals, name='final_return', dtype=float)
  series.index.names = keys
  return series


def _moving_mean(values: pd.Series, window: int) -> npt.NDArray[np.float64]:
  """The trailing `window`-point mean, NaNs skipped (NaN if all are)."""
  return values.astype(float).rolling(window, min_periods=1).mean().to_numpy()


def plateau(
  rows: Rows, num_actions: int, window: int = PLATEAU_WINDOW
) -> dict[str, float]:
  """How long one run stays at its starting return (the one definition;
  docs/studies/plateau.md).

  The plateau is the first learner update at which the return's
  `window`-iteration moving mean is half way from its start (its mean over
  the first `PLATEAU_START` of the updates) to its end (the last
  `PLATEAU_END`) without falling back to the start later (an early
  crossing of noise does not count); it counts only once the policy has
  left uniform for good (`leaves_uniform`: the first update from which
  the entropy's moving mean stays below `UNIFORM_FRACTION` ln(num_actions)
  to the end; an early dip that comes back does not count). NaN where the
  return did not rise, its moving mean never got half way, or the policy
  never left uniform.

  Args:
    rows: one run's metrics rows (one per iteration, in order), with the
      columns of `final_return`, learned (the learner updates the
      iteration took: 0 or 1, epochs x minibatches on-policy) and entropy
      (the policy's; NaN before the first).
    num_actions: the environment's actions.
    window: iterations the moving means span.

  Returns:
    dict(plateau, start, end, leaves_uniform): updates, the start and end
    returns, updates.

  Raises:
    ValueError: rows of several runs, missing columns, or a bad
      num_actions or window.
  """
  table = _table(rows, 'rows', ROW_COLUMNS + ('learned', 'entropy'))
  _check_one_run(table, 'rows')
  _check_count('num_actions', num_actions, 2)
  _check_count('window', window, 1)
  updates = table['learned'].fillna(0).cumsum().to_numpy(float)
  returns = table['avg_return'].astype(float)
  total = updates[-1]
  start = returns[updates <= max(total * PLATEAU_START, 1)].mean()
  end = returns[updates > total * (1 - PLATEAU_END)].mean()
  smooth_entropy = _moving_mean(table['entropy'], window)
  above = ~(smooth_entropy < UNIFORM_FRACTION * math.log(num_actions))
  leaves = math.nan
  if not above[-1]:
    first = np.flatnonzero(above)[-1] + 1 if above.any() else 0
    leaves = float(updates[first])
  length = math.nan
  if math.isfinite(start) and math.isfinite(end) and end > start:
    # A window no longer than the end's stretch, so that the moving mean
    # there is close to `end`.
    stretch = int(np.sum(updates > total * (1 - PLATEAU_END)))
    smooth = _moving_mean(returns, max(1, min(window, stretch)))
    # A crossing the moving mean falls back from, to the start or below,
    # does not count (noise early in the run).
    back = np.flatnonzero(smooth <= start)
    after = back[-1] + 1 if back.size else 0
    reached = np.flatnonzero(smooth[after:] >= (start + end) / 2) + after
    if reached.size and math.isfinite(leaves):
      length = float(updates[reached[0]])
  return dict(
    plateau=length, start=float(start), end=float(end), leaves_uniform=leaves
  )


def compact_curve(rows: Rows, points: int = CURVE_POINTS) -> pd.DataFrame:
  """One run's rows reduced to at most `points` points, for committing.

  The run's environment steps (0, last] are cut into `points` bins of
  equal width; a bin's point holds the environment steps of its last row,
  the episodes that ended in it and their mean return (episode-weighted;
  NaN if none ended), and, where rows have them, the iteration (`step`) of
  its last row and the learner updates done by then (`learned` summed).
  Empty bins (fewer rows than points) have no point. `final_return` of the
  points equals the rows' when the final stretch starts at a bin's edge
  (it takes whole bins).

  Args:
    rows: one run's metrics rows (env_steps, episodes, avg_return; step and
      learned optional).
    points: the most points, >= 1.

  Returns:
    A DataFrame, one row per non-empty bin in order of environment steps:
    [step,] env_steps, [updates,] episodes, avg_return.
  """
  if isinstance(points, bool) or not isinstance(points, int) or points < 1:
    raise ValueError(f'points must be an integer >= 1, got {points!r}.')
  table = _table(rows, 'rows').sort_values('env_steps', kind='stable')
  _check_one_run(table, 'rows')
  last = table['env_steps'].iloc[-1]
  if last <= 0:
    raise ValueError(f'rows: the last env_steps must be > 0, got {last}.')
  bins = np.clip(
    np.ceil(table['env_steps'].to_numpy() * points / last) - 1, 0, points - 1
  ).astype(int)
  ended = table['episodes'] > 0
  table = table.assign(
    bin=bins,
    weighted=np.where(ended, table['avg_return'] * table['episodes'], 0.0),
  )
  if 'learned' in table.columns:
    table['updates'] = pd.to_numeric(table['learned']).cumsum()
  grouped = table.groupby('bin', sort=True)
  out = pd.DataFrame({'env_steps': grouped['env_steps'].last()})
  if 'step' in table.columns:
    out.insert(0, 'step', grouped['step'].last())
  if 'updates' in table.columns:
    out['updates'] = grouped['updates'].last()
  out['episodes'] = grouped['episodes'].sum()
  out['avg_return'] = grouped['weighted'].sum() / out['episodes'].where(
    out['episodes'] > 0
  )
  return out.reset_index(drop=True)


def compact_curves(rows: Rows, points: int = CURVE_POINTS) -> pd.DataFrame:
  """`compact_curve` of every run in `rows`, the run's keys (seed, and
  learning_rate if there) as the first columns, runs in sorted order."""
  table = _table(rows, 'rows')
  keys = _run_keys(table)
  if not keys:
    raise ValueError(
      f'rows must have a column naming the run '
      f'({" or ".join(RUN_KEYS)}), got {list(table.columns)}.'
    )
  parts = []
  for key, group in table.groupby(keys, sort=True):
    curve = compact_curve(group, points)
    for name, value in zip(keys, key, strict=True):
      curve.insert(list(keys).index(name), name, value)
    parts.append(curve)
  return pd.concat(parts, ignore_index=True)


# Random play.


def env_key(env: str, env_settings: Mapping[str, Any] | None = None) -> str:
  """The name of an environment with its settings, as task texts are
  written ('gymnax:DeepSea-bsuite[size=8]'; settings in sorted order): the
  key of its random-play record."""
  settings = _settings(env_settings)
  if not settings:
    return env
  return environments.format_spec(
    env, {k: settings[k] for k in sorted(settings)}
  )


def _settings(env_settings: Mapping[str, Any] | None) -> dict[str, Any]:
  if env_settings is None:
    return {}
  if not isinstance(env_settings, Mapping):
    raise ValueError(
      f'env_settings must be a mapping of setting names to '
      f'values or None, got {env_settings!r}.'
    )
  settings = dict(env_settings)
  try:
    json.dumps(settings)
  except TypeError:
    raise ValueError(
      f'env_settings must hold JSON values (numbers, text, '
      f'lists) to be recorded, got {settings!r}.'
    ) from None
  return settings


def _check_count(name: str, value: int, low: int) -> int:
  if (
    isinstance(value, bool)
    or not isinstance(value, (int, np.integer))
    or (value < low)
  ):
    raise ValueError(f'{name} must be an integer >= {low}, got {value!r}.')
  return int(value)


def random_play_returns(
  env: base.Environment[Any], steps: int, seed: int
) -> np.ndarray:
  """The returns of the episodes that uniform random play ends in `steps`
  steps of `env` (a batched jittable environment), every instance's, in
  order of their ends: [episodes]. The same draws as the retired
  scripts/comparison.py's `random_play_returns` (the committed random-play
  returns were measured with it; `git show c88406e:scripts/comparison.py`);
  scripts/random_play.py used this one (retired; `git show
  450ae85:scripts/random_play.py`)."""
  if env.on_host:
    raise ValueError(
      f'env must be a jittable environment (random play is '
      f'one compiled scan), got one stepped on the host: '
      f'{env!r}.'
    )
  num_envs = env.batch_size
  num_actions = int(env.single_action_spec().maximum) + 1

  @jax.jit
  def play(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    state, _ = env.reset(key)

    def step(
      carry: tuple[Any, jax.Array], key: jax.Array
    ) -> tuple[tuple[Any, jax.Array], tuple[jax.Array, jax.Array]]:
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


def random_play(
  env: str,
  env_settings: Mapping[str, Any] | None = None,
  *,
  num_envs: int = RANDOM_NUM_ENVS,
  steps: int = RANDOM_STEPS,
  seed: int = RANDOM_SEED,
) -> dict[str, Any]:
  """Uniform random play in an environment, measured.

  Args:
    env: a registry name (`disco_rl.environments.get_environment`), e.g.
      'jittable_catch' or 'gymnax:Breakout-MinAtar'; jittable families only.
    env_settings: its settings (None: the family's defaults).
    num_envs: instances played at once.
    steps: steps of each instance.
    seed: the random key's seed (resets and actions).

  Returns:
    The record: dict(env, env_settings, num_envs, steps, seed, episodes:
    how many ended, mean_return: their mean return, NaN if none ended).
  """
  settings = _settings(env_settings)
  num_envs = _check_count('num_envs', num_envs, 1)
  steps = _check_count('steps', steps, 1)
  seed = _check_count('seed', seed, 0)
  # No settings: the family's defaults (the same record as None).
  environment = environments.get_environment(env, num_envs, settings or None)
  returns = random_play_returns(environment, steps, seed)
  return dict(
    env=env,
    env_settings=settings,
    num_envs=num_envs,
    steps=steps,
    seed=seed,
    episodes=int(returns.size),
    mean_return=float(returns.mean()) if returns.size else math.nan,
  )


def read_random_play(
  path: str | os.PathLike[str],
) -> dict[str, dict[str, Any]]:
  """The random-play records of a cache file ({} if there is none).

  Raises:
    ValueError: the file is not a JSON object of records (e.g. the scripts'
      older {game: return} files, which say nothing of how they were
      measured).
  """
  path = pathlib.Path(path)
  if not path.is_file():
    return {}
  records = json.loads(path.read_text())
  bad = [
    k
    for k, v in (records.items() if isinstance(records, dict) else ())
    if not (
      isinstance(v, dict)
      and {'episodes', 'mean_return', *RANDOM_SETTINGS} <= set(v)
    )
  ]
  if not isinstance(records, dict) or bad:
    raise ValueError(
      f'{path} must hold random-play records ({{key: {{'
      f'{", ".join(RANDOM_SETTINGS)}, episodes, mean_return'
      f'}}}}), got entries {bad or records!r} without them.'
    )
  return records


def random_return(
  cache: str | os.PathLike[str],
  env: str,
  env_settings: Mapping[str, Any] | None = None,
  *,
  num_envs: int = RANDOM_NUM_ENVS,
  steps: int = RANDOM_STEPS,
  seed: int = RANDOM_SEED,
) -> float:
  """Random play's mean return in an environment, measured once and kept.

  Read from the JSON file `cache` (e.g. the study's random_play.json,
  keyed by `env_key`), or measured (`random_play`) and added there. A
  record measured with other settings is not reused: that is an error.

  Args:
    cache: the cache file's path (made if absent).
    env: as `random_play`.
    env_settings: as `random_play`.
    num_envs: as `random_play`.
    steps: as `random_play`.
    seed: as `random_play`.

  Returns:
    The mean return of the episodes random play ended.

  Raises:
    ValueError: the cached record was measured with other settings (naming
      the first that differs), or no episode ended in the play.
  """
  path = pathlib.Path(cache)
  request: dict[str, Any] = dict(
    env=env,
    env_settings=_settings(env_settings),
    num_envs=_check_count('num_envs', num_envs, 1),
    steps=_check_count('steps', steps, 1),
    seed=_check_count('seed', seed, 0),
  )
  key = env_key(env, env_settings)
  records = read_random_play(path)
  if key in records:
    record = records[key]
    for name in RANDOM_SETTINGS:
      if record[name] != request[name]:
        raise ValueError(
          f'{path}: random play of {key} was measured with {name}='
          f'{record[name]!r}, asked for {name}={request[name]!r}; ask for '
          f'{name}={record[name]!r}, or remove its entry to measure again.'
        )
  else:
    record = random_play(**request)
    if not record['episodes']:
      raise ValueError(
        f'random play of {key} ended no episode in steps={steps} steps of '
        f'{num_envs} instances: give more steps.'
      )
    records[key] = record
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + '.tmp')
    tmp.write_text(json.dumps(records, indent=1, sort_keys=True) + '\n')
    tmp.replace(path)
  return float(record['mean_return'])


# Normalisation.


def normalise(
  returns: npt.ArrayLike, random: float, reference: float
) -> float | np.ndarray:
  """(returns - random) / (reference - random): random play scores 0, the
  reference 1.

  Args:
    returns: a return, or an array of them.
    random: random play's mean return (`random_return`).
    reference: the return counted as 1: a published one (e.g. gymnax's PPO
      return on a MinAtar game) or the best over the compared rules
      (`best_means`); above `random`.

  Returns:
    A float, or an array shaped as `returns`.
  """
  for name, value in (('random', random), ('reference', reference)):
    if (
      isinstance(value, bool)
      or not isinstance(value, (int, float, np.floating, np.integer))
      or not math.isfinite(value)
    ):
      raise ValueError(f'{name} must be a finite number, got {value!r}.')
  if not reference > random:
    raise ValueError(
      f'reference must be above random ({random!r}) for a '
      f'score from random play (0) to the reference (1), got '
      f'{reference!r}.'
    )
  scores = (np.asarray(returns, float) - random) / (reference - random)
  return float(scores) if scores.ndim == 0 else scores


RESULT_KEYS = ('study', 'stage')  # The columns that group compared runs.


def _check_results(
  results: pd.DataFrame, columns: Sequence[str]
) -> pd.DataFrame:
  if not isinstance(results, pd.DataFrame):
    raise ValueError(
      f'results must be a pandas DataFrame, got {type(results).__name__}.'
    )
  missing = [c for c in columns if c not in results.columns]
  if missing:
    raise ValueError(
      f'results must have columns {list(columns)}, got '
      f'{list(results.columns)} (missing {missing}).'
    )
  return results


def best_means(results: pd.DataFrame) -> pd.Series:
  """The reference of the rate procedure (`spec.RatePick`, as the removed
  scripts/benchmark_meta_suite.py's `choose_rates` had it): per
  environment, the highest mean final return over seeds of any (rule,
  learning rate) compared there.

  Args:
    results: one row per run: env, rule, learning_rate, seed,
      final_return (and study, stage: each group compared on its own).

  Returns:
    A Series indexed by [study, stage,] env. A cell with a NaN final return
    has a NaN mean and is passed over.
  """
  _check_results(results, ('env', 'rule', 'learning_rate', 'final_return'))
  groups = [c for c in RESULT_KEYS if c in results.columns] + ['env']
  means = results.groupby(groups + ['rule', 'learning_rate'], sort=False)[
    'final_return'
  ].agg(lambda finals: finals.mean(skipna=False))
  return (
    means.groupby(level=groups, sort=False).max().rename('reference_return')
  )


def normalised_scores(
  results: pd.DataFrame,
  randoms: Mapping[str, float],
  references: Mapping[str, float] | None = None,
) -> pd.DataFrame:
  """`results` with each run's normalisation: columns random_return,
  reference_return and normalised_score added.

  Args:
    results: one row per run: env, rule, learning_rate, seed, final_return
      (and study, stage).
    randoms: random play's mean return per env, for every env of `results`.
    references: the reference return per env (e.g. `PPO_RETURNS`); an env
      without one gets NaN scores (left out of aggregates, by name). None:
      `best_means`, per [study, stage,] env; where no cell's mean is above
      random play there is no span to normalise by: every run there scores
      NaN (the report leaves the environment out, saying why; the rate
      procedure leaves it out of its average).

  Returns:
    A copy of `results` with the three columns.
  """
  _check_results(results, ('env', 'final_return'))
  envs = list(dict.fromkeys(results['env']))
  missing = [e for e in envs if e not in randoms]
  if missing:
    raise ValueError(
      f'randoms must have a random-play return for every env '
      f'of results: missing {missing}.'
    )
  bad = {e: randoms[e] for e in envs if not math.isfinite(randoms[e])}
  if bad:
    raise ValueError(f'randoms must be finite numbers, got {bad}.')
  out = results.copy()
  out['random_return'] = out['env'].map(dict(randoms)).astype(float)
  if references is None:
    best = best_means(results)
    out['reference_return'] = out.merge(
      best.reset_index(),
      how='left',
      on=list(best.index.names),
      validate='many_to_one',
    )['reference_return'].to_numpy()
    span = out['reference_return'] - out['random_return']
    # No cell above random play: no span, NaN (not 0, which the formula
    # would not give).
    out['normalised_score'] = (
      out['final_return'] - out['random_return']
    ) / span.where(span > 0)
    return out
  if not isinstance(references, Mapping):
    raise ValueError(
      f'references must be a mapping of env to return or '
      f'None, got {references!r}.'
    )
  for env in envs:
    if env in references:
      normalise(0.0, randoms[env], references[env])  # Checks the pair.
  out['reference_return'] = out['env'].map(
    {e: float(references[e]) for e in envs if e in references}
  )
  out['normalised_score'] = (out['final_return'] - out['random_return']) / (
    out['reference_return'] - out['random_return']
  )
  return out
