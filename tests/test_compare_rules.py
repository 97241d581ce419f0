# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""scripts/compare_rules.py: where each rule stands among the rules of one
held-out environment, from the committed per-seed final returns."""

import pathlib
import sys

SCRIPTS = pathlib.Path(__file__).resolve().parent.parent / 'scripts'
sys.path.insert(0, str(SCRIPTS))
import compare_rules  # pylint: disable=g-import-not-at-top,wrong-import-position


def test_ahead_only_above_every_other_seed_level_when_ranges_overlap():
  assert compare_rules.standings(
    {
      'learned': [0.9, 1.0, 0.95],
      'disco_103': [0.5, 0.6, 0.7],
      'actor_critic': [0.1, 0.2, 0.3],
    }
  ) == dict(learned='ahead', disco_103='behind', actor_critic='behind')
  # The top mean's range (0.8-1.0) overlaps the others': all level, even
  # the one whose mean is far below (its best seed reaches 0.8).
  assert compare_rules.standings(
    {
      'learned': [0.8, 0.9, 1.0],
      'disco_103': [0.2, 0.3, 0.8],
      'actor_critic': [0.0, 0.1, 0.2],
    }
  ) == dict(learned='level', disco_103='level', actor_critic='behind')


def test_the_table_from_a_results_file(tmp_path):
  csv = tmp_path / 'results.csv'
  csv.write_text(
    'setting,env,rule,seeds,final_return_mean,final_return_ci95,'
    'final_returns\n'
    'eval,catch,learned,2,0,0,"[0.9, 1.0]"\n'
    'eval,catch,actor_critic,2,0,0,"[0.5, 0.7]"\n'
  )
  out = tmp_path / 'comparison.md'
  assert compare_rules.main([str(csv), '--out', str(out)]) == 0
  text = out.read_text()
  assert (
    '| eval | catch | **0.950 (0.900 to 1.000), ahead** | '
    '0.600 (0.500 to 0.700), behind |' in text
  )
  assert compare_rules.main([str(tmp_path / 'missing.csv')]) == 2
  # Rates chosen per rule (--tune-rates) are named in each cell.
  csv.write_text(
    'setting,env,rule,learning_rate,seeds,final_return_mean,'
    'final_return_ci95,final_returns\n'
    'eval,catch,learned,0.003,2,0,0,"[0.9, 1.0]"\n'
    'eval,catch,actor_critic,0.0003,2,0,0,"[0.5, 0.7]"\n'
  )
  assert compare_rules.main([str(csv), '--out', str(out)]) == 0
  assert (
    '| eval | catch | **0.950 (0.900 to 1.000), ahead, lr 0.003** | '
    '0.600 (0.500 to 0.700), behind, lr 0.0003 |' in out.read_text()
  )


def test_a_second_stage_table_does_not_read_as_started_from_disco103(tmp_path):
  """init='disco_103' only names the layout of --meta-init's file: the
  table says which file, and that it is not Disco103."""
  import benchmark_meta_suite  # pylint: disable=g-import-not-at-top

  from disco_rl.loops import config as config_lib  # pylint: disable=g-import-not-at-top

  meta = config_lib.MetaTrainConfig(init='disco_103', num_steps=4)
  rows = [
    dict(
      setting='eval',
      env='catch',
      rule='learned',
      seeds=1,
      final_return_mean=0.5,
      final_return_ci95=0.0,
      final_returns=[0.5],
    )
  ]
  benchmark_meta_suite.write_tables(
    tmp_path,
    rows,
    'cmd',
    meta,
    {'eval': {}},
    ['eval'],
    dict(final_pos_rewards=1.0, first_pos_rewards=0.0),
    meta_init='stage1/update_rule_params.npz',
  )
  text = (tmp_path / 'results.md').read_text()
  assert (
    "'init': 'stage1/update_rule_params.npz (disco_103 layout; not Disco103)'"
  ) in text
  assert "'init': 'disco_103'" not in text
