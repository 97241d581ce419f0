# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The meta-network of the discovered update rule (Disco103's architecture).

Given a trajectory of the agent's outputs and the value estimates of the rule,
`LSTM` produces the targets the agent is trained towards:

  pi [T, B, A]: policy target logits,
  y  [T, B, Y]: target logits of the agent's action-independent prediction,
  z  [T, B, Y]: target logits of the action-conditional prediction at a_t,

using a backward LSTM over time (so targets can bootstrap from the future),
modulated by a slow "lifetime" LSTM (`MetaLSTM`) that sees one pooled summary
per update and whose state is carried in Haiku state across updates.

Module and parameter names match the upstream checkpoints, e.g.
`lstm/lstm/linear` (the backward LSTM) and
`lstm/~/meta_lstm/~unroll/lstm/linear` (the lifetime LSTM).
"""

from collections.abc import Callable, Mapping, Sequence
import functools
from typing import Any, NamedTuple, cast

import chex
import haiku as hk
import jax
import jax.numpy as jnp

from disco_rl import types
from disco_rl import utils
from disco_rl.networks import input_transforms

_Fn = Callable[[chex.Array], chex.Array]
# Widths of successive layers (hidden sizes or channels).
_LayerSizes = Sequence[int]
# Stddev of a truncated-normal initialiser; None: Haiku's default init.
_InitStddev = float | None
# The lifetime LSTM's state: unbatched hidden and cell vectors, carried across
# updates in Haiku state.
_LifetimeState = hk.LSTMState


class MetaNet(hk.Module):
  """Interface of meta-networks: `UpdateRuleInputs` -> dict of targets."""

  def __call__(
    self, inputs: types.UpdateRuleInputs, axis_name: str | None
  ) -> types.UpdateRuleOuts:
    raise NotImplementedError


class _Embedders(NamedTuple):
  """The learned embeddings a `TransformConfig` may name."""

  y_net: _Fn  # [T(+1), B, Y] -> [T(+1), B, E]
  z_net: _Fn  # [T(+1), B, A, Y] -> [T(+1), B, A, E]
  policy_net: _Fn  # [T, B, A, C] -> [T, B, A, C']


def _make_embedders(
  prediction_hiddens: _LayerSizes, policy_channels: _LayerSizes
) -> _Embedders:
  # Construction order fixes the module names: mlp, mlp_1, sequential.
  return _Embedders(
    y_net=_batch_mlp(prediction_hiddens, num_dims=2),
    z_net=_batch_mlp(prediction_hiddens, num_dims=3),
    policy_net=_conv1d_net(policy_channels),
  )


class LSTM(MetaNet):
  """The Disco meta-network (see the module docstring)."""

  def __init__(
    self,
    hidden_size: int,
    embedding_size: _LayerSizes,
    prediction_size: int,
    meta_rnn_kwargs: Mapping[str, Any],
    input_option: types.MetaNetInputOption,
    policy_channels: _LayerSizes = (16, 2),
    policy_target_channels: _LayerSizes = (128,),
    policy_target_stddev: _InitStddev = None,
    output_stddev: _InitStddev = None,
    aux_stddev: _InitStddev = None,
    state_stddev: _InitStddev = None,
    action_head: bool = False,
    name: str | None = None,
  ) -> None:
    """Builds the meta-network.

    Args:
      hidden_size: size of the backward (per-trajectory) LSTM.
      embedding_size: hidden sizes of the y/z embedding MLPs.
      prediction_size: Y, the size of the y and z targets.
      meta_rnn_kwargs: arguments of `MetaLSTM` (lifetime LSTM).
      input_option: which inputs to read and how to transform them.
      policy_channels: channels of the per-action input embedding.
      policy_target_channels: channels of the policy-target head.
      policy_target_stddev: init stddev of the policy-target output layer.
      output_stddev: init stddev of the `meta_input_emb` layer.
      aux_stddev: init stddev of the y/z target layers.
      state_stddev: init stddev of the lifetime-state interaction layer.
      action_head: also output `pi_action` [T, B], one scalar per step
        from the step features (a linear layer after the policy target's,
        `linear_5`; initialised like it), for the rule's 'action' policy
        target (`disco.POLICY_TARGETS`). Disco103 has none.
      name: module name.
    """
    super().__init__(name=name)
    self._hidden_size = hidden_size
    self._embedding_size = tuple(embedding_size)
    self._prediction_size = prediction_size
    self._input_option = input_option
    self._policy_channels = tuple(policy_channels)
    self._policy_target_channels = tuple(policy_target_channels)
    self._policy_target_init = _truncated_normal_or_none(policy_target_stddev)
    self._output_init = _truncated_normal_or_none(output_stddev)
    self._aux_init = _truncated_normal_or_none(aux_stddev)
    self._state_init = _truncated_normal_or_none(state_stddev)
    self._action_head = action_head
    self._meta_rnn_core = MetaLSTM(input_option=input_option, **meta_rnn_kwargs)

  def __call__(
    self, inputs: types.UpdateRuleInputs, axis_name: str | None
  ) -> types.UpdateRuleOuts:
    """Computes the targets.

    Args:
      inputs: the trajectory; `agent_out` leaves are [T+1, B, ...], rewards
        and `is_terminal` [T, B]; `extra_from_rule` holds the rule's values.
      axis_name: `pmap` axis to average statistics over, or None.

    Returns:
      dict with pi [T, B, A], y [T, B, Y], z [T, B, Y] and meta_input_emb
      [T, B, 1] (and pi_action [T, B] with `action_head`). The lifetime
      LSTM state (Haiku state `meta_rnn_state`) is advanced by one step.
    """
    initial_lifetime_state = self._meta_rnn_core.initial_state()
    # Haiku's annotations say a state is one array; this one is a tree.
    lifetime_state = cast(
      _LifetimeState,
      hk.get_state(
        'meta_rnn_state',
        shape=jax.tree.map(jnp.shape, initial_lifetime_state),
        dtype=jax.tree.map(lambda x: x.dtype, initial_lifetime_state),
        init=lambda *_: initial_lifetime_state,  # type: ignore[arg-type]
      ),
    )
    logits = inputs.agent_out['logits']
    if jnp.ndim(logits) != 3:
      raise ValueError(
        "inputs.agent_out['logits'] must be a [T+1, B, A] array, got "
        f'{getattr(logits, "shape", type(logits))}.'
      )
    _, batch_size, num_actions = logits.shape

    embedders = _make_embedders(self._embedding_size, self._policy_channels)
    x, per_action_emb = _construct_input(
      inputs,
      input_option=self._input_option,
      axis_name=axis_name,
      **embedders._asdict(),
    )
    if per_action_emb is None:
      raise ValueError(
        'The LSTM meta-network computes its policy target per action: '
        'input_option.action_conditional must name at least one input.'
      )

    # Backward LSTM over time, restarting at episode boundaries, so that each
    # step's features summarise the rest of its episode within the unroll.
    backward_core = hk.ResetCore(hk.LSTM(self._hidden_size))
    is_terminal_t = inputs.should_reset_mask_bwd[:-1]  # [T, B]
    x, _ = hk.dynamic_unroll(
      backward_core,
      (x, is_terminal_t),
      backward_core.initial_state(batch_size=batch_size),
      reverse=True,
    )
    x = _multiplicative_interaction(
      x, self._meta_rnn_core.output(lifetime_state), self._state_init
    )

    linear = lambda size, w_init: hk.BatchApply(hk.Linear(size, w_init=w_init))
    meta_input_emb = linear(1, self._output_init)(x)  # [T, B, 1]
    y_hat = linear(self._prediction_size, self._aux_init)(x)  # [T, B, Y]
    z_hat = linear(self._prediction_size, self._aux_init)(x)  # [T, B, Y]

    # Policy target: per action, the step features next to that action's
    # input embedding, then per-action convolutions down to one logit.
    per_step = jnp.repeat(x[:, :, None, :], num_actions, axis=2)  # [T,B,A,H]
    per_action = jnp.concatenate([per_step, per_action_emb], axis=-1)
    per_action = _conv1d_net(self._policy_target_channels)(per_action)
    pi_hat = linear(1, self._policy_target_init)(per_action)[..., 0]

    meta_out = dict(pi=pi_hat, y=y_hat, z=z_hat, meta_input_emb=meta_input_emb)
    if self._action_head:  # Created last: the other modules keep their names.
      meta_out['pi_action'] = linear(1, self._policy_target_init)(x)[..., 0]
    hk.set_state(
      'meta_rnn_state',
      self._meta_rnn_core.unroll(
        inputs, meta_out, lifetime_state, axis_name=axis_name
      ),
    )
    return meta_out


# The LSTM meta-network's parameters by the output they feed, as module
# paths below the network's own name (`lstm`): the policy target's last
# layer and its per-action convolutions, the y and z heads; every other
# module (the input embeddings, the backward and the lifetime LSTM, the
# multiplicative interaction, `meta_input_emb`) is the shared 'torso'.
# 'pi_action': the per-step scalar of an `action_head` network only.
HEADS = (
  ('pi_out', 'linear_4'),
  ('pi_conv', 'sequential_1/'),
  ('pi_action', 'linear_5'),
  ('y', 'linear_2'),
  ('z', 'linear_3'),
)
HEAD_NAMES = tuple(head for head, _ in HEADS) + ('torso',)


def head_of(module: str, name: str = 'lstm') -> str:
  """The head of `HEAD_NAMES` a parameter module of the `LSTM` meta-network
  named `name` belongs to, e.g. 'lstm/linear_4' -> 'pi_out',
  'lstm/sequential_1/conv1_d' -> 'pi_conv', 'lstm/lstm/linear' -> 'torso'."""
  prefix = name + '/'
  if module.startswith(prefix):
    path = module[len(prefix) :]
    for head, where in HEADS:
      if path == where or (where.endswith('/') and path.startswith(where)):
        return head
  return 'torso'


class MetaLSTM(hk.Module):
  """The lifetime LSTM: one step per update, on a pooled trajectory summary."""

  def __init__(
    self,
    input_option: types.MetaNetInputOption,
    policy_channels: _LayerSizes,
    embedding_size: _LayerSizes,
    pred_embedding_size: _LayerSizes,
    hidden_size: int,
  ):
    super().__init__()
    self._input_option = input_option
    self._policy_channels = tuple(policy_channels)
    self._embedding_size = tuple(embedding_size)
    self._pred_embedding_size = tuple(pred_embedding_size)
    self._hidden_size = hidden_size

  def unroll(
    self,
    inputs: types.UpdateRuleInputs,
    meta_out: types.UpdateRuleOuts,
    state: _LifetimeState,
    axis_name: str | None,
  ) -> _LifetimeState:
    """Advances `state` by one step summarising this trajectory's update."""
    embedders = _make_embedders(
      self._pred_embedding_size, self._policy_channels
    )
    features, _ = _construct_input(
      inputs,
      input_option=self._input_option,
      axis_name=axis_name,
      **embedders._asdict(),
    )  # [T, B, F]
    y_target_emb = embedders.y_net(jax.nn.softmax(meta_out['y']))
    summary = jnp.concatenate(
      [features, meta_out['meta_input_emb'], y_target_emb], axis=-1
    )
    summary = _batch_mlp(self._embedding_size)(summary)  # [T, B, E]
    pooled = summary.mean(axis=(0, 1))  # [E]
    if axis_name is not None:
      pooled = jax.lax.pmean(pooled, axis_name=axis_name)
    _, new_state = hk.LSTM(self._hidden_size)(pooled, state)
    return new_state

  def initial_state(self) -> _LifetimeState:
    """Zeros, unbatched: hidden and cell are [hidden_size]."""
    zeros = jnp.zeros((self._hidden_size,), jnp.float32)
    return hk.LSTMState(hidden=zeros, cell=zeros)

  def output(self, state: _LifetimeState) -> chex.Array:
    """The [hidden_size] vector other modules condition on."""
    return state.hidden


