# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A state-value function trained alongside agents during meta-training.

It supplies the advantages of the meta-objective (a policy gradient on a
validation rollout); it is not part of the update rule being learned.
"""

import dataclasses
import functools

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import optax

from disco_rl import optimizers
from disco_rl import types
from disco_rl import utils
from disco_rl.networks import nets
from disco_rl.value_fns import value_utils

# (value outs, value-head outputs [T, B, 1], new advantage EMA state, new TD
# EMA state).
_Estimates = tuple[
  types.ValueOuts, chex.Array, types.EmaState | None, types.EmaState | None
]
# (new value state, value outs before the step, logs).
_Updated = tuple[types.ValueState, types.ValueOuts, types.LogDict]


class ValueFunction:
  """V-trace value function with EMA-normalised advantages and TDs.

  Attributes:
    config: its `types.ValueFnConfig`.
    axis_name: the `pmap` axis to average gradients and statistics on.
  """

  def __init__(
    self, config: types.ValueFnConfig, axis_name: str | None
  ) -> None:
    if not isinstance(config, types.ValueFnConfig):
      raise TypeError(
        f'config must be a types.ValueFnConfig, got {type(config).__name__}.'
      )
    self.config = config
    self.axis_name = axis_name
    net_args = dict(config.net_args)
    net_args.setdefault('action_spec', None)
    if config.net not in nets.NETWORKS:
      raise ValueError(
        f'Unknown value network name {config.net!r}; expected '
        f'one of {sorted(nets.NETWORKS)}.'
      )
    utils.check_kwargs(
      nets.NETWORKS[config.net], net_args, 'ValueFnConfig.net_args'
    )
    self._value_fn = nets.get_network(
      config.net,
      out_spec={'value': types.ArraySpec((1,), jnp.float32)},
      module_name='value_fn',
      **net_args,
    )
    self._value_opt = optimizers.agent_optimizer(
      learning_rate=config.learning_rate, max_abs_update=config.max_abs_update
    )
    self._adv_ema = utils.MovingAverage(
      jnp.zeros(()), decay=config.ema_decay, eps=config.ema_eps
    )
    self._td_ema = utils.MovingAverage(
      jnp.zeros(()), decay=config.ema_decay, eps=config.ema_eps
    )
    # V-trace on a scalar head in signed-hyperbolic space; the fixed
    # arguments are bound here, the config's at each call.
    self._estimate = functools.partial(
      value_utils.get_value_outs,
      q_net_out=None,
      target_value_net_out=None,
      target_q_net_out=None,
      nonlinear_transform=True,
      categorical_value=False,
      adv_ema_fn=self._adv_ema,
      td_ema_fn=self._td_ema,
    )

  def initial_state(
    self, rng: chex.PRNGKey, dummy_observation: chex.ArrayTree
  ) -> types.ValueState:
    """Fresh parameters, optimiser state and EMAs.

    Args:
      rng: a random key.
      dummy_observation: a [B, ...] batch of observations for shape inference.
    """
    params, state = self._value_fn.init(rng, dummy_observation, None)
    if state:
      raise ValueError(
        'ValueFunction supports only stateless networks; the '
        f'network has state {jax.tree.map(jnp.shape, state)}.'
      )
    opt_state = self._value_opt.init(params)
    return types.ValueState(
      params=params,
      state=state,
      opt_state=opt_state,
      adv_ema_state=self._adv_ema.init_state(),
      td_ema_state=self._td_ema.init_state(),
    )

  def _values(
    self, params: hk.Params, state: hk.State, observations: chex.ArrayTree
  ) -> chex.Array:
    """[T, B, ...] observations -> [T, B, 1] value head outputs."""
    apply = lambda obs: self._value_fn.one_step(params, state, obs, None)[0]
    return hk.BatchApply(apply)(observations)['value']

  def get_value_outs(
    self,
    value_state: types.ValueState,
    rollout: types.ActorRollout,
    target_logits: chex.Array,
  ) -> _Estimates:
    """V-trace estimates on a [T, B] rollout for the policy `target_logits`.

    Returns:
      (value outs with [T-1, B] advantages/TDs, raw network outputs
      [T, B, 1], new advantage EMA state, new TD EMA state).
    """
    net_out = self._values(
      value_state.params, value_state.state, rollout.observations
    )
    value_outs, adv_ema_state, td_ema_state = self._estimate(
      value_net_out=net_out,
      rollout=rollout,
      pi_logits=target_logits,
      discount=self.config.discount_factor,
      lambda_=self.config.td_lambda,
      adv_ema_state=value_state.adv_ema_state,
      td_ema_state=value_state.td_ema_state,
      axis_name=self.axis_name,
    )
    return value_outs, net_out, adv_ema_state, td_ema_state

  def update(
    self,
    value_state: types.ValueState,
    rollout: types.ActorRollout,
    target_logits: chex.Array,
  ) -> _Updated:
    """One optimiser step on the (normalised-TD) value loss.

    Returns:
      (new value state, value outs before the step, logs).
    """

    def loss_fn(params):
      outs, net_out, adv_ema, td_ema = self.get_value_outs(
        dataclasses.replace(value_state, params=params), rollout, target_logits
      )
      per_step = value_utils.value_loss_from_td(
        net_out[:-1], jax.lax.stop_gradient(outs.normalized_td)
      )
      loss = jnp.mean(self.config.outer_value_cost * per_step)
      return loss, (outs, adv_ema, td_ema)

    (loss, (value_outs, adv_ema, td_ema)), grads = jax.value_and_grad(
      loss_fn, has_aux=True
    )(value_state.params)
    if self.axis_name is not None:
      grads = jax.lax.pmean(grads, axis_name=self.axis_name)
    updates, opt_state = self._value_opt.update(
      grads, value_state.opt_state, value_state.params
    )
    new_state = dataclasses.replace(
      value_state,
      params=optax.apply_updates(value_state.params, updates),
      opt_state=opt_state,
      adv_ema_state=adv_ema,
      td_ema_state=td_ema,
    )
    logs = {
      'value_loss': loss,
      'value_td': value_outs.td,
      'value_normalized_td': value_outs.normalized_td,
    }
    return new_state, value_outs, logs
