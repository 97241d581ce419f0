# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Small helpers: devices, trees, specs, losses and moving averages."""

from collections.abc import Callable, Mapping, Sequence
import inspect
from typing import Any, TypeVar

import chex
import jax
import jax.numpy as jnp
from ml_collections import config_dict
import numpy as np
import rlax

from disco_rl import types

_T = TypeVar('_T')
# Type aliases (as rlax spells them).
Array = chex.Array
ArrayTree = chex.ArrayTree

# ----------------------------------------------------------------------------
# Devices.

# The default `pmap` axis name of this package (as in the upstream notebooks).
DEFAULT_AXIS_NAME = 'i'


def _leading_axis_sharding(
  devices: Sequence[jax.Device], axis_name: str
) -> jax.sharding.NamedSharding:
  # `jax.pmap` returns arrays sharded this way (a mesh over its devices named
  # after its axis); giving it inputs with the same sharding lets it reuse
  # its compiled program instead of compiling again for a new layout.
  mesh = jax.sharding.Mesh(np.asarray(devices), (axis_name,))
  return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(axis_name))


def check_divisible(size: int, num_devices: int, what: str) -> int:
  """Returns `size // num_devices`, raising a clear error if not exact."""
  if num_devices < 1:
    raise ValueError(f'Need at least one device, got {num_devices}.')
  if size % num_devices:
    raise ValueError(
      f'{what}={size} does not divide across {num_devices} devices; use a '
      f'multiple of {num_devices} (e.g. '
      f'{num_devices * max(1, size // num_devices)}).'
    )
  return size // num_devices


def shard_across_devices(
  data: _T, devices: Sequence[jax.Device], axis_name: str = DEFAULT_AXIS_NAME
) -> _T:
  """Splits every leaf's leading axis across `devices`, adding a device axis.

  A leaf of shape [N, ...] becomes a [D, N // D, ...] array whose d-th slice
  lives on `devices[d]`, ready to be fed to a `jax.pmap` over `devices`.

  Args:
    data: a tree of arrays whose leaves share a leading axis N.
    devices: the D devices; N must be a multiple of D.
    axis_name: the `axis_name` of the `pmap` the data is for (only affects
      which compiled program the `pmap` reuses).

  Returns:
    The same tree of device-sharded arrays.
  """
  devices = tuple(devices)
  num = len(devices)
  sharding = _leading_axis_sharding(devices, axis_name)

  def _shard(x):
    x = np.asarray(x) if not isinstance(x, jax.Array) else x
    if x.ndim == 0:
      raise ValueError(
        'shard_across_devices needs arrays with a leading batch axis; got a '
        'scalar.'
      )
    per_device = check_divisible(x.shape[0], num, 'leading axis size')
    return jax.device_put(x.reshape((num, per_device) + x.shape[1:]), sharding)

  return jax.tree.map(_shard, data)


def replicate_across_devices(
  data: _T, devices: Sequence[jax.Device], axis_name: str = DEFAULT_AXIS_NAME
) -> _T:
  """Copies every leaf onto each device, adding a leading device axis [D, ...].

  The modern replacement of the removed `jax.device_put_replicated`;
  `axis_name` as in `shard_across_devices`.
  """
  devices = tuple(devices)
  sharding = _leading_axis_sharding(devices, axis_name)

  def _replicate(x):
    x = jnp.asarray(x)
    return jax.device_put(
      jnp.broadcast_to(x, (len(devices),) + x.shape), sharding
    )

  return jax.tree.map(_replicate, data)


def gather_from_devices(data: _T) -> _T:
  """Brings a device-sharded tree to the host, [D, N, ...] merged to
  [D * N, ...]."""
  return jax.tree.map(
    lambda x: x.reshape((-1,) + x.shape[2:]), jax.device_get(data)
  )


def _device_copies(leaf, replicated: bool) -> np.ndarray:
  """[D, ...] copies of a leaf: its rows, or a replicated array's buffers."""
  if replicated:
    if not isinstance(leaf, jax.Array):
      raise ValueError(
        'replica_spread(replicated=True) expects jax.Arrays, '
        f'got {type(leaf).__name__}.'
      )
    copies = [shard.data for shard in leaf.addressable_shards]
  else:
    copies = leaf
    if np.ndim(leaf) == 0:
      raise ValueError(
        'replica_spread expects [D, ...] leaves (one row per '
        'device), got a scalar; for replicated jax.Arrays '
        'pass replicated=True.'
      )
  copies = jax.tree.map(
    lambda x: (
      jax.random.key_data(x)
      if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)
      else x
    ),
    copies,
  )
  return np.asarray(jax.device_get(copies), dtype=np.float64)


