# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.networks.nets: mixed precision of the agent network."""

import functools

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco_rl import agent as agent_lib
from disco_rl.environments import jittable_envs
from disco_rl.jobs import config as config_lib
from disco_rl.networks import nets


def _agent(precision):
  env = jittable_envs.CatchJittableEnvironment(
    batch_size=3, env_settings=jittable_envs.get_config_catch()
  )
  settings = agent_lib.make_settings(
    'disco_103', 1e-2, (32,), 8, (8,), precision
  )
  agent = agent_lib.Agent(
    single_observation_spec=env.single_observation_spec(),
    single_action_spec=env.single_action_spec(),
    agent_settings=settings,
    batch_axis_name=None,
  )
  return agent, env


def test_float32_is_the_network_itself():
  agent, _ = _agent('float32')
  network = agent.network
  assert nets.with_precision(network, 'float32') is network


# Slow (moved to `make test-slow` 2026-12-04 for the 8-minute default run; the
# default run computes the residual torso in bfloat16)
@pytest.mark.slow
def test_bfloat16_computes_in_bfloat16_with_float32_params_and_outputs():
  agent32, env = _agent('float32')
  agent16, _ = _agent('bfloat16')
  params = agent32.initial_learner_state(jax.random.PRNGKey(0)).params
  state = agent32.initial_actor_state(jax.random.PRNGKey(0))
  _, timestep = env.reset(jax.random.PRNGKey(1))
  obs = jax.tree.map(lambda x: jnp.stack([x] * 4), timestep.observation)
  reset = jnp.zeros((4, 3), bool)
  out32, _ = agent32.network.unroll(params, state, obs, reset)
  out16, _ = agent16.network.unroll(params, state, obs, reset)
  for leaf in jax.tree.leaves(out16):
    assert leaf.dtype == jnp.float32
  chex.assert_trees_all_close(out16, out32, rtol=5e-2, atol=5e-2)
  assert not all(
    np.array_equal(a, b)
    for a, b in zip(jax.tree.leaves(out16), jax.tree.leaves(out32), strict=True)
  )
  # The torso's matrix products run in bfloat16.
  jaxpr = str(jax.make_jaxpr(agent16.network.unroll)(params, state, obs, reset))
  assert 'bf16[' in jaxpr and 'dot_general' in jaxpr

  def loss(p):
    out, _ = agent16.network.unroll(p, state, obs, reset)
    return jnp.sum(out['logits'] ** 2)

  grads = jax.grad(loss)(params)
  for leaf in jax.tree.leaves(grads):
    assert leaf.dtype == jnp.float32
  assert any(np.abs(g).sum() > 0 for g in jax.tree.leaves(grads))


def test_unknown_precision_is_named():
  with pytest.raises(ValueError, match="Unknown precision 'float16'"):
    nets.with_precision(_agent('float32')[0].network, 'float16')
  with pytest.raises(ValueError, match=r'net_settings.precision \'fp8\''):
    _agent('fp8')


# ----------------------------------------------------------------------------
# The conv torso ('conv') next to the MLP.

_MINATAR_SHAPE = (10, 10, 4)  # Breakout-MinAtar's observation.


def _spec_agent(net, obs_shape, rule='disco_103', **conv):
  from dm_env import specs  # pylint: disable=g-import-not-at-top

  settings = agent_lib.make_settings(
    rule, 1e-2, (16,), 8, (8,), net=net, **conv
  )
  return agent_lib.Agent(
    single_observation_spec={'observation': specs.Array(obs_shape, np.float32)},
    single_action_spec=specs.BoundedArray((), np.int32, 0, 2),
    agent_settings=settings,
    batch_axis_name=None,
  )


def _param_names(agent):
  params = jax.eval_shape(
    agent.initial_learner_state, jax.random.PRNGKey(0)
  ).params
  return {k: {n: v.shape for n, v in p.items()} for k, p in params.items()}


def test_mlp_parameter_names_are_unchanged():
  """The golden cases and checkpoints load the MLP's parameters by name."""
  names = set(_param_names(_agent('float32')[0]))
  assert names == {
    'mlp/action_cond/linear',
    'mlp/linear',
    'mlp/mlp/~/linear_0',
    'mlp/mlp/~/linear_1',
    'mlp/mlp_1/~/linear_0',
    'mlp/mlp_1/~/linear_1',
    'mlp/mlp_2/~/linear_0',
    'mlp/mlp_2/~/linear_1',
    'mlp/~_embedding_pass/torso/~/linear_0',
    'mlp/~_head_pass/torso_head/~/linear_0',
    'mlp/~_head_pass/torso_head_1/~/linear_0',
  }


