# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""scripts/zero_reward_probe.py: the three versions of an action rule it
trains fresh G1 agents with, its block means and its refusals."""

import pathlib

import jax
import numpy as np
import pandas as pd
import pytest

from disco_rl import agent as agent_lib
from disco_rl import weights
from disco_rl.update_rules import disco

SCRIPTS = pathlib.Path(__file__).resolve().parent.parent / 'scripts'
TINY_RULE = disco.NAMED_SIZES['tiny'].changes()


@pytest.fixture(name='script')
def _script(monkeypatch):
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import zero_reward_probe  # pylint: disable=g-import-not-at-top

  return zero_reward_probe


def _rule_file(tmp_path, policy_target='action'):
  settings = agent_lib.get_settings_disco(TINY_RULE, policy_target)
  rule = disco.DiscoUpdateRule(**settings.update_rule)
  params, _ = jax.jit(rule.init_params)(jax.random.PRNGKey(0))
  path = tmp_path / f'{policy_target}.npz'
  weights.save_params(params, path)
  return path


def test_the_constant_head_leaves_the_rest_of_the_rule(script, tmp_path):
  rule = weights.load_rule(_rule_file(tmp_path))
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


def test_a_rule_without_an_action_head_is_refused(script, tmp_path, capsys):
  path = _rule_file(tmp_path, 'absolute')
  assert script.main([str(path)]) == 2
  assert capsys.readouterr().err.strip().endswith('has no action head.')
  assert script.main([str(tmp_path / 'missing.npz')]) == 2
  assert capsys.readouterr().err.startswith('error: ')


# Slow (10 s here: an eval job compiled and run).
@pytest.mark.slow
def test_the_probe_runs_and_writes_its_blocks(script, tmp_path, capsys):
  out = tmp_path / 'probe.csv'
  path = _rule_file(tmp_path)
  argv = [str(path), '--updates', '4', '--seeds', '0', '--block', '2']
  assert script.main(argv + ['--arms', 'constant', '--csv', str(out)]) == 0
  table = pd.read_csv(out)
  assert table['first_update'].tolist() == [0, 2]
  np.testing.assert_allclose(table['pi_action'], 0.025, rtol=1e-6)
  assert set(table['arm']) == {'constant'}
  assert 'lpg:sparse' in capsys.readouterr().out
