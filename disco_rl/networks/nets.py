# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Agent networks and the factory that turns them into pure functions.

Parameter names are part of the public contract (checkpoints key on them): an
`MLP` agent network produces e.g. `mlp/~_embedding_pass/torso/~/linear_0`,
`mlp/~_head_pass/torso_head/~/linear_0` and, with an action model,
`mlp/linear`, `mlp/action_cond/linear`, `mlp/mlp/~/linear_0`.
"""

from collections.abc import Iterable, Mapping
from typing import Any

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import jmp
import numpy as np

from disco_rl import types
from disco_rl.networks import action_models

# Type aliases (as rlax spells them).
Array = chex.Array
ArrayTree = chex.ArrayTree


def get_network(name: str, *args, **kwargs) -> types.PolicyNetwork:
  """Builds the pure `init`/`one_step`/`unroll` functions of a network.

  Args:
    name: a key of `NETWORKS` (e.g. 'mlp').
    *args: positional constructor arguments of that network.
    **kwargs: keyword constructor arguments (out_spec, action_spec, ...).

  Returns:
    A `types.PolicyNetwork`; `one_step` takes [B, ...] inputs and `unroll`
    [T, B, ...] inputs.
  """
  if name not in NETWORKS:
    raise ValueError(
      f'Unknown network name {name!r}; expected one of {sorted(NETWORKS)}.'
    )

  def one_step(observations, should_reset=None):
    return NETWORKS[name](*args, **kwargs)(
      float_observations(observations), should_reset
    )

  def unroll(observations, should_reset=None):
    return NETWORKS[name](*args, **kwargs).unroll(
      float_observations(observations), should_reset
    )

  one_step_fns: hk.TransformedWithState = hk.without_apply_rng(
    hk.transform_with_state(one_step)
  )
  unroll_fns: hk.TransformedWithState = hk.without_apply_rng(
    hk.transform_with_state(unroll)
  )
  return types.PolicyNetwork(
    init=one_step_fns.init, one_step=one_step_fns.apply, unroll=unroll_fns.apply
  )


def float_observations(
  observations: ArrayTree, scales: list[float] | None = None
) -> ArrayTree:
  """Observations with every integer or bool leaf (bytes as stored, e.g.
  MinAtar's uint8 channels) as float32, times its entry of `scales` (one per
  leaf in tree order, `observation_scales`; None: 1); floating leaves
  unchanged."""
  leaves, tree = jax.tree.flatten(observations)
  if scales is None or len(scales) != len(leaves):
    scales = [1.0] * len(leaves)  # A mismatch: the agent's check names it.

  def to_float(x, scale):
    x = jnp.asarray(x)
    if jnp.issubdtype(x.dtype, jnp.floating):
      return x
    x = x.astype(jnp.float32)
    return x if scale == 1.0 else x * scale

  return jax.tree.unflatten(
    tree, [to_float(x, s) for x, s in zip(leaves, scales, strict=True)]
  )


def observation_scales(observation_spec: Any) -> list[float]:
  """Per observation leaf (tree order), the factor its values are
  multiplied by as floats: 1 / maximum for integer leaves whose spec bounds
  them to [0, maximum] with maximum > 1 (Atari's 0..255 frames: 1/255),
  else 1 (MinAtar's 0/1 bytes, floats)."""

  def scale(spec) -> float:
    maximum = getattr(spec, 'maximum', None)
    if (
      maximum is None
      or not np.issubdtype(np.dtype(spec.dtype), np.integer)
      or np.ndim(maximum) != 0
      or float(maximum) <= 1
      or float(getattr(spec, 'minimum', 0)) != 0
    ):
      return 1.0
    return 1.0 / float(maximum)

  return [
    scale(s)
    for s in jax.tree.leaves(
      observation_spec, is_leaf=lambda x: hasattr(x, 'dtype')
    )
  ]


def with_observation_scales(
  network: types.PolicyNetwork, observation_spec: Any
) -> types.PolicyNetwork:
  """The network taking observations of `observation_spec` as stored:
  integer leaves become float32 times `observation_scales` (e.g. Atari's
  uint8 frames divided by 255) before the network (and its precision
  policy) sees them. The network itself where every scale is 1."""
  scales = observation_scales(observation_spec)
  if all(s == 1.0 for s in scales):
    return network

  def wrap(apply):
    def apply_scaled(params, state, observations, should_reset=None):
      return apply(
        params, state, float_observations(observations, scales), should_reset
      )

    return apply_scaled

  return types.PolicyNetwork(
    init=network.init,
    one_step=wrap(network.one_step),
    unroll=wrap(network.unroll),
  )


PRECISIONS = ('float32', 'bfloat16')


def with_precision(
  network: types.PolicyNetwork, precision: str
) -> types.PolicyNetwork:
  """The network computing in `precision`, with float32 parameters and outputs.

  A `jmp.Policy`: `one_step` and `unroll` cast the parameters and the
  observations (bytes first to floats) to the compute dtype and the outputs
  back to float32, so the parameters, their gradients, the optimiser and
  every consumer of the outputs (the update rule, the meta-network) stay in
  float32. `init` is unchanged.

  Args:
    network: the float32 network.
    precision: 'float32' (returns `network` itself) or 'bfloat16'.
  """
  if precision not in PRECISIONS:
    raise ValueError(
      f'Unknown precision {precision!r}; expected one of {PRECISIONS}.'
    )
  if precision == 'float32':
    return network
  policy = jmp.Policy(
    param_dtype=jnp.float32,
    compute_dtype=jnp.dtype(precision),
    output_dtype=jnp.float32,
  )

  def wrap(apply):
    def apply_in_precision(params, state, observations, should_reset=None):
      outputs, state = apply(
        policy.cast_to_compute(params),
        state,
        policy.cast_to_compute(float_observations(observations)),
        should_reset,
      )
      return policy.cast_to_output(outputs), state

    return apply_in_precision

  return types.PolicyNetwork(
    init=network.init,
    one_step=wrap(network.one_step),
    unroll=wrap(network.unroll),
  )


class MLPHeadNet(hk.Module):
  """A torso (defined by subclasses) with linear heads for every output.

  Heads follow `out_spec` (one `torso_head` MLP per leaf, in tree order); an
  optional action model adds action-conditional outputs ([B, A, ...]).
  """

  def __init__(
    self,
    out_spec: ArrayTree,
    action_spec: types.Specs,
    head_w_init_std: float | None,
    model_out_spec: ArrayTree | None = None,
    model_arch_name: str | None = None,
    model_kwargs: Mapping[str, Any] | None = None,
    module_name: str | None = None,
  ):
    super().__init__(name=module_name)
    self._out_spec, self._action_spec = out_spec, action_spec
    self._head_w_init = (
      hk.initializers.TruncatedNormal(head_w_init_std)
      if head_w_init_std
      else None
    )
    # The optional action model, for outputs conditioned on each action.
    self._model = (
      action_models.get_action_model(
        model_arch_name,
        action_spec=action_spec,
        out_spec=model_out_spec,
        **(model_kwargs or {}),
      )
      if model_out_spec
      else None
    )

  def _embedding_pass(
    self, inputs: ArrayTree, should_reset: Array | None = None
  ) -> Array:
    """Maps [B, ...] inputs to a [B, E] embedding."""
    raise NotImplementedError

  def _head_pass(self, embedding: Array) -> dict[str, Array]:
    """One linear head per `out_spec` leaf: [B, E] -> [B, *leaf.shape]."""
    flat = hk.Flatten()(embedding)
    batch = flat.shape[0]

    def head(spec):
      size = int(np.prod(spec.shape))
      out = hk.nets.MLP((size,), w_init=self._head_w_init, name='torso_head')(
        flat
      )
      return out.reshape((batch,) + tuple(spec.shape))

    return jax.tree.map(head, self._out_spec)

  def __call__(
    self, inputs: ArrayTree, should_reset: Array | None = None
  ) -> dict[str, Array]:
    """Outputs for one step: every leaf of `inputs` is [B, ...]."""
    torso = self._embedding_pass(inputs)
    outputs = self._head_pass(torso)
    if self._model is not None:
      root = self._model.root_embedding(torso)
      outputs.update(self._model.model_step(root))
    return outputs

  def unroll(
    self, inputs: ArrayTree, should_reset: Array | None = None
  ) -> dict[str, Array]:
    """Outputs for a sequence: every leaf of `inputs` is [T, B, ...]."""
    return hk.BatchApply(self.__call__)(inputs, should_reset)


class MLP(MLPHeadNet):
  """Feed-forward agent: observations flattened, concatenated, then an MLP."""

  def __init__(
    self,
    out_spec: ArrayTree,
    dense: Iterable[int],
    action_spec: types.Specs,
    head_w_init_std: float | None,
    model_out_spec: ArrayTree | None = None,
    model_arch_name: str | None = None,
    model_kwargs: Mapping[str, Any] | None = None,
    module_name: str | None = None,
  ) -> None:
    hidden_sizes = tuple(dense)  # Read once: `dense` may be an iterator.
    super().__init__(
      out_spec,
      action_spec,
      head_w_init_std,
      model_out_spec,
      model_arch_name,
      model_kwargs,
      module_name,
    )
    self._dense = hidden_sizes

  # The upstream MLP's torso ends in a linear layer (golden numbers).
  TORSO_ACTIVATE_FINAL = False

  def _embedding_pass(
    self, inputs: ArrayTree, should_reset: Array | None = None
  ) -> Array:
    del should_reset  # Stateless.
    leaves = [hk.Flatten()(leaf) for leaf in jax.tree.leaves(inputs)]
    return hk.nets.MLP(
      self._dense, activate_final=self.TORSO_ACTIVATE_FINAL, name='torso'
    )(jnp.concatenate(leaves, -1))


def check_observation_spec(
  name: str, observation_spec: Any, what: str = 'single_observation_spec()'
) -> None:
  """Raises unless observations of `observation_spec` fit network `name`.

  'mlp' and 'tabular' flatten every observation, so any shape fits;
  'conv' and 'resnet' need exactly one image [H, W, C] among the
  observations (the others, e.g. Sokoban's step count, go beside the
  image's features into the MLP torso); 'table' needs one vector [S].

  Args:
    name: the network's name (a key of `NETWORKS`).
    observation_spec: one observation's spec tree (no batch axis).
    what: the spec's name in messages.
  """
  shapes = [
    tuple(s.shape)
    for s in jax.tree.leaves(
      observation_spec, is_leaf=lambda x: hasattr(x, 'shape')
    )
  ]
  if name == 'table' and (len(shapes) != 1 or len(shapes[0]) != 1):
    raise ValueError(
      f"net='table' needs one vector observation [S] (a one-hot state); "
      f'{what} gives shape(s) {shapes or "(none)"}. Use '
      "net='tabular' for other observations."
    )
  if name not in IMAGE_NETWORKS:
    return
  if sum(len(shape) == 3 for shape in shapes) != 1:
    raise ValueError(
      f'net={name!r} needs one image observation of shape [H, W, C]; {what} '
      f"gives shape(s) {shapes or '(none)'}. Use net='mlp' for vector "
      'observations (other observations may go beside one image).'
    )


def split_image(
  inputs: ArrayTree, name: str = 'conv'
) -> tuple[Array, list[Array]]:
  """The one [B, H, W, C] image among batched observations, and the others
  (in tree order).

  Raises:
    ValueError: unless exactly one observation is an image.
  """
  leaves = jax.tree.leaves(inputs)
  check_observation_spec(
    name, [x[0] for x in leaves], 'the observation (without its batch axis)'
  )
  index = next(i for i, x in enumerate(leaves) if x.ndim == 4)
  return leaves[index], leaves[:index] + leaves[index + 1 :]


class ConvNet(MLP):
  """MinAtar-style agent: conv layers, then the MLP torso, heads and model.

  The observation's image ([B, H, W, C]; other observations, flattened,
  join its features at the MLP torso) goes through `conv_channels`
  convolutions (`conv_kernel` x `conv_kernel`, stride 1, SAME padding, ReLU
  after each); the `MLP`'s torso (flatten, hidden sizes `dense`, here with a
  ReLU after its last layer too, as MinAtar's reference network: conv 16
  3x3, ReLU, 128 hidden, ReLU), heads and action model follow. Parameters:
  `conv_net/~_embedding_pass/conv_0` ..., then the `MLP`'s names under
  `conv_net/`.
  """

  def __init__(
    self,
    out_spec: ArrayTree,
    dense: Iterable[int],
    action_spec: types.Specs,
    head_w_init_std: float | None,
    conv_channels: Iterable[int] = (16,),
    conv_kernel: int = 3,
    model_out_spec: ArrayTree | None = None,
    model_arch_name: str | None = None,
    model_kwargs: Mapping[str, Any] | None = None,
    module_name: str | None = None,
  ) -> None:
    channels = tuple(conv_channels)
    if not channels or min(channels) < 1 or conv_kernel < 1:
      raise ValueError(
        f'conv_channels must be positive sizes and conv_kernel >= 1, got '
        f'conv_channels={channels} and conv_kernel={conv_kernel}.'
      )
    super().__init__(
      out_spec,
      dense,
      action_spec,
      head_w_init_std,
      model_out_spec,
      model_arch_name,
      model_kwargs,
      module_name,
    )
    self._channels, self._kernel = channels, conv_kernel

  TORSO_ACTIVATE_FINAL = True  # MinAtar's reference network.

  def _embedding_pass(
    self, inputs: ArrayTree, should_reset: Array | None = None
  ) -> Array:
    """[B, H, W, C] image (and other observations) -> [B, dense[-1]]."""
    x, others = split_image(inputs)
    for i, channels in enumerate(self._channels):
      x = jax.nn.relu(
        hk.Conv2D(
          channels, self._kernel, stride=1, padding='SAME', name=f'conv_{i}'
        )(x)
      )
    return super()._embedding_pass([x] + others, should_reset)


class ResNet(MLP):
  """IMPALA-style residual agent: residual stages, then the MLP torso.

  Each stage (one per entry of `resnet_channels`) is a 3x3 convolution
  (stride 1, SAME), a 3x3 max-pool of stride 2 (SAME: the image's height
  and width halve, rounded up) and `resnet_blocks` residual blocks (ReLU,
  3x3 conv, ReLU, 3x3 conv, added to the block's input), as in IMPALA's
  network (Espeholt et al. 2018: channels 16, 32, 32; 2 blocks). A ReLU
  follows the last stage; then the `MLP`'s torso (flatten, hidden sizes
  `dense`, with a ReLU after its last layer, as the conv network's), heads
  and action model. Parameters: `res_net/~_embedding_pass/stage_<i>_conv`,
  `.../stage_<i>_block_<j>_conv_<k>`, then the `MLP`'s names under
  `res_net/`.
  """

  def __init__(
    self,
    out_spec: ArrayTree,
    dense: Iterable[int],
    action_spec: types.Specs,
    head_w_init_std: float | None,
    resnet_channels: Iterable[int] = (16, 32, 32),
    resnet_blocks: int = 2,
    model_out_spec: ArrayTree | None = None,
    model_arch_name: str | None = None,
    model_kwargs: Mapping[str, Any] | None = None,
    module_name: str | None = None,
  ) -> None:
    channels = tuple(resnet_channels)
    if not channels or min(channels) < 1 or resnet_blocks < 0:
      raise ValueError(
        f'resnet_channels must be positive sizes and resnet_blocks >= 0, '
        f'got resnet_channels={channels} and resnet_blocks={resnet_blocks}.'
      )
    super().__init__(
      out_spec,
      dense,
      action_spec,
      head_w_init_std,
      model_out_spec,
      model_arch_name,
      model_kwargs,
      module_name,
    )
    self._channels, self._blocks = channels, resnet_blocks

  TORSO_ACTIVATE_FINAL = True

  def _embedding_pass(
    self, inputs: ArrayTree, should_reset: Array | None = None
  ) -> Array:
    """[B, H, W, C] image (and other observations) -> [B, dense[-1]]."""
    x, others = split_image(inputs, 'resnet')
    for i, channels in enumerate(self._channels):
      x = hk.Conv2D(
        channels, 3, stride=1, padding='SAME', name=f'stage_{i}_conv'
      )(x)
      x = hk.max_pool(
        x, window_shape=(1, 3, 3, 1), strides=(1, 2, 2, 1), padding='SAME'
      )
      for j in range(self._blocks):
        y = x
        for k in range(2):
          y = hk.Conv2D(
            channels,
            3,
            stride=1,
            padding='SAME',
            name=f'stage_{i}_block_{j}_conv_{k}',
          )(jax.nn.relu(y))
        x = x + y
    return super()._embedding_pass([jax.nn.relu(x)] + others, should_reset)


class Tabular(MLP):
  """Tabular agent: the heads and action model read the observation itself.

  The torso is the identity: the observations, flattened and concatenated
  ([B, F]), go straight into the `MLP`'s linear heads (one per output) and
  the action model's root embedding. On one-hot observations (the LPG
  gridworlds' and delayed chains', `environments.lpg_gridworld` and
  `environments.delayed_chain`) every head is then a table with one entry
  per state (plus a shared bias), as LPG's tabular agents; on other
  observations it is a linear agent. `dense` is accepted (every network is
  given the job's) and unused. Parameters:
  `tabular/~_head_pass/torso_head/~/linear_0`, ..., then the action model's
  under `tabular/` (`tabular/linear`, `tabular/action_cond/linear`, ...).
  """

  def _embedding_pass(
    self, inputs: ArrayTree, should_reset: Array | None = None
  ) -> Array:
    """[B, ...] observations -> [B, F], flattened and concatenated."""
    del should_reset  # Stateless.
    return jnp.concatenate(
      [hk.Flatten()(leaf) for leaf in jax.tree.leaves(inputs)], -1
    )


class _Rows(hk.Module):
  """`hk.Linear`'s parameters (w [S, O], b [O], its initialisers), read as
  a table: on [B, S] one-hot states, row s of w (plus b) for state s, which
  is `hk.Linear`'s output without the [B, S] x [S, O] product."""

  def __init__(
    self, output_size: int, w_init: hk.initializers.Initializer | None
  ):
    super().__init__(name='linear_0')  # As `hk.nets.MLP`'s one layer.
    self._output_size, self._w_init = output_size, w_init

  def __call__(self, one_hot: Array) -> Array:
    """[B, S] one-hot states -> [B, O]."""
    num_states = one_hot.shape[-1]
    w_init = self._w_init or hk.initializers.TruncatedNormal(
      1.0 / np.sqrt(num_states)
    )
    shape = [num_states, self._output_size]
    w = hk.get_parameter('w', shape, one_hot.dtype, w_init)
    b = hk.get_parameter('b', shape[1:], one_hot.dtype, jnp.zeros)
    return jnp.take(w, jnp.argmax(one_hot, axis=-1), axis=0) + b


class _TableHead(hk.Module):
  """One head of `Table`, named as `hk.nets.MLP` and its layer
  (`torso_head/~/linear_0`), so its parameters are `Tabular`'s."""

  def __init__(
    self, output_size: int, w_init: hk.initializers.Initializer | None
  ):
    super().__init__(name='torso_head')
    self._rows = _Rows(output_size, w_init)

  def __call__(self, one_hot: Array) -> Array:
    return self._rows(one_hot)


class Table(Tabular):
  """`Tabular` on one-hot states, its heads read as tables: each head's
  output for state s is row s of its weights (plus the bias), a gather
  instead of a [B, S] x [S, O] product, so a step costs O(B x O) whatever
  the number of states S (LPG's gridworlds: up to 10 x 10 x 2^5). The
  same parameters and outputs as 'tabular' on one-hot states (names under
  `table/` instead of `tabular/`); the observation must be one vector
  [S] (`check_observation_spec`) holding a one-hot state, which is not
  checked per step: on other vectors the heads read the row of the
  largest entry. The action model's root embedding stays linear in the
  observation (`Tabular`)."""

  def _head_pass(self, embedding: Array) -> dict[str, Array]:
    """[B, S] one-hot states -> one [B, *leaf.shape] output per leaf
    (built here, as `MLPHeadNet`'s: Haiku names the heads after it)."""
    batch = embedding.shape[0]

    def head(spec):
      out = _TableHead(int(np.prod(spec.shape)), self._head_w_init)(embedding)
      return out.reshape((batch,) + tuple(spec.shape))

    return jax.tree.map(head, self._out_spec)


NETWORKS = {
  'mlp': MLP,
  'conv': ConvNet,
  'resnet': ResNet,
  'tabular': Tabular,
  'table': Table,
}
# The networks that take one [H, W, C] image.
IMAGE_NETWORKS = ('conv', 'resnet')