def test_conv_torso_parameters_and_output_shapes(fast_compile):
  del fast_compile
  conv = _spec_agent(
    'conv', _MINATAR_SHAPE, conv_channels=(4, 6), conv_kernel=3
  )
  mlp = _spec_agent('mlp', _MINATAR_SHAPE)
  names = _param_names(conv)
  assert names['conv_net/~_embedding_pass/conv_0']['w'] == (3, 3, 4, 4)
  assert names['conv_net/~_embedding_pass/conv_1']['w'] == (3, 3, 4, 6)
  # SAME padding, stride 1: the MLP torso sees all 10 x 10 x 6 features.
  assert names['conv_net/~_embedding_pass/torso/~/linear_0']['w'] == (600, 16)
  # The heads and the action model are the MLP's, under 'conv_net/'.
  mlp_rest = {
    k[len('mlp/') :] for k in _param_names(mlp) if 'embedding_pass' not in k
  }
  conv_rest = {
    k[len('conv_net/') :] for k in names if 'embedding_pass' not in k
  }
  assert conv_rest == mlp_rest

  obs = jax.random.uniform(jax.random.PRNGKey(1), (5, 2) + _MINATAR_SHAPE)
  reset = jnp.zeros((5, 2), bool)

  @jax.jit
  def outputs(key):
    params = conv.initial_learner_state(key).params
    state = conv.initial_actor_state(key)
    out, _ = conv.network.unroll(params, state, obs, reset)
    step, _ = conv.network.one_step(params, state, obs[0], reset[0])
    return out, step

  out, step = outputs(jax.random.PRNGKey(0))
  mlp_out = jax.eval_shape(
    lambda key: mlp.network.unroll(
      mlp.initial_learner_state(key).params, {}, obs, reset
    )[0],
    jax.random.PRNGKey(0),
  )
  chex.assert_trees_all_equal_shapes_and_dtypes(out, mlp_out)
  assert out['logits'].shape == (5, 2, 3)
  chex.assert_trees_all_close(
    jax.tree.map(lambda x: x[0], out), step, rtol=1e-5, atol=1e-6
  )


def test_conv_torso_needs_images_and_the_mlp_takes_anything():
  with pytest.raises(
    ValueError,
    match=(
      r"net='conv' needs one image observation of shape \[H, W, C\]; .*"
      r'gives shape\(s\) \[\(4,\)\]'
    ),
  ):
    nets.check_observation_spec(
      'conv', {'observation': jax.ShapeDtypeStruct((4,), jnp.float32)}
    )
  nets.check_observation_spec(
    'mlp', {'observation': jax.ShapeDtypeStruct((4,), jnp.float32)}
  )
  # Built on vectors anyway, the network says so when it first runs.
  agent = _spec_agent('conv', (4,))
  with pytest.raises(ValueError, match=r"net='conv' needs one image"):
    jax.eval_shape(agent.initial_learner_state, jax.random.PRNGKey(0))
  # The MLP flattens images.
  _param_names(_spec_agent('mlp', _MINATAR_SHAPE))


def test_conv_with_a_vector_environment_is_refused_by_name(fast_compile):
  del fast_compile
  from disco_rl.jobs.eval import job as eval_lib  # pylint: disable=g-import-not-at-top

  config = config_lib.EvalConfig(
    env='gymnax:CartPole-v1',
    net='conv',
    batch_size=2,
    replay_ratio=1,
    buffer_capacity=2,
    dense=(4,),
    model_lstm_size=4,
    model_head_hiddens=(4,),
  )
  with pytest.raises(
    ValueError,
    match=(
      r"net='conv' needs one image observation of shape \[H, W, C\]; env "
      r"'gymnax:CartPole-v1' .* gives shape\(s\) \[\(4,\)\]. Use net='mlp'"
    ),
  ):
    eval_lib.make_eval(config, rule_params={})


