# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.runtime.divergence: a run stops where its learning diverged."""

import chex
import jax.numpy as jnp
import numpy as np
import pytest

from disco_rl.runtime import divergence


class AllFiniteTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_flags_any_non_finite_float_entry(self):
    flag = self.variant(divergence.all_finite)
    tree = {
      'w': jnp.ones((2, 3)),
      'b': jnp.zeros(3),
      'count': jnp.arange(3),
    }  # Integers are always finite.
    assert float(flag(tree)) == 1.0
    for bad in (jnp.nan, jnp.inf, -jnp.inf):
      broken = dict(tree, b=tree['b'].at[1].set(bad))
      assert float(flag(broken)) == 0.0
    assert float(flag({})) == 1.0


def _metrics(**values):
  return {k: np.asarray(v, np.float32) for k, v in values.items()}


def test_the_first_diverged_step_is_named_with_its_quantities():
  metrics = _metrics(
    total_loss=[1.0, np.nan, np.inf, 2.0],
    other=[0.0, 0.0, 0.0, 0.0],
    params_finite=[1, 0, 0, 1],
  )
  with pytest.raises(
    divergence.DivergedError,
    match=(
      r"^learning diverged at loop step 11: total_loss = nan, the agent's "
      r'parameters not finite\. Lower it\.$'
    ),
  ):
    divergence.raise_if_diverged(
      metrics,
      ('total_loss', 'missing'),
      10,
      'loop step',
      "the agent's parameters",
      hint='Lower it.',
    )
  assert divergence.KEY not in metrics  # Popped.


def test_steps_that_did_not_learn_or_came_after_a_fault_are_not_checked():
  metrics = _metrics(
    total_loss=[np.nan, np.nan, 1.0, np.nan], params_finite=[1, 1, 1, 0]
  )
  # Steps 0 and 1 did not learn (NaN placeholders); step 3 came after the
  # rollout fault found at step 3's acting.
  divergence.raise_if_diverged(
    dict(metrics),
    ('total_loss',),
    0,
    'step',
    'params',
    active=[0, 0, 1, 1],
    until=3,
  )
  with pytest.raises(
    divergence.DivergedError,
    match='^learning diverged at step 3: total_loss = nan, params not finite.$',
  ):
    divergence.raise_if_diverged(
      dict(metrics), ('total_loss',), 0, 'step', 'params', active=[0, 0, 1, 1]
    )


def test_the_parameters_alone_can_diverge():
  metrics = _metrics(meta_loss=[1.0, 2.0], params_finite=[1, 0])
  with pytest.raises(
    divergence.DivergedError,
    match="^learning diverged at meta-step 6: the rule's "
    'parameters not finite.$',
  ):
    divergence.raise_if_diverged(
      metrics, ('meta_loss',), 5, 'meta-step', "the rule's parameters"
    )


def test_the_first_diverged_step_is_found_without_raising():
  metrics = _metrics(
    total_loss=[np.nan, 1.0, 2.0, np.nan], params_finite=[1, 1, 0, 0]
  )
  assert divergence.first_diverged(metrics, ('total_loss',)) == 0
  active = [0, 1, 1, 1]
  assert divergence.first_diverged(metrics, ('total_loss',), active) == 2
  assert divergence.KEY in metrics  # Read, not popped.
  assert (
    divergence.first_diverged(metrics, ('total_loss',), active, until=2) is None
  )
  assert divergence.first_diverged(_metrics(loss=[1.0]), ('loss',)) is None


def test_an_error_carries_the_good_steps_of_its_call():
  metrics = _metrics(
    total_loss=[1.0, 2.0, np.nan],
    params_finite=[1, 1, 0],
    rollout_fault=[0, 0, 0],
  )
  with pytest.raises(divergence.DivergedError, match='step 2') as raised:
    with divergence.keep_good(metrics, 2):
      divergence.raise_if_diverged(metrics, ('total_loss',), 0, 'step', 'p')
  good = divergence.good_steps(raised.value)
  assert good is not None and good.count == 2
  # The checks' entries dropped; the good steps alone.
  kept = good.kept()
  assert sorted(kept) == ['total_loss']
  np.testing.assert_array_equal(kept['total_loss'], [1.0, 2.0])
  assert divergence.good_steps(ValueError('other')) is None
