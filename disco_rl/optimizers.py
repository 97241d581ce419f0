# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Optimisers: the agents' (Adam with no meta-gradient through its
denominator) and the rule's, in meta-training.

The rule's optimiser transforms per-agent meta-gradients.

The population gives one meta-gradient per agent, stacked on a leading axis
[N, ...]. `per_agent(inner, N)` runs any optax transformation on each agent's
slice with its own state (e.g. the paper's per-agent Adam normalisation) and
`mean_over_agents()` averages the slices, so both recipes are plain chains:

  'average' (the upstream notebook):
      chain(per_agent(clip, N), mean_over_agents(), adam(lr))
  'per_agent_adam' (the paper, Oh et al. 2025, Methods):
      chain(per_agent(chain(clip, scale_by_adam()), N), mean_over_agents(),
            scale(-lr))
"""

import chex
import jax
import jax.numpy as jnp
import optax
from optax import tree_utils as otu


def scale_by_adam_sg_denom(
  b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
) -> optax.GradientTransformation:
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
      jax.lax.stop_gradient(otu.tree_bias_correction(nu, b2, count)),
    )
    scaled = otu.tree_div(otu.tree_bias_correction(mu, b1, count), denominator)
    return scaled, optax.ScaleByAdamState(count=count, mu=mu, nu=nu)

  return optax.GradientTransformation(
    optax.scale_by_adam(b1, b2, eps).init, update_fn
  )


# The agents' optimisers (`agent_optimizer`'s `kind`).
AGENT_OPTIMIZERS = ('adam', 'sgd')
# The global-norm clip of the 'sgd' agents' gradient (GROOVE's tabular
# agents': EmptyJackson/groove, models/optim.py, --lpg_max_grad_norm).
SGD_MAX_GRAD_NORM = 0.5


def agent_optimizer(
  learning_rate: float, max_abs_update: float, kind: str = 'adam'
) -> optax.GradientTransformation:
  """The agent's optimiser, descending at `learning_rate`.

  'adam' (the upstream's): Adam without a meta-gradient through its
  denominator, each update clipped element-wise to `max_abs_update`.
  'sgd' (GROOVE's tabular agents): the gradient clipped to a global norm
  of `SGD_MAX_GRAD_NORM`, then a plain step; an update linear in the
  gradient, so a meta-gradient through it does not grow as Adam's does
  where the agent's gradients are small (Adam's 1/sqrt(second moment)).
  """
  if kind == 'sgd':
    return optax.chain(
      optax.clip_by_global_norm(SGD_MAX_GRAD_NORM),
      optax.scale(-learning_rate),
    )
  if kind != 'adam':
    raise ValueError(
      f'agent optimizer must be one of {AGENT_OPTIMIZERS}, got {kind!r}.'
    )
  return optax.chain(
    scale_by_adam_sg_denom(),
    optax.clip(max_delta=max_abs_update),
    optax.scale(-learning_rate),
  )


def per_agent(
  inner: optax.GradientTransformation, num_agents: int
) -> optax.GradientTransformation:
  """`inner` applied to each agent's slice [i, ...] of [N, ...] updates.

  Each agent has its own `inner` state (a leading [N] axis); the updates
  keep their agent axis.

  Args:
    inner: any optax transformation of one agent's meta-gradient.
    num_agents: N.
  """

  def init_fn(params):
    return jax.vmap(lambda _: inner.init(params))(jnp.arange(num_agents))

  def update_fn(updates, state, params=None):
    del params
    chex.assert_tree_shape_prefix(updates, (num_agents,))
    return jax.vmap(inner.update)(updates, state)

  return optax.GradientTransformation(init_fn, update_fn)


def mean_over_agents() -> optax.GradientTransformation:
  """[N, ...] updates -> their mean over the agents [...] (stateless)."""

  def update_fn(updates, state, params=None):
    del params
    return jax.tree.map(lambda u: jnp.mean(u, axis=0), updates), state

  return optax.GradientTransformation(
    lambda params: optax.EmptyState(), update_fn
  )


def meta_optimizer(
  meta_grad_norm: str, learning_rate: float, clip_norm: float, num_agents: int
) -> optax.GradientTransformation:
  """The rule's optimiser for `MetaTrainConfig.meta_grad_norm`.

  Args:
    meta_grad_norm: 'average' (Adam on the mean of the agents'
      meta-gradients) or 'per_agent_adam' (each agent's meta-gradient
      normalised by its own Adam moments, the updates averaged and scaled:
      eta <- eta - lr * mean_i ADAM_i(g_i)).
    learning_rate: the meta learning rate.
    clip_norm: clip each agent's meta-gradient to this global norm first
      (0: no clipping).
    num_agents: the population size N (the meta-gradients are [N, ...]).
  """
  clip = (
    optax.clip_by_global_norm(clip_norm) if clip_norm > 0 else optax.identity()
  )
  if meta_grad_norm == 'average':
    return optax.chain(
      per_agent(clip, num_agents), mean_over_agents(), optax.adam(learning_rate)
    )
  if meta_grad_norm == 'per_agent_adam':
    return optax.chain(
      per_agent(optax.chain(clip, optax.scale_by_adam()), num_agents),
      mean_over_agents(),
      optax.scale(-learning_rate),
    )
  raise ValueError(
    f'Unknown meta_grad_norm {meta_grad_norm!r}; expected '
    "'average' or 'per_agent_adam'."
  )
