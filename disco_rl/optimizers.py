# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Optimisers used by agents and value functions."""

import jax
import jax.numpy as jnp
import optax
from optax import tree_utils as otu


def scale_by_adam_sg_denom(b1: float = 0.9, b2: float = 0.999,
                           eps: float = 1e-8) -> optax.GradientTransformation:
  """Adam's rescaling, with no meta-gradient through the denominator.

  The same numbers as `optax.scale_by_adam` (same state, same moment and
  bias-correction utilities). When the updates are differentiated
  (meta-gradients through an inner update), the bias-corrected second moment
  is a constant, which keeps those gradients well behaved.

  Args:
    b1: decay of the first-moment average.
    b2: decay of the second-moment average.
    eps: added to the root of the second moment.

  Returns:
    An `optax.GradientTransformation` whose state is `optax.ScaleByAdamState`.
  """

  def update_fn(updates, state, params=None):
    del params
    count = optax.safe_increment(state.count)
    mu = otu.tree_update_moment(updates, state.mu, b1, 1)
    nu = otu.tree_update_moment_per_elem_norm(updates, state.nu, b2, 2)
    denominator = jax.tree.map(
        lambda v: jnp.sqrt(v) + eps,
        jax.lax.stop_gradient(otu.tree_bias_correction(nu, b2, count)))
    scaled = otu.tree_div(otu.tree_bias_correction(mu, b1, count), denominator)
    return scaled, optax.ScaleByAdamState(count=count, mu=mu, nu=nu)

  return optax.GradientTransformation(
      optax.scale_by_adam(b1, b2, eps).init, update_fn)


def agent_optimizer(learning_rate: float,
                    max_abs_update: float) -> optax.GradientTransformation:
  """Adam (no denominator meta-gradient), element-wise update clip, descent."""
  return optax.chain(
      scale_by_adam_sg_denom(),
      optax.clip(max_delta=max_abs_update),
      optax.scale(-learning_rate),
  )
