# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.optimizers: Adam without a meta-gradient through its denominator."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from disco_rl import optimizers


def _grads(seed):
  k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
  return {
    'w': jax.random.normal(k1, (3, 4)),
    'b': 1e-3 * jax.random.normal(k2, (4,)),
  }


@pytest.mark.parametrize('b1, b2, eps', [(0.9, 0.999, 1e-8), (0.5, 0.9, 1e-3)])
def test_same_numbers_and_state_as_optax_adam(b1, b2, eps):
  ours = optimizers.scale_by_adam_sg_denom(b1, b2, eps)
  adam = optax.scale_by_adam(b1, b2, eps)
  params = _grads(99)
  state, want_state = ours.init(params), adam.init(params)
  chex.assert_trees_all_equal(state, want_state)
  step, want_step = jax.jit(ours.update), jax.jit(adam.update)
  for seed in range(4):
    updates, state = step(_grads(seed), state)
    want, want_state = want_step(_grads(seed), want_state)
    chex.assert_trees_all_equal((updates, state), (want, want_state))
  assert int(state.count) == 4


def test_no_gradient_through_the_denominator():
  """First step from zero moments: the update is g / (|g| + eps) with |g| a
  constant, so its derivative in g is 1 / (|g| + eps); Adam's own is
  eps / (|g| + eps)^2."""
  eps = 1e-3
  g = jnp.array([0.5, -2.0, 1e-2])
  transform = optimizers.scale_by_adam_sg_denom(eps=eps)
  state = transform.init(g)
  first_update = lambda x: jnp.sum(transform.update(x, state)[0])
  np.testing.assert_allclose(
    jax.grad(first_update)(g), 1 / (jnp.abs(g) + eps), rtol=1e-5
  )
  adam = optax.scale_by_adam(eps=eps)
  adam_update = lambda x: jnp.sum(adam.update(x, adam.init(g))[0])
  np.testing.assert_allclose(
    jax.grad(adam_update)(g), eps / (jnp.abs(g) + eps) ** 2, rtol=1e-4
  )


def test_agent_optimizer_clips_then_descends():
  optimizer = optimizers.agent_optimizer(learning_rate=0.1, max_abs_update=0.5)
  g = {'w': jnp.array([3.0, -3.0, 0.0])}
  updates, _ = optimizer.update(g, optimizer.init(g))
  # Adam's first step is g / (|g| + eps) ~ sign(g), clipped to 0.5, times -lr.
  np.testing.assert_allclose(updates['w'], [-0.05, 0.05, 0.0], rtol=1e-6)
