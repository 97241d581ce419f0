# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A study's report, from its tidy results and curves alone.

Two tables are the input (`read_results`, `read_curves`: CSV files):

  results   one row per run: RESULT_COLUMNS (study, stage, env, rule, seed,
            learning_rate, budget, final_return, random_return,
            reference_return, normalised_score; `measure.normalised_scores`
            adds the last three)
  curves    one row per point of a run's compact curve: CURVE_COLUMNS
            (study, stage, env, rule, seed, learning_rate, env_steps,
            avg_return; `measure.compact_curves`)

and the report is

  numbers = summarise(results, curves, baseline_rule='actor_critic')
  text = markdown(numbers)
  paths = write_report(results, curves, 'out', baseline_rule='actor_critic')
  # out/report.md, report.json, curves.png, profiles.png, iqm_curve.png

Per cell (an environment and a rule at its learning rate): the mean final
return over seeds and their range (with 3 seeds a range, not an interval).
Across the environments with normalised scores (`stats`): each rule's IQM
with its stratified-bootstrap 95% interval, each rule's IQM difference from
`baseline_rule` and P(rule > baseline) with theirs, performance profiles,
and the same comparison with the most extreme run set to its environment's
median. Curves: one panel per environment, one colour per rule
(`plots.RULE_COLOURS`), random play's return dashed, and the IQM over
environments of normalised curves with bootstrap bands.

