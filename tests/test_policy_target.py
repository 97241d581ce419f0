# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The Disco rule's policy target: Disco103's absolute logits, or a change
of the agent's own (`policy_target='residual'`)."""

import dataclasses

import chain_helpers
import jax
import numpy as np
import pytest

from disco_rl import agent as agent_lib
from disco_rl import weights
from disco_rl.cli import common
from disco_rl.jobs import config as config_lib
from disco_rl.jobs.eval import setup as eval_setup
from disco_rl.jobs.meta import config as meta_config
from disco_rl.update_rules import disco

pytestmark = pytest.mark.usefixtures('fast_compile')
TINY_RULE = disco.NAMED_SIZES['tiny'].changes()


def _learner_logs(policy_target, action_biases=(0.0,)):
  """One learner step (compiled once) of a tabular agent whose rule's
  policy output is 0 (the last layer of its policy target zeroed; an action
  head's output each of `action_biases`), on a rollout along LPG's delayed
  chain: the step's logs per bias, the agent's logits [T, A], the actions
  [T] and the number of actions."""
  agent = chain_helpers.tabular_chain_agent(
    rule_sizes=TINY_RULE, policy_target=policy_target
  )
  learner = agent.initial_learner_state(jax.random.PRNGKey(0))
  # A policy far from uniform, so that the two targets differ.
  learner = dataclasses.replace(
    learner,
    params=jax.tree.map(
      lambda x: x + jax.random.normal(jax.random.PRNGKey(2), x.shape),
      learner.params,
    ),
  )
  rule_params, _ = jax.jit(agent.update_rule.init_params)(jax.random.PRNGKey(1))
  rule_params['lstm/linear_4'] = jax.tree.map(
    np.zeros_like, rule_params['lstm/linear_4']
  )
  rollout = chain_helpers.chain_rollout(agent, learner.params)
  outs, actor_state = rollout.agent_outs, rollout.states
  step = jax.jit(agent.learner_step, static_argnames='is_meta_training')
  logs = []
  for bias in action_biases:
    if policy_target in disco.ACTION_TARGETS:
      rule_params['lstm/linear_5'] = dict(
        w=np.zeros_like(rule_params['lstm/linear_5']['w']),
        b=np.full_like(rule_params['lstm/linear_5']['b'], bias),
      )
    logs.append(
      step(
        jax.random.PRNGKey(4),
        rollout,
        learner,
        actor_state,
        rule_params,
        is_meta_training=False,
      )[2]
    )
  return (
    logs,
    np.asarray(outs['logits'][:-1]),
    np.asarray(rollout.actions[:-1]),
    agent.num_actions,
  )


# Slow (13 s in CI's default run on 2026-12-07: two agents' learner steps
# compiled). The default suite keeps the action_pg target's test below,
# the same path of a target made from the agent's own logits.
@pytest.mark.slow
def test_a_residual_target_of_a_zero_output_is_the_agents_own_policy():
  (logs,), logits, _, num_actions = _learner_logs('residual')
  np.testing.assert_allclose(logs['meta_out']['pi'], logits, atol=1e-6)
  np.testing.assert_allclose(logs['pi_loss'], 0.0, atol=1e-6)  # No change.
  # Disco103's absolute target of the same output: the uniform policy.
  (logs,), _, _, _ = _learner_logs('absolute')
  np.testing.assert_allclose(logs['meta_out']['pi'], 0.0, atol=1e-7)
  np.testing.assert_allclose(
    logs['pi_hat_entropy'], np.log(num_actions), rtol=1e-6
  )
  assert float(logs['pi_loss']) > 1e-3


# Slow (11 s: an agent's learner step compiled). The default suite keeps
# the action_pg target's end-to-end test (the same path but for the
# division) and the 'action' change's exact mean step below.
@pytest.mark.slow
def test_an_action_target_adds_the_steps_scalar_to_the_action_taken():
  (zero, logs), logits, actions, num_actions = _learner_logs(
    'action', (0.0, 0.5)
  )
  np.testing.assert_allclose(zero['meta_out']['pi'], logits, atol=1e-6)
  np.testing.assert_allclose(zero['pi_loss'], 0.0, atol=1e-6)
  np.testing.assert_allclose(logs['meta_out']['pi_action'], 0.5, atol=1e-6)
  np.testing.assert_allclose(
    logs['meta_out']['pi'],
    logits + 0.5 * np.eye(num_actions)[actions],
    atol=1e-6,
  )
  assert float(logs['pi_loss']) > 1e-3


def _expected_step(logits, s, policy_target):
  """The mean over a ~ pi of the first-order step of the logits that the
  KL to the action target of a constant scalar `s` asks for, [A], with
  the probabilities pi [A]: softmax(target) - pi to first order is the
  Jacobian of the softmax times the change."""
  pi = np.exp(logits - logits.max())
  pi /= pi.sum()
  jacobian = np.diag(pi) - np.outer(pi, pi)
  actions = np.arange(len(pi))
  change = np.asarray(
    disco.action_change(
      np.broadcast_to(logits, (1, len(pi), len(pi))),
      actions[None],
      np.full((1, len(pi)), s, np.float32),
      policy_target,
    )
  )[0]  # [A (the action taken), A]
  return pi, np.sum(pi[:, None] * (change @ jacobian.T), axis=0)


