# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.runtime.compiled: the one builder of jit(shard_map(scan(step))),
and the float32 matmul precision it traces at."""

import dataclasses
import re

import chex
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np
import pytest
import tiny

from disco_rl.jobs import config as config_lib
from disco_rl.jobs.eval import job as eval_lib
from disco_rl.jobs.meta import config as meta_config
from disco_rl.jobs.meta import job as meta_lib
from disco_rl.runtime import compiled
from disco_rl.runtime import mesh as mesh_lib

LEVELS = {
  'default': jax.lax.Precision.DEFAULT,
  'high': jax.lax.Precision.HIGH,
  'highest': jax.lax.Precision.HIGHEST,
}


def _mesh():
  return mesh_lib.make_mesh(jax.devices()[:1])


def _step(state, x):
  """Counts steps; a product summed over the devices; the per-device part
  arrives without its device axis."""
  total, rows = state
  return (total + 1, rows + 1), dict(
    product=jax.lax.psum(x @ x, mesh_lib.AXIS), rows=rows
  )


SPECS = (P(), P(mesh_lib.AXIS))


def test_a_program_runs_up_to_its_length_in_one_compiled_call():
  program = compiled.program(
    _step,
    length=4,
    mesh=_mesh(),
    state_specs=SPECS,
    operand_specs=(P(),),
    output_specs=dict(product=P(), rows=P(mesh_lib.AXIS)),
    precision='highest',
  )
  state = (jnp.zeros(()), jnp.zeros((1, 3)))  # [D=1, 3] per device.
  x = jnp.eye(2)
  assert program.compile(state, x) > 0.0
  assert program.compile(state, x) == 0.0  # Once.
  state, out = program(state, 3, x)
  assert float(state[0]) == 3.0 and state[1].shape == (1, 3)
  np.testing.assert_array_equal(state[1], np.full((1, 3), 3.0))
  # Only the steps run leave the program: [count, ...], per-device outputs
  # with their device axis back.
  assert out['product'].shape == (3, 2, 2) and out['rows'].shape == (3, 1, 3)
  np.testing.assert_array_equal(out['rows'][:, 0, 0], [0, 1, 2])
  state, out = program(state, 4, x)  # The same executable, another count.
  assert float(state[0]) == 7.0 and len(out['product']) == 4
  for bad in (0, 5):
    with pytest.raises(
      ValueError,
      match=rf'count must be in \[1, 4\], got '
      rf'{bad}',
    ):
      program(state, bad, x)
  # The state given is donated: its buffers belong to the new one.
  program(state, 1, x)
  with pytest.raises(RuntimeError, match='deleted'):
    np.asarray(state[1])


def test_placed_puts_its_outputs_on_the_mesh():
  sharding = mesh_lib.replicated(_mesh())
  out = compiled.placed(
    lambda key: jax.random.normal(key, (3,)), sharding, 'default'
  )(jax.random.PRNGKey(0))
  assert out.sharding.is_equivalent_to(sharding, 1)


# ----------------------------------------------------------------------------
# The matmul precision.


def _products(x, w, k):
  """A matrix product and a convolution, neither with a precision."""
  conv = jax.lax.conv_general_dilated(
    x[None, :, :, None],
    k,
    (1, 1),
    'SAME',
    dimension_numbers=('NHWC', 'HWIO', 'NHWC'),
  )
  return x @ w, conv


def _inputs():
  keys = jax.random.split(jax.random.PRNGKey(0), 3)
  return (
    jax.random.normal(keys[0], (8, 8)),
    jax.random.normal(keys[1], (8, 4)),
    jax.random.normal(keys[2], (3, 3, 1, 2)),
  )


def _traced_precisions(fn) -> dict[str, tuple]:
  """{primitive: precision} of the products in `fn`'s jaxpr."""
  jaxpr = jax.make_jaxpr(fn)(*_inputs())
  return {
    e.primitive.name: e.params['precision']
    for e in jaxpr.eqns
    if e.primitive.name in ('dot_general', 'conv_general_dilated')
  }


@pytest.mark.parametrize('name', config_lib.MATMUL_PRECISIONS)
def test_every_product_is_traced_at_the_precision(name):
  assert _traced_precisions(compiled.traced_with(name, _products)) == {
    'dot_general': (LEVELS[name],) * 2,
    'conv_general_dilated': (LEVELS[name],) * 2,
  }


def test_the_context_is_entered_inside_the_function():
  """A caller's context does not reach inside; outside it is untouched."""
  fn = compiled.traced_with('highest', _products)
  with jax.default_matmul_precision('default'):
    inside = _traced_precisions(fn)
  assert set(inside.values()) == {(LEVELS['highest'],) * 2}
  assert set(_traced_precisions(_products).values()) == {None}


class CpuProductsTest(chex.TestCase):
  @chex.variants(with_jit=True, without_jit=True)
  def test_cpus_compute_float32_in_full_at_every_precision(self):
    """What the setting's help says of CPUs (the suite runs on one)."""
    if jax.default_backend() != 'cpu':
      self.skipTest('a CPU fact')
    outs = {
      name: self.variant(compiled.traced_with(name, _products))(*_inputs())
      for name in config_lib.MATMUL_PRECISIONS
    }
    for name in ('high', 'highest'):
      jax.tree.map(np.testing.assert_array_equal, outs[name], outs['default'])


def _precisions(hlo: str) -> set[str]:
  """The precision of every dot_general of a lowered program."""
  dots = [line for line in hlo.splitlines() if 'stablehlo.dot_general' in line]
  assert dots
  return {
    (re.search(r'precision = \[(\w+), \w+\]', d) or [None, 'none'])[1]
    for d in dots
  }


EVAL = tiny.eval_config(
  **tiny.SMALL_AGENT, rollout_len=3, num_devices=1, steps_per_call=2
)


@pytest.mark.parametrize('name', ['default', 'highest'])
def test_the_eval_program_uses_the_configured_precision(name):
  job = eval_lib.make_eval(dataclasses.replace(EVAL, matmul_precision=name))
  assert _precisions(job.program.lower(job.init()).as_text()) == {name.upper()}


# A meta program's compile (24 s of the default suite's 20 min,
# 2026-12-03): in the slow target; the eval program's precision above is
# set by the same `compiled.program` argument.
@pytest.mark.slow
def test_the_meta_program_uses_the_configured_precision():
  job = meta_lib.make_meta_train(
    tiny.meta_config(
      **tiny.SMALL_AGENT,
      num_agents=1,
      value_dense=(4,),
      num_inner_steps=1,
      num_devices=1,
      steps_per_call=1,
      matmul_precision='highest',
    )
  )
  assert _precisions(job.program.lower(job.init()).as_text()) == {'HIGHEST'}


@pytest.mark.parametrize(
  'config_cls', [config_lib.EvalConfig, meta_config.MetaTrainConfig]
)
def test_the_setting_is_checked_with_the_config(config_cls):
  with pytest.raises(
    ValueError,
    match=r"Unknown matmul_precision 'fast'; "
    r"expected one of \('default', 'high', 'highest'\)",
  ):
    config_cls(matmul_precision='fast')
  for name in config_lib.MATMUL_PRECISIONS:
    config_cls(matmul_precision=name)
