# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.loops.precision and the loops' `matmul_precision` setting."""

import dataclasses
import re

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco_rl.loops import config as config_lib
from disco_rl.loops import eval_loop
from disco_rl.loops import meta_loop
from disco_rl.loops import precision

LEVELS = {'default': jax.lax.Precision.DEFAULT,
          'high': jax.lax.Precision.HIGH,
          'highest': jax.lax.Precision.HIGHEST}


def _products(x, w, k):
  """A matrix product and a convolution, neither with a precision."""
  conv = jax.lax.conv_general_dilated(x[None, :, :, None], k, (1, 1), 'SAME',
                                      dimension_numbers=('NHWC', 'HWIO',
                                                         'NHWC'))
  return x @ w, conv


def _inputs():
  keys = jax.random.split(jax.random.PRNGKey(0), 3)
  return (jax.random.normal(keys[0], (8, 8)),
          jax.random.normal(keys[1], (8, 4)),
          jax.random.normal(keys[2], (3, 3, 1, 2)))


def _traced_precisions(fn) -> dict[str, tuple]:
  """{primitive: precision} of the products in `fn`'s jaxpr."""
  jaxpr = jax.make_jaxpr(fn)(*_inputs())
  return {e.primitive.name: e.params['precision'] for e in jaxpr.eqns
          if e.primitive.name in ('dot_general', 'conv_general_dilated')}


@pytest.mark.parametrize('name', precision.MATMUL_PRECISIONS)
def test_every_product_is_traced_at_the_precision(name):
  assert _traced_precisions(precision.traced_with(name, _products)) == {
      'dot_general': (LEVELS[name],) * 2,
      'conv_general_dilated': (LEVELS[name],) * 2}


def test_the_context_is_entered_inside_the_function():
  """A caller's context does not reach inside; outside it is untouched."""
  fn = precision.traced_with('highest', _products)
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
    outs = {name: self.variant(precision.traced_with(name, _products))(
        *_inputs()) for name in precision.MATMUL_PRECISIONS}
    for name in ('high', 'highest'):
      jax.tree.map(np.testing.assert_array_equal, outs[name], outs['default'])


def test_an_unknown_precision_is_named():
  with pytest.raises(ValueError, match=r"Unknown matmul_precision 'tf32'; "
                     r"expected one of \('default', 'high', 'highest'\)"):
    precision.traced_with('tf32', _products)


def _precisions(hlo: str) -> list[str]:
  """The precision of every dot_general of a lowered program."""
  dots = [line for line in hlo.splitlines() if 'stablehlo.dot_general' in line]
  assert dots
  return [(re.search(r'precision = \[(\w+), \w+\]', d) or [None, 'none'])[1]
          for d in dots]


EVAL = config_lib.EvalConfig(
    rule='actor_critic', batch_size=4, replay_ratio=2, buffer_capacity=8,
    rollout_len=3, dense=(8,), model_lstm_size=4, model_head_hiddens=(4,),
    num_devices=1, steps_per_call=2)


@pytest.mark.parametrize('name', ['default', 'highest'])
def test_the_eval_program_uses_the_configured_precision(name):
  loop = eval_loop.EvalLoop(dataclasses.replace(EVAL, matmul_precision=name))
  state = loop.init(jax.random.PRNGKey(0))
  assert set(_precisions(loop.lower(state).as_text())) == {name.upper()}


def test_the_meta_program_uses_the_configured_precision():
  config = config_lib.MetaTrainConfig(
      num_agents=1, batch_size_per_device=2, rollout_len=3, dense=(8,),
      model_lstm_size=4, model_head_hiddens=(4,), value_dense=(4,),
      num_devices=1, steps_per_call=1, matmul_precision='highest')
  trainer = meta_loop.MetaTrainer(config)
  state = trainer.init(jax.random.PRNGKey(0))
  assert set(_precisions(trainer.lower(state).as_text())) == {'HIGHEST'}


@pytest.mark.parametrize('config_cls', [config_lib.EvalConfig,
                                        config_lib.MetaTrainConfig])
def test_the_setting_is_checked_with_the_config(config_cls):
  check = (config_lib.check_eval_config if config_cls is config_lib.EvalConfig
           else config_lib.check_meta_train_config)
  with pytest.raises(ValueError, match="Unknown matmul_precision 'fast'"):
    check(config_cls(matmul_precision='fast'))
  for name in precision.MATMUL_PRECISIONS:
    check(config_cls(matmul_precision=name))
