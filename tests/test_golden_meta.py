# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Parity with the upstream's meta-gradient of Disco103 (meta_train notebook,
`calculate_meta_gradient`, one agent, no pmap), against each golden reference.

The upstream recorded the gradient compiled, so both references are compared
with one compiled gradient function.
"""

import functools

import jax
import numpy as np
import pytest

import golden_cases
from disco_rl import meta_train
from disco_rl import types

pytestmark = [pytest.mark.golden, pytest.mark.weights]


@pytest.fixture(params=golden_cases.REFERENCES, ids=lambda r: r.name)
def case(request, golden, golden_dir):
  return golden_cases.load_case(golden, golden_dir, request.param,
                                'meta_gradient')


@pytest.fixture(scope='module')
def meta(golden, golden_dir):
  """The recorded settings (the same in each reference)."""
  return golden_cases.load_case(golden, golden_dir, golden_cases.CURRENT_JAX,
                                'meta_gradient').meta


@pytest.fixture(scope='module')
def member(meta):
  """The meta-training agent, built from the recorded settings."""
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


@pytest.fixture(scope='module')
def init_state(member, meta):
  return member.init_state(jax.random.PRNGKey(meta['seed']))


@pytest.fixture(scope='module')
def grad_fn(member):
  """The compiled meta-gradient, shared by both references."""
  return jax.jit(functools.partial(meta_train.calculate_meta_gradient,
                                   agent=member, axis_name=None))


def _state_before_gradient(state, case):
  """The agent state the upstream took its gradient from.

  The recording acted with the initial agent (inputs|train, inputs|valid)
  before taking the gradient, which moved only the environment; so the state
  is our own initial state (compared with the record in test_init_state)
  with the recorded environment state and timestep put in.
  """
  recorded = case.under('inputs|state')
  initial = case.under('inputs|init_state')
  moved = sorted({k.split('|')[0] for k in recorded
                  if not np.array_equal(recorded[k], initial[k])})
  assert moved == ['env_state', 'env_timestep'], moved
  return state.replace(
      env_state=golden_cases.from_golden(state.env_state, case,
                                         'inputs|state|env_state'),
      env_timestep=golden_cases.from_golden(state.env_timestep, case,
                                            'inputs|state|env_timestep'))


def test_init_state(case, init_state):
  case.check(init_state, 'inputs|init_state')


def test_meta_gradient(case, init_state, grad_fn, disco_103_params):
  state = _state_before_gradient(init_state, case)
  train = golden_cases.rollout_from(case.subtree('inputs|train'))
  valid = golden_cases.rollout_from(case.subtree('inputs|valid'))
  rng = golden_cases.as_key(case.arrays['inputs|rng'])
  grads, (new_state, metrics, meta_log) = grad_fn(disco_103_params, state,
                                                  train, valid, rng)
  case.check(meta_log, 'out|meta_log')
  case.check(metrics, 'out|metrics')
  case.check(new_state, 'out|new_state')
  case.check(grads, 'out|meta_grads')
