# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Tests of `disco_rl.value_fns.value_utils`.

Numbers are checked against small references written here with numpy loops
(never rlax), in float64.
"""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco_rl import types
from disco_rl import utils
from disco_rl.value_fns import value_utils

_T, _B, _A = 5, 3, 4
_EPS_H = 1e-3  # eps of rlax's signed hyperbolic pair.


# ----------------------------------------------------------------------------
# numpy references.


def _np_log_softmax(logits):
  logits = np.asarray(logits, np.float64)
  shifted = logits - logits.max(axis=-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _np_squash(x):
  x = np.asarray(x, np.float64)
  return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + _EPS_H * x


def _np_unsquash(y):
  """Solves sign(x) (sqrt(|x| + 1) - 1) + eps x = y for x."""
  y = np.asarray(y, np.float64)
  # With u = sqrt(|x| + 1): eps u^2 + u - (1 + eps + |y|) = 0.
  u = (-1.0 + np.sqrt(1.0 + 4.0 * _EPS_H * (1.0 + _EPS_H + np.abs(y)))) / (
    2.0 * _EPS_H
  )
  return np.sign(y) * (u * u - 1.0)


def _np_vtrace(target_values, rewards, env_discounts, rho, discount, lambda_):
  """IMPALA V-trace targets and rlax-style lambda PG advantages, per column."""
  tv = np.asarray(target_values, np.float64)
  num_t, num_b = rewards.shape
  gamma = env_discounts * discount
  vs = np.zeros((num_t + 1, num_b))
  adv = np.zeros((num_t, num_b))
  for b in range(num_b):
    vs[num_t, b] = tv[num_t, b]
    for t in reversed(range(num_t)):
      clip = min(rho[t, b], 1.0)
      delta = clip * (rewards[t, b] + gamma[t, b] * tv[t + 1, b] - tv[t, b])
      correction = gamma[t, b] * lambda_ * clip * (vs[t + 1, b] - tv[t + 1, b])
      vs[t, b] = tv[t, b] + delta + correction
    for t in range(num_t):
      if t == num_t - 1:
        bootstrap = tv[t + 1, b]
      else:
        bootstrap = lambda_ * vs[t + 1, b] + (1 - lambda_) * tv[t + 1, b]
      q_est = rewards[t, b] + gamma[t, b] * bootstrap
      adv[t, b] = min(rho[t, b], 1.0) * (q_est - tv[t, b])
  return vs[:-1], adv


def _np_retrace(
  target_q_taken, target_values, rewards, env_discounts, rho, discount, lambda_
):
  """G_t = r_t + g_t (V_{t+1} + c_{t+1} (G_{t+1} - Q_{t+1})), G_T := V_T."""
  tv = np.asarray(target_values, np.float64)
  num_t, num_b = rewards.shape
  gamma = env_discounts * discount
  c = lambda_ * np.minimum(rho, 1.0)
  g = np.zeros((num_t, num_b))
  for b in range(num_b):
    g[num_t - 1, b] = rewards[num_t - 1, b] + gamma[num_t - 1, b] * tv[num_t, b]
    for t in reversed(range(num_t - 1)):
      trace = c[t + 1, b] * (g[t + 1, b] - target_q_taken[t + 1, b])
      g[t, b] = rewards[t, b] + gamma[t, b] * (tv[t + 1, b] + trace)
  return g


def _np_take(q, actions):
  """q[t, b, actions[t, b]] for the first len(actions) steps."""
  num_t, num_b = actions.shape
  out = np.zeros((num_t, num_b))
  for t in range(num_t):
    for b in range(num_b):
      out[t, b] = q[t, b, actions[t, b]]
  return out


class _NpEma:
  """Hand-rolled debiased moving average, mirroring utils.MovingAverage."""

  def __init__(self, decay, eps):
    self.decay, self.eps = decay, eps
    self.m1 = self.m2 = 0.0
    self.decay_product = 1.0

  def update(self, x):
    x = np.asarray(x, np.float64)
    self.m1 = self.decay * self.m1 + (1 - self.decay) * x.mean()
    self.m2 = self.decay * self.m2 + (1 - self.decay) * (x * x).mean()
    self.decay_product *= self.decay

  def normalize(self, x, subtract_mean):
    mean = self.m1 / (1 - self.decay_product)
    var = max(self.m2 / (1 - self.decay_product) - mean * mean, 0.0)
    centred = x - mean if subtract_mean else x
    return centred / (np.sqrt(var + 1e-12) + self.eps)


def _random_case(seed, num_t=_T, num_b=_B, num_a=_A):
  rng = np.random.default_rng(seed)
  f32 = lambda x: np.asarray(x, np.float32)
  env_discounts = np.ones((num_t, num_b))
  env_discounts[1, 0] = 0.0
  env_discounts[3, 2] = 0.0
  return dict(
    rewards=f32(rng.normal(size=(num_t, num_b))),
    env_discounts=f32(env_discounts),
    # Spans both sides of 1 so that clipping matters.
    rho=f32(rng.uniform(0.2, 2.5, size=(num_t, num_b))),
    values=f32(rng.normal(size=(num_t + 1, num_b))),
    target_values=f32(rng.normal(size=(num_t + 1, num_b))),
    q_values=f32(rng.normal(size=(num_t + 1, num_b, num_a))),
    target_q_values=f32(rng.normal(size=(num_t + 1, num_b, num_a))),
    actions=rng.integers(0, num_a, size=(num_t, num_b)).astype(np.int32),
  )


# ----------------------------------------------------------------------------
# Estimators.


class EstimatorsTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_vtrace_matches_numpy(self):
    case = _random_case(0)
    discount, lambda_ = 0.9, 0.8
    fn = self.variant(
      lambda c: value_utils.estimate_values(
        c['rewards'],
        c['actions'],
        c['env_discounts'],
        c['rho'],
        c['values'],
        c['target_values'],
        discount,
        lambda_,
      )
    )
    out = fn(case)
    vs, adv = _np_vtrace(
      case['target_values'],
      case['rewards'],
      case['env_discounts'],
      case['rho'],
      discount,
      lambda_,
    )
    np.testing.assert_allclose(out.value_target, vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.adv, adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.td, vs - case['values'][:-1], atol=1e-5)
    np.testing.assert_array_equal(out.rho, case['rho'])
    np.testing.assert_array_equal(out.value, case['values'])
    np.testing.assert_array_equal(out.target_value, case['target_values'])
    # Q fields are zero placeholders.
    self.assertEqual(out.qv_adv.shape, (_T, _B))
    self.assertEqual(out.q_target.dtype, out.value_target.dtype)
    for field in (out.qv_adv, out.q_value, out.q_target, out.q_td):
      np.testing.assert_array_equal(field, 0)

  @chex.variants(with_jit=True, without_jit=True)
  def test_vtrace_on_policy_lambda_one_is_discounted_return(self):
    # rho = 1, lambda = 1: the target is the bootstrapped discounted return.
    case = _random_case(1)
    case['rho'] = np.ones_like(case['rho'])
    discount = 0.7
    out = self.variant(
      lambda c: value_utils.estimate_values(
        c['rewards'],
        c['actions'],
        c['env_discounts'],
        c['rho'],
        c['values'],
        c['target_values'],
        discount,
        1.0,
      )
    )(case)
    g = case['target_values'][-1].astype(np.float64)
    expected = np.zeros((_T, _B))
    for t in reversed(range(_T)):
      g = case['rewards'][t] + discount * case['env_discounts'][t] * g
      expected[t] = g
    np.testing.assert_allclose(out.value_target, expected, atol=1e-5)

  @chex.variants(with_jit=True, without_jit=True)
  def test_retrace_matches_numpy(self):
    case = _random_case(2)
    discount, lambda_ = 0.95, 0.7
    out = self.variant(
      lambda c: value_utils.estimate_q_values(
        c['rewards'],
        c['actions'],
        c['env_discounts'],
        c['rho'],
        c['values'],
        c['target_values'],
        c['q_values'],
        c['target_q_values'],
        discount,
        lambda_,
      )
    )(case)
    target_q_taken = _np_take(case['target_q_values'], case['actions'])
    g = _np_retrace(
      target_q_taken,
      case['target_values'],
      case['rewards'],
      case['env_discounts'],
      case['rho'],
      discount,
      lambda_,
    )
    tv = case['target_values'].astype(np.float64)
    adv = g - tv[:-1]
    v_target = tv[:-1] + np.minimum(case['rho'], 1.0) * adv
    np.testing.assert_allclose(out.q_target, g, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.adv, adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.value_target, v_target, atol=1e-5)
    np.testing.assert_allclose(
      out.td, v_target - case['values'][:-1], atol=1e-5
    )
    np.testing.assert_allclose(
      out.q_td, g - _np_take(case['q_values'], case['actions']), atol=1e-5
    )
    np.testing.assert_allclose(
      out.qv_adv, case['target_q_values'] - tv[..., None], atol=1e-6
    )
    np.testing.assert_array_equal(out.q_value, case['q_values'])
    np.testing.assert_array_equal(out.target_q_value, case['target_q_values'])

  def test_retrace_exact_q_gives_discounted_return(self):
    # c = 1 and V(s_{t+1}) = Q(s_{t+1}, a_{t+1}): corrections telescope and
    # the target is the bootstrapped discounted return.
    case = _random_case(3)
    case['rho'] = np.full_like(case['rho'], 1.7)  # clipped to 1.
    tq = case['target_q_values'].copy()
    for t in range(_T):
      for b in range(_B):
        tq[t, b, case['actions'][t, b]] = case['target_values'][t, b]
    discount = 0.8
    out = jax.jit(value_utils.estimate_q_values)(
      case['rewards'],
      case['actions'],
      case['env_discounts'],
      case['rho'],
      case['values'],
      case['target_values'],
      case['q_values'],
      tq,
      discount,
      1.0,
    )
    g = case['target_values'][-1].astype(np.float64)
    expected = np.zeros((_T, _B))
    for t in reversed(range(_T)):
      g = case['rewards'][t] + discount * case['env_discounts'][t] * g
      expected[t] = g
    np.testing.assert_allclose(out.q_target, expected, atol=1e-5)

  def test_retrace_target_has_no_gradient(self):
    case = _random_case(4)

    def total(tq):
      out = value_utils.estimate_q_values(
        case['rewards'],
        case['actions'],
        case['env_discounts'],
        case['rho'],
        case['values'],
        case['target_values'],
        case['q_values'],
        tq,
      )
      return jnp.sum(out.q_target)

    grad = jax.jit(jax.grad(total))(jnp.asarray(case['target_q_values']))
    np.testing.assert_array_equal(grad, 0.0)


# ----------------------------------------------------------------------------
# Network outputs, two-hot, importance weights.


class TransformsTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_two_hot_round_trip(self):
    max_abs, num_bins = 5.0, 11
    rng = np.random.default_rng(5)
    scalars = np.concatenate(
      [
        rng.uniform(-max_abs, max_abs, size=40),
        np.linspace(-max_abs, max_abs, num_bins),  # exactly on bins
      ]
    ).astype(np.float32)
    to_probs = self.variant(
      lambda v: value_utils.scalar_to_categorical_value(num_bins, v, max_abs)
    )
    probs = np.asarray(to_probs(scalars))
    self.assertEqual(probs.shape, (scalars.size, num_bins))
    self.assertTrue(np.all(probs >= -1e-7))
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
    for row in probs:
      nonzero = np.flatnonzero(row > 1e-7)
      self.assertLessEqual(len(nonzero), 2)
      if len(nonzero) == 2:
        self.assertEqual(nonzero[1] - nonzero[0], 1)
    # Expected value under the two-hot distribution, computed by hand...
    support = np.linspace(-max_abs, max_abs, num_bins)
    np.testing.assert_allclose(probs @ support, scalars, atol=1e-4)
    # ...and through the logits path.
    to_scalar = self.variant(
      lambda p: value_utils.value_logits_to_scalar(jnp.log(p), max_abs)
    )
    np.testing.assert_allclose(to_scalar(probs), scalars, atol=1e-4)

  def test_two_hot_clips_out_of_range(self):
    probs = jax.jit(
      value_utils.scalar_to_categorical_value, static_argnums=(0, 2)
    )(7, jnp.array([-9.0, 9.0]), 3.0)
    np.testing.assert_allclose(probs[0, 0], 1.0, atol=1e-5)
    np.testing.assert_allclose(probs[1, -1], 1.0, atol=1e-5)

  def test_value_logits_to_scalar_is_softmax_expectation(self):
    logits = (
      np.random.default_rng(6).normal(size=(_T, _B, 9)).astype(np.float32)
    )
    expected = np.exp(_np_log_softmax(logits)) @ np.linspace(-2.0, 2.0, 9)
    to_scalar = jax.jit(lambda x: value_utils.value_logits_to_scalar(x, 2.0))
    np.testing.assert_allclose(to_scalar(logits), expected, atol=1e-5)

  @chex.variants(with_jit=True, without_jit=True)
  def test_signed_hyperbolic_round_trip_scalar(self):
    values = np.random.default_rng(7).uniform(-20, 20, size=(_T, _B))
    head = _np_squash(values)[..., None].astype(np.float32)
    read = self.variant(
      lambda x: value_utils.get_values_from_net_outs(
        x, categorical_value=False, max_abs_value=None, nonlinear_transform=True
      )
    )
    np.testing.assert_allclose(read(head), values, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(
      read(head), _np_unsquash(head[..., 0]), rtol=1e-3, atol=1e-3
    )

  def test_signed_hyperbolic_round_trip_categorical(self):
    max_abs, num_bins = 6.0, 41
    values = np.random.default_rng(8).uniform(-30, 30, size=(_T, _B))

    @jax.jit
    def round_trip(squashed):
      probs = value_utils.scalar_to_categorical_value(
        num_bins, squashed, max_abs
      )
      return value_utils.get_values_from_net_outs(
        jnp.log(probs),
        categorical_value=True,
        max_abs_value=max_abs,
        nonlinear_transform=True,
      )

    recovered = round_trip(jnp.asarray(_np_squash(values), jnp.float32))
    np.testing.assert_allclose(recovered, values, rtol=1e-3, atol=2e-3)

  def test_extract_values_from_q_is_policy_expectation(self):
    rng = np.random.default_rng(9)
    q_head = rng.normal(size=(_T, _B, _A, 1)).astype(np.float32)
    logits = rng.normal(size=(_T, _B, _A)).astype(np.float32)
    extract = jax.jit(
      lambda v, q, pi: value_utils.extract_scalar_values_from_net_out(
        v,
        q,
        pi,
        categorical_value=False,
        max_abs_value=None,
        nonlinear_transform=False,
      )
    )
    values, q_values = extract(None, q_head, logits)
    np.testing.assert_array_equal(q_values, q_head[..., 0])
    expected = (np.exp(_np_log_softmax(logits)) * q_head[..., 0]).sum(-1)
    np.testing.assert_allclose(values, expected, atol=1e-5)
    # With an explicit V head, V is read from it.
    v_head = rng.normal(size=(_T, _B, 1)).astype(np.float32)
    values, _ = extract(v_head, q_head, logits)
    np.testing.assert_array_equal(values, v_head[..., 0])

  @chex.variants(with_jit=True, without_jit=True)
  def test_importance_weight(self):
    rng = np.random.default_rng(10)
    pi = rng.normal(size=(_T, _B, _A)).astype(np.float32)
    mu = rng.normal(size=(_T, _B, _A)).astype(np.float32)
    actions = rng.integers(0, _A, size=(_T, _B)).astype(np.int32)
    rho = self.variant(value_utils.importance_weight)(pi, mu, actions)
    log_pi = _np_take(_np_log_softmax(pi), actions)
    log_mu = _np_take(_np_log_softmax(mu), actions)
    np.testing.assert_allclose(rho, np.exp(log_pi - log_mu), rtol=1e-5)

  def test_importance_weight_has_no_gradient(self):
    pi = jnp.ones((2, 2, 3)) * jnp.arange(3.0)
    actions = jnp.zeros((2, 2), jnp.int32)
    grad = jax.jit(
      jax.grad(
        lambda p: jnp.sum(
          value_utils.importance_weight(p, jnp.zeros_like(p), actions)
        )
      )
    )(pi)
    np.testing.assert_array_equal(grad, 0.0)


# ----------------------------------------------------------------------------
# Losses.


class LossesTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_value_loss_from_td_gradient(self):
    rng = np.random.default_rng(11)
    head = jnp.asarray(rng.normal(size=(_T, _B, 1)), jnp.float32)
    td = jnp.asarray(rng.normal(size=(_T, _B)), jnp.float32)

    def total(h, d):
      return jnp.sum(value_utils.value_loss_from_td(h, d))

    loss = self.variant(value_utils.value_loss_from_td)(head, td)
    np.testing.assert_allclose(loss, 0.5 * np.square(td), rtol=1e-5)
    grad_head, grad_td = self.variant(jax.grad(total, argnums=(0, 1)))(head, td)
    np.testing.assert_allclose(grad_head, -np.asarray(td)[..., None], rtol=1e-5)
    np.testing.assert_array_equal(grad_td, 0.0)

  def test_value_loss_from_target_categorical(self):
    rng = np.random.default_rng(12)
    max_abs, num_bins = 4.0, 9
    logits = rng.normal(size=(_T, _B, num_bins)).astype(np.float32)
    target = rng.uniform(-3, 3, size=(_T, _B)).astype(np.float32)

    @jax.jit
    def loss_and_probs(logits, target):
      loss = value_utils.value_loss_from_target(
        logits, target, categorical_value=True, max_abs_value=max_abs
      )
      probs = value_utils.scalar_to_categorical_value(num_bins, target, max_abs)
      return loss, probs

    loss, probs = loss_and_probs(logits, target)
    probs = np.asarray(probs)
    expected = -(probs * _np_log_softmax(logits)).sum(-1)
    np.testing.assert_allclose(loss, expected, rtol=1e-5, atol=1e-5)

  def test_value_loss_from_target_nonlinear_scalar(self):
    head = np.full((2, 3, 1), 0.5, np.float32)
    target = np.full((2, 3), 8.0, np.float32)
    loss = jax.jit(
      lambda h, t: value_utils.value_loss_from_target(
        h, t, nonlinear_transform=True
      )
    )(head, target)
    np.testing.assert_allclose(
      loss, 0.5 * (0.5 - _np_squash(8.0)) ** 2, rtol=1e-5
    )


# ----------------------------------------------------------------------------
# get_value_outs end to end.


def _actor_rollout(seed, num_t=6, num_b=2, num_a=3):
  rng = np.random.default_rng(seed)
  discounts = np.ones((num_t, num_b), np.float32)
  discounts[2, 1] = 0.0
  return types.ActorRollout(
    observations=np.zeros((num_t, num_b, 1), np.float32),
    actions=rng.integers(0, num_a, size=(num_t, num_b)).astype(np.int32),
    rewards=rng.normal(size=(num_t, num_b)).astype(np.float32),
    discounts=discounts,
    agent_outs={},
    states={},
    logits=rng.normal(size=(num_t, num_b, num_a)).astype(np.float32),
  )


def _update_inputs(seed, num_t=4, num_b=2, num_a=3, reward_steps=None):
  """UpdateRuleInputs with T transitions (T+1 states)."""
  rng = np.random.default_rng(seed)
  reward_steps = num_t if reward_steps is None else reward_steps
  is_terminal = np.zeros((reward_steps, num_b), np.float32)
  is_terminal[1, 0] = 1.0
  return types.UpdateRuleInputs(
    observations=np.zeros((num_t + 1, num_b, 1), np.float32),
    actions=rng.integers(0, num_a, size=(num_t + 1, num_b)).astype(np.int32),
    rewards=rng.normal(size=(reward_steps, num_b)).astype(np.float32),
    is_terminal=is_terminal,
    agent_out={},
    behaviour_agent_out={
      'logits': rng.normal(size=(num_t + 1, num_b, num_a)).astype(np.float32)
    },
  )


def _emas(decay=0.9, eps=1e-6):
  adv_fn = utils.MovingAverage(jnp.zeros(()), decay=decay, eps=eps)
  td_fn = utils.MovingAverage(jnp.zeros(()), decay=decay, eps=eps)
  return adv_fn, td_fn


class GetValueOutsTest(chex.TestCase):
  @chex.variants(with_jit=True)
  def test_state_value_path(self):
    num_t, num_b, num_a = 6, 2, 3
    rollout = _actor_rollout(13, num_t, num_b, num_a)
    rng = np.random.default_rng(14)
    head = rng.normal(size=(num_t, num_b, 1)).astype(np.float32)
    pi_logits = rng.normal(size=(num_t, num_b, num_a)).astype(np.float32)
    adv_fn, td_fn = _emas()

    @self.variant
    def run(head, rollout, pi_logits, adv_state, td_state):
      return value_utils.get_value_outs(
        value_net_out=head,
        q_net_out=None,
        target_value_net_out=None,
        target_q_net_out=None,
        rollout=rollout,
        pi_logits=pi_logits,
        discount=0.9,
        lambda_=0.8,
        nonlinear_transform=True,
        adv_ema_state=adv_state,
        adv_ema_fn=adv_fn,
        td_ema_state=td_state,
        td_ema_fn=td_fn,
      )

    out, adv_state, td_state = run(
      head, rollout, pi_logits, adv_fn.init_state(), td_fn.init_state()
    )
    n = num_t - 1
    self.assertEqual(out.value.shape, (num_t, num_b))
    for field in (
      'adv',
      'value_target',
      'td',
      'rho',
      'normalized_adv',
      'normalized_td',
      'qv_adv',
      'q_target',
      'q_td',
      'normalized_q_td',
      'normalized_qv_adv',
    ):
      self.assertEqual(getattr(out, field).shape, (n, num_b), field)
    np.testing.assert_allclose(adv_state.decay_product, 0.9, rtol=1e-6)
    np.testing.assert_allclose(td_state.decay_product, 0.9, rtol=1e-6)
    np.testing.assert_array_equal(out.normalized_q_td, 0.0)

    # Independent pieces: unsquashed V, rho from the actor's logits, V-trace
    # on the dropped-last rollout.
    values = _np_unsquash(head[..., 0])
    np.testing.assert_allclose(out.value, values, rtol=1e-3, atol=1e-3)
    acts = rollout.actions[:-1]
    rho = np.exp(
      _np_take(_np_log_softmax(pi_logits[:-1]), acts)
      - _np_take(_np_log_softmax(rollout.logits[:-1]), acts)
    )
    np.testing.assert_allclose(out.rho, rho, rtol=1e-5)
    vs, adv = _np_vtrace(
      np.asarray(out.value),
      rollout.rewards[:-1],
      rollout.discounts[:-1],
      np.asarray(out.rho),
      0.9,
      0.8,
    )
    np.testing.assert_allclose(out.value_target, vs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.adv, adv, rtol=1e-4, atol=1e-4)

  def test_ema_normalisation_matches_hand_loop(self):
    decay, eps = 0.9, 1e-6
    adv_fn, td_fn = _emas(decay, eps)
    adv_state, td_state = adv_fn.init_state(), td_fn.init_state()
    np_adv, np_td = _NpEma(decay, eps), _NpEma(decay, eps)
    rng = np.random.default_rng(15)

    @jax.jit
    def run(head, rollout, adv_state, td_state):
      return value_utils.get_value_outs(
        head,
        None,
        None,
        None,
        rollout,
        rollout.logits,
        discount=0.9,
        adv_ema_state=adv_state,
        adv_ema_fn=adv_fn,
        td_ema_state=td_state,
        td_ema_fn=td_fn,
      )

    for step in range(4):
      rollout = _actor_rollout(100 + step)
      head = rng.normal(size=(6, 2, 1)).astype(np.float32) * (step + 1)
      out, adv_state, td_state = run(head, rollout, adv_state, td_state)
      np_adv.update(out.adv)
      np_td.update(out.td)
      np.testing.assert_allclose(
        out.normalized_adv,
        np_adv.normalize(np.asarray(out.adv, np.float64), True),
        rtol=1e-4,
        atol=1e-4,
      )
      np.testing.assert_allclose(
        out.normalized_td,
        np_td.normalize(np.asarray(out.td, np.float64), False),
        rtol=1e-4,
        atol=1e-4,
      )
      np.testing.assert_allclose(
        td_state.decay_product, decay ** (step + 1), rtol=1e-5
      )

  def test_without_ema_normalised_fields_are_zero(self):
    rollout = _actor_rollout(16)
    head = np.ones((6, 2, 1), np.float32)
    out, adv_state, td_state = jax.jit(value_utils.get_value_outs)(
      head, None, None, None, rollout, rollout.logits, discount=0.9
    )
    self.assertIsNone(adv_state)
    self.assertIsNone(td_state)
    for field in (
      'normalized_adv',
      'normalized_td',
      'normalized_qv_adv',
      'normalized_q_td',
    ):
      np.testing.assert_array_equal(getattr(out, field), 0.0)
    # Bootstrapping from its own values, rho = 1 (on-policy): V-trace with
    # lambda = DEFAULT_TD_LAMBDA.
    np.testing.assert_allclose(out.rho, 1.0, rtol=1e-6)

  @chex.variants(with_jit=True)
  def test_action_value_path(self):
    num_t, num_b, num_a, num_bins, max_abs = 4, 2, 3, 21, 5.0
    inputs = _update_inputs(17, num_t, num_b, num_a)
    rng = np.random.default_rng(18)
    q_head = rng.normal(size=(num_t + 1, num_b, num_a, num_bins)).astype(
      np.float32
    )
    target_q_head = rng.normal(size=q_head.shape).astype(np.float32)
    pi_logits = rng.normal(size=(num_t + 1, num_b, num_a)).astype(np.float32)
    adv_fn, td_fn = _emas()

    @self.variant
    def run(q_head, target_q_head, inputs, pi_logits, adv_state, td_state):
      return value_utils.get_value_outs(
        value_net_out=None,
        q_net_out=q_head,
        target_value_net_out=None,
        target_q_net_out=target_q_head,
        rollout=inputs,
        pi_logits=pi_logits,
        discount=0.97,
        lambda_=0.9,
        nonlinear_transform=True,
        categorical_value=True,
        max_abs_value=max_abs,
        drop_last=False,
        adv_ema_state=adv_state,
        adv_ema_fn=adv_fn,
        td_ema_state=td_state,
        td_ema_fn=td_fn,
      )

    init_adv, init_td = adv_fn.init_state(), td_fn.init_state()
    out, adv_state, td_state = run(
      q_head, target_q_head, inputs, pi_logits, init_adv, init_td
    )
    for field in ('value', 'target_value'):
      self.assertEqual(getattr(out, field).shape, (num_t + 1, num_b), field)
    for field in ('q_value', 'target_q_value', 'qv_adv', 'normalized_qv_adv'):
      self.assertEqual(
        getattr(out, field).shape, (num_t + 1, num_b, num_a), field
      )
    for field in (
      'adv',
      'value_target',
      'td',
      'rho',
      'q_target',
      'q_td',
      'normalized_adv',
      'normalized_td',
      'normalized_q_td',
    ):
      self.assertEqual(getattr(out, field).shape, (num_t, num_b), field)
    self.assertLess(
      float(adv_state.decay_product), float(init_adv.decay_product)
    )
    self.assertLess(float(td_state.decay_product), float(init_td.decay_product))
    np.testing.assert_array_equal(out.normalized_td, 0.0)

    # Q read by hand: softmax expectation over bins, then unsquashed.
    support = np.linspace(-max_abs, max_abs, num_bins)
    read_q = lambda h: _np_unsquash(np.exp(_np_log_softmax(h)) @ support)
    q, tq = read_q(q_head), read_q(target_q_head)
    pi = np.exp(_np_log_softmax(pi_logits))
    tv = (pi * tq).sum(-1)
    np.testing.assert_allclose(out.q_value, q, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(out.target_value, tv, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(
      out.value, (pi * q).sum(-1), rtol=1e-3, atol=1e-3
    )
    # Retrace on the hand-read quantities.
    acts = inputs.actions[:-1]
    rho = np.exp(
      _np_take(_np_log_softmax(pi_logits[:-1]), acts)
      - _np_take(
        _np_log_softmax(inputs.behaviour_agent_out['logits'][:-1]), acts
      )
    )
    np.testing.assert_allclose(out.rho, rho, rtol=1e-5)
    g = _np_retrace(
      _np_take(tq, acts),
      tv,
      inputs.rewards,
      1.0 - inputs.is_terminal,
      rho,
      0.97,
      0.9,
    )
    np.testing.assert_allclose(out.q_target, g, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(
      out.q_td, g - _np_take(q, acts), rtol=1e-3, atol=1e-3
    )
    np.testing.assert_allclose(
      out.qv_adv, tq - tv[..., None], rtol=1e-3, atol=1e-3
    )
    # TD statistics come from q_td; advantages are normalised with one state.
    np_td = _NpEma(0.9, 1e-6)
    np_td.update(out.q_td)
    np.testing.assert_allclose(
      out.normalized_q_td,
      np_td.normalize(np.asarray(out.q_td, np.float64), False),
      rtol=1e-4,
      atol=1e-4,
    )
    np_adv = _NpEma(0.9, 1e-6)
    np_adv.update(out.adv)
    np.testing.assert_allclose(
      out.normalized_qv_adv,
      np_adv.normalize(np.asarray(out.qv_adv, np.float64), True),
      rtol=1e-4,
      atol=1e-4,
    )


# ----------------------------------------------------------------------------
# Errors.


def _v_head(num_t=6, num_b=2):
  return np.zeros((num_t, num_b, 1), np.float32)


def _outs(*heads, rollout=None, pi_logits=None, **kwargs):
  """get_value_outs(*heads, rollout, pi_logits, discount=0.9, **kwargs); by
  default on the actor rollout of seed 0 and the rollout's own logits."""
  rollout = _actor_rollout(0) if rollout is None else rollout
  if pi_logits is None:
    pi_logits = getattr(rollout, 'logits', None)
    if pi_logits is None:  # UpdateRuleInputs.
      pi_logits = rollout.behaviour_agent_out['logits']
  return value_utils.get_value_outs(
    *heads, rollout, pi_logits, discount=0.9, **kwargs
  )