def test_a_constant_action_scalar_narrows_the_policy_unless_over_pi():
  """Why a rule of target 'action' narrows policies where no reward comes:
  a constant scalar s > 0 on the action taken moves the logits, on
  average over a ~ pi, by s * pi * (pi - |pi|^2): towards the likelier
  actions. Divided by pi(a_t) ('action_pg'), the mean step is 0, LPG's
  actor term's."""
  logits = np.log(np.array([0.4, 0.3, 0.2, 0.1], np.float32))
  pi, step = _expected_step(logits, 0.1, 'action')
  np.testing.assert_allclose(step, 0.1 * pi * (pi - pi @ pi), atol=1e-7)
  assert step[0] > 0 > step[-1]
  _, step = _expected_step(logits, 0.1, 'action_pg')
  np.testing.assert_allclose(step, 0.0, atol=1e-7)
  # At the uniform policy both are 0: noise breaks the symmetry.
  _, step = _expected_step(np.zeros(4, np.float32), 0.1, 'action')
  np.testing.assert_allclose(step, 0.0, atol=1e-7)
  with pytest.raises(ValueError, match="got 'residual'"):
    disco.action_change(
      logits[None, None], np.zeros((1, 1), int), np.zeros((1, 1)), 'residual'
    )


def test_an_action_pg_target_divides_the_scalar_by_the_actions_probability():
  """End to end through a learner step: pi_hat = logits + s / pi(a_t) on
  the action taken, and for a small s the target's probabilities differ
  from the agent's by s * (onehot(a_t) - pi), LPG's actor step."""
  (zero, logs, small), logits, actions, num_actions = _learner_logs(
    'action_pg', (0.0, 0.5, 1e-3)
  )
  np.testing.assert_allclose(zero['meta_out']['pi'], logits, atol=1e-6)
  pi = np.exp(logits - logits.max(-1, keepdims=True))
  pi /= pi.sum(-1, keepdims=True)
  onehot = np.eye(num_actions)[actions]
  pi_a = np.sum(pi * onehot, -1, keepdims=True)
  np.testing.assert_allclose(
    logs['meta_out']['pi'], logits + 0.5 / pi_a * onehot, rtol=1e-5, atol=1e-5
  )
  target = np.exp(small['meta_out']['pi'] - logits.max(-1, keepdims=True))
  target /= target.sum(-1, keepdims=True)
  np.testing.assert_allclose(
    target - pi, 1e-3 * (onehot - pi), rtol=0.0, atol=2e-5
  )
  # The logs of what the head does where no reward came: its mean, mean
  # |.| and mean over the steps of reward 0, and their share (the chain's
  # rollout has 4 transitions, the last rewarded); the eval job records
  # them for an action target.
  for key in ('pi_action', 'pi_action_abs', 'pi_action_unrewarded'):
    np.testing.assert_allclose(logs[key], 0.5, rtol=1e-6)
  np.testing.assert_allclose(logs['unrewarded'], 0.75, rtol=1e-6)
  assert float(logs['normalized_adv_abs']) > 0.0
  keys = eval_setup.log_keys('disco_103', policy_target='action_pg')
  assert set(disco.ACTION_SIGNAL_KEYS) <= set(keys)
  assert not set(disco.ACTION_SIGNAL_KEYS) & set(
    eval_setup.log_keys('disco_103')
  )


def test_an_action_rule_file_carries_its_target(tmp_path):
  """The action head is part of the rule's file: it loads with its head
  checked, and a command reading it takes policy target 'action'."""
  settings = agent_lib.get_settings_disco(TINY_RULE, 'action').update_rule
  rule = disco.DiscoUpdateRule(**settings)
  params, _ = jax.jit(rule.init_params)(jax.random.PRNGKey(0))
  assert disco.has_action_head(params)
  path = tmp_path / 'action_rule.npz'
  weights.save_params(params, path)
  loaded = weights.load_rule(path)
  assert disco.has_action_head(loaded)
  config = config_lib.EvalConfig(rule_sizes=TINY_RULE)
  assert (
    common.with_policy_target(config, loaded, str(path), False).policy_target
    == 'action'
  )
  with pytest.raises(ValueError, match='holds the action head'):
    common.with_policy_target(
      dataclasses.replace(config, policy_target='residual'),
      loaded,
      str(path),
      True,
    )
  # 'action' and 'action_pg' files look alike: the flag decides.
  given = dataclasses.replace(config, policy_target='action_pg')
  assert common.with_policy_target(given, loaded, str(path), True) is given
  del loaded['lstm/linear_5']
  with pytest.raises(ValueError, match='has no action head'):
    common.with_policy_target(
      dataclasses.replace(config, policy_target='action'),
      loaded,
      str(path),
      True,
    )
  with pytest.raises(ValueError, match='only they need'):
    disco.DiscoUpdateRule(
      **agent_lib.get_settings_disco(
        TINY_RULE, 'absolute'
      ).update_rule.to_dict()
      | dict(policy_target='action')
    )


def test_policy_target_is_a_setting_of_rules_with_a_meta_network():
  assert config_lib.EvalConfig().policy_target == 'absolute'
  assert 'policy_target' not in agent_lib.get_settings_disco().update_rule
  with pytest.raises(ValueError, match="rule is 'ppo'"):
    config_lib.EvalConfig(policy_target='residual', rule='ppo')
  with pytest.raises(ValueError, match='policy_target'):
    config_lib.EvalConfig(policy_target='relative')
  with pytest.raises(ValueError, match="rule 'actor_critic' has none"):
    agent_lib.make_settings(
      'actor_critic', 1e-3, (8,), 4, (4,), policy_target='residual'
    )
  # A meta-training's rule is evaluated with its own policy target.
  config = meta_config.MetaTrainConfig(policy_target='residual')
  assert config.agent_fields()['policy_target'] == 'residual'
