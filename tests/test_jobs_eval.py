# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval job (disco_rl.jobs.eval.job) on one CPU device, tiny settings.

Several devices: test_multidevice.py and test_runtime_multiprocess.py; runs
with files, checkpoints and resume: test_jobs_trainer.py.
"""

import dataclasses
import re

import chex
import jax
import numpy as np
import pandas as pd
import pytest
import smoke_env
import tiny

from disco_rl import rollout_checks
from disco_rl.cli import eval as eval_cli
from disco_rl.environments import jittable_envs
from disco_rl.jobs import config as config_lib
from disco_rl.jobs.eval import job as eval_lib
from disco_rl.jobs.eval import report as eval_report
from disco_rl.jobs.eval import setup as eval_setup
from disco_rl.runtime import divergence
from disco_rl.runtime import job as job_lib
from disco_rl.runtime import metrics as metrics_lib

pytestmark = pytest.mark.usefixtures('fast_compile')

TINY = tiny.eval_config(num_devices=1)


def _assert_run_alone(together, j, alone, learning_rate, label):
  """Run j of a program of several runs, (state, metrics), is the run alone
  (to rounding)."""
  state, metrics = together
  alone_state, alone_metrics = alone
  np.testing.assert_array_equal(
    metrics['episodes'][:, j], alone_metrics['episodes'][:, 0]
  )
  for key in alone_metrics:
    np.testing.assert_allclose(
      metrics[key][:, j],
      alone_metrics[key][:, 0],
      err_msg=f'{key} {label}',
      **smoke_env.SAME_RUN,
    )
  smoke_env.assert_same_learner_state(
    jax.tree.map(lambda x: x[j], jax.device_get(state.learner_state)),
    jax.tree.map(lambda x: x[0], jax.device_get(alone_state.learner_state)),
    learning_rate=learning_rate,
    max_abs_update=1.0,
  )


class NanRewardCatch(jittable_envs.CatchJittableEnvironment):
  """Catch whose environment 1 returns NaN rewards (a buggy environment)."""

  def step(self, state, actions):
    state, timestep = super().step(state, actions)
    return state, timestep.replace(reward=timestep.reward.at[1].set(np.nan))


def _nan_catch_job(config):
  config = dataclasses.replace(config, env=config_lib.CUSTOM_ENV)
  return eval_lib.make_eval(
    config,
    env=lambda batch_size: NanRewardCatch(
      batch_size=batch_size, env_settings=jittable_envs.get_config_catch()
    ),
  )


@pytest.fixture(scope='module')
def fused_run():
  job = eval_lib.make_eval(TINY)
  return job, smoke_env.run_calls(job, [4, 2])


def test_fused_calls_equal_one_step_per_call(fused_run):
  """K iterations in one program = K programs of one iteration."""
  _, (fused_state, fused) = fused_run
  single = eval_lib.make_eval(dataclasses.replace(TINY, steps_per_call=1))
  state, stepped = smoke_env.run_calls(single, [1] * 6)
  assert sorted(fused) == sorted(stepped)
  for key in fused:
    np.testing.assert_allclose(
      fused[key], stepped[key], err_msg=key, **smoke_env.SAME_RUN
    )
  np.testing.assert_array_equal(fused['episodes'], stepped['episodes'])
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, **smoke_env.SAME_RUN),
    jax.device_get(fused_state.learner_state),
    jax.device_get(state.learner_state),
  )
  assert int(fused_state.step) == int(state.step) == 6


def test_metrics_learning_gate_and_rows(fused_run):
  job, (state, metrics) = fused_run
  assert {'return_sum', 'episodes', 'learned'} | set(job.setup.log_keys) == set(
    metrics
  )
  assert divergence.KEY not in metrics  # Checked and dropped on the host.
  assert all(v.shape == (6, 1) for v in metrics.values())  # [K, S]
  column = {k: v[:, 0] for k, v in metrics.items()}
  # Each buffer holds a learner batch of 4 after the second rollout of 2.
  assert job.warmup == 1
  np.testing.assert_array_equal(column['learned'], [0, 1, 1, 1, 1, 1])
  for key in job.setup.log_keys:
    assert np.isnan(column[key][0]), key
    assert np.isfinite(column[key][1:]).all(), key
  # On an 8x8 board the ball falls for 7 steps: episodes end at steps 7, 14,
  # 21, 28 in each of the 2 environments; rollouts hold steps 1-5, 6-10, ...
  np.testing.assert_array_equal(column['episodes'], [0, 2, 2, 0, 2, 2])
  assert (np.abs(column['return_sum']) <= column['episodes']).all()
  assert int(state.replay.size[0, 0]) == 8
  rows = job.report.rows(metrics, 10)
  assert [r['step'] for r in rows] == list(range(10, 16))
  assert {r['seed'] for r in rows} == {TINY.seed}
  assert [r['env_steps'] for r in rows] == [10 * (s + 1) for s in range(10, 16)]


def test_a_call_runs_between_one_and_steps_per_call_steps(fused_run):
  job, _ = fused_run
  state = job.init()
  for bad in (0, 5):
    with pytest.raises(
      ValueError, match=r'count must be in \[1, 4\], got ' + str(bad)
    ):
      job.step(state, bad)


def test_replay_stores_only_the_behaviour_logits(fused_run):
  job, (state, _) = fused_run
  assert set(state.replay.data.agent_outs) == {'logits'}
  assert state.replay.data.logits is None  # Stored once, in agent_outs.
  # Per step: 8x8 float32 board, action, reward, discount, 3 logits.
  summary = job.report.summary(state, [], job_lib.Timing())
  assert summary['replay_bytes_per_trajectory'] == 5 * (256 + 4 + 4 + 1 + 12)


def test_the_rule_is_part_of_the_state(fused_run, disco_103_params):
  job, (state, _) = fused_run
  # The actor-critic's placeholder parameters.
  chex.assert_trees_all_equal(
    eval_lib.rule(job, state),
    jax.device_get(
      job.setup.agent.update_rule.init_params(jax.random.PRNGKey(0))[0]
    ),
  )
  disco = eval_lib.make_eval(
    dataclasses.replace(TINY, rule='disco_103'), rule_params=disco_103_params
  )
  params = eval_lib.rule(disco, disco.init())
  jax.tree.map(np.testing.assert_array_equal, params, disco_103_params)
  shapes = disco.state_shapes()
  assert jax.tree.structure(shapes) == jax.tree.structure(disco.init())


def test_acting_is_decided_once_from_the_environment():
  """The dm_env Catch is stepped on the host, its jittable twin evaluates
  the policy; jittable Catch acts inside the program."""
  host = eval_setup.make_setup(
    dataclasses.replace(TINY, env='catch', num_seeds=2)
  )
  assert len(host.host_envs) == 2 and host.jittable_env == 'jittable_catch'
  assert host.env.batch_size == TINY.num_envs  # All of a run's.
  fused = eval_setup.make_setup(TINY)
  assert fused.host_envs == () and fused.jittable_env == 'jittable_catch'


@pytest.mark.parametrize('env', ['jittable_catch', 'catch'])
def test_debug_checks_stop_at_the_bad_rollout(env):
  """An environment bug is reported with field, time step, env and step."""
  config = dataclasses.replace(TINY, env=env)
  if env == 'jittable_catch':
    job = _nan_catch_job(config)
  else:  # Host Catch: corrupt what the host environment returns.
    job = eval_lib.make_eval(config)
    host_env = job.setup.host_envs[0]
    host_step = host_env.step

    def nan_step(state, actions):
      state, timestep = host_step(state, actions)
      reward = np.asarray(timestep.reward).copy()
      reward[1] = np.nan
      return state, timestep.replace(reward=reward)

    host_env.step = nan_step
  with pytest.raises(
    rollout_checks.RolloutError,
    match=r'rollout.rewards\[t=1, b=1\] = nan is not finite'
    r' \(loop step 0\)',
  ):
    job.step(job.init(), 1)


def test_without_debug_checks_nan_rewards_stop_the_run_at_the_loss():
  """No rollout check: the NaN reaches the loss, where the run stops."""
  job = _nan_catch_job(dataclasses.replace(TINY, debug_checks=False))
  # Learning starts at loop step 1 (each buffer then holds a batch).
  with pytest.raises(
    divergence.DivergedError,
    match=r'^learning diverged at loop step 1: total_loss = '
    r"nan, the agent's parameters not finite\. Try a "
    r'smaller learning_rate',
  ):
    job.step(job.init(), TINY.steps_per_call)


@pytest.mark.parametrize(
  'env, debug_checks',
  [('jittable_catch', True), ('jittable_catch', False), ('catch', True)],
)
def test_a_huge_learning_rate_stops_the_run_where_it_diverges(
  env, debug_checks
):
  """The parameters after the first learner step (loop step 1) are huge but
  finite; the next rollout's logits are not: the debug checks name them,
  not the environment. Without the checks the loss is checked."""
  job = eval_lib.make_eval(
    dataclasses.replace(
      TINY, env=env, learning_rate=1e30, debug_checks=debug_checks
    )
  )
  if debug_checks:
    error, message = (
      rollout_checks.RolloutError,
      (
        r'rollout.logits\[t=0, b=0\] = \S+ is not finite \(loop step 2\): '
        "the agent's outputs are not finite, its learning diverged"
      ),
    )
  else:
    error, message = (
      divergence.DivergedError,
      (r'^learning diverged at loop step 2: total_loss = nan'),
    )
  with pytest.raises(error, match=message) as raised:
    job.step(job.init(), TINY.steps_per_call)
  # The error carries the call's metrics and its two steps before step 2
  # (host acting checks each iteration as it ends, and joins them).
  good = divergence.good_steps(raised.value)
  assert good is not None and good.count == 2
  kept = good.kept()
  assert {len(v) for v in kept.values()} == {2}
  assert divergence.KEY not in kept and rollout_checks.KEY not in kept
  assert np.isfinite(kept['total_loss'][1]).all()


# The eval command at tiny settings (learning starts at loop step 1; at a
# learning rate of 1e30 the loss or the next rollout's logits are not finite
# at loop step 2, inside the first call of 8 steps).
DIVERGING = tiny.eval_flags(learning_rate=1e30, steps_per_call=8)


@pytest.mark.parametrize(
  'checks, error',
  [
    ('--debug-checks', r'debug check failed: rollout\.logits.*\(loop step 2\)'),
    ('--no-debug-checks', 'learning diverged at loop step 2: total_loss = nan'),
  ],
  ids=['checks', 'no-checks'],
)
def test_a_run_diverging_in_its_first_call_keeps_the_rows_before_it(
  checks, error, call_main, tmp_path
):
  """Before, the call's rows were lost with it: metrics.csv held none. Now
  it holds loop steps 0 and 1, as a run of 1 learner step (2 loop steps)
  does; the error line is as before."""
  diverged = call_main(
    eval_cli.main,
    *DIVERGING,
    checks,
    '--steps',
    '20',
    '--out',
    str(tmp_path / 'diverged'),
  )
  assert diverged.returncode == 2, diverged.stderr[-4000:]
  assert diverged.stderr.startswith('error: '), diverged.stderr[-4000:]
  assert diverged.stderr.count('\n') == 1, diverged.stderr[-4000:]
  assert re.match('error: ' + error, diverged.stderr), diverged.stderr
  short = call_main(
    eval_cli.main,
    *DIVERGING,
    checks,
    '--steps',
    '1',
    '--out',
    str(tmp_path / 'short'),
  )
  assert short.returncode == 0, short.stderr[-4000:]
  kept, expected = (
    metrics_lib.read_table(tmp_path / name / 'metrics.csv').drop(
      columns=['rss_mb', 'time_s']
    )
    for name in ('diverged', 'short')
  )
  assert list(expected['step']) == [0, 1]
  pd.testing.assert_frame_equal(kept, expected)


def test_evaluate_the_policy_without_learning(fused_run):
  job, (state, _) = fused_run
  result = eval_lib.evaluate(job, state, num_rollouts=4)
  assert result['episodes'] > 0 and -1 <= result['avg_return'] <= 1
  assert eval_lib.evaluate(job, state, num_rollouts=4) == result  # Same key.
  with pytest.raises(
    ValueError,
    match=r'run must be in \[0, num_runs=1\), '
    'got 1',
  ):
    eval_lib.evaluate(job, state, run=1)
  with pytest.raises(ValueError, match='num_rollouts must be >= 1, got 0'):
    eval_lib.evaluate(job, state, num_rollouts=0)


# ----------------------------------------------------------------------------
# Seeds in parallel: S runs in one program.


@pytest.fixture(scope='module')
def three_seeds_run():
  job = eval_lib.make_eval(dataclasses.replace(TINY, seed=5, num_seeds=3))
  return job, *smoke_env.run_calls(job, [4, 2])


# Slow (moved to `make test-slow` 2026-12-04 for the 8-minute default run; the
# seeds x rates test checks every run of a sweep against its run alone)
@pytest.mark.slow
def test_each_seed_of_a_multi_seed_program_is_the_run_of_that_seed_alone(
  three_seeds_run,
):
  _, state, metrics = three_seeds_run
  assert all(v.shape == (6, 3) for v in metrics.values())
  assert int(state.step) == 6
  for j in range(3):
    alone_state, alone_metrics = smoke_env.run_calls(
      eval_lib.make_eval(dataclasses.replace(TINY, seed=5 + j)), [4, 2]
    )
    _assert_run_alone(
      (state, metrics), j, (alone_state, alone_metrics), TINY.learning_rate, j
    )


def test_a_sweep_of_seeds_and_rates_is_one_program_of_runs_alone():
  """3 seeds x 3 learning rates: 9 runs in one program, each the run of that
  seed and rate alone (to rounding), checked on three of them: every seed
  and every rate, at indices where a seed axis read as the rate axis (or
  the reverse) would give another run. The rate is an operand of the
  program, not a constant in it: the programs of the runs alone are the
  same program (one compilation between them, in this session's
  compilation cache)."""
  seeds, rates = (5, 6, 7), (3e-3, 1e-2, 3e-2)
  sweep = dataclasses.replace(TINY, seeds=seeds, learning_rates=rates)
  assert sweep.runs == tuple(config_lib.Run(s, r) for r in rates for s in seeds)
  job = eval_lib.make_eval(sweep)
  state, metrics = smoke_env.run_calls(job, [4, 2])
  assert all(v.shape == (6, 9) for v in metrics.values())
  rows = job.report.rows(metrics, 0)
  assert [(r['seed'], r['learning_rate']) for r in rows[:9]] == [
    (s, r) for r in rates for s in seeds
  ]
  lowered = []
  # Runs 1, 5, 6: (6, 3e-3), (7, 1e-2), (5, 3e-2); j % 3 != j // 3 in each.
  for j in (1, 5, 6):
    run = sweep.runs[j]
    alone_job = eval_lib.make_eval(
      dataclasses.replace(TINY, seed=run.seed, learning_rate=run.learning_rate)
    )
    alone_state, alone_metrics = smoke_env.run_calls(alone_job, [4, 2])
    if len(lowered) < 2:
      lowered.append(alone_job.program.lower(alone_state).as_text())
    _assert_run_alone(
      (state, metrics), j, (alone_state, alone_metrics), run.learning_rate, run
    )
  # Two runs alone of other seeds and rates: one program text.
  assert lowered[0] == lowered[1]
  # The rates differ: runs of one seed at two rates learn differently.
  first = jax.tree.leaves(jax.device_get(state.learner_state.params))[0]
  assert not np.allclose(first[0], first[3])


def test_the_seeds_are_different_runs(three_seeds_run):
  _, state, metrics = three_seeds_run
  first = jax.tree.leaves(jax.device_get(state.learner_state.params))[0]
  assert not np.allclose(first[0], first[1])
  assert not np.array_equal(
    metrics['total_loss'][1:, 0], metrics['total_loss'][1:, 1]
  )


def test_rows_are_one_per_step_and_seed(three_seeds_run):
  job, _, metrics = three_seeds_run
  rows = job.report.rows(metrics, 0)
  assert [(r['step'], r['seed']) for r in rows] == [
    (step, seed) for step in range(6) for seed in (5, 6, 7)
  ]
  assert [r['total_loss'] for r in rows[3::3]] == list(
    metrics['total_loss'][1:, 0]
  )


def test_host_environments_run_seeds_in_parallel():
  """Two seeds of the host-stepped Catch: each run is that seed's alone."""
  config = dataclasses.replace(TINY, env='catch', seed=3, num_seeds=2)
  _, metrics = smoke_env.run_calls(eval_lib.make_eval(config), [3])
  for j in range(2):
    _, alone = smoke_env.run_calls(
      eval_lib.make_eval(dataclasses.replace(config, seed=3 + j, num_seeds=1)),
      [3],
    )
    for key in alone:
      np.testing.assert_allclose(
        metrics[key][:, j], alone[key][:, 0], err_msg=key, **smoke_env.SAME_RUN
      )


def test_a_diverging_seed_is_named():
  job = _nan_catch_job(
    dataclasses.replace(TINY, num_seeds=2, seed=4, debug_checks=False)
  )
  with pytest.raises(
    divergence.DivergedError,
    match=r'^learning diverged at seed 4 loop step 1: '
    'total_loss = nan',
  ):
    job.step(job.init(), TINY.steps_per_call)


def test_the_progress_bar_names_the_rule_environment_and_runs():
  config = config_lib.EvalConfig(
    env='catch', env_kwargs={'rows': 8}, num_seeds=3
  )
  job = eval_lib.make_eval(config)
  assert job.report.description == 'eval disco_103 on catch[rows=8] seeds 0-2'
  config = config_lib.EvalConfig(
    rule='actor_critic', seeds=(0, 5), learning_rates=(1e-3, 3e-3)
  )
  assert (
    eval_report.progress_title(config)
    == f'eval actor_critic on {config.env} seeds 0, 5 x lr 0.001, 0.003'
  )