def replica_spread(data: ArrayTree, *, replicated: bool = False) -> float:
  """How far the per-device copies of a replicated tree have drifted apart.

  Args:
    data: a tree whose leaves are [D, ...] arrays, one row per device (what a
      `jax.pmap` returns for replicated values); with `replicated`, a tree of
      replicated `jax.Array`s (what the loops' `shard_map` programs return),
      whose per-device buffers are compared.
    replicated: compare the buffers of replicated arrays instead of rows.

  Returns:
    The largest absolute difference between any device's copy and the first
    device's, over all leaves (0.0 when every copy is identical or there is
    one device; NaN if the copies hold NaNs).
  """
  spread = 0.0
  for leaf in jax.tree.leaves(data):
    copies = _device_copies(leaf, replicated)
    if copies.size and copies.shape[0] > 1:
      if np.isnan(copies).any():
        return float('nan')
      spread = max(spread, float(np.max(np.abs(copies[1:] - copies[:1]))))
  return float(spread)


# ----------------------------------------------------------------------------
# Trees and indexing.


def batch_lookup(table: Array, index: Array, num_dims: int = 2) -> Array:
  """Selects `table[i_0, ..., i_{n-1}, index[i_0, ..., i_{n-1}]]`.

  Args:
    table: [*P, K, ...] with a prefix P of `num_dims` axes.
    index: [*P] integer indices into the K axis.
    num_dims: the number of prefix axes.

  Returns:
    [*P, ...] the selected entries.
  """
  chex.assert_rank(index, num_dims)
  chex.assert_equal_shape_prefix([table, index], num_dims)
  index = index.astype(jnp.int32)
  expanded = index.reshape(index.shape + (1,) * (table.ndim - num_dims))
  picked = jnp.take_along_axis(table, expanded, axis=num_dims)
  return jnp.squeeze(picked, axis=num_dims)


def tree_stack(elems: Sequence[ArrayTree], axis: int = 0) -> ArrayTree:
  """Stacks same-structured trees leaf by leaf along a new `axis`."""
  return jax.tree.map(lambda *leaves: jnp.stack(leaves, axis=axis), *elems)


def broadcast_specs(specs: _T, n: int, replace: bool = False) -> _T:
  """Puts `n` in front of every spec's shape (or in place of its first axis).

  Args:
    specs: a tree of `dm_env.specs.Array` or `jax.ShapeDtypeStruct`.
    n: the new leading size.
    replace: replace the first axis instead of prepending one.

  Returns:
    The tree of broadcast specs.
  """
  skip = 1 if replace else 0

  def _broadcast(spec):
    if isinstance(spec, types.specs.Array):
      return spec.replace(shape=(n,) + tuple(spec.shape[skip:]))
    if isinstance(spec, types.ArraySpec):
      return types.ArraySpec(
        shape=(n,) + tuple(spec.shape[skip:]), dtype=spec.dtype
      )
    raise ValueError(f'broadcast_specs: unsupported spec type {type(spec)}.')

  return jax.tree.map(_broadcast, specs)


def _to_float32(x: Any, cast_ints: bool) -> Any:
  dtype = getattr(x, 'dtype', None)
  if dtype is None:
    return x
  if jnp.issubdtype(dtype, jnp.floating) and dtype != np.float32:
    return x.astype(np.float32)
  if cast_ints and dtype == np.int64:
    return x.astype(np.int32)
  return x


def cast_to_single_precision(
  tree_like: _T, cast_ints: bool = True, host_data: bool = False
) -> _T:
  """Casts floating leaves to float32 (and int64 to int32 if `cast_ints`).

  With `host_data=False` only floating leaves are cast (device data).
  """
  return jax.tree.map(
    lambda x: _to_float32(x, cast_ints=cast_ints and host_data), tree_like
  )


def get_num_actions_from_spec(spec: types.ActionSpec) -> int:
  """Number of discrete actions of a bounded scalar spec."""
  return int(spec.maximum - spec.minimum + 1)


def get_logits_specs(
  spec: types.ActionSpec, with_batch_dim: bool = False
) -> types.ArraySpec:
  """The spec of policy logits, [A] float32, for an action spec.

  Args:
    spec: the action spec; with `with_batch_dim`, its leading axis is a batch
      axis and is ignored.
    with_batch_dim: whether `spec` carries a leading batch axis.
  """
  unbatched = spec.replace(shape=spec.shape[1:]) if with_batch_dim else spec
  return types.ArraySpec((get_num_actions_from_spec(unbatched),), np.float32)


def zeros_like_spec(spec: Any, prepend_shape: tuple[int, ...] = ()) -> Any:
  """A tree of numpy zeros shaped `prepend_shape + spec.shape` per spec."""
  return jax.tree.map(
    lambda s: np.zeros(tuple(prepend_shape) + tuple(s.shape), s.dtype), spec
  )


