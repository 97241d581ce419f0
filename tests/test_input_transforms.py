# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.networks.input_transforms: each named transform by hand."""

from absl.testing import absltest
from absl.testing import parameterized
import chex
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from disco_rl.networks import input_transforms

T, B, A = 4, 3, 2


def _apply(name, x, actions=None, policy=None):
  fn = input_transforms.TRANSFORMS[name]()
  return fn(x, actions, policy, None)


class TransformsTest(parameterized.TestCase):
  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.x = rng.normal(size=(T + 1, B, A, 5)).astype(np.float32)
    self.actions = rng.integers(0, A, size=(T + 1, B)).astype(np.int32)
    logits = rng.normal(size=(T + 1, B, A))
    self.policy = (
      np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    ).astype(np.float32)

  @chex.variants(with_jit=True, without_jit=True)
  def test_select_a_picks_the_taken_action(self):
    got = self.variant(lambda x, a: _apply('select_a', x, a))(
      self.x, self.actions
    )
    chex.assert_shape(got, (T + 1, B, 5))
    for t in range(T + 1):
      for b in range(B):
        np.testing.assert_array_equal(
          got[t, b], self.x[t, b, self.actions[t, b]]
        )

  @chex.variants(with_jit=True, without_jit=True)
  def test_pi_weighted_avg_is_the_expectation_under_the_policy(self):
    got = self.variant(lambda x, p: _apply('pi_weighted_avg', x, policy=p))(
      self.x, self.policy
    )
    want = np.einsum('tbac,tba->tbc', self.x, self.policy)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

  @chex.variants(with_jit=True, without_jit=True)
  def test_td_pair_puts_t_and_t_plus_1_side_by_side(self):
    got = self.variant(lambda x: _apply('td_pair', x))(self.x)
    chex.assert_shape(got, (T, B, A, 10))
    np.testing.assert_array_equal(got[..., :5], self.x[:-1])
    np.testing.assert_array_equal(got[..., 5:], self.x[1:])

  @parameterized.parameters(
    ('drop_last', lambda x: x[:-1]),
    ('masks_to_discounts', lambda x: 1.0 - x),
    ('max_a', lambda x: x.max(axis=2)),
    ('clip', lambda x: np.clip(x, -2.0, 2.0)),
    ('sign_log', lambda x: np.sign(x) * np.log1p(np.abs(x))),
    ('identity', lambda x: x),
  )
  def test_elementwise_transforms(self, name, reference):
    np.testing.assert_allclose(
      _apply(name, jnp.asarray(self.x)), reference(self.x), rtol=1e-6, atol=1e-6
    )

  def test_normalize_first_call_standardises_over_time_and_batch(self):
    """Debiased EMAs equal the first batch's moments after one update."""
    fn = hk.transform_with_state(lambda x: _apply('normalize', x))
    x = jnp.asarray(self.x) * 3.0 + 1.0
    params, state = fn.init(jax.random.PRNGKey(0), x)
    out, _ = fn.apply(params, state, None, x)
    mean = self.x.mean(axis=(0, 1)) * 3.0 + 1.0
    std = (self.x * 3.0).std(axis=(0, 1))
    np.testing.assert_allclose(
      out, (np.asarray(x) - mean) / std, rtol=1e-3, atol=1e-3
    )

  def test_normalize_rejects_a_vector(self):
    fn = hk.transform_with_state(lambda x: _apply('normalize', x))
    with self.assertRaisesRegex(
      ValueError,
      r'\[T, B, \.\.\.\] input, got '
      r'shape \(5,\)',
    ):
      fn.init(jax.random.PRNGKey(0), jnp.zeros((5,)))

  def test_the_registry_is_frozen(self):
    with self.assertRaises(TypeError):
      input_transforms.TRANSFORMS['mine'] = lambda: (
        None
      )  # pytype: disable=unsupported-operands
    self.assertNotIn('mine', input_transforms.TRANSFORMS)


if __name__ == '__main__':
  absltest.main()
