# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Gate G1's study for issue 69's rules (studies/lpg_gridworlds_l1000.py):
the spec states the procedure its docstring fixes (candidates tuned at
SGD rates around the meta-training's, the actor-critic at G1's Adam grid,
the held-out stage only for the one candidate the tuning picks), and its
rule files load as the meta-training wrote them."""

import dataclasses
import pathlib
import runpy

import pytest

from disco_rl import weights
from disco_rl.cli import meta_train
from disco_rl.cli import study as study_cli
from disco_rl.studies import run as study_run
from disco_rl.studies import spec as spec_lib
from disco_rl.update_rules import disco

ROOT = pathlib.Path(__file__).resolve().parents[1]
SPEC = ROOT / 'studies' / 'lpg_gridworlds_l1000.py'
G1 = ROOT / 'studies' / 'lpg_gridworlds.py'


@pytest.fixture(scope='module')
def study() -> spec_lib.Study:
  return study_cli.load_study(SPEC)


def test_the_candidates_are_tuned_at_sgd_rates_and_the_baseline_at_g1s(
  study,
):
  g1 = study_cli.load_study(G1)
  tune = study.stage('tune')
  assert tune.envs == g1.stage('tune').envs
  assert tune.seeds == g1.stage('tune').seeds
  assert tune.num_steps == g1.stage('tune').num_steps == 2000
  assert study.baseline == 'actor_critic'
  learned = [r.name for r in study.rules if r.name != 'actor_critic']
  assert learned == ['learned_2900', 'learned_6000']
  assert tune.rates['actor_critic'] == g1.stage('tune').rates
  for name in learned:
    # The meta-training's agents' rate is on the grid.
    assert 40.0 in tune.rates[name]
    rule = study.rule(name)
    assert rule.settings['agent_optimizer'] == 'sgd'
    assert rule.settings['policy_target'] == 'action'
    cell = study_run.cell_config(
      study, tune, tune.envs[0], rule, tune.rates[name]
    )
    assert cell.agent_optimizer == 'sgd'
    assert cell.learning_rates == (10.0, 20.0, 40.0, 80.0)
    # The agents the rules were meta-trained with (the lpg preset's).
    preset = meta_train.PRESETS['lpg']
    assert cell.net == 'table'
    assert cell.rollout_len == preset['rollout_len']
    assert cell.model_lstm_size == preset['model_lstm_size']
    assert (cell.batch_size, cell.replay_ratio) == (16, 1)


def test_the_held_out_stage_runs_one_candidate_at_its_pick(study):
  """Until the tuning stage names its candidate there is no held-out
  stage; once named, only that candidate and the baseline run there, at
  the rates the tuning stage picks, with G1's environments and seeds."""
  named = runpy.run_path(str(SPEC))['HELD_OUT_RULE']
  if named is None:
    assert [s.name for s in study.stages] == ['tune']
    return
  held_out = study.stage('held_out')
  g1 = study_cli.load_study(G1).stage('held_out')
  assert held_out.rules == (named, 'actor_critic')
  assert held_out.rates == spec_lib.RatePick('tune')
  assert (held_out.envs, held_out.seeds) == (g1.envs, g1.seeds)


def check_candidates_load(study: spec_lib.Study, spec: pathlib.Path) -> None:
  """Each rule file of `study` (paths relative to `spec`'s folder) loads
  at the tiny sizes with the action head."""
  for rule in study.rules:
    if rule.weights is None:
      continue
    params = weights.load_rule(
      spec.parent / rule.weights, rule.settings['rule_sizes']
    )
    assert disco.sizes_from_params(params) == disco.NAMED_SIZES['tiny']
    assert disco.has_action_head(params)


def test_the_candidates_load_with_the_action_head_at_tiny_sizes(study):
  check_candidates_load(study, SPEC)


def test_the_tiny_study_checks_every_cell(study, tmp_path):
  """Every cell's settings are checked before anything runs (the files
  exist, the sizes fit); a candidate whose file is gone is refused."""
  tiny = study.shrunk()
  study_run.check_cells(tiny, list(tiny.stages), SPEC.parent)
  rule = dataclasses.replace(
    study.rule('learned_2900'), weights=str(tmp_path / 'gone.npz')
  )
  gone = dataclasses.replace(
    tiny,
    rules=(rule, study.rule('actor_critic')),
    stages=(
      dataclasses.replace(
        tiny.stage('tune'),
        rates={'learned_2900': (40.0,), 'actor_critic': (1e-2,)},
      ),
    ),
  )
  with pytest.raises(FileNotFoundError, match='gone.npz'):
    study_run.check_cells(gone, list(gone.stages), SPEC.parent)
