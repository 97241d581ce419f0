# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval job's on-policy regime (`epochs`, `minibatches`; the eval
command's `--preset stoix`): its settings, the minibatches it learns on,
the updates a step makes, resume, and the command."""

import dataclasses
import json
import subprocess
import sys

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import stopped_runs
import tiny

from disco_rl import types
from disco_rl.cli import eval as eval_cli
from disco_rl.jobs import config as config_lib
from disco_rl.jobs.eval import setup as eval_setup
from disco_rl.jobs.eval import steps as eval_steps
from disco_rl.runtime import divergence

# Four environments, each step's rollout learned from in 2 passes of 2
# minibatches of 2 environments.
ON_POLICY = dict(
  batch_size=4, replay_ratio=1, buffer_capacity=4, epochs=2, minibatches=2
)


@pytest.mark.parametrize(
  'changes, message',
  [
    (dict(epochs=-1), 'epochs must be >= 0, got -1'),
    (dict(minibatches=0), 'minibatches must be >= 1, got 0'),
    (
      dict(epochs=0),
      'minibatches=2 divides the rollout of the on-policy regime: give '
      'epochs >= 1',
    ),
    (
      dict(replay_ratio=2),
      'needs replay_ratio=1 and buffer_capacity=batch_size=4, got '
      'replay_ratio=2 and buffer_capacity=4',
    ),
    (
      dict(buffer_capacity=8),
      'got replay_ratio=1 and buffer_capacity=8',
    ),
    (
      dict(minibatches=3),
      'batch_size=4 must be a multiple of minibatches=3',
    ),
  ],
)
def test_bad_on_policy_settings_name_the_setting(changes, message):
  with pytest.raises(ValueError, match=message.replace('(', r'\(')):
    tiny.eval_config(**{**ON_POLICY, **changes})


def test_the_replay_regime_is_the_default_and_unchanged():
  config = config_lib.EvalConfig()
  assert config.epochs == 0 and config.minibatches == 1
  assert eval_cli.PRESETS['notebook'] == {}


@chex.dataclass
class _Learner:
  params: chex.Array
  counts: chex.Array  # [E]: the updates that learned on each environment.


@chex.dataclass
class _State:
  learner_state: _Learner
  actor_state: chex.Array
  rule_params: chex.Array
  step: chex.Array


class _CountingAgent:
  """A learner step that counts, per environment, the times it was given
  that environment's trajectory (each trajectory's rewards are its index)."""

  def learner_step(self, key, batch, learner_state, actor_state, rule_params,
                   update_rule_only, learning_rate):  # fmt: skip
    del key, actor_state, rule_params, update_rule_only, learning_rate
    envs = batch.rewards[0].astype(jnp.int32)  # [B]: the environments.
    distinct = jnp.unique(envs, size=envs.shape[0], fill_value=-1)
    logs = dict(
      total_loss=jnp.sum(envs).astype(jnp.float32),
      distinct=jnp.sum(distinct >= 0).astype(jnp.float32),
    )
    counts = learner_state.counts.at[envs].add(1)
    return dataclasses.replace(learner_state, counts=counts), None, logs


def test_each_pass_learns_once_on_every_environment_in_disjoint_minibatches():
  """4 environments, 3 passes of 2 minibatches: each update gets 2
  distinct environments, and every environment is learned from once per
  pass (the permutation, not sampling with replacement)."""
  epochs, minibatches, envs, steps = 3, 2, 4, 5
  config = tiny.eval_config(**{**ON_POLICY, 'epochs': epochs})
  setup = type('Setup', (), {})()
  setup.config, setup.warmup = config, 0
  setup.batch_per_device, setup.agent = envs, _CountingAgent()
  setup.log_keys = ('total_loss', 'distinct')
  ids = jnp.broadcast_to(jnp.arange(envs, dtype=jnp.float32), (steps, envs))
  logits = jnp.zeros((steps, envs, 3))
  rollout = types.ActorRollout(
    observations=jnp.zeros((steps, envs, 2)),
    actions=jnp.zeros((steps, envs), jnp.int32),
    rewards=ids,
    discounts=jnp.ones((steps, envs)),
    agent_outs={'logits': logits, 'v': jnp.zeros((steps, envs))},
    states=jnp.zeros((steps, envs, 1)),
    logits=logits,
  )
  state = _State(
    learner_state=_Learner(
      params=jnp.zeros(1), counts=jnp.zeros(envs, jnp.int32)
    ),
    actor_state=jnp.zeros(()),
    rule_params=jnp.zeros(()),
    step=jnp.zeros((), jnp.int32),
  )
  learn = lambda key: eval_steps.learn_on_policy(
    setup, state, rollout, key, jnp.asarray(0.1)
  )
  state, logs = jax.vmap(learn, axis_name=eval_steps.AXIS)(
    jax.random.PRNGKey(0)[None]
  )
  np.testing.assert_array_equal(state.learner_state.counts[0], [epochs] * envs)
  assert float(logs['distinct'][0]) == 2.0  # Every update: 2 distinct.
  # The mean of the updates' sums: every pass sums to 0+1+2+3 = 6.
  assert float(logs['total_loss'][0]) == 6 / minibatches
  assert float(logs[divergence.KEY][0]) == 1.0


@pytest.mark.usefixtures('disco_103_params', 'fast_compile')
def test_a_step_is_epochs_x_minibatches_updates_and_resumes_exactly(tmp_path):
  """Disco103 on-policy: the agent's Adam counts 4 updates a step, and
  so does the metrics' `learned`;
  stopped after 2 steps and resumed to 4 equals a straight run of 4."""
  settings = dict(**ON_POLICY, rule='disco_103', rollout_len=4, num_steps=4)
  resumed, straight, rows = stopped_runs.stopped_and_straight(
    tiny.eval_config(**settings), 2, tmp_path
  )
  assert resumed.step == straight.step == 4
  adam = jax.device_get(straight.state.learner_state.opt_state[0])
  assert int(np.asarray(adam.count).ravel()[0]) == 4 * 4
  # Each row counts the step's updates (`learned`, which the studies'
  # measures sum).
  assert list(rows['learned']) == [4] * 4
  resumed.close()
  straight.close()


def test_the_command_runs_the_stoix_preset(tmp_path):
  """`--preset stoix` as users type it, at tiny sizes (flags override the
  preset); its run.json records the regime."""
  flags = [
    '--preset', 'stoix', '--rule', 'actor_critic', '--rollout-len', '4',
    '--batch-size', '4', '--buffer-capacity', '4', '--minibatches', '2',
    '--steps', '2', '--steps-per-call', '1', '--dense', '8',
    '--model-lstm-size', '4', '--model-head-hiddens', '4', '--no-progress',
    '--out', str(tmp_path / 'run'),
  ]  # fmt: skip
  done = subprocess.run(
    [sys.executable, '-m', 'disco_rl.cli.eval', *flags],
    capture_output=True,
    text=True,
    check=False,
    timeout=600,
  )
  assert done.returncode == 0, done.stderr[-2000:]
  settings = json.loads((tmp_path / 'run/run.json').read_text())['settings']
  preset = eval_cli.PRESETS['stoix']
  assert settings['epochs'] == preset['epochs'] == 4
  assert settings['learning_rate'] == preset['learning_rate'] == 3e-4
  assert settings['minibatches'] == 2 and settings['replay_ratio'] == 1
  assert (
    dataclasses.asdict(config_lib.EvalConfig(**preset))['rollout_len'] == 128
  )


def test_a_minibatch_must_divide_across_the_devices():
  """8 environments in 8 minibatches over 2 devices: each device's share
  of 4 cannot make 8 minibatches; refused before anything is built."""
  config = tiny.eval_config(**{**ON_POLICY, 'batch_size': 8, 'minibatches': 8,
                               'buffer_capacity': 8})  # fmt: skip
  two = jax.devices()[:1] * 2  # Two devices, as far as the check counts.
  with pytest.raises(
    ValueError,
    match=r'learner minibatch \(batch_size // minibatches\)=1 does not '
    'divide across 2 devices',
  ):
    eval_setup.make_setup(config, two)