def differentiable_policy_gradient_loss(
  logits_t: Array, a_t: Array, adv_t: Array, backprop: bool
) -> Array:
  """Per-step policy-gradient loss -log pi(a_t) * adv_t.

  Args:
    logits_t: [..., A] action preferences.
    a_t: [...] actions taken.
    adv_t: [...] advantages of those actions.
    backprop: let gradients flow into `adv_t` (for meta-gradients).

  Returns:
    [...] the loss per step.
  """
  chex.assert_type([logits_t, a_t, adv_t], [float, int, float])
  chex.assert_equal_shape([a_t, adv_t])
  log_pi_a_t = rlax.batched_index(jax.nn.log_softmax(logits_t), a_t)
  weight = adv_t if backprop else jax.lax.stop_gradient(adv_t)
  return -log_pi_a_t * weight


# ----------------------------------------------------------------------------
# Moving averages.


class MovingAverage:
  """Debiased exponential moving averages of a tree's mean and variance.

  Each leaf contributes its (cross-device) mean per update; `normalize` uses the
  debiased moments, as Adam does.
  """

  def __init__(
    self, example_tree: ArrayTree, decay: float = 0.999, eps: float = 1e-6
  ):
    """Builds the tracker.

    Args:
      example_tree: a tree with the structure later given to `update_state`.
      decay: decay of the moments (the step size is `1 - decay`).
      eps: added to the standard deviation when normalising.
    """
    self._example_tree = example_tree
    self._decay = decay
    self._eps = eps

  def init_state(self) -> types.EmaState:
    zero = lambda _: jnp.zeros((), jnp.float32)
    return types.EmaState(
      moment1=jax.tree.map(zero, self._example_tree),
      moment2=jax.tree.map(zero, self._example_tree),
      decay_product=jnp.ones((), jnp.float32),
    )

  def _blend(self, old: Array, sample: Array, axis_name: str | None) -> Array:
    mean = jnp.mean(sample)
    if axis_name is not None:
      mean = jax.lax.pmean(mean, axis_name=axis_name)
    return self._decay * old + (1.0 - self._decay) * mean

  def update_state(
    self,
    tree_like: ArrayTree,
    state: types.EmaState,
    pmean_axis_name: str | None,
  ) -> types.EmaState:
    """Folds the batch means of `tree_like` and of its square into `state`."""
    blend = lambda old, x: self._blend(old, x, pmean_axis_name)
    return types.EmaState(
      moment1=jax.tree.map(blend, state.moment1, tree_like),
      moment2=jax.tree.map(
        lambda old, x: blend(old, jnp.square(x)), state.moment2, tree_like
      ),
      decay_product=state.decay_product * self._decay,
    )

  def _moments(self, state: types.EmaState):
    debias = 1.0 / (1.0 - state.decay_product)
    mean = jax.tree.map(lambda m1: m1 * debias, state.moment1)
    # Clipped at zero: the difference can go slightly negative in float32.
    var = jax.tree.map(
      lambda m2, m: jnp.maximum(m2 * debias - m * m, 0.0), state.moment2, mean
    )
    return mean, var

  def normalize(
    self,
    value: ArrayTree,
    state: types.EmaState,
    subtract_mean: bool = True,
    root_eps: float = 1e-12,
  ) -> ArrayTree:
    """(value - mean) / (sqrt(var + root_eps) + eps), or without the mean.

    `root_eps` keeps the square root differentiable at zero variance.
    """
    mean, var = self._moments(state)

    def _apply(m, v, x):
      centred = x - m if subtract_mean else x
      return centred / (jnp.sqrt(v + root_eps) + self._eps)

    return jax.tree.map(_apply, mean, var, value)


# ----------------------------------------------------------------------------
# Argument checking.


def as_config(settings: Any, argument: str) -> config_dict.ConfigDict:
  """`settings` as a ConfigDict: one is returned as is, a mapping is wrapped.

  Args:
    settings: a ConfigDict or a mapping.
    argument: how the caller names the argument, for the error message.

  Raises:
    TypeError: for anything else.
  """
  if isinstance(settings, config_dict.ConfigDict):
    return settings
  if isinstance(settings, Mapping):
    return config_dict.ConfigDict(dict(settings))
  raise TypeError(
    f'{argument} must be an ml_collections ConfigDict or a '
    f'mapping, got {type(settings).__name__}.'
  )


def check_keys(given, accepted, what: str) -> None:
  """Raises a ValueError naming any key of `given` not in `accepted`."""
  unknown = sorted(set(given) - set(accepted))
  if unknown:
    raise ValueError(
      f'Unknown {what} key(s) {unknown}; accepted keys are {sorted(accepted)}.'
    )


def check_kwargs(
  fn: Callable[..., Any], kwargs: Mapping[str, Any], what: str
) -> None:
  """Raises a ValueError for keys of `kwargs` that `fn` (class or function)
  does not accept as keyword arguments."""
  # A class's signature is its `__init__`'s, without `self`.
  params = inspect.signature(fn).parameters
  if any(p.kind is p.VAR_KEYWORD for p in params.values()):
    return
  names = [
    n
    for n, p in params.items()
    if n != 'self' and p.kind is not p.VAR_POSITIONAL
  ]
  check_keys(kwargs, names, what)
