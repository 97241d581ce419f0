# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A V-trace actor-critic, written as an update rule (a hand-designed baseline).

The agent outputs policy logits [A] and a value v ([1], or [bins] logits of a
categorical value). The loss is a policy gradient on V-trace advantages, a
value regression towards V-trace targets and an entropy bonus.
"""

import chex
import distrax
import jax
import jax.numpy as jnp
import numpy as np

from disco_rl import types
from disco_rl import utils
from disco_rl.update_rules import base
from disco_rl.value_fns import value_utils

HYPER_PARAMS = (
  'discount_factor',
  'vtrace_lambda',
  'pg_cost',
  'value_cost',
  'entropy_cost',
)


class ActorCritic(base.UpdateRule):
  """Actor-critic with V-trace, optionally categorical and normalised."""

  def __init__(
    self,
    categorical_value: bool = False,
    num_bins: int = 601,
    max_abs_value: float = 300.0,
    nonlinear_value_transform: bool = False,
    normalize_adv: bool = False,
    normalize_td: bool = False,
    moving_average_decay: float = 0.99,
    moving_average_eps: float = 1e-6,
  ) -> None:
    """Configures the rule.

    Args:
      categorical_value: the value head outputs logits over `num_bins` bins.
      num_bins: number of value bins (categorical value only).
      max_abs_value: value range [-max, max] of the bins (categorical only).
      nonlinear_value_transform: learn values in signed-hyperbolic space.
      normalize_adv: use EMA-normalised advantages in the policy gradient.
      normalize_td: use EMA-scaled TDs in the value loss (not with a
        categorical value).
      moving_average_decay: decay of the advantage/TD EMAs.
      moving_average_eps: epsilon of the EMA normalisation.
    """
    if normalize_td and categorical_value:
      raise ValueError(
        'normalize_td=True cannot be combined with categorical_value=True.'
      )
    self._categorical_value = categorical_value
    self._num_bins = num_bins
    self._max_abs_value = max_abs_value
    self._nonlinear_value_transform = nonlinear_value_transform
    self._normalize_adv = normalize_adv
    self._normalize_td = normalize_td
    self._adv_ema = utils.MovingAverage(
      np.zeros(()), decay=moving_average_decay, eps=moving_average_eps
    )
    self._td_ema = utils.MovingAverage(
      np.zeros(()), decay=moving_average_decay, eps=moving_average_eps
    )

  def init_params(self, rng: chex.PRNGKey):
    del rng
    return {'dummy': jnp.array(0.0)}, {}

  def flat_output_spec(
    self, single_action_spec: types.ActionSpec
  ) -> types.Specs:
    value_size = self._num_bins if self._categorical_value else 1
    return dict(
      logits=utils.get_logits_specs(single_action_spec),
      v=types.ArraySpec((value_size,), np.float32),
    )

  def init_meta_state(
    self, rng: chex.PRNGKey, params: types.AgentParams
  ) -> types.MetaState:
    del rng, params
    return dict(
      adv_ema_state=self._adv_ema.init_state(),
      td_ema_state=self._td_ema.init_state(),
    )

  def unroll_meta_net(
    self,
    meta_params,
    params,
    state,
    meta_state,
    rollout,
    hyper_params,
    unroll_policy_fn,
    rng,
    axis_name=None,
  ):
    """V-trace values, targets, advantages and TDs; the EMAs advance."""
    del meta_params, params, state, unroll_policy_fn, rng
    base.check_update_rule_inputs(rollout, ('logits', 'v'), 'actor_critic')
    missing = [k for k in HYPER_PARAMS if k not in hyper_params]
    if missing:
      raise ValueError(
        f'actor_critic: hyper_params lacks {missing}; got '
        f'{sorted(hyper_params)}.'
      )
    # State values only: no q heads and no separate target network.
    value_outs, adv_ema_state, td_ema_state = value_utils.get_value_outs(
      value_net_out=rollout.agent_out['v'],
      target_value_net_out=None,
      q_net_out=None,
      target_q_net_out=None,
      rollout=rollout,
      pi_logits=rollout.agent_out['logits'],
      discount=hyper_params['discount_factor'],
      lambda_=hyper_params['vtrace_lambda'],
      nonlinear_transform=self._nonlinear_value_transform,
      categorical_value=self._categorical_value,
      max_abs_value=self._max_abs_value,
      drop_last=False,
      adv_ema_state=meta_state['adv_ema_state'],
      adv_ema_fn=self._adv_ema,
      td_ema_state=meta_state['td_ema_state'],
      td_ema_fn=self._td_ema,
      axis_name=axis_name,
    )
    meta_out = dict(
      raw_advs=value_outs.adv,
      normalized_advs=value_outs.normalized_adv,
      value_target=value_outs.value_target,
      values=value_outs.value,
      normalized_tds=value_outs.normalized_td,
      tds=value_outs.td,
    )
    new_meta_state = dict(
      meta_state, adv_ema_state=adv_ema_state, td_ema_state=td_ema_state
    )
    return meta_out, new_meta_state

  def agent_loss(self, rollout, meta_out, hyper_params, backprop):
    """pg_cost * PG + value_cost * value loss - entropy_cost * H, [T, B]."""
    del backprop
    a_t = rollout.actions[:-1]
    logits_t = rollout.agent_out['logits'][:-1]
    adv_t = (
      meta_out['normalized_advs']
      if self._normalize_adv
      else meta_out['raw_advs']
    )
    td_t = meta_out['normalized_tds'] if self._normalize_td else meta_out['tds']

    value_loss = value_utils.value_loss_from_td(
      rollout.agent_out['v'][:-1],
      jax.lax.stop_gradient(td_t),
      nonlinear_transform=self._nonlinear_value_transform,
      categorical_value=self._categorical_value,
      max_abs_value=self._max_abs_value,
    )
    entropy = distrax.Softmax(logits_t).entropy()
    pg_loss = utils.differentiable_policy_gradient_loss(
      logits_t, a_t, adv_t=adv_t, backprop=False
    )
    chex.assert_rank([pg_loss, value_loss, entropy], 2)
    loss = (
      hyper_params['pg_cost'] * pg_loss
      + hyper_params['value_cost'] * value_loss
      - hyper_params['entropy_cost'] * entropy
    )
    log = dict(
      logits=jnp.mean(logits_t),
      entropy=jnp.mean(entropy),
      pg_advs=jnp.mean(adv_t),
      raw_advs=jnp.mean(meta_out['raw_advs']),
      avg_value=jnp.mean(meta_out['values']),
    )
    return loss, log
