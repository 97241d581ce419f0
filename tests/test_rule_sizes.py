# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The Disco rule at other sizes (`disco.MetaNetSizes`): same names, other
shapes; Disco103's by default."""

import dataclasses

import chain_helpers
import jax
import numpy as np
import pytest

from disco_rl import agent as agent_lib
from disco_rl import environments
from disco_rl.update_rules import disco

pytestmark = pytest.mark.usefixtures('fast_compile')

# LPG's prediction size, small LSTMs.
_SMALL = dict(
  prediction_size=8,
  hidden_size=32,
  embedding_size=(8, 1),
  meta_hidden_size=16,
  policy_target_channels=(8,),
)


def _rule_shapes(rule):
  params = jax.eval_shape(rule.init_params, jax.random.PRNGKey(0))[0]
  return params, {
    k: {n: v.shape for n, v in p.items()} for k, p in params.items()
  }


def _rule(sizes=None):
  settings = agent_lib.get_settings_disco(sizes)
  return disco.DiscoUpdateRule(**settings.update_rule)


def test_the_defaults_are_disco_103_s():
  net = agent_lib.get_settings_disco().update_rule.net
  assert (
    net.prediction_size,
    net.hidden_size,
    net.meta_rnn_kwargs.hidden_size,
  ) == (600, 256, 128)
  assert tuple(net.embedding_size) == (16, 1)
  params, shapes = _rule_shapes(_rule())
  assert disco.sizes_from_params(params) == disco.MetaNetSizes()
  assert shapes['lstm/linear_2']['w'] == (256, 600)  # y target.
  assert shapes['lstm/lstm/linear']['w'][1] == 4 * 256
  assert disco.as_sizes(None) == disco.as_sizes({}) == disco.MetaNetSizes()


def test_a_smaller_rule_has_disco_103_s_names_and_its_own_shapes():
  sizes = disco.as_sizes(_SMALL)
  params, shapes = _rule_shapes(_rule(sizes))
  _, default_shapes = _rule_shapes(_rule())
  assert set(shapes) == set(default_shapes)
  assert shapes['lstm/linear_2']['w'] == (32, 8)
  assert shapes['lstm/linear_3']['w'] == (32, 8)
  assert shapes['lstm/lstm/linear']['w'][1] == 4 * 32
  assert shapes['lstm/~/meta_lstm/~unroll/lstm/linear']['w'][1] == 4 * 16
  assert shapes['lstm/mlp/~/linear_0']['w'] == (8, 8)
  assert disco.sizes_from_params(params) == sizes
  count = lambda p: sum(np.prod(x.shape) for x in jax.tree.leaves(p))
  assert count(params) < count(_rule_shapes(_rule())[0]) / 10


def test_a_smaller_rule_trains_a_tabular_agent():
  """A learner step of the Disco agent at the small size on delayed-chain
  states: y and z have 8 categories, the step is finite and moves the
  agent."""
  agent = chain_helpers.tabular_chain_agent(rule_sizes=_SMALL)
  learner = jax.jit(agent.initial_learner_state)(jax.random.PRNGKey(0))
  rule_params, _ = jax.jit(agent.update_rule.init_params)(jax.random.PRNGKey(1))
  # A rollout [T=5, B=2] along both chains, the last step rewarded.
  rollout = chain_helpers.chain_rollout(agent, learner.params)
  actor_state, outs = rollout.states, rollout.agent_outs
  assert outs['y'].shape == (5, 2, 8) and outs['z'].shape == (5, 2, 2, 8)
  step = jax.jit(agent.learner_step, static_argnames='is_meta_training')
  new, _, logs = step(
    jax.random.PRNGKey(4),
    rollout,
    learner,
    actor_state,
    rule_params,
    is_meta_training=False,
  )
  assert logs['meta_out']['y'].shape == (4, 2, 8)
  assert np.isfinite(float(logs['total_loss']))
  moved = jax.tree.map(
    lambda a, b: np.abs(a - b).max(), new.params, learner.params
  )
  assert max(jax.tree.leaves(moved)) > 0


def test_bad_sizes_are_named():
  with pytest.raises(
    ValueError,
    match=r'Unknown meta-network size\(s\) '
    r"\['lstm_size'\]; expected some of \['prediction_size'",
  ):
    disco.as_sizes(dict(lstm_size=8))
  with pytest.raises(
    ValueError, match='prediction_size must be a positive integer, got 0'
  ):
    disco.MetaNetSizes(prediction_size=0)
  with pytest.raises(
    ValueError,
    match=r'embedding_size must be one or more '
    r'positive sizes, got \(\)',
  ):
    disco.MetaNetSizes(embedding_size=())
  with pytest.raises(ValueError, match="rule 'actor_critic' has none"):
    agent_lib.make_settings(
      'actor_critic', 1e-2, (8,), 4, (4,), rule_sizes=_SMALL
    )
  with pytest.raises(ValueError, match='Not the parameters of a Disco'):
    disco.sizes_from_params({'mlp/linear': {'b': np.zeros(3)}})
  # Sequences become tuples; the fields are the settings a job may set.
  assert disco.MetaNetSizes(embedding_size=[4, 1]).embedding_size == (4, 1)
  assert agent_lib.RULE_SIZE_FIELDS == tuple(
    f.name for f in dataclasses.fields(disco.MetaNetSizes)
  )


def test_sizes_as_text_round_trip_through_the_command_line_form():
  """`MetaNetSizes.text()` is what `--rule-sizes` takes: tuples as
  '8x1'; Disco103's sizes say so."""
  sizes = disco.as_sizes(_SMALL)
  assert sizes.text() == (
    'prediction_size=8,hidden_size=32,embedding_size=8x1,'
    'policy_target_channels=8,meta_hidden_size=16'
  )
  assert disco.as_sizes(environments.parse_kwargs(sizes.text())) == sizes
  assert sizes.changes() == _SMALL
  assert disco.MetaNetSizes().text() == "Disco103's"
  assert disco.MetaNetSizes().changes() == {}
  assert disco.MetaNetSizes(embedding_size='4x2x1').embedding_size == (4, 2, 1)
  with pytest.raises(ValueError, match=r"or text such as '16x1'\), got '4x'"):
    disco.MetaNetSizes(embedding_size='4x')
