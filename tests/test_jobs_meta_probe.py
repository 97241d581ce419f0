# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Whether a meta-training is stuck: the meta-gradient's statistics per head
(disco_rl.meta_grad_stats), its parts logged by the job
(`meta_grad_parts`), and the probe of a rule (disco_rl.jobs.meta.probe and
its command)."""

import csv
import dataclasses

import chex
import numpy as np
import pytest
import tiny

from disco_rl import meta_grad_stats
from disco_rl import weights
from disco_rl.cli import probe_rule
from disco_rl.jobs import trainer as trainer_lib
from disco_rl.jobs.meta import job as meta_lib
from disco_rl.jobs.meta import probe as meta_probe
from disco_rl.networks import meta_nets

TINY_RULE = tiny.RULE_SIZES.changes()
TINY = tiny.meta_config(
  num_agents=3,
  num_inner_steps=1,
  num_devices=1,
  steps_per_call=1,
  num_steps=2,
  rule_sizes=TINY_RULE,
  meta_grad_parts=True,
)
# TINY as the probe command's flags.
TINY_FLAGS = tiny.flags(
  tiny.meta_settings(
    num_agents=None,
    num_inner_steps=1,
    num_devices=1,
    rule_sizes=tiny.RULE_SIZES.text(),
  )
)


def _tree(per_head):
  """A rule-shaped tree with one [N, P] leaf per head (module names of the
  LSTM meta-network)."""
  modules = dict(
    pi_out='lstm/linear_4',
    pi_conv='lstm/sequential_1/conv1_d',
    y='lstm/linear_2',
    z='lstm/linear_3',
    torso='lstm/lstm/linear',
  )
  return {
    modules[h]: {'w': np.asarray(g, np.float32)} for h, g in per_head.items()
  }


def test_every_parameter_of_disco_103_has_its_head():
  heads = {m: meta_nets.head_of(m) for m in weights.expected_disco_103_shapes()}
  assert heads['lstm/linear_4'] == 'pi_out'
  assert heads['lstm/linear_2'] == 'y' and heads['lstm/linear_3'] == 'z'
  assert heads['lstm/sequential_1/conv1_d'] == 'pi_conv'
  assert heads['lstm/linear'] == 'torso'  # The multiplicative interaction.
  assert heads['lstm/~/meta_lstm/~unroll/lstm/linear'] == 'torso'
  # Every head but the action head of policy target 'action'.
  assert set(heads.values()) == set(meta_nets.HEAD_NAMES) - {'pi_action'}


def test_coherence_is_one_for_agreement_and_the_noise_level_for_none():
  n, p = 4, 6
  same = np.tile([[1.0, -2.0, 0.5, 0.0, 3.0, 1.0]], (n, 1)) * [
    [1],
    [2],
    [3],
    [9],
  ]
  orthogonal = np.eye(n, p) * [[1], [5], [0.1], [2]]  # Independent directions.
  opposite = np.stack([same[0], -same[0], same[1], -same[1]])
  stats = meta_grad_stats.coherence(
    _tree(dict(pi_out=same, y=orthogonal, z=opposite))
  )
  np.testing.assert_allclose(stats['pi_out'], 1.0, rtol=1e-6)
  np.testing.assert_allclose(stats['y'], 1 / np.sqrt(n), rtol=1e-6)
  np.testing.assert_allclose(stats['z'], 0.0, atol=1e-7)
  assert meta_grad_stats.noise_level(n)['coherence'] == 1 / np.sqrt(n)


def test_t_share_counts_parameters_whose_mean_is_significant():
  # Student's t at 5%, two-sided: 2.093 for 20 agents (df 19), as the
  # tables give; 12.706 for 2 (df 1).
  assert meta_grad_stats.t_critical(20) == pytest.approx(2.093, abs=1e-3)
  assert meta_grad_stats.t_critical(2) == pytest.approx(12.706, abs=1e-3)
  rng = np.random.default_rng(0)
  noise = rng.normal(size=(20, 1))
  g = np.concatenate(
    [
      noise + 10.0,  # Mean 10, sem 0.2: t about 50.
      noise * 0 + 1.0,  # The same for every agent: significant.
      noise - noise.mean(),  # Mean exactly 0 up to rounding: t about 0.
      np.zeros((20, 1)),  # No gradient: not significant.
    ],
    axis=1,
  )
  share = meta_grad_stats.t_share(_tree(dict(pi_out=g)))['pi_out']
  np.testing.assert_allclose(share, 0.5)
  logs = meta_grad_stats.summary(_tree(dict(pi_out=g)), 'meta_grad_pg')
  assert sorted(logs) == [
    'meta_grad_pg_pi_out_coherence',
    'meta_grad_pg_pi_out_norm',
    'meta_grad_pg_pi_out_t_share',
  ]
  np.testing.assert_allclose(
    logs['meta_grad_pg_pi_out_norm'], np.linalg.norm(g.mean(0)), rtol=1e-5
  )


# The probe as users start it from a preset's settings (flags). Slow (16 s
# in CI's default run on 2026-12-07, a probe program compiled): the default
# suite keeps the probe's statistics and its command's refusals below; a
# meta-training with the parts logged, stopped and resumed: the meta resume
# test of test_jobs_trainer.py; the probe of a run's checkpoint: slow too.
@pytest.mark.slow
def test_the_probe_command_measures_a_rule_on_fresh_agents(
  tmp_path, fast_compile, capsys
):
  del fast_compile
  csv_path = tmp_path / 'probe.csv'
  status = probe_rule.main(
    [*TINY_FLAGS, '--agents', '2', '--ages', '0,1', '--csv', str(csv_path)]
  )
  out = capsys.readouterr().out
  assert status == 0, out
  assert 'probing the random rule with 2 fresh agents' in out
  assert 'age 1: policy target entropy' in out
  assert 'noise: coherence 0.71, t_share 0.05' in out
  _check_probe_rows(csv_path)


def _check_probe_rows(csv_path):
  heads = set(meta_nets.HEAD_NAMES) - {'pi_action'}  # Disco's own heads.
  with open(csv_path, newline='') as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 2 * 2 * len(heads)  # Ages x parts x heads.
  assert {(r['age'], r['part']) for r in rows} == {
    ('0', 'pg'),
    ('0', 'reg'),
    ('1', 'pg'),
    ('1', 'reg'),
  }
  assert all(0 <= float(r['coherence']) <= 1 + 1e-6 for r in rows)
  # ln(3) for Catch's 3 actions; the target's entropy at most that.
  for r in rows:
    assert float(r['uniform_entropy']) == pytest.approx(np.log(3), rel=1e-6)
    assert float(r['target_entropy']) <= float(r['uniform_entropy']) + 1e-5


# Slow (a meta-training and the probe: two meta-step compilations).
@pytest.mark.slow
def test_the_probe_command_reads_a_runs_checkpoint(
  tmp_path, fast_compile, capsys
):
  del fast_compile
  trainer = trainer_lib.Trainer(TINY, tmp_path / 'a', progress=False)
  assert trainer.fit()['steps'] == 2
  trainer.close()
  capsys.readouterr()
  csv_path = tmp_path / 'probe.csv'
  status = probe_rule.main(
    [
      str(tmp_path / 'a'),
      '--agents',
      '2',
      '--ages',
      '0,1',
      '--csv',
      str(csv_path),
    ]
  )
  out = capsys.readouterr().out
  assert status == 0, out
  assert f'probing {tmp_path / "a"} at meta-step 2 with 2 fresh agents' in out
  _check_probe_rows(csv_path)


@pytest.mark.parametrize(
  'argv, fragment',
  [
    (['--ages', '0,x'], '--ages must be comma-separated integers'),
    (
      ['--ages', '0,1', '--num-inner-steps', '2'],
      'multiples >= 0 of num_inner_steps=2',
    ),
    (['--agents', '1'], 'num_agents must be an int >= 2, got 1'),
    (['--step', '3'], '--step names a checkpoint of RUN_DIR'),
  ],
)
def test_probe_command_refuses_bad_input(argv, fragment, capsys):
  assert probe_rule.main(argv) == 2
  err = capsys.readouterr().err
  assert err.startswith('error: ') and fragment in err, err
  assert err.count('\n') == 1


def test_probe_command_refuses_a_run_with_a_preset(tmp_path, capsys):
  assert probe_rule.main([str(tmp_path), '--preset', 'lpg']) == 2
  assert 'leave out --preset and --weights' in capsys.readouterr().err


# Slow (two meta-step compilations).
@pytest.mark.slow
def test_the_parts_add_up_to_the_meta_gradient(fast_compile):
  """The run with `meta_grad_parts` is the run without, up to rounding:
  the parts' sum is the meta-gradient."""
  del fast_compile
  logs = {}
  for parts in (False, True):
    job = meta_lib.make_meta_train(
      dataclasses.replace(TINY, meta_grad_parts=parts)
    )
    state, logs[parts] = job.step(job.init(), 1)
    logs[parts]['rule'] = meta_lib.rule(job, state)
  chex.assert_trees_all_close(
    logs[True].pop('rule'), logs[False].pop('rule'), rtol=1e-5, atol=1e-7
  )
  for key, value in logs[False].items():
    np.testing.assert_allclose(logs[True][key], value, rtol=1e-4, err_msg=key)
  assert not any('_pg_' in k for k in logs[False])


def test_probe_checks_its_arguments():
  with pytest.raises(ValueError, match='multiples >= 0 of num_inner_steps=1'):
    meta_probe.probe(TINY, ages=(-1,))
  with pytest.raises(ValueError, match='num_agents must be an int >= 2'):
    meta_probe.probe(TINY, num_agents=2.0)
