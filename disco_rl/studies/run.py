# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Running a study: one eval program per cell, then its tidy results.

  results = run_study(study, 'runs/my_study')

Each cell (a stage's environment x rule) is one `Trainer` run of all its
runs (seeds x learning rates) in one program, in `OUT/runs/STAGE/ENV/RULE`
(large: not for committing). A cell whose results and settings are in the
small files below is finished: it is not run again, even without its run
folder (a committed study continues, e.g. with a new rule). Otherwise a
folder that holds a finished run of the same settings is read, an
interrupted one is resumed. A cell whose saved settings differ from the
study's is an error naming the setting (`RunDir.resumed_config`, or here
for a finished cell), never silently reused. After every cell the small
files are written again, whole, from every finished cell:

  OUT/results.csv      one row per run (`report.RESULT_COLUMNS`)
  OUT/curves.csv       each run's compact curve (`measure.compact_curves`)
  OUT/random_play.json random play per environment (`measure.random_return`)
  OUT/rates.json       each RatePick's chosen rates, with their scores
                       (picked again whenever the tuning stage has finished)
  OUT/cells.json       each finished cell's settings (`EvalConfig` fields)

`write_reports(study, out)` then writes each stage's report from those
files alone (`OUT/STAGE/report.md`, figures). The final return is
`measure.final_return`'s, everywhere.
"""

from collections.abc import Callable, Iterable, Mapping
import dataclasses
import json
import math
import os
import pathlib
import re
from typing import Any

import pandas as pd
import tqdm

from disco_rl import environments
from disco_rl import weights
from disco_rl.jobs import config as config_lib
from disco_rl.jobs import records
from disco_rl.jobs import trainer as trainer_lib
from disco_rl.runtime import metrics as metrics_lib
from disco_rl.runtime import run_dir as run_dir_lib
from disco_rl.runtime import signals
from disco_rl.studies import measure
from disco_rl.studies import report as report_lib
from disco_rl.studies import spec as spec_lib

RESULTS, CURVES = 'results.csv', 'curves.csv'
RANDOM_PLAY, RATES = 'random_play.json', 'rates.json'
CELLS = 'cells.json'  # Each finished cell's settings, by cell.
FLOAT_FORMAT = '%.10g'  # The tables' numbers.
RUNS = 'runs'  # The cells' run directories.
# Rows of finished cells by (stage, env, rule).
Cells = dict[tuple[str, str, str], list[dict[str, Any]]]


class StudyInterrupted(Exception):
  """A signal stopped a cell's program (its run is saved; running the study
  again continues it)."""

  def __init__(self, signal_name: str, cell: str):
    super().__init__(f'{signal_name} during {cell}')
    self.signal_name, self.cell = signal_name, cell


def slug(text: str) -> str:
  """A folder name of an environment's text: 'catch[rows=5]' ->
  'catch_rows_5'."""
  return re.sub(r'[^A-Za-z0-9.-]+', '_', text).strip('_')


def cell_config(
  study: spec_lib.Study,
  stage: spec_lib.Stage,
  env: str,
  rule: spec_lib.Rule,
  rates: tuple[float, ...],
) -> config_lib.EvalConfig:
  """The `EvalConfig` of one cell: the base, the stage's and the rule's
  settings, and the cell's environment, rule, runs and budget."""
  name, settings = environments.parse_spec(env)
  return config_lib.EvalConfig(
    **{**study.base, **stage.settings, **rule.settings},
    env=name,
    env_kwargs=settings,
    rule=rule.rule,
    seeds=tuple(stage.seeds),
    learning_rates=tuple(rates),
    num_steps=stage.num_steps,
  )


def stage_rates(
  study: spec_lib.Study,
  stage: spec_lib.Stage,
  chosen: Mapping[str, Mapping[str, float]],
) -> dict[str, tuple[float, ...]]:
  """{rule name: its learning rates in `stage`}."""
  rules = study.stage_rules(stage)
  if isinstance(stage.rates, spec_lib.RatePick):
    picked = chosen[stage.rates.stage]
    return {r: (float(picked[r]),) for r in rules}
  if isinstance(stage.rates, Mapping):
    return {r: tuple(float(x) for x in stage.rates[r]) for r in rules}
  return {r: tuple(float(x) for x in stage.rates) for r in rules}


