# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Gate G2's study (studies/lpg_minatar_actor.py): the rule G1 held out,
in the MinAtar study's regime on Breakout, with the target it was
meta-trained with and the regime's Adam; its cells build at test size."""

import pathlib
import runpy

import pytest

from disco_rl.cli import study as study_cli
from disco_rl.studies import run as study_run
from disco_rl.studies import spec as spec_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC = ROOT / 'studies' / 'lpg_minatar_actor.py'
G1 = ROOT / 'studies' / 'lpg_gridworlds_actor.py'
MINATAR = ROOT / 'studies' / 'minatar.py'


@pytest.fixture(scope='module', name='study')
def _study() -> spec_lib.Study:
  return study_cli.load_study(SPEC)


def test_the_rule_is_the_one_g1_held_out_in_the_minatar_regime(study):
  g1 = runpy.run_path(str(G1))
  minatar = study_cli.load_study(MINATAR)
  (rule,) = study.rules
  assert rule.name == g1['HELD_OUT_RULE'] is not None
  assert rule.weights == g1['CANDIDATES'][rule.name]
  assert study.base == minatar.base and study.tiny == minatar.tiny
  (stage,) = study.stages
  sweep = minatar.stage('sweep')
  assert stage.envs == sweep.envs == ('gymnax:Breakout-MinAtar',)
  assert stage.seeds == (0, 1, 2, 3, 4)
  assert (stage.rates, stage.num_steps) == (sweep.rates, sweep.num_steps)
  for rate in stage.rates:
    cell = study_run.cell_config(study, stage, stage.envs[0], rule, (rate,))
    assert cell.policy_target == 'action_pg'
    assert cell.agent_optimizer == 'adam'  # The regime's, not G1's SGD.
    assert cell.net == 'conv' and cell.rule == 'disco_103'


def test_the_cells_build_at_test_size(study):
  tiny = study.shrunk()
  study_run.check_cells(tiny, list(tiny.stages), SPEC.parent)


@pytest.mark.slow
def test_the_tiny_study_runs_the_rule_on_conv_agents(study, tmp_path):
  """The whole grid at test size (5 seeds x 3 rates in one program): the
  tiny action_pg rule trains conv agents on Breakout (random play read
  from the MinAtar study's record)."""
  results_dir = ROOT / 'docs' / 'results' / 'minatar'
  random_play = tmp_path / study_run.RANDOM_PLAY
  random_play.write_bytes((results_dir / study_run.RANDOM_PLAY).read_bytes())
  results = study_run.run_study(
    study.shrunk(), tmp_path, progress=False, spec_dir=SPEC.parent
  )
  assert len(results) == 15
  assert set(results['rule']) == {study.rules[0].name}
  assert results['final_return'].notna().all()
