# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.loops.meta_loop on one CPU device.

Several devices: the meta-train notebook (test_notebooks.py) and
test_loops_multiprocess.py.
"""

import dataclasses
import json
import pathlib

import jax
import numpy as np
import pytest
import smoke_env

from disco_rl.loops import config as config_lib
from disco_rl.loops import meta_loop

DATA = pathlib.Path(__file__).resolve().parent / 'data'
TINY = config_lib.MetaTrainConfig(
    num_agents=2, batch_size_per_device=2, rollout_len=3, dense=(16,),
    model_lstm_size=8, model_head_hiddens=(8,), value_dense=(8,),
    num_devices=1, steps_per_call=3)


def _run(trainer, calls):
  state = trainer.init(jax.random.PRNGKey(trainer.config.seed))
  logs = []
  for count in calls:
    state, step_logs = trainer.run(state, count)
    logs.append(step_logs)
  return state, {k: np.concatenate([l[k] for l in logs]) for k in logs[0]}


def test_scanned_meta_steps_equal_one_meta_step_per_call():
  with smoke_env.fast_compile():
    fused_state, fused = _run(meta_loop.MetaTrainer(TINY), [3, 1])
    single = meta_loop.MetaTrainer(
        dataclasses.replace(TINY, steps_per_call=1))
    state, stepped = _run(single, [1] * 4)
  assert sorted(fused) == sorted(stepped)
  assert all(len(v) == 4 for v in fused.values())
  for key in fused:
    np.testing.assert_allclose(fused[key], stepped[key], rtol=1e-4,
                               atol=1e-7, err_msg=key)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4,
                                                       atol=1e-7),
               single.params(state), single.params(fused_state))
  assert int(fused_state.step) == int(state.step) == 4
  # The rule moved, and the loop logged its meta-gradient every step.
  initial = single.initial_rule_params()
  moved = sum(np.sum((np.asarray(a) - np.asarray(b)) ** 2) for a, b in zip(
      jax.tree.leaves(single.params(state)), jax.tree.leaves(initial)))
  assert moved > 0
  assert (fused['meta_grad_norm'] > 0).all()
  for key in ('pos_rewards', 'neg_rewards'):  # 2 inner steps x 2 x 3 steps.
    assert ((fused[key] >= 0) & (fused[key] <= 12)).all(), fused[key]


def test_run_checks_the_step_count():
  trainer = meta_loop.MetaTrainer(dataclasses.replace(TINY, steps_per_call=2))
  with pytest.raises(ValueError, match=r'num_steps must be in \[1, '
                     r'steps_per_call=2\], got 3'):
    trainer.run(None, 3)


def test_meta_training_repeats_the_upstream_first_steps():
  """Same settings and seeds as the upstream notebook: the same run.

  tests/data/upstream_meta_train_steps.json holds the first meta-steps of the
  upstream notebook (see its description). The counts of rewarded steps are
  integers per agent, so they agree exactly while the two runs' rounding
  differences stay small; the meta-gradient norms agree closely at first and
  drift apart slowly (the loop is chaotic).
  """
  recorded = json.loads((DATA / 'upstream_meta_train_steps.json').read_text())
  steps = 3
  trainer = meta_loop.MetaTrainer(config_lib.MetaTrainConfig(
      num_steps=steps, num_devices=1, steps_per_call=steps))
  _, logs = _run(trainer, [steps])
  np.testing.assert_array_equal(logs['pos_rewards'],
                                recorded['pos_rewards'][:steps])
  for key in ('meta_grad_norm', 'meta_up_norm'):
    np.testing.assert_allclose(logs[key], recorded[key][:steps], rtol=1e-3,
                               err_msg=key)