_CATEGORICAL = r'max_abs_value.*categorical_value=True'
_POSITIVE = r'max_abs_value.*greater than 0'
_CASE = _random_case(0)
_ERRORS = {
  'both heads None': (lambda: _outs(None, None, None, None), 'both are None'),
  'categorical without bound, outs': (
    lambda: _outs(
      np.zeros((6, 2, 5), np.float32), None, None, None, categorical_value=True
    ),
    _CATEGORICAL,
  ),
  'categorical without bound, net outs': (
    lambda: value_utils.get_values_from_net_outs(
      np.zeros((6, 2, 5)), True, None, False
    ),
    _CATEGORICAL,
  ),
  'categorical without bound, target loss': (
    lambda: value_utils.value_loss_from_target(
      np.zeros((6, 2, 5)), np.zeros((6, 2)), categorical_value=True
    ),
    _CATEGORICAL,
  ),
  'categorical without bound, td loss': (
    lambda: value_utils.value_loss_from_td(
      np.zeros((6, 2, 5)), np.zeros((6, 2)), categorical_value=True
    ),
    _CATEGORICAL,
  ),
  **{
    f'bound {bound}, {where}': (fn, _POSITIVE)
    for bound in (0.0, -1.0)
    for where, fn in (
      (
        'logits to scalar',
        lambda b=bound: value_utils.value_logits_to_scalar(
          jnp.zeros((2, 5)), b
        ),
      ),
      (
        'scalar to categorical',
        lambda b=bound: value_utils.scalar_to_categorical_value(
          5, jnp.zeros((2,)), b
        ),
      ),
      (
        'outs',
        lambda b=bound: _outs(
          np.zeros((6, 2, 5), np.float32),
          None,
          None,
          None,
          categorical_value=True,
          max_abs_value=b,
        ),
      ),
    )
  },
  # Values have T+1 = 5 steps, so rewards need 4; given 5.
  'rewards time axis, drop_last=False': (
    lambda: _outs(
      np.zeros((5, 2, 1), np.float32),
      None,
      None,
      None,
      rollout=_update_inputs(0, reward_steps=5),
      drop_last=False,
    ),
    r'rollout\.rewards.*\(4, 2\).*\(5, 2\).*T-1=4',
  ),
  'discounts time axis, drop_last=True': (
    lambda: _outs(
      _v_head(),
      None,
      None,
      None,
      rollout=_actor_rollout(0).replace(
        discounts=_actor_rollout(0).discounts[:-1]
      ),
    ),
    r'rollout\.discounts.*\(6, 2\).*\(5, 2\)',
  ),
  'pi_logits shape': (
    lambda: _outs(
      _v_head(), None, None, None, pi_logits=_actor_rollout(0).logits[:-1]
    ),
    r'pi_logits.*\(6, 2\).*\(5, 2, 3\)',
  ),
  'missing target q': (
    lambda: _outs(
      None,
      np.zeros((5, 2, 3, 1), np.float32),
      np.zeros((5, 2, 1), np.float32),
      None,
      rollout=_update_inputs(0),
      drop_last=False,
    ),
    'target_q_net_out',
  ),
  'estimator rewards shape': (
    lambda: value_utils.estimate_values(
      _CASE['rewards'][:-1],
      _CASE['actions'],
      _CASE['env_discounts'],
      _CASE['rho'],
      _CASE['values'],
      _CASE['target_values'],
    ),
    r'rewards.*\(5, 3\).*\(4, 3\)',
  ),
  'estimator rho shape': (
    lambda: value_utils.estimate_q_values(
      _CASE['rewards'],
      _CASE['actions'],
      _CASE['env_discounts'],
      np.ones((6, 3), np.float32),
      _CASE['values'],
      _CASE['target_values'],
      _CASE['q_values'],
      _CASE['target_q_values'],
    ),
    r'rho.*\(5, 3\).*\(6, 3\)',
  ),
  'head rank': (
    lambda: value_utils.get_values_from_net_outs(
      np.zeros((6, 2)), False, None, False
    ),
    r'\[T, B, 1 or num_bins\].*\(6, 2\)',
  ),
  'scalar head size': (
    lambda: value_utils.get_values_from_net_outs(
      np.zeros((6, 2, 3)), False, None, False
    ),
    r'size 1.*\(6, 2, 3\)',
  ),
  'td shape': (
    lambda: value_utils.value_loss_from_td(
      np.zeros((6, 2, 1)), np.zeros((5, 2))
    ),
    r'td.*\(6, 2\).*\(5, 2\)',
  ),
}


@pytest.mark.parametrize('call, match', _ERRORS.values(), ids=_ERRORS.keys())
def test_bad_inputs_are_named(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def test_error_ema_state_type():
  adv_fn, _ = _emas()
  with pytest.raises(TypeError, match='adv_ema_state'):
    _outs(
      _v_head(), None, None, None, adv_ema_state={'m': 0.0}, adv_ema_fn=adv_fn
    )
