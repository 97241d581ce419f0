# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.optimizers: the rule's optimiser, chained from optax."""

import chex
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from disco_rl import optimizers


def _adam_steps(grads, lr, b1=0.9, b2=0.999, eps=1e-8):
  """Adam's updates for a sequence of gradients, written out in NumPy."""
  m = v = np.zeros_like(grads[0])
  updates = []
  for t, g in enumerate(grads, start=1):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
    updates.append(-lr * m_hat / (np.sqrt(v_hat) + eps))
  return updates


@pytest.mark.parametrize(
  'norm, clip',
  [
    ('average', 0.0),
    ('average', 2.0),
    ('per_agent_adam', 0.0),
    ('per_agent_adam', 2.0),
  ],
)
def test_meta_optimizer_against_adam_written_out(norm, clip):
  """Two steps of the rule's optimiser on [N=3] agents' gradients."""
  lr = 1e-3
  rng = np.random.default_rng(0)
  # Agents of very different gradient scales, as over several environments.
  scales = np.array([1e-4, 1.0, 30.0])[:, None]
  steps = [
    (rng.normal(size=(3, 5)) * scales).astype(np.float32) for _ in range(2)
  ]
  optimizer = optimizers.meta_optimizer(norm, lr, clip, num_agents=3)
  params = {'w': jnp.zeros((5,))}
  state = optimizer.init(params)
  got = []
  for g in steps:
    updates, state = optimizer.update({'w': jnp.asarray(g)}, state)
    got.append(np.asarray(updates['w']))

  def clipped(g):
    if not clip:
      return g
    norms = np.linalg.norm(g, axis=1, keepdims=True)
    return g * np.minimum(1.0, clip / norms)

  if norm == 'average':
    expected = _adam_steps([clipped(g).mean(axis=0) for g in steps], lr)
  else:  # Each agent's own Adam, then the mean of the updates.
    per_agent = [
      _adam_steps([clipped(g)[i] for g in steps], lr) for i in range(3)
    ]
    expected = [np.mean([p[t] for p in per_agent], axis=0) for t in range(2)]
  for t in range(2):
    np.testing.assert_allclose(got[t], expected[t], rtol=1e-4, atol=1e-9)
  if norm == 'per_agent_adam':
    # Every agent counts: the small-gradient agent moves the rule as much as
    # the others (its Adam normalises it), unlike in the plain average.
    plain = _adam_steps([g.mean(axis=0) for g in steps], lr)[0]
    assert not np.allclose(got[0], plain, rtol=1e-2)


class PerAgentTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_each_agent_has_its_own_state(self):
    """Adam's first step is sign(g) * lr for every agent, whatever its
    scale; the second differs per agent (its own moments)."""
    opt = optimizers.per_agent(optax.adam(0.1), num_agents=2)
    params = {'w': jnp.zeros(3)}
    state = opt.init(params)
    chex.assert_tree_shape_prefix(state, (2,))
    update = self.variant(opt.update)
    grads = {'w': jnp.array([[1e-3, -2e-3, 5e-3], [10.0, 20.0, -30.0]])}
    updates, state = update(grads, state)
    np.testing.assert_allclose(
      updates['w'], -0.1 * np.sign(grads['w']), rtol=1e-4
    )
    second, _ = update(
      {'w': jnp.array([[1e-3, 0.0, 0.0], [0.0, 0.0, 0.0]])}, state
    )
    assert not np.allclose(second['w'][0], second['w'][1])

  @chex.variants(with_jit=True, without_jit=True)
  def test_mean_over_agents(self):
    opt = optimizers.mean_over_agents()
    updates, state = self.variant(opt.update)(
      {'w': jnp.array([[1.0, 2.0], [3.0, 6.0]])}, opt.init(None)
    )
    np.testing.assert_allclose(updates['w'], [2.0, 4.0])
    assert state == optax.EmptyState()


def test_the_rule_optimiser_chains_like_any_optax_transformation():
  lr = 1e-3
  grads = {'w': jnp.array([[1.0, -2.0], [3.0, 4.0]])}
  params = {'w': jnp.zeros(2)}
  plain = optimizers.meta_optimizer('per_agent_adam', lr, 0.0, num_agents=2)
  doubled = optax.chain(plain, optax.scale(2.0))
  a, _ = plain.update(grads, plain.init(params))
  b, _ = doubled.update(grads, doubled.init(params))
  np.testing.assert_allclose(b['w'], 2 * a['w'])
  # Adam's first step per agent is lr * sign(g); the rule moves by their
  # mean (descending).
  np.testing.assert_allclose(
    optax.apply_updates(params, a)['w'],
    -lr * np.mean(np.sign(grads['w']), axis=0),
    rtol=1e-4,
    atol=1e-9,
  )


def test_an_unknown_normalisation_is_named():
  with pytest.raises(ValueError, match="Unknown meta_grad_norm 'rms'"):
    optimizers.meta_optimizer('rms', 1e-3, 0.0, num_agents=2)
