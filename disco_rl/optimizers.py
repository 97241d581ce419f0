# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Optimisers used by agents and value functions."""

import jax
import jax.numpy as jnp
import optax


def _debias(moment, decay: float, count):
  """Undoes the zero initialisation of an EMA after `count` updates."""
  return jax.tree.map(
      lambda m: m / (1 - decay**count).astype(m.dtype), moment)


def scale_by_adam_sg_denom(b1: float = 0.9, b2: float = 0.999,
                           eps: float = 1e-8) -> optax.GradientTransformation:
  """Adam's rescaling, with no meta-gradient through the denominator.

  Identical to `optax.scale_by_adam` in the forward pass. When the updates are
  differentiated (meta-gradients through an inner update), the second-moment
  estimate is treated as a constant, which keeps those gradients well behaved.

  Args:
    b1: decay of the first-moment average.
    b2: decay of the second-moment average.
    eps: added to the root of the second moment.

  Returns:
    An `optax.GradientTransformation` whose state is `optax.ScaleByAdamState`.
  """

  def init_fn(params):
    zeros = lambda p: jax.tree.map(jnp.zeros_like, p)
    return optax.ScaleByAdamState(
        count=jnp.zeros((), jnp.int32), mu=zeros(params), nu=zeros(params))

  def update_fn(updates, state, params=None):
    del params
    mu = jax.tree.map(lambda g, m: (1 - b1) * g + b1 * m, updates, state.mu)
    nu = jax.tree.map(lambda g, v: (1 - b2) * (g * g) + b2 * v, updates,
                      state.nu)
    count = optax.safe_int32_increment(state.count)
    mu_hat = _debias(mu, b1, count)
    nu_hat = jax.lax.stop_gradient(_debias(nu, b2, count))
    scaled = jax.tree.map(lambda m, v: m / (jnp.sqrt(v) + eps), mu_hat, nu_hat)
    return scaled, optax.ScaleByAdamState(count=count, mu=mu, nu=nu)

  return optax.GradientTransformation(init_fn, update_fn)


def agent_optimizer(learning_rate: float,
                    max_abs_update: float) -> optax.GradientTransformation:
  """Adam (no denominator meta-gradient), element-wise update clip, descent."""
  return optax.chain(
      scale_by_adam_sg_denom(),
      optax.clip(max_delta=max_abs_update),
      optax.scale(-learning_rate),
  )
