# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.jobs.trainer: fit, exact resume, outputs, callbacks."""

import dataclasses
import json
import os
import pathlib
import re
import shutil
import signal

import chex
import jax
import numpy as np
import pandas as pd
import pytest
import stopped_runs
import tiny

from disco_rl.jobs import config as config_lib
from disco_rl.jobs import trainer as trainer_lib
from disco_rl.jobs.eval import job as eval_lib
from disco_rl.jobs.meta import config as meta_config_lib
from disco_rl.jobs.meta import job as meta_lib
from disco_rl.runtime import divergence
from disco_rl.runtime import host_loop
from disco_rl.runtime import metrics as metrics_lib
from disco_rl.runtime import signals
from disco_rl.update_rules import disco

pytestmark = pytest.mark.usefixtures('fast_compile')

# The debug checks stay on (the default): they are plain program outputs, so
# a program traced again (a resumed or a straight run) hits the compilation
# cache.


def eval_config(**overrides):
  settings = dict(
    batch_size=8, replay_ratio=4, buffer_capacity=32, num_steps=10
  )
  return tiny.eval_config(**{**settings, **overrides})


def meta_config(**overrides):
  """Tiny meta-training with the paper's recipe: per-agent Adam states,
  clipping, remat and agent lifetimes (2 updates: renewals every 2 steps)."""
  settings = dict(
    batch_size_per_device=4,
    rollout_len=4,
    num_inner_steps=1,
    steps_per_call=2,
    num_steps=3,
    meta_grad_norm='per_agent_adam',
    meta_grad_clip=1.0,
    remat=True,
    agent_lifetime=2,
  )
  return tiny.meta_config(**{**settings, **overrides})


# A meta-training run's record (run.json) from version 0.1.
OLD_META = pathlib.Path(__file__).parent / 'data/runs_v0_1/meta'

# The LPG recipe's tiny rule.
TINY_RULE = disco.NAMED_SIZES['tiny'].changes()


@pytest.mark.parametrize(
  'env',
  [
    # Slow since 2026-12-04 (the 8-minute default run): the host-stepped
    # Catch below resumes the same loop.
    pytest.param('jittable_catch', marks=pytest.mark.slow),
    'catch',
  ],
)
def test_eval_resume_is_exact(tmp_path, env):
  """N steps, stop, resume to 2N == 2N straight, bit for bit."""
  first = trainer_lib.Trainer(
    eval_config(env=env, num_steps=10),
    tmp_path / 'a',
    progress=False,
    checkpoint_every=4,
  )
  summary = first.fit()
  assert summary['steps'] == 10 and summary['iterations'] == 13
  assert summary['checkpoint_step'] == 13
  first.close()
  resumed = trainer_lib.Trainer(
    eval_config(env=env, num_steps=21),
    tmp_path / 'a',
    resume=True,
    progress=False,
    checkpoint_every=4,
  )
  assert resumed.step == 13
  resumed.fit()
  straight = trainer_lib.Trainer(
    eval_config(env=env, num_steps=21),
    tmp_path / 'b',
    progress=False,
    checkpoint_every=4,
  )
  straight.fit()
  stopped_runs.assert_same_run(
    tmp_path / 'a', tmp_path / 'b', resumed.state, straight.state
  )
  # The checkpoints kept (last 3 by default) hold the last step.
  assert (
    sorted(
      int(p.name)
      for p in (tmp_path / 'a/checkpoints').iterdir()
      if p.name.isdigit()
    )[-1]
    == 24
  )


# Slow (moved to `make test-slow` 2026-12-04 for the 8-minute default run; the
# default run resumes one seed exactly and checks every seed of a sweep
# against its run alone)
@pytest.mark.slow
def test_eval_resume_with_seeds_is_exact(tmp_path):
  """Three runs in one program: rows per step and seed, checkpoints counted
  in steps, resumed bit for bit."""
  config = eval_config(num_steps=6, num_seeds=3, seed=2)
  first = trainer_lib.Trainer(
    config, tmp_path / 'a', progress=False, checkpoint_every=4
  )
  summary = first.fit()
  assert summary['steps'] == 6 and summary['iterations'] == 9
  assert summary['checkpoint_step'] == first.step == 9
  assert len(first.rows) == 27
  assert sorted(summary['final_avg_return_per_run']) == [
    'seed 2',
    'seed 3',
    'seed 4',
  ]
  first.close()
  table = metrics_lib.read_table(tmp_path / 'a/metrics.csv')
  assert list(zip(table['step'], table['seed'], strict=True)) == [
    (step, seed) for step in range(9) for seed in (2, 3, 4)
  ]
  again = trainer_lib.Trainer(
    dataclasses.replace(config, num_steps=10),
    tmp_path / 'a',
    resume=True,
    progress=False,
    checkpoint_every=4,
  )
  assert again.restore(step=8) == 8 and again.step == 8
  assert len(metrics_lib.read_table(tmp_path / 'a/metrics.csv')) == 24
  again.fit()
  straight = trainer_lib.Trainer(
    dataclasses.replace(config, num_steps=10),
    tmp_path / 'b',
    progress=False,
    checkpoint_every=4,
  )
  straight.fit()
  stopped_runs.assert_same_run(
    tmp_path / 'a', tmp_path / 'b', again.state, straight.state
  )


