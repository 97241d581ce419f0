# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.rollout_checks: the first bad entry of acted rollouts."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco_rl import rollout_checks as checks


class FindFaultTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_first_bad_action_then_first_bad_reward(self):
    find = self.variant(checks.find_fault, static_argnums=2)
    actions = np.zeros((4, 3), np.int32)
    rewards = np.zeros((4, 3), np.float32)
    fault = find(actions, rewards, 3, 7)
    assert int(fault.kind) == checks.NO_FAULT
    rewards[2, 1] = np.nan
    rewards[3, 0] = np.inf
    fault = find(actions, rewards, 3, 7)
    assert (int(fault.kind), int(fault.t), int(fault.b)) == (
      checks.BAD_REWARD,
      2,
      1,
    )
    assert np.isnan(fault.value) and int(fault.step) == 7
    # An action out of range is reported first, wherever it is.
    actions[3, 2] = 3
    actions[1, 0] = -1
    fault = find(actions, rewards, 3, 7)
    assert (
      int(fault.kind),
      int(fault.t),
      int(fault.b),
      float(fault.value),
      int(fault.limit),
    ) == (checks.BAD_ACTION, 1, 0, -1.0, 3)

  @chex.variants(with_jit=True, without_jit=True)
  def test_non_finite_logits_come_before_actions_and_rewards(self):
    find = self.variant(checks.find_fault, static_argnums=2)
    actions = np.full((4, 3), -1, np.int32)  # What NaN logits sample.
    rewards = np.full((4, 3), np.nan, np.float32)
    logits = np.zeros((4, 3, 2), np.float32)
    fault = find(actions, rewards, 3, 7, logits_t=logits)
    assert int(fault.kind) == checks.BAD_ACTION  # Finite logits.
    logits[2, 1, 1] = -np.inf
    logits[3, 0, 0] = np.nan
    fault = find(actions, rewards, 3, 7, logits_t=logits)
    assert (
      int(fault.kind),
      int(fault.t),
      int(fault.b),
      float(fault.value),
    ) == (checks.BAD_LOGITS, 2, 1, -np.inf)
    assert checks.message(jax.tree.map(np.asarray, fault)) == (
      'rollout.logits[t=2, b=1] = -inf is not finite (loop step 7): the '
      "agent's outputs are not finite, its learning diverged (try a "
      'smaller learning rate)'
    )


def test_first_index():
  assert checks.first_index(None) is None
  stack = jax.tree.map(lambda *xs: np.stack(xs), _fault(0), _fault(0))
  assert checks.first_index(stack) is None
  stack = jax.tree.map(
    lambda *xs: np.stack(xs), _fault(0), _fault(2), _fault(1)
  )
  assert checks.first_index(stack) == 1


def _fault(kind, t=0, b=0, value=0.0, step=0, source=0):
  return checks.Fault(
    kind=np.int32(kind),
    t=np.int32(t),
    b=np.int32(b),
    value=np.float32(value),
    step=np.int32(step),
    limit=np.int32(3),
    source=np.int32(source),
  )


def test_first_of_a_stack_and_messages():
  stack = jax.tree.map(
    lambda *xs: np.stack(xs),
    _fault(0),
    _fault(2, 1, 1, np.nan, 5, source=1),
    _fault(1, 0, 0, 4, 6, source=2),
  )
  first = checks.first_of(stack)
  assert int(first.kind) == checks.BAD_REWARD and int(first.source) == 1
  with pytest.raises(
    checks.RolloutError,
    match=(
      r'^debug check failed: training rollout of agent 1\.rewards\[t=1, '
      r'b=1\] = nan is not finite \(loop step 5\)$'
    ),
  ):
    checks.raise_if_faulty(stack, 'training rollout of agent {source}')
  assert checks.message(_fault(1, 2, 0, 4, 9)) == (
    'rollout.actions[t=2, b=0] = 4 is outside [0, 3) (loop step 9)'
  )
  checks.raise_if_faulty(None)  # The checks are off.
  checks.raise_if_faulty(
    jax.tree.map(lambda *xs: np.stack(xs), _fault(0), _fault(0))
  )


def test_first_over_devices_takes_the_first_faulty_device():
  """Two 'devices' under vmap: device 1 has a fault, device 0 none; batch
  indices count over the devices."""
  faults = jax.tree.map(
    lambda *xs: jnp.stack(xs),
    _fault(0),
    _fault(2, t=3, b=1, value=np.inf, step=4),
  )
  both = jax.vmap(
    lambda f: checks.first_over_devices(f, 'd', 5), axis_name='d'
  )(faults)
  for device in range(2):
    one = jax.tree.map(lambda x, i=device: x[i], both)
    assert (int(one.kind), int(one.t), int(one.b), int(one.step)) == (
      checks.BAD_REWARD,
      3,
      6,
      4,
    )
  none = jax.vmap(
    lambda f: checks.first_over_devices(f, 'd', 5), axis_name='d'
  )(jax.tree.map(lambda x: x[:1].repeat(2, 0), faults))
  assert not np.asarray(none.kind).any()