def _lookup_path(root: Any, path: str) -> Any:
  """`root[k0][k1]...` for `path` 'k0/k1/...', keys being keys or attributes."""
  node = root
  walked: list[str] = []
  for key in path.split('/'):
    if node is None:
      raise ValueError(
        f'Input {"/".join(walked) or "<root>"} is None, so meta-network '
        f'input {path!r} cannot be read.'
      )
    if isinstance(node, Mapping) and key in node:
      node = node[key]
    elif hasattr(node, key):
      node = getattr(node, key)
    else:
      available = list(node.keys()) if isinstance(node, Mapping) else None
      raise KeyError(
        f'Meta-network input {path!r}: {"/".join(walked) or "<root>"} has '
        f'no entry {key!r}' + (f' (has {available}).' if available else '.')
      )
    walked.append(key)
  return node


def _needs_feature_axis(source: str) -> bool:
  # Scalar-per-step quantities the rule computes get a trailing feature axis;
  # the target network's outputs already have one, except its Q-values.
  if source == 'extra_from_rule/target_out/q':
    return True
  return source.startswith('extra_from_rule') and 'target_out' not in source


def _apply_transforms(
  x: chex.Array,
  names: Sequence[str],
  embedders: _Embedders,
  actions: chex.Array,
  policy: chex.Array,
  axis_name: str | None,
) -> chex.Array:
  for name in names:
    if name == 'y_net':
      x = embedders.y_net(x)
    elif name == 'z_net':
      x = embedders.z_net(x)
    elif name in input_transforms.TRANSFORMS:
      x = input_transforms.TRANSFORMS[name]()(x, actions, policy, axis_name)
    else:
      raise KeyError(
        f'Unknown input transform {name!r} in {list(names)}; expected one of '
        f'{sorted(input_transforms.TRANSFORMS) + ["y_net", "z_net"]}.'
      )
  return x