@pytest.mark.parametrize(
  'net_cls, final_relu', [(nets.MLP, False), (nets.ConvNet, True)]
)
def test_torso_ends_in_a_relu_only_in_the_conv_network(net_cls, final_relu):
  """MinAtar's reference network: conv, ReLU, 128 hidden, ReLU; the MLP
  (the upstream's, golden) ends its torso in a linear layer."""
  action_spec = jittable_envs.CatchJittableEnvironment(
    batch_size=1, env_settings=jittable_envs.get_config_catch()
  ).single_action_spec()

  def embed(x):
    net = net_cls(
      out_spec={}, dense=(32, 16), action_spec=action_spec, head_w_init_std=None
    )
    return net._embedding_pass(x)  # pylint: disable=protected-access

  fn = hk.transform(embed)
  x = jax.random.normal(jax.random.PRNGKey(0), (64,) + _MINATAR_SHAPE)
  params = fn.init(jax.random.PRNGKey(1), x)
  out = np.asarray(fn.apply(params, None, x))
  assert out.shape == (64, 16)
  # After a ReLU nothing is negative; a linear layer's outputs of normal
  # inputs are negative about half the time.
  assert (out.min() >= 0) == final_relu
  assert (out < 0).mean() == (0 if final_relu else pytest.approx(0.5, abs=0.2))


@pytest.mark.parametrize('precision', ['float32', 'bfloat16'])
def test_byte_observations_give_the_outputs_of_their_float_values(
  precision, fast_compile
):
  """MinAtar's channels are stored as uint8; networks see them as floats."""
  del fast_compile
  settings = agent_lib.make_settings(
    'disco_103', 1e-2, (16,), 8, (8,), precision, net='conv', conv_channels=(4,)
  )
  from dm_env import specs  # pylint: disable=g-import-not-at-top

  agent = agent_lib.Agent(
    single_observation_spec={
      'observation': specs.Array(_MINATAR_SHAPE, np.uint8)
    },
    single_action_spec=specs.BoundedArray((), np.int32, 0, 2),
    agent_settings=settings,
    batch_axis_name=None,
  )
  params = agent.initial_learner_state(jax.random.PRNGKey(0)).params
  state = agent.initial_actor_state(jax.random.PRNGKey(0))
  obs = jax.random.bernoulli(
    jax.random.PRNGKey(1), 0.3, (3, 2) + _MINATAR_SHAPE
  ).astype(jnp.uint8)
  reset = jnp.zeros((3, 2), bool)
  from_bytes, _ = agent.network.unroll(params, state, obs, reset)
  from_floats, _ = agent.network.unroll(
    params, state, obs.astype(jnp.float32), reset
  )
  chex.assert_trees_all_equal(from_bytes, from_floats)
  assert from_bytes['logits'].dtype == jnp.float32
  assert nets.float_observations(obs).dtype == jnp.float32
  floats = jnp.ones((2,), jnp.bfloat16)
  assert nets.float_observations(floats) is floats or (
    nets.float_observations(floats).dtype == jnp.bfloat16
  )


# ----------------------------------------------------------------------------
# The residual torso ('resnet').


def test_resnet_parameters_downsampling_and_outputs(fast_compile):
  del fast_compile
  agent = _spec_agent(
    'resnet', _MINATAR_SHAPE, resnet_channels=(4, 6), resnet_blocks=2
  )
  names = _param_names(agent)
  stem = 'res_net/~_embedding_pass/'
  assert names[stem + 'stage_0_conv']['w'] == (3, 3, 4, 4)
  assert names[stem + 'stage_1_conv']['w'] == (3, 3, 4, 6)
  for i, channels in enumerate((4, 6)):
    for j in range(2):
      for k in range(2):
        assert names[stem + f'stage_{i}_block_{j}_conv_{k}']['w'] == (
          3,
          3,
          channels,
          channels,
        )
  # Two stride-2 SAME max-pools: 10 x 10 -> 5 x 5 -> 3 x 3, 6 channels.
  assert names[stem + 'torso/~/linear_0']['w'] == (3 * 3 * 6, 16)
  conv_rest = {
    k[len('conv_net/') :]
    for k in _param_names(_spec_agent('conv', _MINATAR_SHAPE))
    if 'embedding_pass' not in k
  }
  assert {
    k[len('res_net/') :] for k in names if 'embedding_pass' not in k
  } == conv_rest

  obs = jax.random.uniform(jax.random.PRNGKey(1), (5, 2) + _MINATAR_SHAPE)
  reset = jnp.zeros((5, 2), bool)
  params = agent.initial_learner_state(jax.random.PRNGKey(0)).params
  state = agent.initial_actor_state(jax.random.PRNGKey(0))
  out, _ = agent.network.unroll(params, state, obs, reset)
  step, _ = agent.network.one_step(params, state, obs[0], reset[0])
  assert out['logits'].shape == (5, 2, 3)
  chex.assert_trees_all_close(
    jax.tree.map(lambda x: x[0], out), step, rtol=1e-5, atol=1e-6
  )


