# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Parity with the upstream: meta-network initialisation, the Disco
meta-network and losses on synthetic inputs, and the policy-gradient rule."""

import jax
import jax.numpy as jnp
import pytest

from disco_rl import agent as agent_lib
from disco_rl import types
from disco_rl.update_rules import disco
from disco_rl.update_rules import policy_gradient

pytestmark = pytest.mark.golden


def _disco_rule():
  return disco.DiscoUpdateRule(**agent_lib.get_settings_disco().update_rule)


def test_disco_init_params_and_state(golden, load_golden):
  case = load_golden('disco_init')
  params, rnn_state = _disco_rule().init_params(
      jax.random.PRNGKey(case.meta['seed']))
  golden.assert_close(params, case, 'params')
  golden.assert_close(rnn_state, case, 'rnn_state')
  assert sum(x.size for x in jax.tree.leaves(params)) == 754_778


def test_disco_103_has_the_meta_network_tree(disco_103_params):
  params, _ = jax.eval_shape(_disco_rule().init_params, jax.random.PRNGKey(0))
  want = jax.tree.map(lambda x: (x.shape, x.dtype), params)
  got = jax.tree.map(lambda x: (x.shape, x.dtype), disco_103_params)
  assert got == want


def _synthetic_inputs(case) -> tuple[types.UpdateRuleInputs, dict]:
  x = case.subtree('inputs')
  inputs = types.UpdateRuleInputs(
      observations=jnp.asarray(x['observations']),
      actions=jnp.asarray(x['actions']),
      rewards=jnp.asarray(x['rewards']),
      is_terminal=jnp.asarray(x['is_terminal']),
      agent_out=jax.tree.map(jnp.asarray, x['agent_out']),
      behaviour_agent_out=jax.tree.map(jnp.asarray, x['behaviour_agent_out']),
  )
  return inputs, jax.tree.map(jnp.asarray, x['target_out'])


@pytest.mark.weights
def test_disco_meta_net_three_calls(golden, load_golden, disco_103_params):
  """Jitted: op-by-op execution of the meta-network takes minutes on a CPU."""
  case = load_golden('meta_net')
  rule = _disco_rule()
  inputs, target_out = _synthetic_inputs(case)
  hyper_params = agent_lib.get_settings_disco().hyper_params.to_dict()
  unroll_policy_fn = lambda *_: (target_out, {})

  def call(meta_state, i):
    params = {'lin': {'w': jnp.ones((2, 2)) * (i + 2)}}
    rollout = inputs.replace(rewards=inputs.rewards * (i + 1))
    meta_out, meta_state = rule.unroll_meta_net(
        disco_103_params, params, {}, meta_state, rollout, hyper_params,
        unroll_policy_fn, jax.random.PRNGKey(0), axis_name=None)
    loss, log = rule.agent_loss(rollout, meta_out, hyper_params,
                                backprop=False)
    loss_no_meta, log_no_meta = rule.agent_loss_no_meta(rollout, meta_out,
                                                        hyper_params)
    out = dict(meta_out=meta_out, meta_state=meta_state, loss_per_step=loss,
               loss_no_meta_per_step=loss_no_meta,
               log={**log, **log_no_meta})
    return meta_state, out

  call = jax.jit(call, static_argnums=1)
  meta_state = rule.init_meta_state(
      jax.random.PRNGKey(case.meta['seed']), {'lin': {'w': jnp.ones((2, 2))}})
  for i in range(3):
    meta_state, out = call(meta_state, i)
    golden.assert_close(out, case, f'out|{i}')


@pytest.mark.parametrize('normalize', [True, False])
def test_policy_gradient_rule(golden, load_golden, normalize):
  case = load_golden('policy_gradient')
  x = case.subtree('inputs')
  rollout = types.UpdateRuleInputs(
      observations=jnp.zeros(x['actions'].shape),
      actions=jnp.asarray(x['actions']),
      rewards=jnp.asarray(x['rewards']),
      is_terminal=jnp.asarray(x['is_terminal']),
      agent_out={'logits': jnp.asarray(x['logits'])},
      value_out=types.ValueOuts(adv=jnp.asarray(x['adv']),
                                normalized_adv=jnp.asarray(
                                    x['normalized_adv'])),
  )
  rule = policy_gradient.PolicyGradientUpdate(normalize_adv=normalize)
  loss, _, log = rule(
      meta_params=rule.init_params(jax.random.PRNGKey(0))[0], params={},
      state={}, rollout=rollout, hyper_params={}, meta_state={},
      unroll_policy_fn=None, rng=jax.random.PRNGKey(0), axis_name=None)
  golden.assert_close(dict(loss_per_step=loss, log=log), case,
                      f'out|{normalize}')