def _construct_input(
  inputs: types.UpdateRuleInputs,
  input_option: types.MetaNetInputOption,
  y_net: _Fn,
  z_net: _Fn,
  policy_net: _Fn,
  axis_name: str | None = None,
) -> tuple[chex.Array, chex.Array | None]:
  """Reads, transforms and concatenates the configured inputs.

  Returns:
    [T, B, F] per-step features and, if the option has action-conditional
    inputs, their [T, B, A, C] embedding (else None).
  """
  embedders = _Embedders(y_net=y_net, z_net=z_net, policy_net=policy_net)
  num_steps, batch_size = inputs.is_terminal.shape
  a_t = inputs.actions[:-1]  # [T, B]
  policy = jax.lax.stop_gradient(
    jax.nn.softmax(inputs.agent_out['logits'])
  )  # [T+1, B, A]
  num_actions = policy.shape[-1]

  def read_all(configs, prefix_shape):
    features = []
    for config in configs:
      x = _lookup_path(inputs, config.source)
      if _needs_feature_axis(config.source):
        x = x[..., None]
      x = _apply_transforms(
        x, config.transforms, embedders, a_t, policy, axis_name
      )
      features.append(x.reshape(prefix_shape + (-1,)))
    return features

  features = read_all(input_option.base, (num_steps, batch_size))
  per_action_emb = None
  if input_option.action_conditional:
    per_action = read_all(
      input_option.action_conditional, (num_steps, batch_size, num_actions)
    )
    per_action.append(
      jax.nn.one_hot(a_t, num_actions, dtype=jnp.float32)[..., None]
    )
    per_action_emb = embedders.policy_net(
      jnp.concatenate(per_action, axis=-1)
    )  # [T, B, A, C]
    features.append(jnp.mean(per_action_emb, axis=2))
    features.append(utils.batch_lookup(per_action_emb, a_t))

  chex.assert_rank(features, 3)
  chex.assert_tree_shape_prefix(features, (num_steps, batch_size))
  return jnp.concatenate(features, axis=-1), per_action_emb


