# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Acting: rolling an agent out in an environment, episode returns, and a
policy's average return acting without learning."""

from collections.abc import Callable

import chex
import jax
import jax.numpy as jnp
import numpy as np

from disco_rl import agent as agent_lib
from disco_rl import types
from disco_rl.environments import base as base_env
from disco_rl.environments.wrappers import batched_env

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
) -> tuple[
  types.ActorRollout,
  types.HaikuState,
  types.EnvironmentTimestep,
  chex.ArrayTree,
]:
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
    recorded, actor_state = actor_step_fn(
      params, step_rng, timestep, actor_state
    )
    env_state, timestep = env.step(env_state, recorded.actions)
    return (env_state, timestep, actor_state), recorded

  (env_state, timestep, actor_state), recorded = jax.lax.scan(
    one_step,
    (env_state, timestep, actor_state),
    jax.random.split(rng, rollout_len),
  )
  return (
    types.ActorRollout.from_timestep(recorded),
    actor_state,
    timestep,
    env_state,
  )


def accumulate_rewards(
  acc_rewards: chex.Array, rewards_and_discounts: tuple[chex.Array, chex.Array]
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


def episode_returns(
  returns: chex.Array, discounts: chex.Array
) -> tuple[chex.Array, chex.Array]:
  """(Sum of returns of episodes that ended, number of those episodes)."""
  ended = 1.0 - jnp.asarray(discounts, jnp.float32)
  return jnp.sum(returns * ended), jnp.sum(ended)


def evaluate_policy(
  agent: agent_lib.Agent,
  params: types.AgentParams,
  env: base_env.Environment,
  rng: chex.PRNGKey,
  num_rollouts: int,
  rollout_len: int,
  matmul_precision: str = 'default',
) -> dict[str, float]:
  """Average return of a policy acting (sampling, no learning) in `env`.

  Args:
    agent: the agent whose network acts.
    params: the network's parameters.
    env: a jittable environment (its batch acts at once).
    rng: a random key.
    num_rollouts: rollouts of `rollout_len` steps to act for.
    rollout_len: steps per rollout.
    matmul_precision: the float32 matmul precision of the program.

  Returns:
    {'avg_return': mean return of the episodes that ended (NaN if none),
     'episodes': how many ended}.
  """
  if not isinstance(env, base_env.Environment) or isinstance(
    env, batched_env.BatchedSingleStreamEnvironment
  ):
    raise TypeError(
      'env must be a jittable disco_rl Environment (e.g. '
      f"get_environment('jittable_catch', ...)), got {env!r}."
    )
  if num_rollouts < 1:
    raise ValueError(f'num_rollouts must be >= 1, got {num_rollouts}.')

  @jax.jit
  def act(params, rng):
    def one_rollout(carry, _):
      actor_state, timestep, env_state, acc, rng = carry
      rng, key = jax.random.split(rng)
      rollout, actor_state, timestep, env_state = unroll_jittable_actor(
        params,
        actor_state,
        timestep,
        env_state,
        key,
        env,
        rollout_len,
        agent.actor_step,
      )
      acc, returns = accumulate_rewards(
        acc, (rollout.rewards, rollout.discounts)
      )
      return (
        (actor_state, timestep, env_state, acc, rng),
        episode_returns(returns, rollout.discounts),
      )

    reset_rng, rng = jax.random.split(rng)
    env_state, timestep = env.reset(reset_rng)
    carry = (
      agent.initial_actor_state(rng),
      timestep,
      env_state,
      jnp.zeros(timestep.reward.shape, jnp.float32),
      rng,
    )
    return jax.lax.scan(one_rollout, carry, length=num_rollouts)[1]

  with jax.default_matmul_precision(matmul_precision):
    totals, episodes = act(jax.device_get(params), rng)
  total, episodes = float(np.sum(totals)), float(np.sum(episodes))
  return dict(
    avg_return=total / episodes if episodes else float('nan'), episodes=episodes
  )