A stage whose rules each ran at one learning rate per environment compares
rules; one where a rule ran at several (a tuning stage) compares each
(rule, rate) pair. The same files give the same bytes: every bootstrap has
a fixed seed and the figures are PNGs without metadata at a fixed dpi.
"""

from collections.abc import Callable, Iterable, Sequence
import json
import math
import os
import pathlib
import textwrap
import types
from typing import TYPE_CHECKING, Any
import warnings

import numpy as np
import numpy.typing as npt
import pandas as pd

from disco_rl import plots
from disco_rl.runtime import metrics
from disco_rl.studies import measure
from disco_rl.studies import stats

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn.
  from matplotlib.artist import Artist
  from matplotlib.figure import Figure

RESULT_COLUMNS = (
  'study',
  'stage',
  'env',
  'rule',
  'seed',
  'learning_rate',
  'budget',
  'final_return',
  'random_return',
  'reference_return',
  'normalised_score',
)
CURVE_COLUMNS = (
  'study',
  'stage',
  'env',
  'rule',
  'seed',
  'learning_rate',
  'env_steps',
  'avg_return',
)
CELL = ('env', 'rule', 'learning_rate')  # A cell of a stage.
REPS = 2000  # Bootstrap resamples of the final scores.
CURVE_REPS = 500  # Of each point of the IQM curve.
SEED = 0  # Every interval's resampling seed.
CONFIDENCE = 0.95
PROFILE_POINTS = 101  # Thresholds of the performance profiles.
DPI = 100
FILES = (
  'report.md',
  'report.json',
  'curves.png',
  'profiles.png',
  'iqm_curve.png',
)


# Reading.


def read_results(path: str | os.PathLike[str]) -> pd.DataFrame:
  """The results table of a CSV file (one row per run), checked whole
  (`read_table`)."""
  return read_table(path, RESULT_COLUMNS[: RESULT_COLUMNS.index('budget') + 1])


def read_curves(path: str | os.PathLike[str]) -> pd.DataFrame:
  """The curves table of a CSV file (one row per point of a run), checked
  whole (`read_table`)."""
  return read_table(path, CURVE_COLUMNS[:-1])


# The way out of a damaged table, as a study writes them.
_REWRITE = (
  'restore the file, or write it again (a study: remove results.csv and '
  'curves.csv and run the same command without --report; finished cells '
  'are read back from OUT/runs)'
)


def read_table(
  path: str | os.PathLike[str], required: Sequence[str]
) -> pd.DataFrame:
  """A CSV table that was written whole: it ends in a newline and no row
  lacks a value in the `required` columns (a row cut short by a truncated
  file would otherwise be read as NaN).

  Raises:
    ValueError: naming the file and the first incomplete row, and the way
      out.
  """
  path = pathlib.Path(path)
  text = path.read_bytes()
  if text and not text.endswith(b'\n'):
    raise ValueError(
      f'{path} is truncated: its last line ends without a newline (a row '
      f'cut short); {_REWRITE}.'
    )
  try:
    table = pd.read_csv(path)
  except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
    raise ValueError(
      f'{path} is not a whole table ({" ".join(str(e).split())}); {_REWRITE}.'
    ) from None
  present = [c for c in required if c in table.columns]
  missing = table[present].isna().any(axis=1)
  if missing.any():
    row = int(np.flatnonzero(missing.to_numpy())[0])
    empty = [c for c in present if pd.isna(table[c].iloc[row])]
    raise ValueError(
      f'{path}: line {row + 2} has no {", ".join(empty)} (a row cut short '
      f'or edited); {_REWRITE}.'
    )
  return table


# Checking and selecting.


def _check_table(
  table: pd.DataFrame, what: str, columns: Sequence[str]
) -> pd.DataFrame:
  if not isinstance(table, pd.DataFrame):
    raise ValueError(
      f'{what} must be a pandas DataFrame, got {type(table).__name__}.'
    )
  missing = [c for c in columns if c not in table.columns]
  if missing or table.empty:
    raise ValueError(
      f'{what} must be non-empty with columns {list(columns)}, '
      f'got {len(table)} rows with columns '
      f'{list(table.columns)} (missing {missing}).'
    )
  numeric = [c for c in columns if c not in ('study', 'stage', 'env', 'rule')]
  bad = [c for c in numeric if not pd.api.types.is_numeric_dtype(table[c])]
  if bad:
    raise ValueError(
      f'{what}: columns {bad} must be numbers, got dtypes '
      f'{[str(table[c].dtype) for c in bad]}.'
    )
  return table


def check_results(results: pd.DataFrame) -> pd.DataFrame:
  """`results` checked: RESULT_COLUMNS there, one row per run, one random
  play and reference return per environment.

  Raises:
    ValueError: naming the column or the runs at fault.
  """
  _check_table(results, 'results', RESULT_COLUMNS)
  run = ['study', 'stage', *CELL, 'seed']
  repeated = results[results.duplicated(run, keep=False)]
  if not repeated.empty:
    raise ValueError(
      f'results must have one row per run ({", ".join(run)}), '
      f'got repeated runs {repeated[run].to_dict("records")}.'
    )
  for column in ('random_return', 'reference_return'):
    per_env = results.groupby(['study', 'stage', 'env'])[column].nunique(
      dropna=False
    )
    if (per_env > 1).any():
      several = per_env[per_env > 1].index.tolist()
      raise ValueError(
        f'results: {column} must be one value per '
        f'environment, got several for {several}.'
      )
  return results


def check_curves(curves: pd.DataFrame) -> pd.DataFrame:
  """`curves` checked: CURVE_COLUMNS there, one point per run and
  environment steps."""
  _check_table(curves, 'curves', CURVE_COLUMNS)
  point = ['study', 'stage', *CELL, 'seed', 'env_steps']
  if curves.duplicated(point).any():
    raise ValueError(
      f'curves must have one row per run and env_steps, got '
      f'{int(curves.duplicated(point).sum())} repeated.'
    )
  return curves


def select_stage(
  results: pd.DataFrame, curves: pd.DataFrame, stage: str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
  """The results and curves of one study's stage: `stage`, or the only one.

  Raises:
    ValueError: `stage` not there, several stages without `stage`, or
      several studies; a cell of the results without a curve.
  """
  check_results(results)
  check_curves(curves)
  if stage is not None:
    if stage not in set(results['stage']):
      raise ValueError(
        f"stage must be one of the results' stages "
        f'{sorted(set(results["stage"]))}, got {stage!r}.'
      )
    results = results[results['stage'] == stage]
  pairs = results[['study', 'stage']].drop_duplicates()
  if len(pairs) != 1:
    raise ValueError(
      f"results must hold one study's stage (or give stage=), "
      f'got {pairs.to_records(index=False).tolist()}.'
    )
  study, stage = pairs.iloc[0]
  curves = curves[(curves['study'] == study) & (curves['stage'] == stage)]
  have = set(curves[list(CELL)].itertuples(index=False, name=None))
  lacking = [
    c
    for c in results[list(CELL)]
    .drop_duplicates()
    .itertuples(index=False, name=None)
    if c not in have
  ]
  if lacking:
    raise ValueError(
      f'curves must have every cell of the results; missing '
      f'(env, rule, learning_rate) {lacking}.'
    )
  return results.reset_index(drop=True), curves.reset_index(drop=True)


def with_algorithms(
  results: pd.DataFrame, curves: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
  """Both tables with an `algorithm` column: the rule where every rule ran
  at one learning rate per environment, else 'rule (lr R)'."""
  rates = results.groupby(['env', 'rule'])['learning_rate'].nunique()
  by_rate = bool((rates > 1).any())

  def name(table: pd.DataFrame) -> pd.Series:
    if not by_rate:
      return table['rule'].astype(str)
    return table['rule'].astype(str) + table['learning_rate'].map(
      lambda r: f' (lr {r:g})'
    )

  return (
    results.assign(algorithm=name(results)),
    curves.assign(algorithm=name(curves)),
  )


# Computing.


def label(algorithm: str) -> str:
  """How tables and figures name an algorithm: a rule's `plots.RULE_NAMES`
  name ('Disco103'), with its rate where the stage has several."""
  rule, _, rate = algorithm.partition(' (')
  name = plots.RULE_NAMES.get(rule, rule)
  return f'{name} ({rate}' if rate else name


def _mean_range(values: pd.Series) -> dict[str, float]:
  values = values.astype(float)
  return dict(
    mean=float(values.mean(skipna=False)),
    min=float(values.min(skipna=False)),
    max=float(values.max(skipna=False)),
  )


def cells(results: pd.DataFrame) -> list[dict[str, Any]]:
  """Per cell, in the results' order: its seeds, budget, the final return's
  and normalised score's mean and range over seeds (NaN if any run's is
  NaN), random play and the reference.

  Args:
    results: one stage's runs with an `algorithm` column.
  """
  out: list[dict[str, Any]] = []
  for (env, algorithm, rate), group in results.groupby(
    ['env', 'algorithm', 'learning_rate'], sort=False
  ):
    out.append(
      dict(
        env=env,
        algorithm=algorithm,
        rule=group['rule'].iloc[0],
        learning_rate=float(rate),
        seeds=sorted(group['seed'].tolist()),
        budget=sorted(set(group['budget'].tolist())),
        final_return=_mean_range(group['final_return']),
        random_return=float(group['random_return'].iloc[0]),
        reference_return=float(group['reference_return'].iloc[0]),
        normalised_score=_mean_range(group['normalised_score']),
      )
    )
  return out


def score_matrices(
  results: pd.DataFrame,
) -> tuple[list[str], dict[str, str], dict[str, pd.DataFrame]]:
  """The [seeds, envs] normalised scores of each algorithm, over the
  environments where every run of every algorithm has a finite one.

  Returns:
    (envs, {env left out: why}, {algorithm: DataFrame indexed by seed,
    one column per env of envs}).
  """
  algorithms = list(dict.fromkeys(results['algorithm']))
  envs: list[str] = []
  left_out: dict[str, str] = {}
  for env, group in results.groupby('env', sort=False):
    if not np.isfinite(group['reference_return']).all():
      left_out[env] = 'no reference return'
    elif not (group['reference_return'] > group['random_return']).all():
      left_out[env] = (
        f'reference {_f(group["reference_return"].iloc[0])} not above '
        f'random play {_f(group["random_return"].iloc[0])}: no scores'
      )
    elif not np.isfinite(group['normalised_score']).all():
      left_out[env] = 'a run without a final return (NaN)'
    elif set(group['algorithm']) != set(algorithms):
      left_out[env] = 'not every rule ran there'
    else:
      envs.append(env)
  matrices: dict[str, pd.DataFrame] = {}
  for algorithm in algorithms:
    rows = results[
      (results['algorithm'] == algorithm) & results['env'].isin(envs)
    ]
    table = rows.pivot(index='seed', columns='env', values='normalised_score')
    matrices[algorithm] = table.reindex(columns=envs)
  for algorithm, m in matrices.items():
    lacking = [e for e in envs if m[e].isna().any()]
    if lacking:
      raise ValueError(
        f'results: every environment of the aggregate needs '
        f'the same seeds of each rule; {algorithm} lacks some '
        f'of seeds {m.index.tolist()} on {lacking}.'
      )
  return envs, left_out, matrices


def _interval(
  scores: npt.ArrayLike | tuple[npt.ArrayLike, ...],
  statistic: Callable[..., float],
  reps: int,
  seed: int,
) -> list[float]:
  return list(
    stats.interval(
      scores, statistic, confidence=CONFIDENCE, reps=reps, seed=seed
    )
  )


def compare(
  x: np.ndarray, y: np.ndarray, reps: int = REPS, seed: int = SEED
) -> dict[str, Any]:
  """X against Y from [seeds, envs] normalised scores: IQM(X) - IQM(Y) and
  P(X > Y), each with its interval, and P(X > Y) per environment."""
  pair = (x, y)
  return dict(
    iqm_x=stats.iqm(x),
    iqm_y=stats.iqm(y),
    difference=stats.iqm_difference(*pair),
    difference_ci=_interval(pair, stats.iqm_difference, reps, seed),
    probability=stats.probability_of_improvement(*pair),
    probability_ci=_interval(
      pair, stats.probability_of_improvement, reps, seed
    ),
    per_env=[
      stats.task_probability(x[:, t], y[:, t]) for t in range(x.shape[1])
    ],
  )


def sensitivity(
  x: pd.DataFrame, y: pd.DataFrame, reps: int = REPS, seed: int = SEED
) -> dict[str, Any]:
  """`compare` again with the most extreme run of either side (the
  farthest from its environment's median) set to that median.

  Args:
    x: [seeds, envs] scores of X, indexed by seed, a column per env.
    y: Y's, the same envs.

  Returns:
    dict(side: 'x' or 'y', seed, env, score, median, and `compare`'s
    numbers and IQM(X), IQM(Y) with that run at the median).
  """
  extreme = stats.most_extreme_run(x.to_numpy(), y.to_numpy())
  side = x if extreme['side'] == 'x' else y
  moved = stats.at_median(side.to_numpy(), extreme['run'], extreme['task'])
  xs, ys = (
    (moved, y.to_numpy()) if extreme['side'] == 'x' else (x.to_numpy(), moved)
  )
  return dict(
    side=extreme['side'],
    seed=int(side.index[extreme['run']]),
    env=str(side.columns[extreme['task']]),
    score=extreme['score'],
    median=extreme['median'],
    **compare(xs, ys, reps, seed),
  )


def profile_taus(matrices: dict[str, pd.DataFrame]) -> np.ndarray:
  """[PROFILE_POINTS] thresholds from min(0, the lowest score) to the
  highest."""
  values = np.concatenate([m.to_numpy().ravel() for m in matrices.values()])
  return np.linspace(min(0.0, values.min()), values.max(), PROFILE_POINTS)


def aggregate(
  results: pd.DataFrame,
  baseline_rule: str | None = None,
  reps: int = REPS,
  seed: int = SEED,
) -> dict[str, Any]:
  """The numbers across environments of one stage.

  Args:
    results: one stage's runs with an `algorithm` column.
    baseline_rule: the algorithm every other is compared with (difference,
      probability of improvement, sensitivity); None: no comparison.
    reps: bootstrap resamples of each interval.
    seed: each interval's resampling seed.

  Returns:
    dict(envs, left_out, seeds: {algorithm: [seeds]}, iqm: {algorithm:
    dict(value, ci)}, comparisons: [dict(x, y, `compare`'s numbers,
    sensitivity)], profiles: dict(taus, {algorithm: dict(profile, low,
    high)})); envs empty when no environment has normalised scores.
  """
  envs, left_out, matrices = score_matrices(results)
  algorithms = list(matrices)
  if baseline_rule is not None and baseline_rule not in algorithms:
    raise ValueError(
      f'baseline_rule must be one of the compared rules '
      f'{algorithms}, got {baseline_rule!r}.'
    )
  out: dict[str, Any] = dict(
    envs=envs,
    left_out=left_out,
    seeds={a: [int(s) for s in m.index] for a, m in matrices.items()},
    iqm={},
    comparisons=[],
    profiles={},
  )
  if not envs:
    return out
  for algorithm, m in matrices.items():
    out['iqm'][algorithm] = dict(
      value=stats.iqm(m.to_numpy()),
      ci=_interval(m.to_numpy(), stats.iqm, reps, seed),
    )
  if baseline_rule is not None:
    y = matrices[baseline_rule]
    for algorithm in algorithms:
      if algorithm != baseline_rule:
        x = matrices[algorithm]
        out['comparisons'].append(
          dict(
            x=algorithm,
            y=baseline_rule,
            **compare(x.to_numpy(), y.to_numpy(), reps, seed),
            sensitivity=sensitivity(x, y, reps, seed),
          )
        )
  taus = profile_taus(matrices)
  out['profiles'] = dict(taus=taus.tolist(), by_algorithm={})
  for algorithm, m in matrices.items():
    profile, low, high = stats.profile_intervals(
      m.to_numpy(), taus, confidence=CONFIDENCE, reps=reps, seed=seed
    )
    out['profiles']['by_algorithm'][algorithm] = dict(
      profile=profile.tolist(),
      low=np.asarray(low).tolist(),
      high=np.asarray(high).tolist(),
    )
  return out


def filled(values: npt.ArrayLike, start: float = math.nan) -> np.ndarray:
  """A curve's NaN points (no episode ended in that bin) take the last
  finite value before them; `start` before the first."""
  return pd.Series(np.asarray(values, float)).ffill().fillna(start).to_numpy()


def panel_curves(curves: pd.DataFrame, env: str) -> dict[str, pd.DataFrame]:
  """{algorithm: DataFrame indexed by env_steps, a column per seed} of
  `filled` returns on `env`, in order of first appearance."""
  out: dict[str, pd.DataFrame] = {}
  on_env = curves[curves['env'] == env]
  for algorithm, group in on_env.groupby('algorithm', sort=False):
    table = group.pivot(
      index='env_steps', columns='seed', values='avg_return'
    ).sort_index()
    out[algorithm] = table.apply(filled)
  return out


def iqm_curves(
  results: pd.DataFrame,
  curves: pd.DataFrame,
  envs: Sequence[str],
  reps: int = CURVE_REPS,
  seed: int = SEED,
) -> dict[str, Any]:
  """Each algorithm's IQM over `envs` and seeds of normalised returns at
  each curve point, with its stratified-bootstrap interval.

  A point where no episode ended carries the run's previous return (random
  play's, score 0, before the first). Runs are cut to the shortest curve;
  the x axis is environment steps where every curve has the same points,
  else the point's index.

  Returns:
    dict(x, x_label, {algorithm: dict(value, low, high)}), lists.
  """
  ends = results.groupby('env').first()[['random_return', 'reference_return']]
  data: dict[str, list[np.ndarray]] = {}
  grids: list[np.ndarray] = []
  for algorithm in dict.fromkeys(results['algorithm']):
    per_env: list[np.ndarray] = []
    for env in envs:
      table = panel_curves(curves[curves['algorithm'] == algorithm], env)[
        algorithm
      ]
      random, reference = ends.loc[env]
      grids.append(table.index.to_numpy())
      returns = table.to_numpy().T
      if reference > random:
        # An array for an array (a float only for a single return).
        per_env.append(
          np.asarray(measure.normalise(returns, random, reference))
        )
      else:  # Nothing beat random play there: 0, as the final scores.
        per_env.append(np.where(np.isnan(returns), np.nan, 0.0))
    seeds = {p.shape[0] for p in per_env}
    if len(seeds) > 1:
      raise ValueError(
        f'curves: {algorithm} must have the same seeds on '
        f'every environment of the aggregate, got '
        f'{[p.shape[0] for p in per_env]} on {list(envs)}.'
      )
    data[algorithm] = per_env
  length = min(len(g) for g in grids)
  same = all(np.array_equal(g[:length], grids[0][:length]) for g in grids)
  x = grids[0][:length] if same else np.arange(1, length + 1)
  out: dict[str, Any] = dict(
    x=[float(v) for v in x],
    x_label='environment steps' if same else 'curve point',
    by_algorithm={},
  )
  for algorithm, per_env in data.items():
    # Runs whose curve starts NaN: score 0 (random play) until their first.
    runs = np.stack(
      [np.nan_to_num(p[:, :length], nan=0.0) for p in per_env], axis=1
    )  # [seeds, envs, points]
    value, low, high = stats.curve_intervals(
      runs, stats.iqm, confidence=CONFIDENCE, reps=reps, seed=seed
    )
    out['by_algorithm'][algorithm] = dict(
      value=value.tolist(),
      low=np.asarray(low).tolist(),
      high=np.asarray(high).tolist(),
    )
  return out


def prepare(
  results: pd.DataFrame, curves: pd.DataFrame, stage: str | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
  """One stage's results and curves (`select_stage`), checked, with their
  `algorithm` column (`with_algorithms`)."""
  return with_algorithms(*select_stage(results, curves, stage))


def numbers_of(
  results: pd.DataFrame,
  curves: pd.DataFrame,
  *,
  baseline_rule: str | None = None,
  title: str = '',
  reps: int = REPS,
  curve_reps: int = CURVE_REPS,
  seed: int = SEED,
) -> dict[str, Any]:
  """`summarise` of tables already `prepare`d."""
  numbers = aggregate(results, baseline_rule, reps, seed)
  study, stage = results[['study', 'stage']].iloc[0]
  return dict(
    study=str(study),
    stage=str(stage),
    title=title or f'Study {study}, stage {stage}',
    settings=dict(
      final_fraction=measure.FINAL_FRACTION,
      reps=reps,
      curve_reps=curve_reps,
      seed=seed,
      confidence=CONFIDENCE,
      baseline_rule=baseline_rule,
    ),
    cells=cells(results),
    aggregate=numbers,
    iqm_curve=(
      iqm_curves(results, curves, numbers['envs'], curve_reps, seed)
      if numbers['envs']
      else None
    ),
  )


def summarise(
  results: pd.DataFrame,
  curves: pd.DataFrame,
  *,
  baseline_rule: str | None = None,
  stage: str | None = None,
  title: str = '',
  reps: int = REPS,
  curve_reps: int = CURVE_REPS,
  seed: int = SEED,
) -> dict[str, Any]:
  """Every number of the report of one stage (no files).

  Args:
    results: the results table (RESULT_COLUMNS).
    curves: the curves table (CURVE_COLUMNS).
    baseline_rule: the rule the others are compared with; None: none.
    stage: the stage to report (None: the only one).
    title: the report's title ('': study and stage).
    reps: bootstrap resamples of the final scores' intervals.
    curve_reps: of each point of the IQM curve.
    seed: every interval's resampling seed.

  Returns:
    dict(study, stage, title, settings, cells, aggregate, iqm_curve): the
    content of report.json.
  """
  results, curves = prepare(results, curves, stage)
  return numbers_of(
    results,
    curves,
    baseline_rule=baseline_rule,
    title=title,
    reps=reps,
    curve_reps=curve_reps,
    seed=seed,
  )


# Writing: text.


def _f(value: float, sign: str = '') -> str:
  return 'nan' if not math.isfinite(value) else f'{value:{sign}.3f}'


def _mean_range_text(v: dict[str, float]) -> str:
  return f'{_f(v["mean"])} ({_f(v["min"])} to {_f(v["max"])})'


def _ci(value: float, ci: Sequence[float], sign: str = '') -> str:
  return f'{_f(value, sign)} [{_f(ci[0], sign)}, {_f(ci[1], sign)}]'


def _reading(ci: Sequence[float]) -> str:
  if ci[0] > 0:
    return 'the interval lies above 0'
  if ci[1] < 0:
    return 'the interval lies below 0'
  return 'the interval includes 0: no difference shown'


def cell_lines(numbers: dict[str, Any]) -> list[str]:
  """report.md's per-cell table."""
  lines = [
    '| env | rule | learning rate | seeds | budget | final return, mean '
    '(min to max) | random play | reference | normalised, mean (min to '
    'max) |',
    '|---|---|---|---|---|---|---|---|---|',
  ]
  flat = []
  for c in numbers['cells']:
    reference = c['reference_return']
    if math.isfinite(reference) and not reference > c['random_return']:
      flat.append(c['env'])
    lines.append(
      f'| {c["env"]} | {label(c["algorithm"])} | {c["learning_rate"]:g} | '
      f'{len(c["seeds"])} | {", ".join(f"{b:g}" for b in c["budget"])} | '
      f'{_mean_range_text(c["final_return"])} | '
      f'{_f(c["random_return"])} | '
      f'{_f(reference) if math.isfinite(reference) else "-"} | '
      + (
        _mean_range_text(c['normalised_score'])
        if math.isfinite(reference) and reference > c['random_return']
        else '-'
      )
      + ' |'
    )
  if flat:
    lines += [
      '',
      f"On {', '.join(dict.fromkeys(flat))} no cell's mean final return is "
      'above random play: the reference (the best mean) is not above random '
      'play, so there is no span to normalise by and no normalised score '
      '(left out across environments).',
    ]
  return lines


def aggregate_lines(numbers: dict[str, Any]) -> list[str]:
  """report.md's section across environments."""
  a, s = numbers['aggregate'], numbers['settings']
  left_out = '; '.join(f'{e} ({why})' for e, why in a['left_out'].items())
  if not a['envs']:
    return [
      'No environment has normalised scores for every run: no '
      f'aggregate. Left out: {left_out}.'
    ]
  seeds = sorted({len(v) for v in a['seeds'].values()})
  lines = [
    f'Over {len(a["envs"])} '
    f'environment{"s" if len(a["envs"]) > 1 else ""} '
    f'({", ".join(a["envs"])}), '
    f'{" or ".join(map(str, seeds))} seeds each: normalised score = '
    '(final return - random play) / (reference - random play). '
    + (f'Left out: {left_out}. ' if left_out else '')
    + f'Intervals: {s["confidence"]:.0%} stratified bootstrap (seeds '
    'resampled within each environment, each rule on its own; '
    f'{s["reps"]:,} resamples, seed {s["seed"]}).',
    '',
    f'| statistic | value [{s["confidence"]:.0%} CI] |',
    '|---|---|',
  ]
  for algorithm, v in a['iqm'].items():
    lines.append(f'| IQM, {label(algorithm)} | {_ci(v["value"], v["ci"])} |')
  for c in a['comparisons']:
    x, y = label(c['x']), label(c['y'])
    lines += [
      f'| IQM difference, {x} - {y} | '
      f'{_ci(c["difference"], c["difference_ci"], "+")} |',
      f'| P({x} > {y}) | {_ci(c["probability"], c["probability_ci"])} |',
    ]
  for c in a['comparisons']:
    x, y = label(c['x']), label(c['y'])
    per_env = ', '.join(
      f'{e} {p:.2f}' for e, p in zip(a['envs'], c['per_env'], strict=False)
    )
    t = c['sensitivity']
    who = x if t['side'] == 'x' else y
    lines += [
      '',
      f'{x} against {y}: IQM difference: '
      f'{_reading(c["difference_ci"])}; '
      f'P({x} > {y}) per environment: {per_env}.',
      '',
      f'Sensitivity: the most extreme run ({who}, {t["env"]}, seed '
      f'{t["seed"]}: normalised {_f(t["score"])}, the farthest of any run '
      f"from its environment's median, {_f(t['median'])}) set to that "
      f'median: IQM {x} {_f(t["iqm_x"])}, {y} {_f(t["iqm_y"])}, difference '
      f'{_ci(t["difference"], t["difference_ci"], "+")} '
      f'({_reading(t["difference_ci"])}), P({x} > {y}) '
      f'{_ci(t["probability"], t["probability_ci"])}.',
    ]
  return lines


def markdown(numbers: dict[str, Any]) -> str:
  """report.md from `summarise`'s numbers."""
  s = numbers['settings']
  lines = [
    f'# {numbers["title"]}',
    '',
    f'Study `{numbers["study"]}`, stage `{numbers["stage"]}`. Final return: '
    'the mean return of the episodes that ended in the last '
    f"{s['final_fraction']:.0%} of a run's environment steps. Per cell "
    '(environment and rule at its learning rate): the mean over seeds and '
    'their range (min to max), not an interval.',
    '',
    *cell_lines(numbers),
    '',
    '## Across environments',
    '',
    *aggregate_lines(numbers),
    '',
    'Figures: [curves](curves.png) (per environment, the mean over seeds '
    'and their range; random play dashed)'
    + (
      ', [performance profiles](profiles.png), [IQM curve](iqm_curve.png) '
      f'({s["curve_reps"]:,} resamples per point)'
      if numbers['aggregate']['envs']
      else ''
    )
    + '.',
  ]
  return '\n'.join(lines) + '\n'


def to_json(numbers: dict[str, Any]) -> str:
  """report.json's text: `summarise`'s numbers, NaN as null."""
  return (
    json.dumps(metrics.json_safe(numbers), indent=1, allow_nan=False) + '\n'
  )


# Writing: figures.


def _pyplot() -> types.ModuleType:
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  return plt


def _styles(algorithms: Iterable[str]) -> dict[str, dict[str, Any]]:
  """Per algorithm: its rule's colour (`plots.RULE_COLOURS`; a rule without
  one takes `plots.other_colour`) and, for a rule's second, third... rate,
  another line style."""
  out: dict[str, dict[str, Any]] = {}
  others: dict[str, str] = {}  # Rule: colour, for rules without their own.
  rates: dict[str, int] = {}  # Rule: the index of its latest rate.
  for algorithm in algorithms:
    rule = algorithm.partition(' (')[0]
    if rule in plots.RULE_COLOURS:
      colour = plots.RULE_COLOURS[rule]
    else:
      colour = others.setdefault(rule, plots.other_colour(len(others)))
    n = rates[rule] = rates.get(rule, -1) + 1
    out[algorithm] = dict(color=colour, linestyle=('-', '--', ':', '-.')[n % 4])
  return out


def save(fig: 'Figure', path: str | os.PathLike[str]) -> pathlib.Path:
  """`fig` saved as PNG at DPI without metadata (the same figure gives the
  same bytes), closed."""
  path = pathlib.Path(path)
  fig.savefig(path, dpi=DPI, metadata={'Software': None})
  _pyplot().close(fig)
  return path


# Height of a legend row below the panels, in inches.
LEGEND_ROW_INCHES = 0.25


def _legend(fig: 'Figure', axes: np.ndarray, columns: int) -> int:
  """The panels' entries in one legend below them: at most 4 a row (2
  under a single panel, whose width holds no more); its rows."""
  entries: dict[str, Artist] = {}
  for ax in np.ravel(axes):
    for handle, text in zip(*ax.get_legend_handles_labels(), strict=False):
      entries.setdefault(text, handle)
  ncol = min(4 if columns > 1 else 2, len(entries))
  fig.legend(
    list(entries.values()),
    list(entries),
    loc='lower center',
    ncol=ncol,
    frameon=False,
  )
  return math.ceil(len(entries) / ncol)


def draw_curves(numbers: dict[str, Any], curves: pd.DataFrame) -> 'Figure':
  """curves.png's figure: a panel per environment, per algorithm the mean
  over seeds of `filled` returns and their range, random play dashed."""
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top

  plt = _pyplot()
  envs = list(dict.fromkeys(c['env'] for c in numbers['cells']))
  randoms = {c['env']: c['random_return'] for c in numbers['cells']}
  styles = _styles(dict.fromkeys(c['algorithm'] for c in numbers['cells']))
  columns = min(3, len(envs))
  rows = math.ceil(len(envs) / columns)
  height = 3.2 * rows + 0.9
  fig, axes = plt.subplots(
    rows, columns, squeeze=False, figsize=(4.2 * columns, height)
  )
  for ax, env in zip(axes.flat, envs, strict=False):
    for algorithm, table in panel_curves(curves, env).items():
      values = table.to_numpy()
      with warnings.catch_warnings():
        warnings.simplefilter('ignore', RuntimeWarning)  # All-NaN points.
        ax.plot(
          table.index,
          np.nanmean(values, axis=1),
          label=label(algorithm),
          **styles[algorithm],
        )
        ax.fill_between(
          table.index,
          np.nanmin(values, axis=1),
          np.nanmax(values, axis=1),
          alpha=0.2,
          color=styles[algorithm]['color'],
        )
    plots.random_play_line(ax, randoms[env])
    ax.set_title(env, fontsize=9)
    ax.set_xlabel('environment steps', fontsize=9)
    ax.set_ylabel('episode return', fontsize=9)
    ax.grid(alpha=0.3)
    ax.xaxis.set_major_locator(ticker.MaxNLocator(5))
    ax.xaxis.set_major_formatter(ticker.EngFormatter())
  for ax in list(axes.flat)[len(envs) :]:
    ax.set_axis_off()
  # Each legend row past the first: that much taller, the panels as high.
  extra = LEGEND_ROW_INCHES * (_legend(fig, axes, columns) - 1)
  if extra:
    height += extra
    fig.set_size_inches(4.2 * columns, height)
  fig.suptitle(
    textwrap.fill(
      f'{numbers["title"]}: mean over seeds, shaded: their range', 45 * columns
    ),
    fontsize=10,
  )
  fig.tight_layout(rect=(0, (0.5 + extra) / height, 1, 1))
  return fig


def draw_profiles(numbers: dict[str, Any]) -> 'Figure':
  """profiles.png's figure: per algorithm the fraction of runs scoring
  above each threshold, with its bootstrap band."""
  plt = _pyplot()
  profiles = numbers['aggregate']['profiles']
  styles = _styles(profiles['by_algorithm'])
  fig, ax = plt.subplots(figsize=(7, 4))
  for algorithm, p in profiles['by_algorithm'].items():
    ax.plot(
      profiles['taus'],
      p['profile'],
      label=label(algorithm),
      drawstyle='steps-post',
      **styles[algorithm],
    )
    ax.fill_between(
      profiles['taus'],
      p['low'],
      p['high'],
      alpha=0.2,
      step='post',
      color=styles[algorithm]['color'],
    )
  ax.set_xlabel('normalised score (random play 0, reference 1)')
  ax.set_ylabel('fraction of runs with score > tau')
  ax.set_title(
    f'{numbers["title"]}: performance profiles, '
    f'{numbers["settings"]["confidence"]:.0%} bootstrap bands',
    fontsize=10,
  )
  ax.grid(alpha=0.3)
  ax.legend()
  fig.tight_layout()
  return fig


def draw_iqm_curve(numbers: dict[str, Any]) -> 'Figure':
  """iqm_curve.png's figure: per algorithm the IQM of normalised returns
  over environments and seeds at each point, with its bootstrap band."""
  plt = _pyplot()
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top

  curve = numbers['iqm_curve']
  styles = _styles(curve['by_algorithm'])
  fig, ax = plt.subplots(figsize=(7, 4))
  for algorithm, c in curve['by_algorithm'].items():
    ax.plot(curve['x'], c['value'], label=label(algorithm), **styles[algorithm])
    ax.fill_between(
      curve['x'],
      c['low'],
      c['high'],
      alpha=0.2,
      color=styles[algorithm]['color'],
    )
  plots.random_play_line(ax, 0.0, 'random play (0)')
  if curve['x_label'] == 'environment steps':
    ax.xaxis.set_major_formatter(ticker.EngFormatter())
  ax.set_xlabel(curve['x_label'])
  ax.set_ylabel('IQM of normalised return')
  envs = numbers['aggregate']['envs']
  ax.set_title(
    textwrap.fill(
      f'{numbers["title"]}: IQM over {len(envs)} '
      f'environment{"s" if len(envs) > 1 else ""}, '
      f'{numbers["settings"]["confidence"]:.0%} stratified-bootstrap band',
      80,
    ),
    fontsize=10,
  )
  ax.grid(alpha=0.3)
  ax.legend()
  fig.tight_layout()
  return fig


def write_report(
  results: pd.DataFrame,
  curves: pd.DataFrame,
  out_dir: str | os.PathLike[str],
  *,
  baseline_rule: str | None = None,
  stage: str | None = None,
  title: str = '',
  reps: int = REPS,
  curve_reps: int = CURVE_REPS,
  seed: int = SEED,
) -> dict[str, pathlib.Path]:
  """Writes the report of one stage to `out_dir` (made if absent).

  Args:
    results: as `summarise`, and so are `curves`, `baseline_rule`,
      `stage`, `title`, `reps`, `curve_reps` and `seed`.
    out_dir: the folder.

  Returns:
    {file name: path} of report.md, report.json, curves.png and, when some
    environment has normalised scores, profiles.png and iqm_curve.png
    (else those two are removed from `out_dir`, if an earlier report
    left them there).
  """
  results, curves = prepare(results, curves, stage)
  numbers = numbers_of(
    results,
    curves,
    baseline_rule=baseline_rule,
    title=title,
    reps=reps,
    curve_reps=curve_reps,
    seed=seed,
  )
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  paths = {name: out / name for name in FILES}
  paths['report.md'].write_text(markdown(numbers))
  paths['report.json'].write_text(to_json(numbers))
  save(draw_curves(numbers, curves), paths['curves.png'])
  if not numbers['aggregate']['envs']:
    for name in ('profiles.png', 'iqm_curve.png'):  # None of an earlier run.
      paths.pop(name).unlink(missing_ok=True)
    return paths
  save(draw_profiles(numbers), paths['profiles.png'])
  save(draw_iqm_curve(numbers), paths['iqm_curve.png'])
  return paths