def test_resnet_blocks_are_residual():
  """Each block adds to its input: with its last convolution zeroed, a
  block is the identity, and the torso equals one without blocks."""
  action_spec = jittable_envs.CatchJittableEnvironment(
    batch_size=1, env_settings=jittable_envs.get_config_catch()
  ).single_action_spec()

  def embed(x, blocks):
    net = nets.ResNet(
      out_spec={},
      dense=(8,),
      action_spec=action_spec,
      head_w_init_std=None,
      resnet_channels=(4, 4),
      resnet_blocks=blocks,
    )
    return net._embedding_pass(x)  # pylint: disable=protected-access

  x = jax.random.normal(jax.random.PRNGKey(0), (3,) + _MINATAR_SHAPE)
  with_blocks = hk.transform(lambda x: embed(x, 1))
  params = with_blocks.init(jax.random.PRNGKey(1), x)
  out = with_blocks.apply(params, None, x)
  zeroed = {
    k: (jax.tree.map(jnp.zeros_like, v) if k.endswith('conv_1') else v)
    for k, v in params.items()
  }
  plain = hk.transform(lambda x: embed(x, 0))
  kept = {
    k.replace('res_net', 'res_net', 1): v
    for k, v in params.items()
    if 'block' not in k
  }
  np.testing.assert_allclose(
    with_blocks.apply(zeroed, None, x),
    plain.apply(kept, None, x),
    rtol=1e-6,
    atol=1e-6,
  )
  assert not np.allclose(out, plain.apply(kept, None, x))
  with pytest.raises(ValueError, match='resnet_blocks >= 0'):
    hk.transform(lambda x: embed(x, -1)).init(jax.random.PRNGKey(1), x)


def test_resnet_needs_an_image_and_computes_in_bfloat16(fast_compile):
  del fast_compile
  with pytest.raises(ValueError, match=r"net='resnet' needs one image"):
    nets.check_observation_spec(
      'resnet', {'observation': jax.ShapeDtypeStruct((4,), jnp.float32)}
    )
  agent = _spec_agent(
    'resnet', _MINATAR_SHAPE, resnet_channels=(4,), resnet_blocks=1
  )
  settings16 = agent_lib.make_settings(
    'disco_103',
    1e-2,
    (16,),
    8,
    (8,),
    'bfloat16',
    net='resnet',
    resnet_channels=(4,),
    resnet_blocks=1,
  )
  agent16 = agent_lib.Agent(
    single_observation_spec=agent.single_observation_spec,
    single_action_spec=agent.single_action_spec,
    agent_settings=settings16,
    batch_axis_name=None,
  )
  params = agent.initial_learner_state(jax.random.PRNGKey(0)).params
  obs = jax.random.uniform(jax.random.PRNGKey(1), (2, 3) + _MINATAR_SHAPE)
  reset = jnp.zeros((2, 3), bool)
  out32, _ = agent.network.unroll(params, {}, obs, reset)
  out16, _ = agent16.network.unroll(params, {}, obs, reset)
  assert out16['logits'].dtype == jnp.float32
  chex.assert_trees_all_close(out16, out32, rtol=5e-2, atol=5e-2)
  jaxpr = str(jax.make_jaxpr(agent16.network.unroll)(params, {}, obs, reset))
  assert 'conv_general_dilated' in jaxpr and 'bf16[' in jaxpr


# ----------------------------------------------------------------------------
# The tabular torso ('tabular'): LPG's tabular agents.


