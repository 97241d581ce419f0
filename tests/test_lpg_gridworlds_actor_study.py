# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Gate G1's study for the `lpg_actor` preset's rules
(studies/lpg_gridworlds_actor.py): the procedure of
studies/lpg_gridworlds_l1000.py for the two action_pg candidates, whose
files load with their head at the tiny sizes and are evaluated with the
target they were meta-trained with."""

import pathlib
import runpy

import pytest
import test_lpg_gridworlds_l1000_study

from disco_rl.cli import study as study_cli
from disco_rl.studies import run as study_run
from disco_rl.studies import spec as spec_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC = ROOT / 'studies' / 'lpg_gridworlds_actor.py'
L1000 = ROOT / 'studies' / 'lpg_gridworlds_l1000.py'


@pytest.fixture(scope='module', name='study')
def _study() -> spec_lib.Study:
  return study_cli.load_study(SPEC)


def test_the_procedure_is_the_l1000_studys_for_the_action_pg_rules(study):
  l1000 = study_cli.load_study(L1000)
  tune, tune_l1000 = study.stage('tune'), l1000.stage('tune')
  assert (tune.envs, tune.seeds, tune.num_steps) == (
    tune_l1000.envs,
    tune_l1000.seeds,
    tune_l1000.num_steps,
  )
  assert study.base == l1000.base and study.tiny == l1000.tiny
  learned = [r.name for r in study.rules if r.name != 'actor_critic']
  assert learned == ['actor_s4_3000', 'actor_s5_3000']
  assert tune.rates['actor_critic'] == tune_l1000.rates['actor_critic']
  for name in learned:
    assert tune.rates[name] == tune_l1000.rates['learned_6000']
    cell = study_run.cell_config(
      study, tune, tune.envs[0], study.rule(name), tune.rates[name]
    )
    assert cell.policy_target == 'action_pg'
    assert cell.agent_optimizer == 'sgd'
  # The actor-critic's cells are the l1000 study's, so its finished
  # cells can be copied in.
  ac = study.rule('actor_critic')
  assert study_run.cell_config(
    study, tune, tune.envs[0], ac, tune.rates['actor_critic']
  ) == study_run.cell_config(
    l1000,
    tune_l1000,
    tune.envs[0],
    l1000.rule('actor_critic'),
    tune_l1000.rates['actor_critic'],
  )


def test_no_held_out_stage_before_the_tuning_names_its_rule(study):
  named = runpy.run_path(str(SPEC))['HELD_OUT_RULE']
  if named is None:
    assert [s.name for s in study.stages] == ['tune']
  else:
    assert study.stage('held_out').rules == (named, 'actor_critic')


def test_the_candidates_load_with_the_action_head_at_tiny_sizes(study):
  test_lpg_gridworlds_l1000_study.check_candidates_load(study, SPEC)
  tiny = study.shrunk()
  study_run.check_cells(tiny, list(tiny.stages), SPEC.parent)