def _truncated_normal_or_none(
  stddev: _InitStddev,
) -> hk.initializers.Initializer | None:
  if stddev is None:
    return None
  return hk.initializers.TruncatedNormal(stddev=stddev)


def _multiplicative_interaction(
  x: chex.Array, y: chex.Array, initializer: hk.initializers.Initializer | None
) -> chex.Array:
  """x * Linear(y) for a non-scalar y; x unchanged for a scalar y.

  Decided on the static rank of `y`, so it behaves the same eagerly and under
  `jit`, `grad` and `pmap` (an `isinstance(y, jax.Array)` test would not:
  tracers are not `jax.Array`s on current JAX).
  """
  if jnp.ndim(y) == 0:
    return x
  return x * hk.Linear(x.shape[-1], w_init=initializer)(y)


def _batch_mlp(hiddens: _LayerSizes, num_dims: int = 2) -> _Fn:
  return hk.BatchApply(hk.nets.MLP(tuple(hiddens)), num_dims=num_dims)


def _conv1d_block(x: chex.Array, n_channels: int) -> chex.Array:
  """[T, B, A, C] -> [T, B, A, n]: each action sees itself and the mean."""
  mean_over_actions = jnp.broadcast_to(
    jnp.mean(x, axis=2, keepdims=True), x.shape
  )
  x = jnp.concatenate([x, mean_over_actions], axis=-1)
  x = hk.BatchApply(hk.Conv1D(output_channels=n_channels, kernel_shape=1))(x)
  return jax.nn.relu(x)


def _conv1d_net(channels: _LayerSizes) -> _Fn:
  return hk.Sequential(
    [functools.partial(_conv1d_block, n_channels=c) for c in channels]
  )
