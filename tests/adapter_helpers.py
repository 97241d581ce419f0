# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What the environment adapters' exactness tests share (gymnax, Craftax,
Jumanji): a rollout through the adapter, to set beside the wrapped library
stepped by hand."""

import functools

import jax


@functools.partial(jax.jit, static_argnums=0)
def adapter_rollout(env, rng, actions):
  """The adapter's reset, then one `step_with_info` per row of `actions`,
  in one compiled program (as the loops run it: compiled and eager float
  arithmetic can differ in the last bit).

  Args:
    env: a `base.AdapterEnvironment` of batch size B.
    rng: the reset key.
    actions: [T, B] actions.

  Returns:
    (first timestep, [T, B] timesteps, [T, B] `StepInfo`s).
  """
  state, first = env.reset(rng)

  def step(state, action):
    state, timestep, info = env.step_with_info(state, action)
    return state, (timestep, info)

  _, (timesteps, infos) = jax.lax.scan(step, state, actions)
  return first, timesteps, infos
