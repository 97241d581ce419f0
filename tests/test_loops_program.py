# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.loops.program: jit of shard_map, compiled ahead on demand."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np
import pytest

from disco_rl.loops import devices as devices_lib
from disco_rl.loops import program


def _step(state, x):
  """A state update and a product (its precision is the program's)."""
  return state + 1, jax.lax.psum(x @ x, devices_lib.AXIS)


def _mesh():
  return devices_lib.make_mesh(jax.devices()[:1])


def test_over_mesh_runs_before_and_after_compiling_ahead():
  prog = program.over_mesh(_step, _mesh(), (P(), P()), (P(), P()),
                           'highest', donate_state=True)
  x = jnp.eye(2)
  state, out = prog(jnp.zeros(()), x)
  assert float(state) == 1.0
  np.testing.assert_array_equal(out, np.eye(2))
  assert 'precision = [HIGHEST, HIGHEST]' in prog.lower(state, x).as_text()
  assert prog.compile(state, x) > 0.0
  assert prog.compile(state, x) == 0.0  # Once.
  state, _ = prog(state, x)
  assert float(state) == 2.0
  # The ahead-of-time executable serves the calls: other shapes are refused.
  with pytest.raises(TypeError):
    prog(state, jnp.eye(3))


def test_on_mesh_places_its_outputs():
  mesh = _mesh()
  sharding = devices_lib.replicated(mesh)
  prog = program.on_mesh(lambda key: jax.random.normal(key, (3,)), sharding,
                         'default')
  out = prog(jax.random.PRNGKey(0))
  assert out.sharding.is_equivalent_to(sharding, 1)
