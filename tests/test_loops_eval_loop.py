# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval program and its loops (disco_rl.loops.eval_*) on one CPU device,
tiny settings.

Several devices: the eval notebook (test_notebooks.py) and
test_loops_multiprocess.py; learning curves: test_learning_curves.py.
"""

import dataclasses

import jax
import numpy as np
import pytest
import smoke_env

from disco_rl.loops import config as config_lib
from disco_rl.loops import divergence
from disco_rl.loops import eval_job
from disco_rl.loops import eval_loop
from disco_rl.loops import eval_program
from disco_rl.loops import eval_setup
from disco_rl.loops import host_eval_loop
from disco_rl import rollout_checks

pytestmark = pytest.mark.usefixtures('fast_compile')

# Two environments, a learner batch of 4: learning starts at the second
# iteration.
TINY = config_lib.EvalConfig(
    rule='actor_critic', batch_size=4, replay_ratio=2, buffer_capacity=8,
    rollout_len=5, dense=(16,), model_lstm_size=8, model_head_hiddens=(8,),
    num_devices=1, steps_per_call=4)


def _run(loop, calls):
  return _run_from(loop, jax.random.PRNGKey(3), calls)


def _run_from(loop, rngs, calls):
  state = loop.init(rngs)
  metrics = []
  for count in calls:
    state, m = loop.run(state, count)
    metrics.append(m)
  joined = {k: np.concatenate([m[k] for m in metrics]) for k in metrics[0]}
  return state, joined


@pytest.fixture(scope='module')
def fused_run():
  loop = eval_loop.EvalLoop(TINY)
  return loop, _run(loop, [4, 2])


def test_fused_calls_equal_one_step_per_call(fused_run):
  """K iterations in one program = K programs of one iteration."""
  _, (fused_state, fused) = fused_run
  single = eval_loop.EvalLoop(dataclasses.replace(TINY, steps_per_call=1))
  state, stepped = _run(single, [1] * 6)
  assert sorted(fused) == sorted(stepped)
  for key in fused:
    np.testing.assert_allclose(fused[key], stepped[key], rtol=1e-5,
                               atol=1e-6, err_msg=key)
  np.testing.assert_array_equal(fused['episodes'], stepped['episodes'])
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5,
                                                       atol=1e-6),
               jax.device_get(fused_state.learner_state),
               jax.device_get(state.learner_state))
  assert int(fused_state.step) == int(state.step) == 6


def test_metrics_learning_gate_and_rows(fused_run):
  loop, (state, metrics) = fused_run
  assert {'return_sum', 'episodes', 'learned'} | set(loop.setup.log_keys) == set(
      metrics)
  assert all(v.shape == (6, 1) for v in metrics.values())  # [K, S]
  metrics = {k: v[:, 0] for k, v in metrics.items()}
  # Each buffer holds a learner batch of 4 after the second rollout of 2.
  np.testing.assert_array_equal(metrics['learned'], [0, 1, 1, 1, 1, 1])
  for key in loop.setup.log_keys:
    assert np.isnan(metrics[key][0]), key
    assert np.isfinite(metrics[key][1:]).all(), key
  # On an 8x8 board the ball falls for 7 steps: episodes end at steps 7, 14,
  # 21, 28 in each of the 2 environments; rollouts hold steps 1-5, 6-10, ...
  np.testing.assert_array_equal(metrics['episodes'], [0, 2, 2, 0, 2, 2])
  assert (np.abs(metrics['return_sum']) <= metrics['episodes']).all()
  assert int(state.replay.size[0, 0]) == 8
  rows = eval_program.metrics_rows(loop.setup, {k: v[:, None] for k, v in metrics.items()},
                           first_step=10)
  assert [r['step'] for r in rows] == list(range(10, 16))
  assert {r['seed'] for r in rows} == {TINY.seed}
  assert [r['env_steps'] for r in rows] == [10 * (s + 1) for s in
                                            range(10, 16)]


def test_run_checks_the_step_count(fused_run):
  loop, _ = fused_run
  state = loop.init(jax.random.PRNGKey(0))
  for bad in (0, 5):
    with pytest.raises(ValueError, match=r'num_steps must be in \[1, '
                       r'steps_per_call=4\], got ' + str(bad)):
      loop.run(state, bad)


def test_host_environment_needs_the_host_loop():
  with pytest.raises(ValueError, match="env='catch' is stepped on the host"):
    eval_loop.EvalLoop(dataclasses.replace(TINY, env='catch'))
  loop = eval_job.make_eval_loop(dataclasses.replace(TINY, env='catch'))
  assert isinstance(loop, host_eval_loop.HostEvalLoop)


def test_replay_stores_only_the_behaviour_logits(fused_run):
  loop, (state, _) = fused_run
  assert set(state.replay.data.agent_outs) == {'logits'}
  assert state.replay.data.logits is None  # Stored once, in agent_outs.
  # Per step: 8x8 float32 board, action, reward, discount, 3 logits.
  assert eval_program.bytes_per_trajectory(state) == 5 * (256 + 4 + 4 + 1 + 12)


@pytest.mark.parametrize('loop_cls', ['fused', 'host'])
def test_debug_checks_stop_at_the_bad_rollout(loop_cls):
  """An environment bug is reported with field, time step, env and step."""
  config = dataclasses.replace(TINY, rule='actor_critic', num_devices=1,
                               env='jittable_catch' if loop_cls == 'fused'
                               else 'catch')
  loop = eval_job.make_eval_loop(config)
  if loop_cls == 'fused':
    loop.setup = dataclasses.replace(
      loop.setup, env=smoke_env.NanRewardForEnv1(loop.setup.env))
    first_bad = r'rollout.rewards\[t=1, b=1\] = nan is not finite'
  else:  # Host Catch: corrupt what the host environment returns.
    host_step = loop.setup.env.step

    def nan_step(state, actions):
      state, timestep = host_step(state, actions)
      reward = np.asarray(timestep.reward).copy()
      reward[1] = np.nan
      return state, timestep.replace(reward=reward)

    loop.setup.env.step = nan_step
    first_bad = r'rollout.rewards\[t=1, b=1\] = nan is not finite'
  state = loop.init(jax.random.PRNGKey(0))
  with pytest.raises(rollout_checks.RolloutError,
                     match=first_bad + r' \(loop step 0\)'):
    loop.run(state, 1)


def test_without_debug_checks_nan_rewards_stop_the_run_at_the_loss():
  """No rollout check: the NaN reaches the loss, where the run stops."""
  config = dataclasses.replace(TINY, rule='actor_critic', num_devices=1,
                               debug_checks=False)
  loop = eval_job.make_eval_loop(config)
  loop.setup = dataclasses.replace(
      loop.setup, env=smoke_env.NanRewardForEnv1(loop.setup.env))
  # Learning starts at loop step 1 (each buffer then holds a batch).
  with pytest.raises(divergence.DivergedError,
                     match=r"^learning diverged at loop step 1: total_loss = "
                     r"nan, the agent's parameters not finite\. Try a "
                     r'smaller learning_rate'):
    loop.run(loop.init(jax.random.PRNGKey(0)), config.steps_per_call)


@pytest.mark.parametrize('env', ['jittable_catch', 'catch'])
def test_a_huge_learning_rate_stops_the_run_where_it_diverges(env):
  config = dataclasses.replace(TINY, rule='actor_critic', env=env,
                               learning_rate=1e30)
  loop = eval_job.make_eval_loop(config)
  state = loop.init(jax.random.PRNGKey(0))
  # The parameters after the first learner step (loop step 1) are huge but
  # finite; the next rollout's logits are not: the debug checks name them,
  # not the environment.
  with pytest.raises(rollout_checks.RolloutError,
                     match=r'rollout.logits\[t=0, b=0\] = \S+ is not finite '
                     r"\(loop step 2\): the agent's outputs are not finite, "
                     'its learning diverged'):
    loop.run(state, config.steps_per_call)
  # Without the debug checks the loss is checked.
  loop = eval_job.make_eval_loop(dataclasses.replace(config,
                                                      debug_checks=False))
  with pytest.raises(divergence.DivergedError,
                     match=r'^learning diverged at loop step 2: total_loss = '
                     'nan'):
    loop.run(loop.init(jax.random.PRNGKey(0)), config.steps_per_call)


def test_finite_learning_keeps_no_flag_in_the_metrics(fused_run):
  _, (_, metrics) = fused_run
  assert divergence.KEY not in metrics


# ----------------------------------------------------------------------------
# Seeds in parallel: S runs in one program.


@pytest.fixture(scope='module')
def three_seeds_run():
  config = dataclasses.replace(TINY, seed=5, num_seeds=3)
  loop = eval_loop.EvalLoop(config)
  state = loop.init(eval_setup.seed_keys(config))
  metrics = []
  for count in (4, 2):
    state, m = loop.run(state, count)
    metrics.append(m)
  return loop, state, {k: np.concatenate([m[k] for m in metrics])
                       for k in metrics[0]}


def test_each_seed_of_a_multi_seed_program_is_the_run_of_that_seed_alone(
    three_seeds_run):
  loop, state, metrics = three_seeds_run
  assert all(v.shape == (6, 3) for v in metrics.values())
  assert int(state.step) == 6
  for j in range(3):
    alone_config = dataclasses.replace(TINY, seed=5 + j)
    alone = eval_loop.EvalLoop(alone_config)
    alone_state, alone_metrics = _run_from(
        alone, eval_setup.seed_keys(alone_config), [4, 2])
    np.testing.assert_array_equal(metrics['episodes'][:, j],
                                  alone_metrics['episodes'][:, 0])
    for key in alone_metrics:
      np.testing.assert_allclose(metrics[key][:, j], alone_metrics[key][:, 0],
                                 rtol=1e-4, atol=1e-5, err_msg=f'{key} {j}')
    jax.tree.map(
        lambda many, one, j=j: np.testing.assert_allclose(
            many[j], one[0], rtol=1e-4, atol=1e-5),
        jax.device_get(state.learner_state),
        jax.device_get(alone_state.learner_state))


def test_the_seeds_are_different_runs(three_seeds_run):
  _, state, metrics = three_seeds_run
  params = jax.device_get(state.learner_state.params)
  first = jax.tree.leaves(params)[0]
  assert not np.allclose(first[0], first[1])
  assert not np.array_equal(metrics['total_loss'][1:, 0],
                            metrics['total_loss'][1:, 1])


def test_rows_are_one_per_step_and_seed(three_seeds_run):
  loop, _, metrics = three_seeds_run
  rows = eval_program.metrics_rows(loop.setup, metrics, first_step=0)
  assert [(r['step'], r['seed']) for r in rows] == [
      (step, seed) for step in range(6) for seed in (5, 6, 7)]
  assert [r['total_loss'] for r in rows[3::3]] == list(
      metrics['total_loss'][1:, 0])


def test_init_checks_the_number_of_keys(three_seeds_run):
  loop, _, _ = three_seeds_run
  with pytest.raises(ValueError, match=r'rngs must be \[num_seeds=3, 2\] '
                     r'keys \(one per run, see seed_keys\), got shape '
                     r'\(2, 2\)'):
    loop.init(eval_setup.seed_keys(dataclasses.replace(TINY, num_seeds=2)))


def test_a_diverging_seed_is_named():
  config = dataclasses.replace(TINY, num_seeds=2, seed=4, debug_checks=False)
  loop = eval_job.make_eval_loop(config)
  loop.setup = dataclasses.replace(
      loop.setup, env=smoke_env.NanRewardForEnv1(loop.setup.env))
  with pytest.raises(divergence.DivergedError,
                     match=r'^learning diverged at seed 4 loop step 1: '
                     'total_loss = nan'):
    loop.run(loop.init(eval_setup.seed_keys(config)), config.steps_per_call)
