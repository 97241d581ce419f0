# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Action-conditional models: one prediction per (state, action) pair."""

from collections.abc import Mapping, Sequence

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np

from disco_rl import types
from disco_rl import utils


def get_action_model(name: str | None, *args, **kwargs) -> 'LSTMModel':
  """Builds the action model called `name` (only 'lstm' exists; None is
  an error)."""
  if name not in ACTION_MODELS:
    raise ValueError(
      f'Unknown action model name {name!r}; expected one of '
      f'{sorted(ACTION_MODELS)}.'
    )
  return ACTION_MODELS[name](*args, **kwargs)


class LSTMModel:
  """A one-step model in the style of Muesli/MuZero.

  The agent's embedding seeds an LSTM state; one LSTM step per action (the
  action one-hot as input) gives a per-action embedding from which MLP heads
  predict every entry of `out_spec`. Not a Haiku module itself: its layers
  live in the calling module's scope (`linear`, `action_cond`, `mlp`, ...).
  """

  def __init__(
    self,
    action_spec: types.ActionSpec,
    out_spec: Mapping[str, types.ArraySpec],
    head_mlp_hiddens: Sequence[int],
    lstm_size: int,
  ) -> None:
    self._action_spec = action_spec
    self._out_spec = out_spec
    self._head_mlp_hiddens = tuple(head_mlp_hiddens)
    self._lstm_size = lstm_size
    self._num_actions = utils.get_num_actions_from_spec(action_spec)

  def root_embedding(self, state: chex.Array) -> hk.LSTMState:
    """[B, ...] agent embedding -> LSTM state with [B, lstm_size] leaves."""
    cell = hk.Linear(self._lstm_size)(hk.Flatten()(state))
    return hk.LSTMState(hidden=jnp.tanh(cell), cell=cell)

  def _step_every_action(self, root: hk.LSTMState) -> chex.Array:
    """[B, H] root -> [B*A, H] LSTM outputs; row b*A + a is action a of b."""
    num_actions = self._num_actions
    batch = root.cell.shape[0]
    actions_one_hot = jnp.tile(
      jnp.eye(num_actions, dtype=root.cell.dtype), (batch, 1)
    )
    root_per_action = jax.tree.map(
      lambda x: jnp.repeat(x, num_actions, axis=0), root
    )
    outputs, _ = hk.LSTM(self._lstm_size, name='action_cond')(
      actions_one_hot, root_per_action
    )
    return outputs

  def _predict(self, per_action: chex.Array) -> dict[str, chex.Array]:
    """[B*A, H] -> {key: [B, A, *spec.shape]}, one MLP per `out_spec` entry."""
    batch = per_action.shape[0] // self._num_actions
    predictions = {}
    for key, spec in self._out_spec.items():
      size = int(np.prod(spec.shape))
      flat = hk.nets.MLP(self._head_mlp_hiddens + (size,))(per_action)
      predictions[key] = flat.reshape(
        (batch, self._num_actions) + tuple(spec.shape)
      )
    return predictions

  def model_step(self, embedding: hk.LSTMState) -> dict[str, chex.Array]:
    """Per-action predictions [B, A, ...] from a root state."""
    return self._predict(self._step_every_action(embedding))


ACTION_MODELS = {'lstm': LSTMModel}
