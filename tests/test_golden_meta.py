# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Parity with the upstream's meta-gradient of Disco103 (meta_train notebook,
`calculate_meta_gradient`, one agent, no pmap), against each golden reference.

The upstream recorded the gradient compiled, so both references are compared
with one compiled gradient function.

Against current_jax, some meta-gradient leaves get a tolerance of their own
(`LEAF_RTOL`, `DIRECTION_ONLY`): their float32 values move with the CPU's
instruction set, in the upstream itself. The meta-gradient passes back
through the inner Adam steps, whose update m / (sqrt(v) + eps) (v without
gradient) scales what flows back into each agent-gradient element g by about
1 / (|g| + eps): up to 1e8 for the thousands of elements of the agent's y
and z heads whose |g| is 1e-8 to 1e-6. That amplifies one-ulp rounding
differences (with or without fused multiply-adds, in XLA's element-wise code
and its exp/log/tanh/logistic approximations; the matrix products are
bit-identical) into the meta-network's y/z heads (`lstm/linear_2`,
`lstm/linear_3`) and, less, into the layers below them. Measured on a 2-core
AMD EPYC (AVX2 + FMA, no AVX-512): the upstream's own meta-gradient on these
inputs (patched only as golden/README.md says, compiled) is 0.50-0.56 of the
leaf's norm off current_jax on the y/z heads at the machine's default,
0.87-0.96 with XLA_FLAGS=--xla_cpu_max_isa=AVX or SSE4_2 (0.26 between its own
AVX2 and AVX runs; XLA's optimisation level 0 moves it by only 6.8e-3), and
0.7-4.7% on 15 other leaves (8.1% with AVX); the port is within 1.6e-7 of
the upstream there at the default, 1e-2 with AVX. In float64 the upstream's
meta-gradient moves by 2.5e-10 between instruction sets, and every float32
result (the golden one too: 0.38) is 0.11-0.38 off it on the y/z heads; no
XLA flag on that machine reproduces the golden file. So:

- `LEAF_RTOL`: twice the largest movement of the upstream's own leaf against
  current_jax over those runs (AVX2, AVX, SSE4_2, optimisation level 0),
  rounded up to one significant digit; the port's largest there is within it.
- `DIRECTION_ONLY`, the y/z heads: the golden value pins down their
  direction, not their size (the float32 norms there are 0.67-1.30 times the
  float64 one): cosine with the golden leaf >= 0.9 (measured >= 0.965,
  upstream and port, every instruction set) and norm within a factor of 3 of
  it (measured 1.45-1.92).

Every other leaf keeps the reference's 5e-3.
"""

import functools
import re

import golden_cases
import jax
import numpy as np
import pytest

from disco_rl import meta_objective
from disco_rl import types

pytestmark = [pytest.mark.golden, pytest.mark.weights]

# Leaf tolerances of the meta-gradient leaves that the instruction set moves
# (module docstring), against current_jax; measured movement of the
# upstream's own leaf in the comment.
LEAF_RTOL = {
  'lstm/linear|b': 0.2,  # 0.081
  'lstm/linear_4|w': 6e-3,  # 2.9e-3
  'lstm/lstm/linear|b': 0.07,  # 0.030
  'lstm/lstm/linear|w': 0.07,  # 0.032
  'lstm/mlp/~/linear_0|b': 0.03,  # 0.014
  'lstm/mlp/~/linear_0|w': 0.03,  # 0.014
  'lstm/mlp/~/linear_1|b': 0.03,  # 0.014
  'lstm/mlp/~/linear_1|w': 0.03,  # 0.014
  'lstm/mlp_1/~/linear_0|b': 0.03,  # 0.012
  'lstm/mlp_1/~/linear_0|w': 0.03,  # 0.013
  'lstm/mlp_1/~/linear_1|b': 0.03,  # 0.012
  'lstm/mlp_1/~/linear_1|w': 0.03,  # 0.012
  'lstm/sequential/conv1_d|b': 0.05,  # 0.021
  'lstm/sequential/conv1_d|w': 0.06,  # 0.028
  'lstm/sequential/conv1_d_1|w': 0.02,  # 5.2e-3
  'lstm/sequential_1/conv1_d|b': 0.03,  # 0.015
  'lstm/sequential_1/conv1_d|w': 0.04,  # 0.017
}
# The y/z heads: direction only (module docstring); measured movement of the
# upstream's own leaf 0.50-0.96 of its norm.
DIRECTION_ONLY = (
  'lstm/linear_2|b',
  'lstm/linear_2|w',
  'lstm/linear_3|b',
  'lstm/linear_3|w',
)
MIN_COS = 0.9
MAX_NORM_RATIO = 3.0


@pytest.fixture(params=golden_cases.REFERENCES, ids=lambda r: r.name)
def case(request, golden, golden_dir):
  return golden_cases.load_case(
    golden, golden_dir, request.param, 'meta_gradient'
  )


@pytest.fixture(scope='module')
def meta(golden, golden_dir):
  """The recorded settings (the same in each reference)."""
  return golden_cases.load_case(
    golden, golden_dir, golden_cases.CURRENT_JAX, 'meta_gradient'
  ).meta


@pytest.fixture(scope='module')
def member(meta):
  """The meta-training agent, built from the recorded settings."""
  vf = meta['value_fn']
  value_fn_config = types.ValueFnConfig(
    net=vf['net'],
    net_args=dict(
      dense=tuple(vf['dense']),
      head_w_init_std=vf['head_w_init_std'],
      action_spec=(),
    ),
    learning_rate=vf['learning_rate'],
    max_abs_update=vf['max_abs_update'],
    discount_factor=vf['discount_factor'],
    td_lambda=vf['td_lambda'],
    outer_value_cost=vf['outer_value_cost'],
  )
  env = meta_objective.catch_env(
    meta['batch'], rows=meta['mg_rows'], columns=meta['mg_cols']
  )
  return meta_objective.MetaTrainAgent(
    batch_size_per_device=meta['batch'],
    agent_settings=golden_cases.settings_from_case(meta),
    value_fn_config=value_fn_config,
    axis_name=None,
    env=env,
  )


@pytest.fixture(scope='module')
def init_state(member, meta):
  return jax.jit(member.init_state)(jax.random.PRNGKey(meta['seed']))


@pytest.fixture(scope='module')
def grad_fn(member):
  """The compiled meta-gradient, shared by both references."""
  return jax.jit(
    functools.partial(
      meta_objective.calculate_meta_gradient, agent=member, axis_name=None
    )
  )


def _state_before_gradient(state, case):
  """The agent state the upstream took its gradient from.

  The recording acted with the initial agent (inputs|train, inputs|valid)
  before taking the gradient, which moved only the environment; so the state
  is our own initial state (compared with the record in test_init_state)
  with the recorded environment state and timestep put in.
  """
  recorded = case.under('inputs|state')
  initial = case.under('inputs|init_state')
  moved = sorted(
    {
      k.split('|')[0]
      for k in recorded
      if not np.array_equal(recorded[k], initial[k])
    }
  )
  assert moved == ['env_state', 'env_timestep'], moved
  return state.replace(
    env_state=golden_cases.from_golden(
      state.env_state, case, 'inputs|state|env_state'
    ),
    env_timestep=golden_cases.from_golden(
      state.env_timestep, case, 'inputs|state|env_timestep'
    ),
  )


def test_init_state(case, init_state):
  case.check(init_state, 'inputs|init_state')


# Compiled with XLA's optimisations even in the default run (conftest.py):
# without them one leaf of the meta-LSTM's convolution
# (`lstm/~/meta_lstm/~unroll/sequential/conv1_d`) moved by 1.5-1.8% of its
# norm on an AVX-512 CPU (2026-12-04), past its 5e-3.
@pytest.mark.optimised
def test_meta_gradient(case, init_state, grad_fn, disco_103_params):
  state = _state_before_gradient(init_state, case)
  train = golden_cases.rollout_from(case.subtree('inputs|train'))
  valid = golden_cases.rollout_from(case.subtree('inputs|valid'))
  rng = golden_cases.as_key(case.arrays['inputs|rng'])
  grads, (new_state, metrics, meta_log) = grad_fn(
    disco_103_params, state, train, valid, rng
  )
  case.check(meta_log, 'out|meta_log')
  case.check(metrics, 'out|metrics')
  case.check(new_state, 'out|new_state')
  if case.reference.leaf_rtol is None:  # Elementwise only.
    case.check(grads, 'out|meta_grads')
    return
  case.check(
    grads,
    'out|meta_grads',
    leaf_rtol={**LEAF_RTOL, **dict.fromkeys(DIRECTION_ONLY)},
  )
  for key in DIRECTION_ONLY:
    module, leaf = key.split('|')
    case.check_direction(
      grads[module][leaf], f'out|meta_grads|{key}', MIN_COS, MAX_NORM_RATIO
    )


def _golden_grads(case) -> dict:
  """The recorded meta-gradient as {module: {'w': ..., 'b': ...}}."""
  grads = {}
  for key, value in case.under('out|meta_grads').items():
    module, leaf = key.split('|')
    grads.setdefault(module, {})[leaf] = value.copy()
  return grads


def _meta_grad_problems(case, grads) -> list[str]:
  """test_meta_gradient's checks of the meta-gradient, as failure messages."""
  problems = case.compare(
    grads,
    'out|meta_grads',
    leaf_rtol={**LEAF_RTOL, **dict.fromkeys(DIRECTION_ONLY)},
  )
  for key in DIRECTION_ONLY:
    module, leaf = key.split('|')
    try:
      case.check_direction(
        grads[module][leaf], f'out|meta_grads|{key}', MIN_COS, MAX_NORM_RATIO
      )
    except AssertionError as e:
      problems.append(str(e))
  return problems


@pytest.mark.parametrize(
  'change, expected',
  [
    (
      lambda g: g['lstm/linear_2'].update(b=0 * g['lstm/linear_2']['b']),
      r'direction out\|meta_grads\|lstm/linear_2\|b: cos 0',
    ),
    (
      lambda g: g['lstm/linear_3'].update(w=-g['lstm/linear_3']['w']),
      r'direction out\|meta_grads\|lstm/linear_3\|w: cos -1',
    ),
    (
      lambda g: g['lstm/linear_3'].update(b=4 * g['lstm/linear_3']['b']),
      r'lstm/linear_3\|b: cos 1 .* norm ratio 4',
    ),
    (
      lambda g: g['lstm/linear_2'].update(
        b=np.roll(g['lstm/linear_2']['b'], 7)
      ),
      r'direction out\|meta_grads\|lstm/linear_2\|b',
    ),
    (
      lambda g: g['lstm/linear'].update(b=1.3 * g['lstm/linear']['b']),
      r'lstm/linear\|b: relative error of the whole leaf 0.3 > 0.2',
    ),
    (
      lambda g: g['lstm/linear'].update(w=1.01 * g['lstm/linear']['w']),
      r'lstm/linear\|w: relative error of the whole leaf 0.01 > 0.005',
    ),
  ],
  ids=[
    'y_head_zero',
    'z_head_sign',
    'z_head_x4',
    'y_head_shuffled',
    'noisy_leaf_past_its_tolerance',
    'other_leaf_past_5e-3',
  ],
)
def test_the_meta_gradient_tolerances_still_catch_a_wrong_gradient(
  golden, golden_dir, change, expected
):
  """The per-leaf tolerances and the direction check: the recorded gradient
  passes them, a wrong one (its y head zero, z head flipped or scaled,
  a leaf past its tolerance) does not."""
  case = golden_cases.load_case(
    golden, golden_dir, golden_cases.CURRENT_JAX, 'meta_gradient'
  )
  assert not _meta_grad_problems(case, _golden_grads(case))
  grads = _golden_grads(case)
  change(grads)
  problems = _meta_grad_problems(case, grads)
  assert len(problems) == 1 and re.search(expected, problems[0]), problems
