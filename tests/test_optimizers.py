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


def test_sgd_agents_take_plain_steps_of_the_clipped_gradient():
  """GROOVE's tabular agents: -lr * g while |g| <= 0.5, the direction kept
  and the global norm cut to 0.5 above; linear in g, so the meta-gradient
  through it does not scale with 1/sqrt of the gradient's second moment."""
  opt = optimizers.agent_optimizer(40.0, 1.0, kind='sgd')
  small = {'a': jnp.array([1e-6, -2e-6]), 'b': jnp.array([3e-6])}
  updates, _ = opt.update(small, opt.init(small))
  chex.assert_trees_all_close(updates, jax.tree.map(lambda g: -40.0 * g, small))
  big = {'a': jnp.array([3.0, -4.0]), 'b': jnp.array([0.0])}  # Norm 5.
  updates, _ = opt.update(big, opt.init(big))
  chex.assert_trees_all_close(
    updates, jax.tree.map(lambda g: -40.0 * 0.1 * g, big), rtol=1e-6
  )
  # Adam's first step of the same small gradient is a full step of lr.
  adam = optimizers.agent_optimizer(40.0, 1.0)
  updates, _ = adam.update(small, adam.init(small))
  assert float(jnp.abs(updates['a'][0])) > 1.0

  # The meta-gradient through one step: lr for SGD, ~lr / |g| for Adam.
  def step(g, o):
    return o.update({'x': g}, o.init({'x': g}))[0]['x'][0]

  g = jnp.array([1e-3])
  assert float(jax.grad(lambda g: step(g, opt))(g)[0]) == pytest.approx(-40.0)
  assert abs(float(jax.grad(lambda g: step(g, adam))(g)[0])) > 1e3
  with pytest.raises(
    ValueError, match="one of \\('adam', 'sgd'\\), got 'rmsprop'"
  ):
    optimizers.agent_optimizer(1.0, 1.0, kind='rmsprop')


def test_the_agent_optimizer_is_a_setting_of_both_jobs():
  from disco_rl import agent as agent_lib  # pylint: disable=g-import-not-at-top
  from disco_rl.jobs import config as config_lib  # pylint: disable=g-import-not-at-top

  assert 'optimizer' not in config_lib.EvalConfig().agent_settings('disco_103')
  config = config_lib.EvalConfig(rule='actor_critic', agent_optimizer='sgd')
  assert config.agent_settings('actor_critic').optimizer == 'sgd'
  assert config.agent_fields()['agent_optimizer'] == 'sgd'
  with pytest.raises(ValueError, match='agent_optimizer'):
    config_lib.EvalConfig(agent_optimizer='rmsprop')
  with pytest.raises(ValueError, match='optimizer must be one of'):
    agent_lib.make_settings('ppo', 1e-3, (8,), 4, (4,), optimizer='rmsprop')