def test_tabular_heads_are_tables_over_one_hot_states():
  """No torso: every head is linear in the observation, so on one-hot
  states each state's outputs are its own row of each head (plus the
  bias), and changing one state's row changes only that state's."""
  from dm_env import specs  # pylint: disable=g-import-not-at-top

  settings = agent_lib.make_settings(
    'actor_critic', 1e-2, (16,), 8, (8,), net='tabular'
  )
  agent = agent_lib.Agent(
    single_observation_spec={'observation': specs.Array((6,), np.uint8)},
    single_action_spec=specs.BoundedArray((), np.int32, 0, 2),
    agent_settings=settings,
    batch_axis_name=None,
  )
  names = _param_names(agent)
  assert names == {  # Policy logits [A] and the categorical value [601].
    'tabular/~_head_pass/torso_head/~/linear_0': {'w': (6, 3), 'b': (3,)},
    'tabular/~_head_pass/torso_head_1/~/linear_0': {'w': (6, 601), 'b': (601,)},
  }
  params = agent.initial_learner_state(jax.random.PRNGKey(0)).params
  state = agent.initial_actor_state(jax.random.PRNGKey(0))
  states = {'observation': jnp.eye(6, dtype=jnp.uint8)[None]}  # [1, 6, 6]
  reset = jnp.zeros((1, 6), bool)

  def logits(p):
    return agent.network.unroll(p, state, states, reset)[0]['logits'][0]

  head = params['tabular/~_head_pass/torso_head/~/linear_0']
  np.testing.assert_allclose(logits(params), head['w'] + head['b'], rtol=1e-6)
  changed = jax.tree.map(lambda x: x, params)
  changed['tabular/~_head_pass/torso_head/~/linear_0'] = dict(
    head, w=head['w'].at[2].add(1.0)
  )
  moved = np.abs(logits(changed) - logits(params)).max(-1)
  np.testing.assert_allclose(moved, [0, 0, 1, 0, 0, 0], atol=1e-6)


def test_table_is_tabular_read_as_tables():
  """'table' has 'tabular''s parameters (under `table/`), initial values
  and, on one-hot states, its outputs and gradients: the Disco agent's
  every output (its q [A, 601] is most of a tabular agent), without the
  one-hot product. It takes one vector observation only."""
  tabular, table = (_spec_agent(net, (7,)) for net in ('tabular', 'table'))
  names = _param_names(tabular)
  renamed = {k.replace('tabular/', 'table/', 1): v for k, v in names.items()}
  assert _param_names(table) == renamed
  key = jax.random.PRNGKey(3)
  params = tabular.initial_learner_state(key).params
  as_table = {k.replace('tabular/', 'table/', 1): v for k, v in params.items()}
  chex.assert_trees_all_equal(as_table, table.initial_learner_state(key).params)
  state = tabular.initial_actor_state(key)
  # Every state once, then random ones: [T=1, B=12, S=7].
  index = jnp.concatenate([jnp.arange(7), jnp.array([6, 0, 3, 3, 5])])
  states = {'observation': jax.nn.one_hot(index, 7)[None]}
  reset = jnp.zeros((1, 12), bool)

  def outputs(agent, p):
    return agent.network.unroll(p, state, states, reset)[0]

  want, got = outputs(tabular, params), outputs(table, as_table)
  chex.assert_trees_all_close(got, want, rtol=1e-6, atol=1e-6)

  def loss(agent, p):
    return sum(jnp.sum(jnp.sin(x)) for x in jax.tree.leaves(outputs(agent, p)))

  grads = jax.grad(functools.partial(loss, tabular))(params)
  table_grads = jax.grad(functools.partial(loss, table))(as_table)
  chex.assert_trees_all_close(
    table_grads,
    {k.replace('tabular/', 'table/', 1): v for k, v in grads.items()},
    rtol=1e-5,
    atol=1e-6,
  )
  with pytest.raises(ValueError, match=r"net='table' needs one vector"):
    nets.check_observation_spec('table', {'o': np.zeros((5, 5, 3))})
  nets.check_observation_spec('table', {'o': np.zeros((7,))})


def test_tabular_is_a_net_jobs_can_name():
  """config.py takes its choices from agent.TORSO_FIELDS; the Disco
  agent's action model reads the observation too."""
  assert 'tabular' in config_lib.NETS
  assert config_lib.EvalConfig(net='tabular').net == 'tabular'
  nets.check_observation_spec('tabular', {'o': np.zeros((5, 5, 3))})
  names = _param_names(_spec_agent('tabular', (4, 3)))
  assert not any('_embedding_pass' in n for n in names)
  assert names['tabular/linear']['w'] == (12, 8)  # Root of the model.
  assert names['tabular/~_head_pass/torso_head/~/linear_0']['w'] == (12, 3)
