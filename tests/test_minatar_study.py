# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The MinAtar study (studies/minatar.py) and its committed results
(docs/results/minatar): the spec states the committed study's regime, the
committed tables are its per-run record, its rates are the sweep's picks,
and `--report` rebuilds the committed reports byte for byte from them.

The study at test size (`--tiny`) runs 13 cells of MinAtar programs, too
slow for the default run: the slow target runs one of its cells.
"""

import dataclasses
import json
import pathlib
import shutil

import numpy as np
import pandas as pd
import pytest

from disco_rl.cli import study as study_cli
from disco_rl.studies import report as report_lib
from disco_rl.studies import run as study_run
from disco_rl.studies import spec as spec_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC = ROOT / 'studies' / 'minatar.py'
RESULTS = ROOT / 'docs' / 'results' / 'minatar'
GAMES = ('Asterix', 'Breakout', 'Freeway', 'Seaquest', 'SpaceInvaders')


@pytest.fixture(scope='module')
def study() -> spec_lib.Study:
  return study_cli.load_study(SPEC)


def _env(game: str) -> str:
  return f'gymnax:{game}-MinAtar'


def test_the_spec_is_the_committed_studys_regime(study):
  assert study.name == 'minatar' and study.baseline == 'actor_critic'
  assert [r.name for r in study.rules] == ['disco_103', 'actor_critic', 'ppo']
  sweep, table = study.stages
  assert (sweep.name, sweep.envs, sweep.seeds) == (
    'sweep',
    (_env('Breakout'),),
    (100, 101),
  )
  assert sweep.rates == (1e-3, 3e-3, 1e-2)
  assert study.stage_rules(sweep) == ('disco_103', 'actor_critic', 'ppo')
  assert (table.name, table.envs, table.seeds) == (
    'table',
    tuple(_env(g) for g in GAMES),
    (0, 1, 2),
  )
  assert study.stage_rules(table) == ('disco_103', 'actor_critic', 'ppo')
  assert dict(table.rates) == {
    'disco_103': (1e-3,),
    'actor_critic': (3e-3,),
    'ppo': (1e-2,),
  }
  assert sweep.num_steps == table.num_steps == 3000
  # gymnax's PPO returns; Seaquest has none.
  assert study.references == {
    _env('Asterix'): 15.0,
    _env('Breakout'): 28.0,
    _env('Freeway'): 58.0,
    _env('SpaceInvaders'): 131.0,
  }
  config = study_run.cell_config(
    study, table, _env('Seaquest'), study.rule('disco_103'), (1e-3,)
  )
  assert (config.env, config.env_kwargs, config.rule) == (
    'gymnax:Seaquest-MinAtar',
    {},
    'disco_103',
  )
  assert (config.net, config.conv_channels, config.conv_kernel) == (
    'conv',
    (16,),
    3,
  )
  assert (config.dense, config.model_lstm_size, config.model_head_hiddens) == (
    (128,),
    128,
    (128,),
  )
  # 2 environments x 29 steps = 58 environment steps per learner update.
  assert (config.num_envs, config.rollout_len) == (2, 29)
  assert (config.batch_size, config.replay_ratio, config.buffer_capacity) == (
    16,
    8,
    256,
  )
  assert config.seeds == (0, 1, 2) and config.learning_rates == (1e-3,)


def test_tiny_keeps_the_grid_and_shrinks_every_cell(study):
  tiny = study.shrunk()
  assert [s.envs for s in tiny.stages] == [s.envs for s in study.stages]
  for stage in tiny.stages:
    assert stage.num_steps == 20
    config = study_run.cell_config(
      tiny, stage, stage.envs[0], tiny.rule('actor_critic'), (1e-3,)
    )
    assert (config.conv_channels, config.dense, config.batch_size) == (
      (4,),
      (16,),
      4,
    )


def _committed() -> tuple[pd.DataFrame, pd.DataFrame]:
  return (
    report_lib.read_results(RESULTS / study_run.RESULTS),
    report_lib.read_curves(RESULTS / study_run.CURVES),
  )


def test_the_committed_tables_are_the_specs_cells(study):
  """Every stage and cell of results.csv and curves.csv is the spec's, in
  the order run.py writes them; the columns are run.py's."""
  results, curves = _committed()
  assert tuple(results.columns) == report_lib.RESULT_COLUMNS
  assert tuple(curves.columns) == report_lib.CURVE_COLUMNS
  expected = []
  for stage in study.stages:
    rates = study_run.stage_rates(study, stage, {})
    for env in stage.envs:
      for rule in study.stage_rules(stage):
        for seed in stage.seeds:
          for rate in rates[rule]:
            expected.append(
              ('minatar', stage.name, env, rule, seed, rate, stage.num_steps)
            )
  ids = ['study', 'stage', 'env', 'rule', 'seed', 'learning_rate', 'budget']
  got = [tuple(r) for r in results[ids].itertuples(index=False)]
  assert sorted(got) == sorted(expected)
  cells = ['stage', 'env', 'rule', 'learning_rate']
  assert (
    curves[cells].drop_duplicates().sort_values(cells).to_numpy().tolist()
    == results[cells].drop_duplicates().sort_values(cells).to_numpy().tolist()
  )


