# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.utils: replica spread, tree stacking, batch look-up."""

import jax
import numpy as np
import pytest

from disco_rl import utils


def test_replica_spread_of_identical_copies_is_zero():
  row = {'w': np.arange(6.0).reshape(2, 3), 'step': np.array(4, np.int32)}
  stacked = jax.tree.map(lambda x: np.stack([x, x, x]), row)
  assert utils.replica_spread(stacked) == 0.0
  # One device: nothing to compare.
  assert utils.replica_spread(jax.tree.map(lambda x: x[:1], stacked)) == 0.0


def test_replica_spread_is_the_largest_difference_to_device_0():
  tree = {
    'a': np.array([[1.0, 2.0], [1.0, 2.5], [0.0, 2.0]]),  # 0.5, 1.0
    'b': np.array([3, 3, 3], np.int32),
    'key': jax.numpy.stack([jax.random.key(0)] * 3),
  }
  assert utils.replica_spread(tree) == 1.0
  tree['b'] = np.array([3, 1, 3], np.int32)
  assert utils.replica_spread(tree) == 2.0
  tree['key'] = jax.random.split(jax.random.key(0), 3)
  assert utils.replica_spread(tree) > 0


def test_replica_spread_reports_nans_and_rejects_scalars():
  assert np.isnan(utils.replica_spread(np.array([[0.0], [np.nan]])))
  assert np.isnan(utils.replica_spread(np.array([[np.nan], [np.nan]])))
  with pytest.raises(ValueError, match='one row per device'):
    utils.replica_spread({'w': np.float32(1.0)})


def test_replica_spread_of_a_replicated_array_on_one_device_is_zero():
  mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:1]), ('i',))
  replicated = jax.device_put(
    {'w': np.arange(3.0), 'step': np.int32(2)},
    jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec()),
  )
  assert utils.replica_spread(replicated, replicated=True) == 0.0
  with pytest.raises(ValueError, match='expects jax.Arrays, got ndarray'):
    utils.replica_spread({'w': np.zeros(3)}, replicated=True)


@pytest.mark.parametrize('axis', [0, 1, -1])
def test_tree_stack_stacks_each_leaf_on_a_new_axis(axis):
  trees = [
    {'a': np.full((2, 3), i), 'b': (np.arange(3.0) * i,)} for i in range(4)
  ]
  stacked = utils.tree_stack(trees, axis=axis)
  assert jax.tree.structure(stacked) == jax.tree.structure(trees[0])
  for got, *leaves in zip(
    *map(jax.tree.leaves, [stacked] + trees), strict=True
  ):
    np.testing.assert_array_equal(got, np.stack(leaves, axis=axis))


def test_batch_lookup_picks_one_entry_per_prefix():
  table = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
  index = np.array([[0, 3, 1], [2, 2, 0]])
  got = utils.batch_lookup(jax.numpy.asarray(table), jax.numpy.asarray(index))
  want = np.take_along_axis(table, index[..., None, None], axis=2)[:, :, 0]
  np.testing.assert_array_equal(got, want)