def pick_rates(
  results: pd.DataFrame,
  randoms: Mapping[str, float],
  notes: dict[str, str] | None = None,
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
  """`RatePick`'s procedure on one stage's results: ({rule: its rate},
  {rule: {rate: score}}).

  Each run is normalised from random play (0) to the best mean over the
  environment's (rule, rate) cells (1, `measure.best_means`); a (rule,
  rate) scores the mean of its runs' scores per environment, averaged over
  environments; each rule takes its best-scoring rate. An environment where
  no cell's mean is above random play has no scores (NaN) and is left out
  of the average; where none has scores every rate scores NaN. Ties
  (every rate NaN included) go to the smallest rate. A (rule, rate) with a
  NaN final return in any run scores NaN and is never picked while another
  rate scored.

  Args:
    results: one row per run of the stage.
    randoms: random play's mean return per environment.
    notes: filled with {rule: how its pick was made} where it was not a
      plain best: a tie, or no environment above random play.
  """
  scored = measure.normalised_scores(
    results.drop(
      columns=[
        c
        for c in ('random_return', 'reference_return', 'normalised_score')
        if c in results.columns
      ]
    ),
    randoms,
  )
  flat = sorted(
    set(
      scored.loc[~(scored['reference_return'] > scored['random_return']), 'env']
    )
  )
  informative = scored[~scored['env'].isin(flat)]
  per_env = informative.groupby(['rule', 'learning_rate', 'env'])[
    'normalised_score'
  ].agg(lambda s: s.mean(skipna=False))
  scores = per_env.groupby(level=['rule', 'learning_rate']).agg(
    lambda s: s.mean(skipna=False)
  )
  chosen, table = {}, {}
  for rule in dict.fromkeys(scored['rule']):
    rates = sorted(set(scored.loc[scored['rule'] == rule, 'learning_rate']))
    by_rate = pd.Series(
      [scores.get((rule, r), math.nan) for r in rates], index=rates
    )
    table[rule] = {repr(float(r)): float(v) for r, v in by_rate.items()}
    chosen[rule], note = _best_rate(rule, by_rate, flat, informative.empty)
    if note and notes is not None:
      notes[rule] = note
  return chosen, table


def _best_rate(
  rule: str, by_rate: pd.Series, flat: list[str], all_flat: bool
) -> tuple[float, str]:
  """(the best-scoring rate of `by_rate` (sorted by rate), how it was
  chosen where that was not a plain best, else ''); ties go to the
  smallest rate. `flat`: the environments left out (no cell above random
  play); `all_flat`: every environment was."""
  left_out = (
    f"{', '.join(flat)} left out of the scores (no cell's mean final "
    'return above random play)'
  )
  smallest = float(by_rate.index[0])
  if all_flat:
    return smallest, (
      f'{left_out}, so no rate of {rule} has a score: of its rates '
      f'{", ".join(f"{r:g}" for r in by_rate.index)} (a tie) the smallest, '
      f'{smallest:g}, taken'
    )
  valid = by_rate.dropna()
  if valid.empty:
    raise ValueError(
      f'No learning rate of rule {rule!r} has a final '
      'return in every run: none can be chosen.'
    )
  tied = valid[valid == valid.max()]
  notes = [left_out] if flat else []
  if len(tied) > 1:
    notes.append(
      f'rates {", ".join(f"{r:g}" for r in tied.index)} of {rule} tie at '
      f'score {valid.max():.3f}: the smallest, {float(tied.index[0]):g}, '
      'taken'
    )
  return float(tied.index[0]), '; '.join(notes)


def _rows(
  study: spec_lib.Study,
  stage: spec_lib.Stage,
  env: str,
  rule_name: str,
  config: config_lib.EvalConfig,
  rows: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
  """A finished cell's results and curve rows."""
  table = pd.DataFrame(rows)
  ids = dict(study=study.name, stage=stage.name, env=env, rule=rule_name)
  results: list[dict[str, Any]] = []
  for (seed, rate), finals in measure.final_returns(table).groupby(
    level=['seed', 'learning_rate']
  ):
    results.append(
      dict(
        ids,
        seed=int(seed),
        learning_rate=float(rate),
        budget=config.num_steps,
        # As results.csv keeps it, so that figures derived from a cell
        # are the same whether it ran now or was read back.
        final_return=float(FLOAT_FORMAT % finals.iloc[0]),
      )
    )
  table = measure.compact_curves(table)
  table = table[['seed', 'learning_rate', 'env_steps', 'avg_return']]
  return results, [dict(ids, **r) for r in table.to_dict('records')]


def _run_cell(
  cell_dir: pathlib.Path,
  config: config_lib.EvalConfig,
  rule_params: Any,
  cell: str,
  progress: bool,
  on_cell: Callable[[str], None] | None,
  log_every: int = 0,
) -> list[dict[str, Any]]:
  """The cell's metrics rows: its finished run read, an interrupted one
  resumed, or a new one run (printing a line every `log_every` steps)."""
  # A run stopped before its first complete checkpoint keeps nothing: it
  # starts again.
  started = (cell_dir / run_dir_lib.SETTINGS).is_file() and (
    run_dir_lib.checkpoints_held(cell_dir) > 0
  )
  run_dir = run_dir_lib.RunDir(
    cell_dir, resume=started, overwrite=not started and cell_dir.is_dir()
  )
  if run_dir.resume:
    try:
      config = records.resumed_config(run_dir, config, trainer_lib.CONFIGS)
    except ValueError as e:
      raise ValueError(
        f'Cell {cell}: {" ".join(str(e).split())} To run the cell again '
        f"with the study's settings, remove its folder {cell_dir}; or give "
        'the study another --out.'
      ) from None
    summary = _summary(cell_dir)
    if summary.get('completed') and summary.get('steps') == config.num_steps:
      return metrics_lib.read_rows(
        cell_dir / run_dir_lib.METRICS, _row_count(cell_dir)
      )
    trainer = trainer_lib.Trainer(
      config, run_dir, resume=True, progress=progress, log_every=log_every
    )
  else:
    trainer = trainer_lib.Trainer(
      config,
      run_dir,
      rule_params=rule_params,
      progress=progress,
      log_every=log_every,
    )
  if on_cell is not None:
    on_cell(cell)
  try:
    summary = trainer.fit()
  finally:
    trainer.close()
  if summary['interrupted'] in ('SIGINT', 'SIGTERM'):
    raise StudyInterrupted(summary['interrupted'], cell)
  return trainer.rows


def _summary(cell_dir: pathlib.Path) -> dict[str, Any]:
  path = cell_dir / run_dir_lib.SUMMARY
  return json.loads(path.read_text()) if path.is_file() else {}


def _row_count(cell_dir: pathlib.Path) -> int:
  return len(metrics_lib.read_table(cell_dir / run_dir_lib.METRICS))


def run_study(
  study: spec_lib.Study,
  out: str | os.PathLike[str],
  *,
  only: str | None = None,
  spec_dir: str | os.PathLike[str] | None = None,
  progress: bool = True,
  on_cell: Callable[[str], None] | None = None,
  log: Callable[[str], None] | None = None,
) -> pd.DataFrame:
  """Runs (or continues) every cell of `study` into `out`; its results.

  Every cell's settings are checked (`check_cells`) before the first runs.
  The results files written while it runs are provisional: a stage's
  reference returns (its best means) and a RatePick's rates follow the
  cells finished so far.

  Args:
    study: the study.
    out: the study's folder.
    only: run this stage alone (the stages it picks rates from must have
      run).
    spec_dir: where relative `Rule.weights` paths start (the spec file's
      folder; default: the working directory).
    progress: a progress bar for the study and one per program.
    on_cell: called with each cell's name before its program runs.
    log: called with one line per cell (which cell, what it runs, or that
      it finished before) and per rate pick that was not a plain best
      (e.g. `print` where there are no progress bars). With `log` and
      without bars, each cell's run also prints a line about every tenth
      of its steps (the `Trainer`'s `log_every`), so a long cell shows
      that it moves.

  Returns:
    The results table (`report.RESULT_COLUMNS`), also `OUT/results.csv`.

  Raises:
    StudyInterrupted: a signal stopped a cell (running again continues).
    ValueError: a cell whose saved settings differ from the study's.
  """
  out = pathlib.Path(out)
  stages = [study.stage(only)] if only else list(study.stages)
  done_results, done_curves = _read_existing(out)
  chosen = _read_json(out / RATES)
  recorded = _read_json(out / CELLS)
  check_cells(study, stages, spec_dir)
  cells = []
  for stage in stages:
    for env in stage.envs:
      for rule_name in study.stage_rules(stage):
        cells.append((stage, env, rule_name))
  say = log or (lambda line: None)
  bar = tqdm.tqdm(
    total=len(cells),
    desc=f'study {study.name}',
    disable=not progress,
    position=1,
  )
  try:
    for number, (stage, env, rule_name) in enumerate(cells, 1):
      if signals.received():  # Between two cells: stop here.
        raise StudyInterrupted(str(signals.received()), 'the study')
      if isinstance(stage.rates, spec_lib.RatePick):
        tuning = stage.rates.stage
        before = chosen.get(tuning)
        chosen[tuning] = _current_pick(study, tuning, done_results, before, out)
        if chosen[tuning] != before:
          for rule, note in chosen[tuning].get('notes', {}).items():
            say(f'rates picked on {tuning}, {rule}: {note}')
      rates = stage_rates(
        study, stage, {k: v['rates'] for k, v in chosen.items()}
      )[rule_name]
      rule = study.rule(rule_name)
      config = cell_config(study, stage, env, rule, rates)
      cell = f'{stage.name}/{env}/{rule_name}'
      key = (stage.name, env, rule_name)
      path = _weights_path(rule, spec_dir)
      settings = _settings(config, path)
      where = f'cell {number} of {len(cells)}, {cell}'
      bar.set_description(f'study {study.name}: {where}')
      if key in done_results and cell in recorded:  # Finished before.
        _check_recorded(cell, recorded[cell], settings, out)
        say(f'{where}: finished before (its results kept)')
        bar.update(1)
        continue
      say(f'{where}: {_what_runs(config)}')
      params = (
        None if path is None else weights.load_rule(path, config.rule_sizes)
      )
      rows = _run_cell(
        out / RUNS / stage.name / slug(env) / rule_name,
        config,
        params,
        cell,
        progress,
        on_cell,
        log_every=0 if progress or log is None else -(-config.num_steps // 10),
      )
      results, curves = _rows(study, stage, env, rule_name, config, rows)
      done_results[key], done_curves[key] = results, curves
      _write_tables(study, out, done_results, done_curves)
      recorded[cell] = settings
      _write_json(out / CELLS, recorded)
      bar.update(1)
  finally:
    bar.close()
  if chosen:
    _write_json(out / RATES, chosen)
  return report_lib.read_results(out / RESULTS)


def _what_runs(config: config_lib.EvalConfig) -> str:
  """What a cell's program runs, and what its progress bar counts: the
  loop's iterations, the warm-up ones (acting only, until the replay buffer
  holds a learner batch: replay_ratio - 1) and then the learner steps."""
  warmup = config.replay_ratio - 1
  seeds, rates = len(config.seeds), len(config.learning_rates)
  return (
    f'{_count(seeds * rates, "run")} ({_count(seeds, "seed")} x '
    f'{_count(rates, "rate")}), {config.num_steps:,} learner steps after '
    f'{_count(warmup, "warm-up iteration")} (its bar counts both: '
    f'{config.num_steps + warmup:,})'
  )


def _count(n: int, noun: str) -> str:
  """'1 seed', '2 seeds'."""
  return f'{n:,} {noun}{"s" * (n != 1)}'


# The rate a RatePick stage's cells are checked with before the pick.
_UNPICKED_RATE = 1e-3


def check_cells(
  study: spec_lib.Study,
  stages: Iterable[spec_lib.Stage],
  spec_dir: str | os.PathLike[str] | None = None,
) -> None:
  """Checks every cell of `stages` before any runs: its `EvalConfig`
  (a RatePick stage's with a stand-in rate), its rule's weights file, and
  each environment's settings (the environment is built with one instance;
  a host family's jittable twin, if it has one).

  Raises:
    ValueError: naming the cell and the setting.
    FileNotFoundError: a rule's weights file.
  """
  built: set[str] = set()
  for stage in stages:
    rates: dict[str, tuple[float, ...]]
    if isinstance(stage.rates, spec_lib.RatePick):
      rates = {r: (_UNPICKED_RATE,) for r in study.stage_rules(stage)}
    else:
      rates = stage_rates(study, stage, {})
    for env in stage.envs:
      for rule_name in study.stage_rules(stage):
        cell = f'{stage.name}/{env}/{rule_name}'
        rule = study.rule(rule_name)
        try:
          config = cell_config(study, stage, env, rule, rates[rule_name])
        except ValueError as e:
          raise ValueError(f'Cell {cell}: {e}') from None
        _settings(config, _weights_path(rule, spec_dir))  # The file exists.
        if env not in built:
          _check_environment(cell, config)
          built.add(env)


def _check_environment(cell: str, config: config_lib.EvalConfig) -> None:
  """Builds the cell's environment once (one instance) to check its
  settings; a host family without a jittable twin is left to its run."""
  name = config.env
  family = environments.family(name)
  settings = dict(config.env_kwargs)
  if family.on_host:
    if not family.jittable:
      return
    name = family.jittable
    settings.pop(environments.SEED_KEY, None)
  try:
    environments.get_environment(name, 1, settings)
  except ValueError as e:
    raise ValueError(f'Cell {cell}: {e}') from None


def _weights_path(
  rule: spec_lib.Rule, spec_dir: str | os.PathLike[str] | None
) -> pathlib.Path | None:
  """The rule's parameter file (relative paths from `spec_dir`), if any."""
  if rule.weights is None:
    return None
  path = pathlib.Path(rule.weights)
  if spec_dir is not None and not path.is_absolute():
    path = pathlib.Path(spec_dir) / path
  return path


def _settings(
  config: config_lib.EvalConfig, weights_path: pathlib.Path | None = None
) -> dict[str, Any]:
  """A cell's settings as JSON holds them (tuples as lists), with the
  sha256 of its rule's parameter file if it has one (`rule_sha256`: the
  same cell with another rule file is another cell)."""
  settings = json.loads(json.dumps(dataclasses.asdict(config)))
  if weights_path is not None:
    if not weights_path.is_file():
      raise FileNotFoundError(
        f'rule weights file not found: {str(weights_path)!r}'
      )
    settings['rule_sha256'] = weights.sha256_of(weights_path)
  return settings


def _check_recorded(
  cell: str,
  saved: dict[str, Any],
  given: dict[str, Any],
  out: pathlib.Path,
) -> None:
  """Raises ValueError naming each setting of a finished cell (`saved`)
  that the study now gives otherwise (`given`, `_settings`'): its results
  are never silently reused."""
  differ = [
    f'{name}: saved {saved.get(name)!r}, given {value!r}'
    for name, value in given.items()
    if saved.get(name) != value
  ]
  if differ:
    stage, env, rule = cell.split('/', 2)
    raise ValueError(
      f'Cell {cell} of {out} finished with other settings; these differ: '
      + '; '.join(differ)
      + '. Give the study another --out, or run the cell again with these: '
      f'remove its folder {out / RUNS / stage / slug(env) / rule} and its '
      f'entry {cell!r} in {out / CELLS}.'
    )


def _current_pick(
  study: spec_lib.Study,
  stage_name: str,
  done_results: Cells,
  stored: dict[str, Any] | None,
  out: pathlib.Path,
) -> dict[str, Any]:
  """The rates that `stage_name`'s results choose: picked again from them
  when all its cells have finished (the picks follow the results), else
  the recorded pick if it names every rule the study runs."""
  tuning = study.stage(stage_name)
  missing = [
    f'{env}/{rule}'
    for env in tuning.envs
    for rule in study.stage_rules(tuning)
    if (stage_name, env, rule) not in done_results
  ]
  if not missing:
    return _pick(stage_name, done_results, out)
  rules = set(study.stage_rules(tuning))
  if stored is not None and rules <= set(stored.get('rates', {})):
    return stored
  raise ValueError(
    f'Stage {stage_name!r} has not finished (cells {missing} have no '
    'results): its results choose the learning rates of a later stage.'
  )


def _pick(
  stage_name: str,
  done_results: Cells,
  out: pathlib.Path,
) -> dict[str, Any]:
  rows = [
    r for (s, _, _), rs in done_results.items() if s == stage_name for r in rs
  ]
  table = pd.DataFrame(rows)
  randoms = _randoms(out, table['env'].unique())
  notes: dict[str, str] = {}
  rates, scores = pick_rates(table, randoms, notes)
  # notes only where a pick was not a plain best (rates.json as before).
  return dict(rates=rates, scores=scores, **({'notes': notes} if notes else {}))


def _randoms(out: pathlib.Path, envs: Iterable[str]) -> dict[str, float]:
  randoms = {}
  for env in envs:
    name, settings = environments.parse_spec(env)
    family = environments.family(name)
    if family.on_host and family.jittable:  # The same game, compiled.
      name = family.jittable
    randoms[env] = measure.random_return(out / RANDOM_PLAY, name, settings)
  return randoms


def _read_existing(out: pathlib.Path) -> tuple[Cells, Cells]:
  """The finished cells' rows of an earlier invocation, by cell."""
  results: Cells = {}
  curves: Cells = {}
  if (out / RESULTS).is_file():
    table = report_lib.read_results(out / RESULTS)
    for key, group in table.groupby(['stage', 'env', 'rule'], sort=False):
      results[key] = group[
        [
          'study',
          'stage',
          'env',
          'rule',
          'seed',
          'learning_rate',
          'budget',
          'final_return',
        ]
      ].to_dict('records')
  if (out / CURVES).is_file():
    table = report_lib.read_curves(out / CURVES)
    for key, group in table.groupby(['stage', 'env', 'rule'], sort=False):
      curves[key] = group.to_dict('records')
  return results, curves


def _write_tables(
  study: spec_lib.Study, out: pathlib.Path, results: Cells, curves: Cells
) -> None:
  """results.csv (normalised per stage) and curves.csv, written whole."""
  table = pd.DataFrame([r for rs in results.values() for r in rs])
  randoms = _randoms(out, table['env'].unique())
  parts = []
  for _, part in table.groupby('stage', sort=False):
    references = {
      e: study.references[e]
      for e in part['env'].unique()
      if e in study.references
    }
    parts.append(
      measure.normalised_scores(
        part, randoms, references if study.references else None
      )
    )
  table = pd.concat(parts)[list(report_lib.RESULT_COLUMNS)]
  _write_csv(out / RESULTS, table)
  curve_table = pd.DataFrame([r for rs in curves.values() for r in rs])
  _write_csv(out / CURVES, curve_table[list(report_lib.CURVE_COLUMNS)])


def _write_csv(path: pathlib.Path, table: pd.DataFrame) -> None:
  path.parent.mkdir(parents=True, exist_ok=True)
  tmp = path.with_name(path.name + '.tmp')
  table.to_csv(tmp, index=False, float_format=FLOAT_FORMAT)
  tmp.replace(path)


def _read_json(path: pathlib.Path) -> dict[str, Any]:
  return json.loads(path.read_text()) if path.is_file() else {}


def _write_json(path: pathlib.Path, value: Any) -> None:
  tmp = path.with_name(path.name + '.tmp')
  tmp.write_text(json.dumps(value, indent=1, sort_keys=True) + '\n')
  tmp.replace(path)


def write_reports(
  study: spec_lib.Study,
  out: str | os.PathLike[str],
  *,
  only: str | None = None,
) -> dict[str, dict[str, pathlib.Path]]:
  """Each stage's report from `OUT/results.csv` and `OUT/curves.csv` alone
  ({stage: {file: path}}); the same files give the same bytes."""
  out = pathlib.Path(out)
  results = report_lib.read_results(out / RESULTS)
  curves = report_lib.read_curves(out / CURVES)
  paths = {}
  for stage in [study.stage(only)] if only else study.stages:
    if not (results['stage'] == stage.name).any():
      continue
    baseline = study.baseline
    if baseline not in study.stage_rules(stage):
      baseline = None  # Not run here: nothing to compare with.
    elif not isinstance(stage.rates, spec_lib.RatePick) and any(
      len(rates) > 1 for rates in stage_rates(study, stage, {}).values()
    ):
      baseline = None  # A sweep: each (rule, rate) is its own entry.
    paths[stage.name] = report_lib.write_report(
      results,
      curves,
      out / stage.name,
      baseline_rule=baseline,
      stage=stage.name,
      title=f'{study.name}: {stage.name}',
    )
  return paths
