# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Gate G1's study (studies/lpg_gridworlds.py): the spec states the gate
of docs/studies/lpg_transfer.md with the meta-training's agents, its rule
file loads at the sizes it states, a rule file of other sizes is refused
at its cell, and (slow target) a cell of the learned rule runs."""

import dataclasses
import pathlib
import shutil

import pytest

from disco_rl import weights
from disco_rl.cli import meta_train
from disco_rl.cli import study as study_cli
from disco_rl.studies import report as report_lib
from disco_rl.studies import run as study_run
from disco_rl.studies import spec as spec_lib
from disco_rl.update_rules import disco

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC = ROOT / 'studies' / 'lpg_gridworlds.py'


@pytest.fixture(scope='module')
def study() -> spec_lib.Study:
  return study_cli.load_study(SPEC)


def test_the_spec_is_gate_g1_with_the_meta_trainings_agents(study):
  tune, held_out = study.stage('tune'), study.stage('held_out')
  assert [s.name for s in study.stages] == ['tune', 'held_out']
  assert [r.name for r in study.rules] == ['learned', 'actor_critic']
  assert study.baseline == 'actor_critic'
  assert tune.envs == tuple(f'lpg:all[layout_seed={s}]' for s in (1, 2, 3))
  assert held_out.envs == ('lpg:dense', 'lpg:sparse', 'lpg:long_dense')
  assert tune.rates == (1e-3, 3e-3, 1e-2, 3e-2)
  assert meta_train.PRESETS['lpg']['learning_rate'] in tune.rates
  assert held_out.rates == spec_lib.RatePick('tune')
  assert tune.seeds == (100, 101, 102) and held_out.seeds == (0, 1, 2, 3, 4)
  assert tune.num_steps == held_out.num_steps == 2000
  # The agents the rule was meta-trained with (the lpg preset's).
  preset = meta_train.PRESETS['lpg']
  assert preset['tasks'] == ('lpg:all[layout_seed=-1,net=table]',)
  for cell in (
    study_run.cell_config(study, tune, tune.envs[0], study.rule(r), (1e-3,))
    for r in ('learned', 'actor_critic')
  ):
    assert cell.net == 'table'
    assert cell.rollout_len == preset['rollout_len']
    assert cell.model_lstm_size == preset['model_lstm_size']
    assert cell.model_head_hiddens == preset['model_head_hiddens']
    assert (cell.batch_size, cell.replay_ratio, cell.buffer_capacity) == (
      16,
      1,
      16,
    )


def test_the_rule_file_loads_at_the_sizes_the_spec_states(study):
  rule = study.rule('learned')
  params = weights.load_rule(
    SPEC.parent / rule.weights, rule.settings['rule_sizes']
  )
  assert disco.sizes_from_params(params).prediction_size == 8


def test_a_rule_file_of_other_sizes_is_refused_at_its_cell(study, tmp_path):
  """The learned rule's cell with Disco103's sizes stated: refused before
  any training, naming the file's sizes and the cell's."""
  tiny = study.shrunk()
  rule = dataclasses.replace(study.rule('learned'), settings={})
  wrong = dataclasses.replace(
    tiny,
    rules=(rule,),
    baseline=None,
    stages=(dataclasses.replace(tiny.stage('tune'), rules=('learned',)),),
  )
  with pytest.raises(
    weights.ArchitectureError,
    match=r'rule_step_\d+.npz holds a meta-network of sizes '
    r"prediction_size=8,.*, not the run's Disco103's",
  ):
    study_run.run_study(wrong, tmp_path, spec_dir=SPEC.parent, progress=False)
  assert not (tmp_path / study_run.RUNS).exists()


@pytest.mark.slow
def test_one_cell_of_the_tiny_study_runs(study, tmp_path):
  """The learned rule's first tuning cell at test size: every seed x rate
  in one program, the rule read from its file at its sizes. The finished
  cell is tied to that file: run again with another rule file in its
  place, it is refused, naming the files' sha256 (never reused)."""
  rule_file = tmp_path / 'rule.npz'
  shutil.copy(SPEC.parent / study.rule('learned').weights, rule_file)
  tiny = study.shrunk()
  tune = tiny.stage('tune')
  one = dataclasses.replace(
    tiny,
    rules=(dataclasses.replace(study.rule('learned'), weights=str(rule_file)),),
    baseline=None,
    stages=(dataclasses.replace(tune, envs=tune.envs[:1], rules=('learned',)),),
  )
  out = tmp_path / 'study'
  results = study_run.run_study(one, out, progress=False)
  assert len(results) == 12  # 3 seeds x 4 rates.
  assert set(results['rule']) == {'learned'} and set(results['budget']) == {20}
  curves = report_lib.read_curves(out / study_run.CURVES)
  assert len(curves.groupby(['seed', 'learning_rate'])) == 12
  saved = weights.sha256_of(rule_file)
  params = weights.load_rule(rule_file)
  weights.save_params(
    {m: {k: 2 * v for k, v in p.items()} for m, p in params.items()}, rule_file
  )
  with pytest.raises(
    ValueError,
    match=r'Cell tune/lpg:all\[layout_seed=1\]/learned of .* finished with '
    rf"other settings; these differ: rule_sha256: saved '{saved}', given "
    rf"'{weights.sha256_of(rule_file)}'\.",
  ):
    study_run.run_study(one, out, progress=False)
