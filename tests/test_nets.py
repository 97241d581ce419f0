# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.networks.nets: mixed precision of the agent network."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco_rl import agent as agent_lib
from disco_rl.environments import jittable_envs
from disco_rl.loops import config as config_lib
from disco_rl.networks import nets


def _agent(precision):
  env = jittable_envs.CatchJittableEnvironment(
      batch_size=3, env_settings=jittable_envs.get_config_catch())
  settings = config_lib.agent_settings('disco_103', 1e-2, (32,), 8, (8,),
                                       precision)
  agent = agent_lib.Agent(
      single_observation_spec=env.single_observation_spec(),
      single_action_spec=env.single_action_spec(), agent_settings=settings,
      batch_axis_name=None)
  return agent, env


def test_float32_is_the_network_itself():
  agent, _ = _agent('float32')
  network = agent.network
  assert nets.with_precision(network, 'float32') is network


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
  assert not all(np.array_equal(a, b) for a, b in zip(
      jax.tree.leaves(out16), jax.tree.leaves(out32)))
  # The torso's matrix products run in bfloat16.
  jaxpr = str(jax.make_jaxpr(agent16.network.unroll)(params, state, obs,
                                                     reset))
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
