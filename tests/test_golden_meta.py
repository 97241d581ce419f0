# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Parity with the upstream's meta-gradient of Disco103 (meta_train notebook,
`calculate_meta_gradient`, one agent, no pmap)."""

import functools

import haiku as hk
import jax
import jax.numpy as jnp
import optax
import pytest

import golden_cases
from disco_rl import agent as agent_lib
from disco_rl import meta_train
from disco_rl import types
from disco_rl.environments.wrappers import batched_jittable_env

pytestmark = [pytest.mark.golden, pytest.mark.weights]


@pytest.fixture(scope='module')
def case(load_golden):
  return load_golden('meta_gradient')


@pytest.fixture(scope='module')
def member(case):
  meta = case.meta
  vf = meta['value_fn']
  value_fn_config = types.ValueFnConfig(
      net=vf['net'],
      net_args=dict(dense=tuple(vf['dense']),
                    head_w_init_std=vf['head_w_init_std'], action_spec=()),
      learning_rate=vf['learning_rate'],
      max_abs_update=vf['max_abs_update'],
      discount_factor=vf['discount_factor'],
      td_lambda=vf['td_lambda'],
      outer_value_cost=vf['outer_value_cost'],
  )
  env = meta_train.catch_env(meta['batch'], rows=meta['mg_rows'],
                             columns=meta['mg_cols'])
  return meta_train.MetaTrainAgent(
      batch_size_per_device=meta['batch'],
      agent_settings=golden_cases.settings_from_case(meta),
      value_fn_config=value_fn_config,
      axis_name=None,
      env=env)


def _state_from(tree) -> meta_train.MetaTrainState:
  """Rebuilds the recorded agent state (golden trees are plain dicts)."""
  as_jnp = lambda t: jax.tree.map(jnp.asarray, t)
  learner = tree['learner_state']
  adam = learner['opt_state']['0']
  value = tree['value_state']
  value_adam = value['opt_state']['0']
  ema = lambda d: types.EmaState(**as_jnp(d))
  meta_state = as_jnp(learner['meta_state'])
  meta_state['adv_ema_state'] = ema(learner['meta_state']['adv_ema_state'])
  meta_state['td_ema_state'] = ema(learner['meta_state']['td_ema_state'])
  rnn = learner['meta_state']['rnn_state']['lstm']['meta_rnn_state']
  meta_state['rnn_state'] = {'lstm': {'meta_rnn_state': hk.LSTMState(
      hidden=jnp.asarray(rnn['hidden']), cell=jnp.asarray(rnn['cell']))}}
  adam_state = lambda a: (optax.ScaleByAdamState(
      count=jnp.asarray(a['count']), mu=as_jnp(a['mu']), nu=as_jnp(a['nu'])),
                          optax.EmptyState(), optax.EmptyState())
  return meta_train.MetaTrainState(
      learner_state=agent_lib.LearnerState(
          params=as_jnp(learner['params']),
          opt_state=adam_state(adam),
          meta_state=meta_state),
      actor_state={},
      value_state=types.ValueState(
          params=as_jnp(value['params']), state={},
          opt_state=adam_state(value_adam),
          adv_ema_state=ema(value['adv_ema_state']),
          td_ema_state=ema(value['td_ema_state'])),
      env_state=jittable_env_state(tree['env_state']),
      env_timestep=types.EnvironmentTimestep(**as_jnp(tree['env_timestep'])),
  )


def jittable_env_state(tree):
  return batched_jittable_env.EnvState(state=jnp.asarray(tree['state']),
                                       rng=jnp.asarray(tree['rng']))


def test_init_state(golden, case, member):
  state = member.init_state(jax.random.PRNGKey(case.meta['seed']))
  golden.assert_close(state, case, 'inputs|init_state')


def test_meta_gradient(golden, case, member, disco_103_params):
  state = _state_from(case.subtree('inputs|state'))
  golden.assert_close(state, case, 'inputs|state')
  train = golden_cases.rollout_from(case.subtree('inputs|train'))
  valid = golden_cases.rollout_from(case.subtree('inputs|valid'))
  rng = golden_cases.as_key(case.arrays['inputs|rng'])
  grad_fn = jax.jit(functools.partial(meta_train.calculate_meta_gradient,
                                      agent=member, axis_name=None))
  grads, (new_state, metrics, meta_log) = grad_fn(disco_103_params, state,
                                                  train, valid, rng)
  golden.assert_close(meta_log, case, 'out|meta_log')
  golden.assert_close(metrics, case, 'out|metrics')
  golden.assert_close(new_state, case, 'out|new_state')
  golden.assert_close(grads, case, 'out|meta_grads')
