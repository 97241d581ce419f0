# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""studies/learned_rule.py and its committed results (docs/results/
learned_rule): the spec loads and holds stage 2's grid, its cells are the
settings the committed runs were trained with, the committed files are
that grid, and `--report` rebuilds the committed reports byte for byte
from them alone (no training)."""

import dataclasses
import json
import pathlib
import shutil

import pytest

from disco_rl import weights
from disco_rl.cli import study as study_command
from disco_rl.jobs import config as config_lib
from disco_rl.jobs import records
from disco_rl.studies import report as report_lib
from disco_rl.studies import run as study_run
from disco_rl.studies import spec as spec_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC = ROOT / 'studies' / 'learned_rule.py'
RESULTS = ROOT / 'docs' / 'results' / 'learned_rule'
# What scripts/benchmark_meta_suite.py kept of each held-out run (its
# settings in run.json), before the study moved onto the facility.
OLD = ROOT / 'docs' / 'results' / 'meta_suite_cpu' / 'stage2_tuned'
# The stage-2 rule's sha256, as every committed run of it recorded it.
LEARNED_SHA256 = (
  '12bef107c573c98b1f698de2ceb1481d36307295973b170eccf29ab751c33d17'
)
HELD_OUT = ('held_out_eval', 'held_out_meta')


@pytest.fixture(scope='module')
def study() -> spec_lib.Study:
  return study_command.load_study(SPEC)


def test_the_spec_holds_stage_2s_grid(study):
  assert [s.name for s in study.stages] == [
    'tune_eval',
    'held_out_eval',
    'tune_meta',
    'held_out_meta',
  ]
  assert [r.name for r in study.rules] == [
    'learned',
    'disco_103',
    'actor_critic',
  ]
  assert study.baseline == 'actor_critic'
  for setting in ('eval', 'meta'):
    tune, held_out = (
      study.stage(f'tune_{setting}'),
      study.stage(f'held_out_{setting}'),
    )
    assert tune.rates == (3e-4, 1e-3, 3e-3, 1e-2, 3e-2)
    assert tune.seeds == (100, 101, 102)
    assert held_out.rates == spec_lib.RatePick(tune.name)
    assert held_out.seeds == (0, 1, 2)
    assert tune.num_steps == held_out.num_steps == 3000
    assert tune.settings == held_out.settings
  # The learned rule is the committed stage-2 rule, and it loads.
  path = SPEC.parent / study.rule('learned').weights
  assert weights.sha256_of(path) == LEARNED_SHA256
  assert weights.load_disco_103(path, download=False)
  # Every cell at test size is a valid config.
  tiny = study.shrunk()
  for stage in tiny.stages:
    for env in stage.envs:
      for rule in tiny.stage_rules(stage):
        config = study_run.cell_config(
          tiny, stage, env, tiny.rule(rule), (1e-3,)
        )
        assert config.num_steps == 20


def test_the_cells_are_the_committed_runs_settings(study):
  """Each held-out cell's config is the one its committed run was trained
  with, but for how the runs are named: seed=0, num_seeds=3 and one
  learning_rate then; seeds and learning_rates now."""
  envs = {  # The script's folder of each environment.
    'catch_rows_8_columns_8_': 'jittable_catch[rows=8,columns=8]',
    'gymnax_Catch-bsuite': 'gymnax:Catch-bsuite',
    'gymnax_Acrobot-v1': 'gymnax:Acrobot-v1',
  }
  runs = sorted(OLD.glob('*/eval_*/*/*/lr_*/run.json'))
  assert len(runs) == 18  # 2 settings x 3 environments x 3 rules.
  for path in runs:
    setting, folder, rule = path.parts[-6], path.parts[-4], path.parts[-3]
    saved = json.loads(path.read_text())
    assert saved['rule_sha256'] == (LEARNED_SHA256 if rule == 'learned' else '')
    then = records.upgrade_settings(config_lib.EvalConfig, saved['settings'])
    rate = then['learning_rate']
    config = study_run.cell_config(
      study,
      study.stage(f'held_out_{setting}'),
      envs[folder],
      study.rule(rule),
      (rate,),
    )
    now = json.loads(json.dumps(dataclasses.asdict(config)))
    then = json.loads(json.dumps(then))
    differ = {k for k in now if now[k] != then[k]}
    assert differ <= {
      'seed',
      'num_seeds',
      'seeds',
      'learning_rate',
      'learning_rates',
    }, (path, differ)
    assert (then['seed'], then['num_seeds'], then['seeds']) == (0, 3, [])
    assert (now['seeds'], now['learning_rates']) == ([0, 1, 2], [rate])


def test_the_committed_files_are_the_spec_grid(study):
  results = report_lib.read_results(RESULTS / study_run.RESULTS)
  rates = json.loads((RESULTS / study_run.RATES).read_text())
  randoms = json.loads((RESULTS / study_run.RANDOM_PLAY).read_text())
  assert sorted(rates) == ['tune_eval', 'tune_meta']
  assert len(randoms) == 6  # The suite's and the held-out environments.
  for name in HELD_OUT:
    stage = study.stage(name)
    rows = results[results['stage'] == name]
    picked = rates[stage.rates.stage]['rates']
    assert len(rows) == len(stage.envs) * 3 * len(stage.seeds)
    for (env, rule), cell in rows.groupby(['env', 'rule']):
      assert env in stage.envs
      assert sorted(cell['seed']) == list(stage.seeds)
      assert set(cell['budget']) == {stage.num_steps}
      assert set(cell['learning_rate']) == {picked[rule]}
  # The tuning stages' runs kept no curves: their choice is rates.json's.
  assert set(results['stage']) == set(HELD_OUT)


@pytest.mark.parametrize('stage', HELD_OUT)
def test_the_committed_report_rebuilds_byte_for_byte(study, stage, tmp_path):
  for name in (study_run.RESULTS, study_run.CURVES):
    shutil.copy(RESULTS / name, tmp_path / name)
  paths = study_run.write_reports(study, tmp_path, only=stage)
  assert sorted(paths[stage]) == sorted(report_lib.FILES)
  for name, path in paths[stage].items():
    assert path.read_bytes() == (RESULTS / stage / name).read_bytes(), name
