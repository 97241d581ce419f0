# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Acting: rolling an agent out in an environment, and episode returns."""

from collections.abc import Callable

import chex
import jax
import jax.numpy as jnp

from disco_rl import types
from disco_rl.environments import base as base_env

ActorStepFn = Callable[..., tuple[types.ActorTimestep, types.HaikuState]]


def unroll_jittable_actor(
    params: types.AgentParams,
    actor_state: types.HaikuState,
    timestep: types.EnvironmentTimestep,
    env_state: chex.ArrayTree,
    rng: chex.PRNGKey,
    env: base_env.Environment,
    rollout_len: int,
    actor_step_fn: ActorStepFn,
) -> tuple[types.ActorRollout, types.HaikuState, types.EnvironmentTimestep,
           chex.ArrayTree]:
  """Acts for `rollout_len` steps in a jittable environment with `lax.scan`.

  Step t uses the t-th key of `jax.random.split(rng, rollout_len)`.

  Args:
    params: the acting parameters.
    actor_state: the network state before the first step.
    timestep: the current [B] environment timestep.
    env_state: the environment's state.
    rng: a random key.
    env: a jittable environment (static under `jit`).
    rollout_len: T, the number of steps (static).
    actor_step_fn: e.g. `Agent.actor_step`.

  Returns:
    (rollout [T, B, ...], actor state, next timestep, env state) — the order
    of the upstream helper.
  """

  def one_step(carry, step_rng):
    env_state, timestep, actor_state = carry
    recorded, actor_state = actor_step_fn(params, step_rng, timestep,
                                          actor_state)
    env_state, timestep = env.step(env_state, recorded.actions)
    return (env_state, timestep, actor_state), recorded

  (env_state, timestep, actor_state), recorded = jax.lax.scan(
      one_step, (env_state, timestep, actor_state),
      jax.random.split(rng, rollout_len))
  return (types.ActorRollout.from_timestep(recorded), actor_state, timestep,
          env_state)


def accumulate_rewards(
    acc_rewards: chex.Array, rewards_and_discounts: tuple[chex.Array,
                                                          chex.Array]
) -> tuple[chex.Array, chex.Array]:
  """Running undiscounted episode returns along a [T, B] rollout.

  Args:
    acc_rewards: [B] return so far of each environment's current episode.
    rewards_and_discounts: ([T, B] rewards, [T, B] discounts), a discount of
      0 marking the last step of an episode.

  Returns:
    ([B] carried return, [T, B] return up to and including each step; at a
    step with discount 0 it is that episode's full return).
  """
  rewards, discounts = rewards_and_discounts
  chex.assert_equal_shape([rewards, discounts])

  def step(running, r_and_d):
    r_t, d_t = r_and_d
    running = running + r_t
    return running * d_t, running

  return jax.lax.scan(step, acc_rewards, (rewards, discounts))


def episode_returns(returns: chex.Array, discounts: chex.Array
                    ) -> tuple[chex.Array, chex.Array]:
  """(Sum of returns of episodes that ended, number of those episodes)."""
  ended = 1.0 - jnp.asarray(discounts, jnp.float32)
  return jnp.sum(returns * ended), jnp.sum(ended)
