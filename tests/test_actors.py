# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.actors: unrolling an actor in a jittable environment, returns."""

import chex
import jax
import jax.numpy as jnp
import numpy as np

from disco_rl import actors
from disco_rl import types
from disco_rl.environments import jittable_envs


def test_unroll_steps_the_env_with_one_key_per_step():
  """A scripted actor (action = step count mod 3) records what it saw."""
  settings = jittable_envs.get_config_catch()
  settings.rows = settings.columns = 4
  env = jittable_envs.CatchJittableEnvironment(
    batch_size=2, env_settings=settings
  )

  def actor_step(params, rng, timestep, count):
    actions = jnp.full((2,), count % 3, jnp.int32)
    recorded = types.ActorTimestep(
      observations=timestep.observation,
      actions=actions,
      rewards=timestep.reward,
      discounts=timestep.step_type != 2,
      agent_outs={'key': jax.random.key_data(rng), 'params': params},
      states=count,
      logits=jnp.zeros((2, 3)),
    )
    return recorded, count + 1

  env_state, timestep = env.reset(jax.random.PRNGKey(0))
  rollout, count, last, _ = jax.jit(
    actors.unroll_jittable_actor, static_argnums=(5, 6, 7)
  )(
    jnp.float32(7.0),
    jnp.int32(0),
    timestep,
    env_state,
    jax.random.PRNGKey(1),
    env,
    5,
    actor_step,
  )
  assert isinstance(rollout, types.ActorRollout)
  assert int(count) == 5
  np.testing.assert_array_equal(rollout.states, np.arange(5))
  np.testing.assert_array_equal(rollout.actions[:, 0], np.arange(5) % 3)
  np.testing.assert_array_equal(rollout.agent_outs['params'], 7.0)
  np.testing.assert_array_equal(
    rollout.agent_outs['key'],
    jax.random.key_data(jax.random.split(jax.random.PRNGKey(1), 5)),
  )
  # The environment stepped with the recorded actions.
  state = env_state
  for t in range(5):
    state, want = env.step(state, rollout.actions[t])
  chex.assert_trees_all_equal(last, want)


def test_accumulated_returns_match_a_python_loop():
  rng = np.random.default_rng(0)
  rewards = rng.choice([-1.0, 0.0, 1.0], size=(9, 3)).astype(np.float32)
  discounts = rng.random((9, 3)) > 0.3
  carry, returns = actors.accumulate_rewards(
    jnp.zeros(3), (jnp.asarray(rewards), jnp.asarray(discounts))
  )
  expected = np.zeros((9, 3))
  running = np.zeros(3)
  for t in range(9):
    running = running + rewards[t]
    expected[t] = running
    running = running * discounts[t]
  np.testing.assert_allclose(returns, expected)
  np.testing.assert_allclose(carry, running)
