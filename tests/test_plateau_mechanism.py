# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""studies/plateau_mechanism.py (issue 70): its measures on known inputs,
and (slow target) a tiny condition run and reported as documented."""

import importlib.util
import math
import pathlib
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / 'studies' / 'plateau_mechanism.py'
COMMITTED = ROOT / 'docs' / 'results' / 'plateau'


def _load_script():
  spec = importlib.util.spec_from_file_location('plateau_mechanism', SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


mechanism = _load_script()


def test_spread_is_the_mean_total_variation_from_the_batch_mean():
  same = jnp.broadcast_to(jnp.asarray([0.2, 0.3, 0.5]), (4, 2, 3))
  live = jnp.ones((4, 2))
  assert float(mechanism._spread(same, live)) == pytest.approx(0.0, abs=1e-7)
  # Half the steps one-hot on action 0, half on action 1: the mean is
  # (0.5, 0.5, 0), each step 0.5 away in total variation.
  one_hot = jnp.asarray([[1.0, 0, 0], [0, 1.0, 0]])
  probs = jnp.broadcast_to(one_hot[None], (4, 2, 3))
  assert float(mechanism._spread(probs, live)) == pytest.approx(0.5)
  # A dead step is left out of both the mean and the average: numpy's
  # weighted mean over the 7 live steps.
  probs = probs.at[0, 0].set(jnp.asarray([0.0, 0, 1.0]))
  dead = live.at[0, 0].set(0.0)
  w = np.asarray(dead).ravel() / 7
  p = np.asarray(probs).reshape(8, 3)
  mean = (p * w[:, None]).sum(0)
  want = (0.5 * np.abs(p - mean).sum(1) * w).sum()
  assert float(mechanism._spread(probs, dead)) == pytest.approx(want, rel=1e-6)


def test_corr_is_pearson_s_over_the_live_steps():
  rng = np.random.default_rng(0)
  x, y = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
  live = np.ones((5, 4))
  live[0] = 0.0
  want = np.corrcoef(x[1:].ravel(), y[1:].ravel())[0, 1]
  got = mechanism._corr(jnp.asarray(x), jnp.asarray(y), jnp.asarray(live))
  assert float(got) == pytest.approx(want, rel=1e-5)
  assert float(
    mechanism._corr(jnp.asarray(x), jnp.asarray(2 * x + 1), jnp.ones((5, 4)))
  ) == pytest.approx(1.0, rel=1e-5)


def test_the_conditions_are_eval_configs():
  from disco_rl.jobs import config as config_lib

  for name in mechanism.CONDITIONS:
    config = mechanism.condition_config(name)
    updates = config.num_steps * max(1, config.epochs * config.minibatches)
    assert config.seeds == (0, 1, 2) and 1000 <= updates < 1032, name
    assert isinstance(config, config_lib.EvalConfig)
  # Stoix's regime: the cold run's updates in steps of 32 (Catch 1,000 in
  # 32 steps, Breakout 3,000 in 94), measured every step.
  stoix = mechanism.condition_config('stoix')
  assert (stoix.epochs, stoix.minibatches, stoix.rollout_len) == (4, 8, 128)
  assert (stoix.num_steps, stoix.steps_per_call) == (32, 1)
  assert stoix.learning_rate == 3e-4 and stoix.replay_ratio == 1
  assert mechanism.condition_config('stoix', 'breakout').num_steps == 94
  # The same regime at the game's replay-regime rate.
  base_rate = mechanism.condition_config('stoix_base_rate')
  assert (base_rate.learning_rate, base_rate.num_steps) == (1e-2, 32)
  assert mechanism.condition_config(
    'stoix_base_rate', 'breakout'
  ).learning_rate == pytest.approx(1e-3)
  tiny_stoix = mechanism.condition_config('stoix', tiny=True)
  assert tiny_stoix.buffer_capacity == tiny_stoix.batch_size
  # A warm start's rate as a multiple of the game's own: Catch's 1e-2,
  # Breakout's 1e-3 (the MinAtar study's for Disco103).
  assert mechanism.condition_config('pred300_x3').warm_start_learning_rate == (
    pytest.approx(3e-2)
  )
  breakout = mechanism.condition_config('pred300_x3', 'breakout')
  assert breakout.learning_rate == 1e-3
  assert breakout.warm_start_learning_rate == pytest.approx(3e-3)
  assert (
    mechanism.condition_config('pred300_x3', tiny=True).warm_start_steps == 5
  )


@pytest.mark.slow
@pytest.mark.usefixtures('disco_103_params')
def test_a_tiny_condition_runs_and_reports(tmp_path):
  out = tmp_path / 'runs'
  assert mechanism.main([str(out), 'pred300', '--tiny']) == 0
  rows = pd.read_csv(out / 'pred300' / 'metrics.csv')
  measured = pd.read_csv(out / 'pred300.targets.csv')
  assert sorted(measured['seed'].unique()) == [0, 1, 2]
  assert set(measured['step']) <= set(rows['step'])
  for key in ('pi_hat_entropy', 'kl_target_policy', 'y_hat_spread'):
    assert measured[key].notna().all(), key
  assert (measured['pi_hat_entropy'] <= math.log(3) + 1e-5).all()
  assert mechanism.main([str(out), '--report', str(tmp_path / 'res')]) == 0
  for name in ('mechanism.csv', 'mechanism.md', 'mechanism.png', 'curves.csv'):
    assert (tmp_path / 'res' / name).stat().st_size > 0
  table = pd.read_csv(tmp_path / 'res' / 'mechanism_plateaus.csv')
  assert list(table['seed']) == [0, 1, 2]


def test_half_way_for_good_waits_for_the_last_rise():
  # Return -1 for 50 updates, +1 for 50 (a warm start that learns), 0 for
  # 100 (the switch takes part of it back), then +1.
  returns = [-1.0] * 50 + [1.0] * 50 + [0.0] * 100 + [1.0] * 200
  run = pd.DataFrame(dict(avg_return=returns, updates=np.arange(400.0)))
  # Half way from -1 to +1 is 0. At update i in 50..74 the trailing
  # 25-update window holds i - 49 of +1 and 74 - i of -1: its mean is
  # >= 0 from i = 62 (2i >= 123), and the 0s that follow keep it there.
  assert mechanism.half_way_for_good(run, -1.0, 1.0) == 62.0
  # Half way from -1 to 1.5 is 0.25: the stretch of 0s falls below it; in
  # the last rise the window holds k = i - 199 of +1 and the rest 0s, so
  # k / 25 >= 0.25 from k = 7: update 206.
  assert mechanism.half_way_for_good(run, -1.0, 1.5) == 206.0
  # Ending below: NaN.
  assert np.isnan(mechanism.half_way_for_good(run, -1.0, 3.5))


def test_a_report_keeps_the_conditions_it_has_no_new_run_of(tmp_path):
  # A committed report of cold and ac100; a new run of ac100 replaces
  # ac100's rows, cold's are kept as they were.
  for table in mechanism.TABLES:
    pd.DataFrame(
      dict(condition=['ac100', 'cold', 'cold'], seed=[0, 0, 1], x=[1, 2, 3])
    ).to_csv(tmp_path / table, index=False)
  plateaus, measured, curves = mechanism._kept(tmp_path, ['ac100'])
  for kept in (plateaus, measured, curves):
    (rows,) = kept
    assert list(rows['condition']) == ['cold', 'cold']
    assert list(rows['x']) == [2, 3]
  assert mechanism._kept(tmp_path / 'none', ['ac100']) == ([], [], [])


def test_only_a_run_that_completed_is_finished(tmp_path):
  assert not mechanism.finished(tmp_path / 'none')
  for summary, done in (
    ('{"completed": true, "interrupted": null}', True),
    ('{"completed": false, "interrupted": "SIGTERM"}', False),
    ('{"completed": tr', False),  # Cut.
  ):
    (tmp_path / 'summary.json').write_text(summary)
    assert mechanism.finished(tmp_path) is done, summary


@pytest.mark.parametrize('cut', ['mid_line', 'no_newline'])
def test_a_report_over_a_cut_table_ends_in_one_line_writing_nothing(
  tmp_path, capsys, cut
):
  results = tmp_path / 'results'
  shutil.copytree(COMMITTED / 'mechanism_catch', results)
  path = results / 'mechanism_plateaus.csv'
  text = path.read_text()
  path.write_text(text[:-20] + '\n' if cut == 'mid_line' else text[:-1])
  before = {p.name: p.read_bytes() for p in results.iterdir()}
  assert mechanism.main([str(tmp_path / 'runs'), '--report', str(results)]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith('error: '), err
  where = 'line ' if cut == 'mid_line' else 'its end'
  assert f'mechanism_plateaus.csv is cut or damaged at {where}' in err[0]
  assert {p.name: p.read_bytes() for p in results.iterdir()} == before


def test_report_rows_follow_the_conditions_order():
  table = pd.DataFrame(
    dict(condition=['ac100', 'later', 'cold', 'ac100'], seed=[0, 0, 0, 1])
  )
  got = mechanism._in_order(table)
  # CONDITIONS starts cold, pred300, pred150, ac100; unknown names last.
  assert list(got['condition']) == ['cold', 'ac100', 'ac100', 'later']
  assert list(got['seed']) == [0, 0, 1, 0]


def test_the_warm_start_length_is_the_procedures_on_the_sweep_seeds():
  # ac524pred_3e-3's length: the actor-critic at 3e-3 on the MinAtar
  # study's sweep seeds, as committed.
  curves = pd.read_csv(ROOT / 'docs/results/minatar/curves.csv')
  curves = curves[
    (curves['stage'] == 'sweep')
    & curves['env'].str.contains('Breakout')
    & (curves['rule'] == 'actor_critic')
    & (curves['learning_rate'] == 3e-3)
  ]
  assert sorted(curves['seed'].unique()) == [100, 101]
  length = mechanism.warm_start_length(curves, 3000)
  assert length == mechanism.CONDITIONS['ac524pred_3e-3']['warm_start_steps']


def test_catchs_warm_start_length_is_the_procedures():
  # ac88pred_3e-3's length: the actor-critic at 3e-3 on Catch 8x8, seeds
  # 100 and 101 (`disco-rl eval --rule actor_critic --learning-rates 3e-3
  # --seeds 100 101`), its compact curves as committed.
  curves = pd.read_csv(ROOT / 'docs/results/plateau/catch_ac_sweep.csv')
  assert sorted(curves['seed'].unique()) == [100, 101]
  assert set(curves['learning_rate']) == {3e-3}
  length = mechanism.warm_start_length(curves, 1000)
  assert length == mechanism.CONDITIONS['ac88pred_3e-3']['warm_start_steps']


def test_warm_start_length_by_hand():
  # Two runs of 20 points, 10 updates per point (200 updates). Run 0:
  # start (first point) 0, end (last 2) 4, half way 2, first reached at
  # point 5 (env_steps 600 of 2,000: update 60). Run 1: half way first at
  # point 9 (update 100). Mean 80.
  steps = np.arange(1, 21) * 100.0
  run0 = np.r_[[0.0] * 5, [2.0] * 13, [4.0] * 2]
  run1 = np.r_[[0.0] * 9, [3.0] * 9, [4.0] * 2]
  curves = pd.DataFrame(
    dict(
      seed=[0] * 20 + [1] * 20,
      env_steps=np.r_[steps, steps],
      avg_return=np.r_[run0, run1],
    )
  )
  assert mechanism.warm_start_length(curves, 200) == 80
  # With an updates column (each point 40 updates fewer, as after a replay
  # warm-up), its values are taken: 60 - 40 = 20 for run 0, 100 - 40 = 60
  # for run 1, mean 40.
  updates = np.clip(np.r_[steps, steps] / 10 - 40, 0, None)
  assert mechanism.warm_start_length(curves.assign(updates=updates), 160) == 40
  flat = curves.assign(avg_return=1.0)
  with pytest.raises(ValueError, match='seed 0 does not rise'):
    mechanism.warm_start_length(flat, 200)


def test_gate_table_bins_by_z_spread():
  # Condition a: two rows in (0, 0.02] with gaps +0.2 and +0.4 (mean 0.3,
  # policy entropy mean 0.7), one in (0.1, 0.15] with gap -0.1; condition
  # cold (first in CONDITIONS' order): one row in (0.05, 0.1], gap 0.
  table = pd.DataFrame(
    dict(
      condition=['a', 'a', 'a', 'cold'],
      z_spread=[0.01, 0.02, 0.12, 0.07],
      pi_entropy=[0.6, 0.8, 1.0, 1.1],
      pi_hat_entropy=[0.8, 1.2, 0.9, 1.1],
    )
  )
  gate = mechanism.gate_table(table)
  assert list(gate['condition']) == ['cold', 'a', 'a']
  assert list(gate['z_bin']) == ['(0.05, 0.1]', '(0.0, 0.02]', '(0.1, 0.15]']
  assert list(gate['rows']) == [1, 2, 1]
  np.testing.assert_allclose(gate['gap'], [0.0, 0.3, -0.1], atol=1e-12)
  np.testing.assert_allclose(gate['pi_entropy'], [1.1, 0.7, 1.0])
  text = mechanism._gate_markdown(gate)
  assert text.splitlines()[2:] == [
    '| (0.0, 0.02] |  | +0.300 (0.70, 2) |',
    '| (0.05, 0.1] | +0.000 (1.10, 1) |  |',
    '| (0.1, 0.15] |  | -0.100 (1.00, 1) |',
  ]


def test_z_gate_counts_from_the_end_of_the_warm_start():
  # ac100's warm start is 100 updates: z above 0.1 at update 50 does not
  # count, at 150 it does (and 120, at 0.1 exactly, is not above). cold
  # never passes: NaN.
  table = pd.DataFrame(
    dict(
      condition=['ac100'] * 4 + ['cold'] * 2,
      seed=[0] * 6,
      updates=[50, 100, 120, 150, 10, 20],
      z_spread=[0.3, 0.05, 0.1, 0.2, 0.05, 0.09],
    )
  )
  got = mechanism.z_gate_updates(table)
  assert got.loc[0, 'z_gate'] == 150.0
  assert math.isnan(got.loc[1, 'z_gate'])
  assert mechanism.CONDITIONS['ac100']['warm_start_steps'] == 100


def _tiny_params(tmp_path):
  from disco_rl.jobs import config as config_lib
  from disco_rl.jobs import trainer as trainer_lib

  config = config_lib.EvalConfig(**{**mechanism.BASE, **mechanism.TINY})
  trainer = trainer_lib.Trainer(
    config, tmp_path / 'run', overwrite=True, progress=False
  )
  try:
    return jax.device_get(trainer.state.learner_state.params)
  finally:
    trainer.close()


@pytest.mark.usefixtures('disco_103_params')
def test_transplant_takes_the_donors_modules_but_the_fresh_heads(tmp_path):
  params = _tiny_params(tmp_path)
  donor = jax.tree.map(lambda v: v + 1.0, params)
  # The heads are the modules the names say: the policy's logits (3
  # actions), y (600 categories) and z (600) per seed.
  out_size = {
    head: [m for m in params if pattern.search(m)]
    for head, pattern in mechanism.HEADS.items()
  }
  (policy,), (y,) = out_size['policy'], out_size['y']
  assert params[policy]['b'].shape == (3, 3)
  assert params[y]['b'].shape == (3, 600)
  assert [params[m]['b'].shape[-1] for m in out_size['z']][-1] == 600
  got = mechanism.transplant(params, donor, ('y', 'z'))
  for module, leaves in got.items():
    for name, value in leaves.items():
      if module == policy:
        expected = np.zeros_like(params[module][name])
      elif module == y or module in out_size['z']:
        expected = params[module][name]
      else:
        expected = donor[module][name]
      np.testing.assert_array_equal(value, expected, err_msg=module)
  # With the action model fresh too, only the torso is the donor's.
  got = mechanism.transplant(params, donor, ('y', 'z', 'model'))
  donors = [m for m in got if got[m]['w'] is donor[m]['w']]
  assert donors == ['mlp/~_embedding_pass/torso/~/linear_0'], donors
  # With the torso fresh, every module but it (and the zeroed policy
  # layer) is the donor's.
  got = mechanism.transplant(params, donor, ('torso',))
  donors = {m for m in got if got[m]['w'] is donor[m]['w']}
  policy = {m for m in got if mechanism.HEADS['policy'].search(m)}
  assert donors == set(got) - policy - {
    'mlp/~_embedding_pass/torso/~/linear_0'
  }, donors
  # Without fresh heads, y and z are the donor's too.
  got = mechanism.transplant(params, donor, ())
  np.testing.assert_array_equal(got[y]['w'], donor[y]['w'])
  # A donor without y's module and with z's of other shapes (another
  # rule's agent): those keep the fresh agent's.
  other = {k: v for k, v in donor.items() if k != y}
  z_last = out_size['z'][-1]
  other[z_last] = {k: v[..., :1] for k, v in donor[z_last].items()}
  got = mechanism.transplant(params, other, ())
  np.testing.assert_array_equal(got[y]['w'], params[y]['w'])
  np.testing.assert_array_equal(got[z_last]['w'], params[z_last]['w'])
  np.testing.assert_array_equal(
    got[out_size['z'][0]]['w'], donor[out_size['z'][0]]['w']
  )
  with pytest.raises(ValueError, match='fresh must name heads of'):
    mechanism.transplant(params, donor, ('policy',))
  with pytest.raises(ValueError, match="no module of head 'y'"):
    mechanism.transplant({k: v for k, v in params.items() if k != y}, donor, ())


@pytest.mark.slow
@pytest.mark.usefixtures('disco_103_params')
def test_a_tiny_transplant_runs_from_its_donor(tmp_path):
  out = tmp_path / 'runs'
  assert mechanism.main([str(out), 'transplant', '--tiny']) == 0
  assert (out / 'donor' / 'summary.json').exists()
  donor = np.load(out / 'donor_params.npz')
  assert any(k.endswith('|w') for k in donor.files)
  measured = pd.read_csv(out / 'transplant.targets.csv')
  assert sorted(measured['seed'].unique()) == [0, 1, 2]
