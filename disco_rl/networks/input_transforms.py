# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Named transformations applied to meta-network inputs.

Every entry of `TRANSFORMS` is a zero-argument builder returning a callable
`fn(x, actions, policy, axis_name) -> array`, where `actions` is [T, B],
`policy` the agent's (stop-gradient) policy [T+1, B, A] and `axis_name` the
`pmap` axis, if any. Builders that are Haiku modules must be called inside a
transform.
"""

from collections.abc import Callable, Sequence
import functools

import chex
import haiku as hk
import immutabledict
import jax
import jax.numpy as jnp
import rlax

from disco_rl import utils


class InputTransform:
  """Interface of the transforms that read more than the input itself."""

  def __call__(
    self, x, actions: chex.Array, policy: chex.Array, axis: str | None
  ) -> chex.Array:
    """Transforms one input.

    Args:
      x: the input, time and batch axes first.
      actions: [T, B] the actions taken.
      policy: [T+1, B, A] the agent's action probabilities.
      axis: the `pmap` axis name for statistics across devices, or None.

    Returns:
      The transformed input.
    """
    raise NotImplementedError


class SelectByAction(InputTransform):
  """Keeps, at every step, the entry of the action taken.

  x [T, B, A, ...] and actions [T, B] give x[t, b, actions[t, b]], of shape
  [T, B, ...].
  """

  def __call__(self, x, actions, policy, axis):
    del policy, axis
    chex.assert_rank(actions, 2)
    chex.assert_tree_shape_prefix((x, actions), actions.shape)
    return utils.batch_lookup(x, actions)


class PiWeightedAvg(InputTransform):
  """The expectation of x over actions under the policy.

  x [T, B, A, C] and policy [T, B, A] give sum_a policy[t, b, a] x[t, b, a],
  of shape [T, B, C].
  """

  def __call__(self, x, actions, policy, axis):
    del actions, axis
    chex.assert_rank((x, policy), (4, 3))
    chex.assert_tree_shape_prefix((x, policy), policy.shape)
    weights = policy[..., None]  # [T, B, A, 1]
    return jnp.sum(x * weights, axis=2)


class Normalize(InputTransform, hk.Module):
  """Normalises by EMA statistics over the time and batch axes."""

  def __call__(self, x, actions, policy, axis):
    del actions, policy
    if x.ndim < 2:
      raise ValueError(
        f'normalize needs a [T, B, ...] input, got shape {x.shape}.'
      )
    time_and_batch = (0, 1)
    norm = EmaNorm(
      decay_rate=0.99, eps=1e-6, axis=time_and_batch, cross_replica_axis=axis
    )
    return norm(x)


class EmaNorm(hk.Module):
  """Like `hk.BatchNorm` in training mode, but normalising with EMAs.

  The batch mean and mean square (averaged across replicas on
  `cross_replica_axis`) update two `hk.ExponentialMovingAverage`s, and the
  input is normalised by the EMA mean and variance.
  """

  def __init__(
    self,
    decay_rate: float,
    *,
    axis: Sequence[int] | None = None,
    data_format: str = 'channels_last',
    cross_replica_axis: str | Sequence[str] | None = None,
    cross_replica_axis_index_groups: Sequence[Sequence[int]] | None = None,
    eps: float = 1e-6,
    eps_root: float = 1e-12,
    name: str | None = None,
  ):
    """Builds the module; every setting but the decay by keyword.

    Args:
      decay_rate: EMA decay.
      axis: axes reduced over; default all but the channel axis.
      data_format: where the channel axis is (see `hk.get_channel_index`).
      cross_replica_axis: `pmap`/`vmap` axis name(s) to average statistics on.
      cross_replica_axis_index_groups: device groups for that average.
      eps: added to the standard deviation.
      eps_root: added to the variance inside the root (meta-gradient safety).
      name: module name.
    """
    super().__init__(name=name)
    self.channel_index = hk.get_channel_index(data_format)
    self.axis = axis
    self.eps, self.eps_root = eps, eps_root
    self.cross_replica_axis = cross_replica_axis
    self.cross_replica_axis_index_groups = cross_replica_axis_index_groups
    # EMAs of the first and second moments.
    self.m1_ema = hk.ExponentialMovingAverage(decay_rate, name='m1_ema')
    self.m2_ema = hk.ExponentialMovingAverage(decay_rate, name='m2_ema')

  def _reduction_axes(self, ndim: int) -> Sequence[int]:
    if self.axis is not None:
      return self.axis
    channel = self.channel_index % ndim
    return [i for i in range(ndim) if i != channel]

  def __call__(self, inputs: jax.Array) -> jax.Array:
    """Updates the EMAs with this batch and returns the normalised input."""
    axes = self._reduction_axes(inputs.ndim)
    first = jnp.mean(inputs, axes, keepdims=True)
    second = jnp.mean(jnp.square(inputs), axes, keepdims=True)
    if self.cross_replica_axis:
      first, second = jax.lax.pmean(
        (first, second),
        axis_name=self.cross_replica_axis,
        axis_index_groups=self.cross_replica_axis_index_groups,
      )
    self.m1_ema(first)
    self.m2_ema(second)
    mean = self.m1_ema.average.astype(inputs.dtype)
    var = jnp.maximum(self.m2_ema.average.astype(inputs.dtype) - mean**2, 0.0)
    eps = jnp.asarray(self.eps, var.dtype)
    eps_root = jnp.asarray(self.eps_root, var.dtype)
    return (inputs - mean) / (jnp.sqrt(var + eps_root) + eps)


def td_pair(x: chex.Array) -> chex.Array:
  """[T+1, ...] -> [T, ..., 2C]: features at t and t+1 side by side."""
  return jnp.concatenate([x[:-1], x[1:]], axis=-1)


def _elementwise(fn: Callable[[chex.Array], chex.Array]):
  """Lifts a one-argument function to the transform interface."""

  def builder():
    def transform(x, actions, policy, axis):
      del actions, policy, axis
      return fn(x)

    return transform

  return builder


# The transforms of x alone, by what they do.
_ELEMENTWISE = {
  # Along the time axis ([T+1, ...] -> [T, ...]).
  'drop_last': lambda x: x[:-1],
  'td_pair': td_pair,
  # Over the action axis ([T, B, A, ...] -> [T, B, ...]).
  'max_a': functools.partial(jnp.max, axis=2),
  # Value by value.
  'identity': lambda x: x,
  'stop_grad': jax.lax.stop_gradient,
  'softmax': jax.nn.softmax,
  'masks_to_discounts': lambda is_terminal: 1.0 - is_terminal,
  'clip': lambda x: jnp.clip(x, -2.0, 2.0),
  'sign': jnp.sign,
  # Sign-preserving squashing: sign(x) log(1 + |x|) and the hyperbolic one.
  'sign_log': rlax.signed_logp1,
  'sign_hyp': rlax.signed_hyperbolic,
}

TRANSFORMS = immutabledict.immutabledict(
  {
    'select_a': SelectByAction,
    'pi_weighted_avg': PiWeightedAvg,
    'normalize': Normalize,
    **{key: _elementwise(fn) for key, fn in _ELEMENTWISE.items()},
  }
)