def test_the_committed_tables_are_the_per_run_record():
  """results.csv holds the per-run summaries' final returns (the old
  script's definition: the last 10% of learner updates; run.py keeps 10
  significant digits) and curves.csv their curves' points; random play is
  measured as run.py measures it (its record: 32 instances x 5,000
  steps)."""
  results, curves = _committed()
  summaries = sorted(RESULTS.glob('**/lr_*/summary.json'))
  assert len(summaries) == 16  # 5 games x 2 rules, Breakout 2 rules x 3 rates
  for path in summaries:
    summary = json.loads(path.read_text())
    stage = 'sweep' if 'sweep' in path.relative_to(RESULTS).parts else 'table'
    cell = (
      (results['stage'] == stage)
      & (results['env'] == summary['env'])
      & (results['rule'] == summary['rule'])
      & (results['learning_rate'] == summary['learning_rate'])
    )
    rows = results[cell].set_index('seed').loc[summary['seeds']]
    np.testing.assert_allclose(
      rows['final_return'], summary['final_returns'], rtol=1e-9, atol=0
    )
    points = pd.read_csv(path.parent / 'curves.csv')
    cell = (
      (curves['stage'] == stage)
      & (curves['env'] == summary['env'])
      & (curves['rule'] == summary['rule'])
      & (curves['learning_rate'] == summary['learning_rate'])
    )
    mine = curves[cell].sort_values(['seed', 'env_steps'])
    theirs = points.sort_values(['seed', 'env_steps'])
    assert mine['env_steps'].tolist() == theirs['env_steps'].tolist()
    np.testing.assert_allclose(
      mine['avg_return'], theirs['avg_return'], rtol=1e-9
    )
  randoms = json.loads((RESULTS / study_run.RANDOM_PLAY).read_text())
  assert sorted(randoms) == sorted(_env(g) for g in GAMES)
  for record in randoms.values():
    assert (record['num_envs'], record['steps']) == (32, 5000)
    assert record['seed'] == 0
  table = results[results['stage'] == 'table']
  np.testing.assert_allclose(
    table['random_return'],
    [randoms[e]['mean_return'] for e in table['env']],
    rtol=1e-9,
  )


def test_the_table_rates_are_the_sweeps_picks(study):
  """`TABLE_RATES` are what RatePick's procedure (`run.pick_rates`) chooses
  on the committed sweep, and what rates.json records."""
  results, _ = _committed()
  sweep = results[results['stage'] == 'sweep']
  randoms = {
    e: r['mean_return']
    for e, r in json.loads(
      (RESULTS / study_run.RANDOM_PLAY).read_text()
    ).items()
  }
  rates, scores = study_run.pick_rates(sweep, randoms)
  assert rates == {'disco_103': 1e-3, 'actor_critic': 3e-3, 'ppo': 1e-2}
  table = study.stage('table')
  assert {r: (rates[r],) for r in rates} == dict(table.rates)
  saved = json.loads((RESULTS / study_run.RATES).read_text())
  assert saved == {'sweep': {'rates': rates, 'scores': scores}}


def test_report_rebuilds_the_committed_reports_byte_for_byte(study, tmp_path):
  """`--report` from the committed results.csv and curves.csv alone (no
  training, no random play) gives the committed reports' bytes."""
  for name in (study_run.RESULTS, study_run.CURVES):
    shutil.copy(RESULTS / name, tmp_path / name)
  paths = study_run.write_reports(study, tmp_path)
  assert sorted(paths) == ['sweep', 'table']
  for stage, files in paths.items():
    assert sorted(files) == sorted(report_lib.FILES)
    for name, path in files.items():
      committed = RESULTS / stage / name
      assert path.read_bytes() == committed.read_bytes(), committed