def test_resume_from_an_earlier_checkpoint_drops_later_rows(tmp_path):
  run = trainer_lib.Trainer(
    eval_config(num_steps=10),
    tmp_path / 'a',
    progress=False,
    checkpoint_every=4,
  )
  run.fit()
  # The run as it finished: the straight run to compare with.
  shutil.copytree(tmp_path / 'a', tmp_path / 'b')
  straight = jax.device_get(run.state)
  run.close()
  # Back to step 8 (a periodic checkpoint): rows 8.. are computed again.
  again = trainer_lib.Trainer(
    eval_config(num_steps=10), tmp_path / 'a', resume=True, progress=False
  )
  assert again.restore(step=8) == 8 and again.step == 8
  assert len(metrics_lib.read_table(tmp_path / 'a/metrics.csv')) == 8
  again.fit()
  stopped_runs.assert_same_run(
    tmp_path / 'a', tmp_path / 'b', again.state, straight
  )


def _npz(path):
  with np.load(path) as data:
    return {k: data[k] for k in data.files}


def _check_read_rule(run_dir, last_rule, rule_at_2):
  """read_rule on a meta-training run with checkpoints at steps 2 and 4: the
  rule at step 2 is the one the run had when stopped there, the latest is
  its final rule, and the run directory is left untouched."""
  files = {p: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
  checkpoints = sorted(p.name for p in (run_dir / 'checkpoints').iterdir())
  import disco_rl  # pylint: disable=g-import-not-at-top
  from disco_rl import weights  # pylint: disable=g-import-not-at-top

  assert disco_rl.read_rule is meta_lib.read_rule
  params, step = meta_lib.read_rule(run_dir)
  assert step == 4
  chex.assert_trees_all_equal(weights.flatten_params(params), last_rule)
  params, step = meta_lib.read_rule(run_dir, step=2)
  assert step == 2
  chex.assert_trees_all_equal(weights.flatten_params(params), rule_at_2)
  with pytest.raises(AssertionError):  # The rule moved between the two.
    chex.assert_trees_all_equal(last_rule, rule_at_2)
  # Nothing in the run changed: files, metrics rows, checkpoints.
  assert {p: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == files
  assert (
    sorted(p.name for p in (run_dir / 'checkpoints').iterdir()) == checkpoints
  )
  with pytest.raises(FileNotFoundError, match=r'No checkpoint 3 .*\[2, 4\]'):
    meta_lib.read_rule(run_dir, step=3)
  with pytest.raises(ValueError, match='No run in .*none: it has no run.json'):
    meta_lib.read_rule(run_dir.parent / 'none')


def test_read_rule_reads_a_checkpoint_whatever_devices_saved_it(tmp_path):
  """read_rule reads only the rule: a checkpoint whose other parts have the
  shapes of more devices than this process has (here two, as a
  two-process run saves them) is read, where building the run's job to
  restore the whole state failed on the first such shape."""
  from disco_rl.runtime import checkpoints as checkpoints_lib  # pylint: disable=g-import-not-at-top
  from disco_rl.runtime import run_dir as run_dir_lib  # pylint: disable=g-import-not-at-top

  run = tmp_path / 'run'
  run.mkdir()
  shutil.copy(OLD_META / 'run.json', run / 'run.json')
  rule = {'lstm/linear': {'w': np.arange(6.0).reshape(2, 3), 'b': np.ones(3)}}
  state = dict(
    update_rule_params=rule,
    agents=dict(rng=np.zeros((2, 2, 2, 2), np.uint32)),  # Two devices.
    step=np.asarray(7),
  )
  saver = checkpoints_lib.Checkpointer(run / run_dir_lib.CHECKPOINTS)
  saver.save(7, state, dict(row=7))
  saver.close()
  params, step = meta_lib.read_rule(run)
  assert step == 7
  chex.assert_trees_all_equal(params, rule)


def test_read_rule_refuses_an_eval_run(tmp_path):
  trainer_lib.Trainer(
    eval_config(num_steps=1), tmp_path / 'e', progress=False
  ).fit()
  with pytest.raises(ValueError, match='holds a eval run, not a meta_train'):
    meta_lib.read_rule(tmp_path / 'e')


@pytest.mark.parametrize(
  'tasks',
  [
    ('catch[rows=5,columns=5]',),
    # Two agent groups (network shapes and environment states of each):
    # twice the meta program's trace and compile (168 s of the default
    # suite's 20 min on 2026-12-03), in the slow target.
    pytest.param(
      ('catch[rows=5,columns=5]', 'catch[rows=4,columns=3]'),
      marks=pytest.mark.slow,
    ),
  ],
  ids=['one_task', 'two_tasks'],
)
def test_meta_train_resume_is_exact(tmp_path, tasks):
  """Interrupted by SIGINT after its first call, then resumed from its
  checkpoint; a suite of one task, or of two (two agent groups). The run
  resumed from its directory (`resume=True`) holds the stopped run's state
  bit for bit; continued from that checkpoint (`restore`), the run gives
  the rows and state of the run carried on in memory, which is the run
  never interrupted: the SIGINT stops it between two calls, where the state
  is whole. Both continuations run the one meta program (a second Trainer
  would trace it again: 10-20 s here; the eval resume tests above continue
  a resumed Trainer, and the two-process CLI tests both jobs). The rules at
  its checkpoints read back (read_rule)."""
  # The LPG recipe's tiny rule: the meta program compiles in about 30% less
  # time than with Disco103's sizes (resume does not depend on them).
  # With the meta-gradient's parts logged (issue 69): a run with the
  # setting resumes exactly too.
  config = meta_config(
    num_steps=4, tasks=tasks, rule_sizes=TINY_RULE, meta_grad_parts=True
  )
  first = trainer_lib.Trainer(config, tmp_path / 'a', progress=False)

  def interrupt(trainer, new_rows):
    del trainer, new_rows
    os.kill(os.getpid(), signal.SIGINT)  # As Ctrl-C would.

  summary = first.fit(callbacks=[interrupt])
  assert summary['interrupted'] == 'SIGINT' and summary['stopped_at_step'] == 2
  # Stopped: its checkpoint, plots and the rule learned so far are saved.
  assert summary['checkpoint_step'] == 2
  assert (tmp_path / 'a/pos_rewards.png').is_file()
  rule_at_2 = _npz(tmp_path / 'a/update_rule_params.npz')
  np.testing.assert_array_equal(
    rule_at_2['lstm/linear/w'],
    jax.device_get(first.state.update_rule_params['lstm/linear']['w']),
  )
  stopped_rows = stopped_runs.metrics_without_timing(tmp_path / 'a/metrics.csv')
  shutil.copytree(tmp_path / 'a', tmp_path / 'b')  # The run as stopped.
  resumed = trainer_lib.Trainer(
    dict(num_steps=4), tmp_path / 'b', resume=True, progress=False
  )
  assert resumed.config == config and resumed.step == 2
  chex.assert_trees_all_equal(
    jax.device_get(resumed.state), jax.device_get(first.state)
  )
  assert len(resumed.rows) == len(stopped_rows)
  resumed.close()

  summary = first.fit()  # Carried on in memory: the straight run.
  assert summary['steps'] == 4
  assert summary['tasks'] == list(tasks)
  if len(tasks) > 1:
    assert (tmp_path / 'a/rewards_task1.png').is_file()
  straight = stopped_runs.metrics_without_timing(tmp_path / 'a/metrics.csv')
  straight_state = jax.device_get(first.state)
  # Renewals before and after the stop.
  for part in ('pg', 'reg'):  # Each of the rule's heads, both parts.
    for head in ('pi_out', 'pi_conv', 'y', 'z', 'torso'):
      key = f'meta_grad_{part}_{head}'
      assert (straight[f'{key}_norm'] > 0).all(), key
      assert straight[f'{key}_coherence'].between(0, 1 + 1e-6).all(), key
      assert straight[f'{key}_t_share'].between(0, 1).all(), key
  renewed = straight['agents_renewed']
  assert renewed[:2].sum() > 0 and renewed[2:].sum() > 0, renewed
  assert straight[:2].equals(stopped_rows)

  # The stopped run's checkpoint, continued.
  assert first.restore(tmp_path / 'b/checkpoints') == 2
  assert first.fit()['steps'] == 4
  again = stopped_runs.metrics_without_timing(tmp_path / 'a/metrics.csv')
  assert again.equals(straight), again.compare(straight)
  chex.assert_trees_all_equal(jax.device_get(first.state), straight_state)
  _check_read_rule(
    tmp_path / 'a', _npz(tmp_path / 'a/update_rule_params.npz'), rule_at_2
  )
  # That the learned rule trains a fresh agent: the next test.


def test_evaluate_trains_a_fresh_agent_with_a_rule_of_any_size():
  """`meta.train_fresh_agent` of a job whose rule is not Disco103-sized trains a
  fresh agent: the default environment takes the rule's sizes (it failed
  inside Haiku before); one given with other sizes is an error naming both,
  and so is one of another rule."""
  run = trainer_lib.Trainer(meta_config(rule_sizes=TINY_RULE), progress=False)
  held_out = eval_config(
    rule='disco_103', env_kwargs=dict(rows=6, columns=4), num_steps=2
  )
  with pytest.raises(
    ValueError,
    match=r"env.rule_sizes \(Disco103's\) differ from the sizes of the "
    r"rule's parameters \(prediction_size=8,",
  ):
    meta_lib.train_fresh_agent(run.job, run.state, env=held_out)
  with pytest.raises(
    ValueError, match='env must be an EvalConfig with rule disco_103'
  ):
    meta_lib.train_fresh_agent(run.job, run.state, env=eval_config())
  default = meta_lib.fresh_agent_config(
    run.job, meta_lib.rule(run.job, run.state)
  )
  assert default.rule_sizes == TINY_RULE and default.num_steps == 200
  # A fresh agent like the job's own, on its first task.
  assert default.env == 'jittable_catch'
  assert default.env_kwargs == dict(rows=5, columns=5)
  for name in config_lib.AGENT_FIELDS:
    if name != 'rule_sizes':  # Checked above.
      assert getattr(default, name) == getattr(run.job.setup.config, name), name
  shorter = dict(batch_size=8, replay_ratio=4, buffer_capacity=32)
  summary = meta_lib.train_fresh_agent(
    run.job,
    run.state,
    env=dataclasses.replace(default, num_steps=2, rollout_len=5, **shorter),
  )
  assert summary['steps'] == 2


# Slow (on this 2-core machine 85-170 s, by load): the resumed run compiles
# its program again, because a program of the lpg: gridworlds traced after
# its initial state was compiled (the straight run) names one of its
# private functions differently from one traced after a restore, so the
# compilation cache misses (fixed lifetimes too). The default run resumes
# a two-task Catch suite exactly in the test above.
@pytest.mark.slow
@pytest.mark.parametrize('preset', ['lpg', 'lpg_actor'])
def test_lpg_preset_meta_training_resumes_exactly(tmp_path, preset):
  """The lpg preset (tabular agents on LPG gridworlds, a layout per agent,
  per-agent Adam, lifetimes drawn per agent) and the lpg_actor preset
  (issue 69's settings: the action_pg target, SGD agents, one Adam step on
  the averaged meta-gradient, the action head's L2) at tiny size:
  interrupted after its first call and resumed from that checkpoint, each
  equals the run carried on in memory (the straight run, as in the test
  above): metrics rows, the whole state (the drawn lifetimes too) and the
  rule's npz. Agents start afresh, and draw new lifetimes, before and
  after the resume."""
  from disco_rl.cli import meta_train as command  # pylint: disable=g-import-not-at-top

  config = meta_config_lib.MetaTrainConfig(
    **{
      **command.PRESETS[preset],
      **dict(
        num_agents=2,
        batch_size_per_device=2,
        rollout_len=3,
        num_inner_steps=2,
        min_agent_lifetime=2,
        agent_lifetime=5,
        rule_sizes=TINY_RULE,
        model_lstm_size=8,
        model_head_hiddens=(8,),
        value_dense=(8,),
        steps_per_call=2,
        num_steps=4,
      ),
    }
  )
  assert config.sampled_lifetimes and config.suite[0].net == 'table'
  first = trainer_lib.Trainer(config, tmp_path / 'a', progress=False)
  lifetimes = [np.asarray(first.state.lifetimes)]

  def interrupt(trainer, new_rows):
    del new_rows
    lifetimes.append(np.asarray(trainer.state.lifetimes))
    os.kill(os.getpid(), signal.SIGINT)

  summary = first.fit(callbacks=[interrupt])
  assert summary['interrupted'] == 'SIGINT' and summary['stopped_at_step'] == 2
  assert summary['checkpoint_step'] == 2
  shutil.copytree(tmp_path / 'a', tmp_path / 'b')
  resumed = trainer_lib.Trainer(
    config, tmp_path / 'b', resume=True, progress=False
  )
  np.testing.assert_array_equal(resumed.state.lifetimes, lifetimes[-1])
  assert resumed.fit()['steps'] == 4
  assert first.fit()['steps'] == 4
  stopped_runs.assert_same_run(
    tmp_path / 'b', tmp_path / 'a', resumed.state, first.state
  )
  chex.assert_trees_all_equal(
    _npz(tmp_path / 'b/update_rule_params.npz'),
    _npz(tmp_path / 'a/update_rule_params.npz'),
  )
  renewed = metrics_lib.read_table(tmp_path / 'b/metrics.csv')['agents_renewed']
  assert renewed[:2].sum() > 0 and renewed[2:].sum() > 0, renewed
  drawn = np.stack(lifetimes + [np.asarray(first.state.lifetimes)])
  assert drawn.min() >= 2 and drawn.max() <= 5, drawn


def test_same_seed_same_metrics_other_seed_differs():
  def metrics(seed):
    run = trainer_lib.Trainer(
      eval_config(seed=seed, num_steps=6), progress=False
    )
    run.fit()
    return pd.DataFrame(run.rows).drop(columns=list(stopped_runs.TIMING))

  first, again, other = metrics(0), metrics(0), metrics(1)
  assert first.equals(again)  # NaN (before learning) equals NaN here.
  assert not first.equals(other)
  # The seeds differ from the first learner step on.
  learned = first['learned'] == 1
  assert (first['total_loss'][learned] != other['total_loss'][learned]).all()


def test_summary_is_valid_json_without_nan(tmp_path):
  # A one-step run: the first iterations end no episode on a 50-row board.
  run = trainer_lib.Trainer(
    eval_config(num_steps=1, env_kwargs=dict(rows=50)),
    tmp_path / 'a',
    progress=False,
  )
  summary = run.fit()
  assert summary['final_avg_return'] is None
  written = json.loads((tmp_path / 'a/summary.json').read_text())
  assert written['final_avg_return'] is None and written['steps'] == 1


def test_stop_when_callback_stops_early(tmp_path):
  run = trainer_lib.Trainer(
    eval_config(num_steps=40), tmp_path / 'a', progress=False
  )
  seen = []

  def record(trainer, new_rows):
    seen.append(len(new_rows))

  summary = run.fit(
    callbacks=[record, host_loop.stop_when('learned', above=1.0, window=2)]
  )
  # Learning starts at iteration 4 (3 warm-up iterations); calls of 4.
  assert summary['interrupted'] == 'callback'
  assert run.step == 8 and seen == [4, 4]
  assert summary['stopped_at_step'] == 5
  # Stopped runs still leave their checkpoint, plot and rows.
  assert (tmp_path / 'a/returns.png').is_file()
  assert len(metrics_lib.read_table(tmp_path / 'a/metrics.csv')) == 8
  assert summary['checkpoint_step'] == 8


def test_stop_when_counts_its_window_in_steps_of_every_seed(tmp_path):
  run = trainer_lib.Trainer(
    eval_config(num_steps=40, num_seeds=2), tmp_path / 'a', progress=False
  )
  summary = run.fit(
    callbacks=[host_loop.stop_when('learned', above=1.0, window=6)]
  )
  # Steps 0-2 only act. After the call that ends at step 8 the last 6 steps
  # (12 rows) hold step 2; after the next (step 12) they all learned.
  assert summary['interrupted'] == 'callback'
  assert run.step == 12 and len(run.rows) == 24


def test_stop_when_rejects_bad_arguments():
  with pytest.raises(ValueError, match='exactly one of above= or below='):
    host_loop.stop_when('avg_return')
  with pytest.raises(ValueError, match='window must be >= 1, got 0'):
    host_loop.stop_when('avg_return', above=1.0, window=0)


def test_existing_run_is_not_overwritten(tmp_path):
  trainer_lib.Trainer(
    eval_config(num_steps=1), tmp_path / 'a', progress=False
  ).fit()
  before = (tmp_path / 'a/metrics.csv').read_bytes()
  with pytest.raises(ValueError, match='already holds a run'):
    trainer_lib.Trainer(eval_config(num_steps=1), tmp_path / 'a')
  assert (tmp_path / 'a/metrics.csv').read_bytes() == before
  with pytest.raises(ValueError, match='overwrite and resume exclude'):
    trainer_lib.Trainer(
      eval_config(num_steps=1), tmp_path / 'a', resume=True, overwrite=True
    )
  assert (tmp_path / 'a/metrics.csv').read_bytes() == before
  (tmp_path / 'a/notes.txt').write_text('mine')
  run = trainer_lib.Trainer(
    eval_config(num_steps=2), tmp_path / 'a', overwrite=True, progress=False
  )
  # The old run's files are gone, the user's are not.
  assert not (tmp_path / 'a/metrics.csv').exists()
  assert (tmp_path / 'a/notes.txt').read_text() == 'mine'
  run.fit()
  assert len(metrics_lib.read_table(tmp_path / 'a/metrics.csv')) == 5


def test_resume_with_other_settings_is_an_error(tmp_path):
  trainer_lib.Trainer(
    eval_config(num_steps=1), tmp_path / 'a', progress=False
  ).fit()
  with pytest.raises(ValueError, match=r'these differ: seed: saved 0, given 3'):
    trainer_lib.Trainer(
      eval_config(num_steps=4, seed=3), tmp_path / 'a', resume=True
    )
  with pytest.raises(ValueError, match='holds a eval run, not a meta_train'):
    trainer_lib.Trainer(meta_config(), tmp_path / 'a', resume=True)
  with pytest.raises(ValueError, match='Nothing to resume in'):
    trainer_lib.Trainer(eval_config(), tmp_path / 'empty', resume=True)
  assert not (tmp_path / 'empty').exists()


@pytest.mark.slow  # Two meta-training runs (~35 s); the eval command's
# test (test_jobs_eval.py) runs the same host loop in the default run.
def test_meta_training_diverging_in_its_first_call_keeps_the_rows_before_it(
  tmp_path,
):
  """A meta-learning rate of 1e30: the rule's parameters are not finite
  after meta-step 0, meta-step 1 diverges inside the first call of 3.
  Before, metrics.csv held no row; now it holds meta-step 0's, as a run of
  1 meta-step does."""
  config = meta_config(
    rule_sizes=TINY_RULE, meta_learning_rate=1e30, steps_per_call=3
  )
  run = trainer_lib.Trainer(
    dataclasses.replace(config, num_steps=6), tmp_path / 'a', progress=False
  )
  try:
    with pytest.raises(
      divergence.DivergedError,
      match=r'^learning diverged at meta-step 1: meta_loss = nan',
    ):
      run.fit()
  finally:
    run.close()
  assert [r['step'] for r in run.rows] == [0]
  short = trainer_lib.Trainer(
    dataclasses.replace(config, num_steps=1), tmp_path / 'b', progress=False
  )
  short.fit()
  short.close()
  kept, expected = (
    stopped_runs.metrics_without_timing(tmp_path / name / 'metrics.csv')
    for name in ('a', 'b')
  )
  assert list(expected['step']) == [0]
  pd.testing.assert_frame_equal(kept, expected)


def test_bad_trainer_arguments():
  with pytest.raises(
    TypeError, match='EvalConfig or a MetaTrainConfig, got dict'
  ):
    trainer_lib.Trainer({'num_steps': 3})
  with pytest.raises(ValueError, match='checkpoint_every must be >= 0, got -1'):
    trainer_lib.Trainer(eval_config(), checkpoint_every=-1)
  with pytest.raises(ValueError, match='resume=True needs the output_dir'):
    trainer_lib.Trainer(eval_config(), resume=True)
  with pytest.raises(
    ValueError, match='batch_size=8 must be a multiple of replay_ratio=3'
  ):
    trainer_lib.Trainer(eval_config(replay_ratio=3))


LOGGER_NAMES = "a list of logger names (e.g. ['tensorboard'])"


@pytest.mark.parametrize(
  'argument, value, message',
  [
    ('checkpoint_every', '5', "an integer or None, got '5' (str)."),
    ('checkpoint_every', 5.0, 'an integer or None, got 5.0 (float).'),
    ('checkpoint_every', True, 'an integer or None, got True (bool).'),
    ('checkpoint_every', -1, '>= 0, got -1.'),
    ('keep_checkpoints', 2.0, 'an integer, got 2.0 (float).'),
    ('keep_checkpoints', None, 'an integer, got None (NoneType).'),
    ('keep_checkpoints', 0, '>= 1, got 0.'),
    ('progress', 'no', "True or False, got 'no' (str)."),
    ('progress', 0, 'True or False, got 0 (int).'),
    ('log_every', '10', "an integer, got '10' (str)."),
    ('log_every', -5, '>= 0, got -5.'),
    ('overwrite', 'yes', "True or False, got 'yes' (str)."),
    ('resume', 1, 'True or False, got 1 (int).'),
    ('loggers', 'tensorboard', f"{LOGGER_NAMES}, got 'tensorboard' (str)."),
    ('loggers', [1], f'{LOGGER_NAMES}, got [1] (list).'),
  ],
)
def test_the_trainers_own_arguments_are_checked_by_type(
  argument, value, message, tmp_path
):
  """Before, '5' and 2.0 failed in a comparison naming no argument, or
  were taken ('no' as a progress bar, -5 as log_every, 'tensorboard' as
  the unknown logger 't'). Each is refused, naming the argument, what it
  must be and the value, before anything is built or written."""
  out = tmp_path / 'run'
  expected = '^' + re.escape(f'{argument} must be {message}') + '$'
  with pytest.raises(ValueError, match=expected):
    trainer_lib.Trainer(eval_config(), out, **{argument: value})
  assert not out.exists()
  if argument != 'resume':  # Trainer.resume: checked before the lock.
    with pytest.raises(ValueError, match=expected):
      trainer_lib.Trainer.resume(out, **{argument: value})
    assert not out.exists()


def test_the_trainers_arguments_keep_numpy_values_as_python_ones(tmp_path):
  run = trainer_lib.Trainer(
    eval_config(num_steps=1),
    checkpoint_every=np.int64(4),
    keep_checkpoints=np.int32(2),
    progress=np.bool_(False),
    loggers=[],
  )
  assert type(run.checkpoint_every) is int and run.checkpoint_every == 4
  assert type(run.keep_checkpoints) is int and run.progress is False
  for bad, message in (
    ('1', "num_steps must be an integer, got '1' (str)."),
    (0, 'num_steps must be >= 1, got 0.'),
  ):
    with pytest.raises(ValueError, match=re.escape(message)):
      run.fit(bad)
  with pytest.raises(
    ValueError,
    match=re.escape(
      "output_dir must be the run's directory (a path or a RunDir or "
      'None), got 5 (int).'
    ),
  ):
    trainer_lib.Trainer(eval_config(), 5)
  with pytest.raises(
    ValueError,
    match=re.escape(
      "output_dir must be the run's directory (a path or a RunDir), got "
      'None (NoneType).'
    ),
  ):
    trainer_lib.Trainer.resume(None)
  with pytest.raises(ValueError, match='^changes must be a dict'):
    trainer_lib.Trainer.resume(tmp_path / 'run', [('num_steps', 3)])
  with pytest.raises(ValueError, match='^config_cls must be EvalConfig'):
    trainer_lib.Trainer.resume(tmp_path / 'run', config_cls=dict)
  assert not (tmp_path / 'run').exists()


def test_save_and_restore_without_output_dir(tmp_path):
  run = trainer_lib.Trainer(eval_config(num_steps=3), progress=False)
  run.fit()
  assert run.save(tmp_path / 'ckpt') == 6
  other = trainer_lib.Trainer(eval_config(num_steps=3), progress=False)
  assert other.restore(tmp_path / 'ckpt') == 6
  chex.assert_trees_all_equal(
    jax.device_get(run.state), jax.device_get(other.state)
  )
  with pytest.raises(ValueError, match='no output_dir: pass a directory'):
    other.save()


def test_evaluate_the_agent_policy():
  from disco_rl.environments import get_environment  # pylint: disable=g-import-not-at-top

  run = trainer_lib.Trainer(eval_config(num_steps=2), progress=False)
  run.fit()
  before = jax.device_get(run.state.learner_state.params)
  result = eval_lib.evaluate(run.job, run.state, num_rollouts=4)
  # 2 environments x 4 rollouts x 5 steps; an episode on an 8-row board
  # lasts 7 steps (the ball falls from row 0 to row 7): 2 episodes each.
  assert result['episodes'] == 2 * (4 * 5 // 7)
  assert -1.0 <= result['avg_return'] <= 1.0
  assert (
    eval_lib.evaluate(run.job, run.state, num_rollouts=4) == result
  )  # Same seed, same result.
  chex.assert_trees_all_equal(
    before, jax.device_get(run.state.learner_state.params)
  )
  other = get_environment(
    'jittable_catch', batch_size=3, env_settings={'rows': 5, 'columns': 5}
  )
  with pytest.raises(
    ValueError,
    match=r'timestep.observation must have shape '
    r'\[B, \*\(8, 8, 1\)\].*got \(3, 5, 5, 1\)',
  ):
    eval_lib.evaluate(run.job, run.state, env=other)
  host = get_environment('catch', batch_size=2)
  with pytest.raises(TypeError, match='env must be a jittable'):
    eval_lib.evaluate(run.job, run.state, env=host)
  with pytest.raises(ValueError, match='num_rollouts must be >= 1, got 0'):
    eval_lib.evaluate(run.job, run.state, num_rollouts=0)


@pytest.mark.weights
def test_meta_training_fine_tunes_disco_103_or_a_saved_rule(
  tmp_path, disco_103_params
):
  """init='disco_103' starts from the published weights; rule_params from
  any saved rule (e.g. a previous run's update_rule_params.npz)."""
  from disco_rl import meta_objective  # pylint: disable=g-import-not-at-top
  from disco_rl import weights  # pylint: disable=g-import-not-at-top

  run = trainer_lib.Trainer(meta_config(init='disco_103'), progress=False)
  chex.assert_trees_all_equal(
    meta_lib.rule(run.job, run.state), disco_103_params
  )
  shifted = jax.tree.map(lambda x: np.asarray(x) + 1.0, disco_103_params)
  meta_objective.save_params(shifted, tmp_path / 'rule.npz')
  saved = weights.load_disco_103(tmp_path / 'rule.npz', download=False)
  run = trainer_lib.Trainer(
    meta_config(init='disco_103'), rule_params=saved, progress=False
  )
  chex.assert_trees_all_equal(meta_lib.rule(run.job, run.state), shifted)


# ----------------------------------------------------------------------------
# Signals at every point of a run.


def test_a_signal_during_start_up_or_compilation_stops_before_any_step(
  tmp_path,
):
  """Caught by an outer StopOnSignal (as the CLI's) while the Trainer is
  built, or during the ahead-of-time compilation: no step runs; resuming
  runs them all."""
  config = eval_config(num_steps=3)
  with signals.StopOnSignal():
    os.kill(os.getpid(), signal.SIGINT)  # During start-up.
    trainer = trainer_lib.Trainer(config, tmp_path / 'a', progress=False)
    summary = trainer.fit()
  assert summary['interrupted'] == 'SIGINT' and not summary['completed']
  assert summary['stopped_at_step'] == 0 and summary['checkpoint_step'] == 0
  assert trainer.step == 0

  resumed = trainer_lib.Trainer(
    config, tmp_path / 'a', resume=True, progress=False
  )
  program = resumed.job.program

  class CompileAndSignal:
    def compile(self, state):
      seconds = program.compile(state)
      os.kill(os.getpid(), signal.SIGTERM)
      return seconds

  resumed.job = dataclasses.replace(resumed.job, program=CompileAndSignal())
  summary = resumed.fit()
  assert summary['interrupted'] == 'SIGTERM'
  assert summary['stopped_at_step'] == 0 and resumed.step == 0
  resumed.close()
  summary = trainer_lib.Trainer(
    config, tmp_path / 'a', resume=True, progress=False
  ).fit()
  assert summary['completed'] and summary['interrupted'] is None
  assert summary['steps'] == 3


def test_a_signal_after_the_last_step_is_reported_with_the_run_complete(
  tmp_path,
):
  trainer = trainer_lib.Trainer(
    eval_config(num_steps=2), tmp_path / 'a', progress=False
  )
  write_outputs = trainer.job.report.outputs

  def signal_then_write(*args):
    os.kill(os.getpid(), signal.SIGINT)
    return write_outputs(*args)

  trainer.job = dataclasses.replace(
    trainer.job,
    report=dataclasses.replace(trainer.job.report, outputs=signal_then_write),
  )
  summary = trainer.fit()
  assert summary['interrupted'] == 'SIGINT' and summary['completed']
  assert summary['stopped_at_step'] == summary['steps'] == 2
  on_disk = json.loads((tmp_path / 'a/summary.json').read_text())
  assert on_disk['interrupted'] == 'SIGINT' and on_disk['completed']
