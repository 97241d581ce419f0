# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""scripts/zero_reward_probe.py: the three versions of an action rule it
trains fresh G1 agents with, its block means and its refusals."""

import pathlib

import numpy as np
import pandas as pd
import pytest

from disco_rl import weights

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / 'scripts'
RULE = ROOT / 'docs/results/lpg_transfer/l1000/rule_step_2900.npz'


@pytest.fixture(name='script')
def _script(monkeypatch):
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import zero_reward_probe  # pylint: disable=g-import-not-at-top

  return zero_reward_probe


@pytest.fixture(scope='module', name='rule_files')
def _rule_files(tmp_path_factory):
  """A tiny rule file with the action head (the action arm's committed
  milestone) and the same rule without it."""
  folder = tmp_path_factory.mktemp('rules')
  params = weights.load_rule(RULE)
  del params['lstm/linear_5']
  weights.save_params(params, folder / 'absolute.npz')
  return {'action': RULE, 'absolute': folder / 'absolute.npz'}


def test_the_constant_head_leaves_the_rest_of_the_rule(script, rule_files):
  rule = weights.load_rule(rule_files['action'])
  constant = script.with_constant_head(rule, 0.025)
  np.testing.assert_array_equal(constant['lstm/linear_5']['w'], 0.0)
  np.testing.assert_allclose(constant['lstm/linear_5']['b'], 0.025)
  assert np.any(rule['lstm/linear_5']['w'] != 0.0)  # Not changed in place.
  for name in set(rule) - {'lstm/linear_5'}:
    assert constant[name] is rule[name]


def test_arms_take_the_studys_settings_and_their_own_target(script):
  rule = script.arm_config('lpg:sparse', 'rule', 30, 10.0, [0, 1])
  pg = script.arm_config('lpg:sparse', 'constant_pg', 30, 10.0, [0, 1])
  assert (rule.policy_target, pg.policy_target) == ('action', 'action_pg')
  assert rule.net == 'table' and rule.agent_optimizer == 'sgd'
  assert rule.learning_rates == (10.0,) and rule.seeds == (0, 1)
  assert rule.num_steps == 30 and rule.steps_per_call == 30


def test_blocks_average_over_steps_and_seeds_per_block(script):
  rows = pd.DataFrame(
    [
      dict(env='e', arm='a', step=step, seed=seed, **{c: float(step + seed)})
      for step in range(4)
      for seed in (0, 1)
      for c in ('avg_return',)
    ]
  )
  for column in script.COLUMNS[1:]:
    rows[column] = 1.0
  table = script.blocks(rows, 2)
  assert table['first_update'].tolist() == [0, 2]
  # Steps 0, 1 and seeds 0, 1: (0 + 1 + 1 + 2) / 4; steps 2, 3: 3.
  assert table['avg_return'].tolist() == [1.0, 3.0]


def test_a_rule_without_an_action_head_is_refused(
  script, rule_files, tmp_path, capsys
):
  assert script.main([str(rule_files['absolute'])]) == 2
  assert capsys.readouterr().err.strip().endswith('has no action head.')
  assert script.main([str(tmp_path / 'missing.npz')]) == 2
  assert capsys.readouterr().err.startswith('error: ')
  # Settings the job refuses end in one line too, before any training.
  action = str(rule_files['action'])
  assert script.main([action, '--envs', 'lpg:nowhere']) == 2
  err = capsys.readouterr().err
  assert err.startswith('error: ') and err.count('\n') == 1
  # A --csv that cannot be written is refused before any training too.
  no_folder = tmp_path / 'no_folder' / 'probe.csv'
  assert script.main([action, '--csv', str(no_folder)]) == 2
  assert capsys.readouterr().err == (
    f'error: --csv {no_folder}: its folder does not exist.\n'
  )


# Slow (10 s here: an eval job compiled and run).
@pytest.mark.slow
def test_the_probe_runs_and_writes_its_blocks(
  script, rule_files, tmp_path, capsys
):
  out = tmp_path / 'probe.csv'
  argv = [
    str(rule_files['action']),
    '--updates',
    '4',
    '--seeds',
    '0',
    '--block',
    '2',
  ]
  assert script.main(argv + ['--arms', 'constant', '--csv', str(out)]) == 0
  table = pd.read_csv(out)
  assert table['first_update'].tolist() == [0, 2]
  np.testing.assert_allclose(table['pi_action'], 0.025, rtol=1e-6)
  assert set(table['arm']) == {'constant'}
  assert 'lpg:sparse' in capsys.readouterr().out