def test_the_readme_row_is_the_committed_report():
  """README's MinAtar row: each rule's IQM and interval as
  table/report.json gives them, citing table/report.md."""
  numbers = json.loads((RESULTS / 'table' / 'report.json').read_text())
  iqm = numbers['aggregate']['iqm']
  text = (ROOT / 'README.md').read_text()
  [row] = [line for line in text.splitlines() if line.startswith('| [MinAtar]')]
  cells = [c.strip() for c in row.strip('|').split('|')]
  for rule, cell in (
    ('disco_103', cells[2]),
    ('actor_critic', cells[3]),
    ('ppo', cells[4]),
  ):
    value, (low, high) = iqm[rule]['value'], iqm[rule]['ci']
    assert cell == f'IQM {value:.3f} [{low:.3f}, {high:.3f}]', cell
  assert '(docs/results/minatar/table/report.md)' in cells[-1]
  # The sentences under the table: Disco103's difference, and without the
  # most extreme run; PPO's difference.
  disco, ppo = numbers['aggregate']['comparisons']
  assert (disco['x'], ppo['x']) == ('disco_103', 'ppo')
  prose = ' '.join(text.split())
  for d in (disco, disco['sensitivity'], ppo):
    low, high = d['difference_ci']
    assert f'{d["difference"]:+.3f} [{low:+.3f}, {high:+.3f}]' in prose


@pytest.mark.slow
@pytest.mark.weights
def test_one_cell_of_the_tiny_study_runs(study, tmp_path):
  """The sweep's PPO cell at test size, every seed x rate in one program,
  through `run_study` (random play read from the committed record)."""
  tiny = study.shrunk()
  one = dataclasses.replace(
    tiny,
    stages=(dataclasses.replace(tiny.stage('sweep'), rules=('ppo',)),),
  )
  shutil.copy(RESULTS / study_run.RANDOM_PLAY, tmp_path / study_run.RANDOM_PLAY)
  results = study_run.run_study(one, tmp_path, progress=False)
  assert len(results) == 6  # Seeds 100, 101 x the three rates.
  assert set(results['rule']) == {'ppo'} and set(results['budget']) == {20}
  assert sorted(set(results['learning_rate'])) == [1e-3, 3e-3, 1e-2]
  curves = report_lib.read_curves(tmp_path / study_run.CURVES)
  assert len(curves.groupby(['seed', 'learning_rate'])) == 6


@pytest.mark.parametrize('name', ['minatar_ppo.py', 'minatar_rerun.py'])
def test_the_partial_specs_run_the_studys_own_cells(study, name):
  """studies/minatar_ppo.py (PPO's cells) and studies/minatar_rerun.py
  (two cells run again) hold cells of the study itself: every one of
  their cells has the settings the study gives it."""
  part = study_cli.load_study(ROOT / 'studies' / name)
  cells = 0
  for stage in part.stages:
    rates = study_run.stage_rates(part, stage, {})
    whole = study_run.stage_rates(study, study.stage(stage.name), {})
    assert set(stage.seeds) == set(study.stage(stage.name).seeds)
    for env in stage.envs:
      for rule in part.stage_rules(stage):
        assert rates[rule] == whole[rule], (stage.name, rule)
        args = (env, study.rule(rule), rates[rule])
        assert study_run.cell_config(
          part, stage, *args
        ) == study_run.cell_config(study, study.stage(stage.name), *args)
        cells += 1
  assert cells == {'minatar_ppo.py': 6, 'minatar_rerun.py': 2}[name]


def test_the_rerun_cells_reproduce_the_committed_runs():
  """docs/results/minatar_rerun: the two Breakout cells run again through
  the facility give the committed final returns to the last digit over the
  committed window, and the facility's own over its window."""
  check = pd.read_csv(ROOT / 'docs/results/minatar_rerun/window_check.csv')
  results, _ = _committed()
  rerun = report_lib.read_results(
    ROOT / 'docs/results/minatar_rerun/results.csv'
  )
  assert len(check) == len(rerun) == 6
  for row in check.itertuples():
    committed = results[
      (results['stage'] == 'table')
      & (results['env'] == _env('Breakout'))
      & (results['rule'] == row.rule)
      & (results['seed'] == row.seed)
    ]['final_return'].item()
    facility = rerun[(rerun['rule'] == row.rule) & (rerun['seed'] == row.seed)]
    assert row.committed == committed
    assert row.rerun_script_window == pytest.approx(committed, rel=1e-9)
    assert row.rerun_facility_window == facility['final_return'].item()
