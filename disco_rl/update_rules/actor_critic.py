# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A V-trace actor-critic, written as an update rule (a hand-designed baseline).

The agent outputs policy logits [A] and a value v ([1], or [bins] logits of a
categorical value). The loss is a policy gradient on V-trace advantages, a
value regression towards V-trace targets and an entropy bonus.
"""

import dataclasses
from typing import Any

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
# meta_out's entries: {name: the `types.ValueOuts` field it holds}.
_META_OUT = {
  'values': 'value',
  'value_target': 'value_target',
  'tds': 'td',
  'normalized_tds': 'normalized_td',
  'raw_advs': 'adv',
  'normalized_advs': 'normalized_adv',
}


@dataclasses.dataclass(eq=False)
class ActorCritic(base.UpdateRule):
  """Actor-critic with V-trace, optionally categorical and normalised.

  The constructor's arguments are these attributes.

  Attributes:
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

  categorical_value: bool = False
  num_bins: int = 601
  max_abs_value: float = 300.0
  nonlinear_value_transform: bool = False
  normalize_adv: bool = False
  normalize_td: bool = False
  moving_average_decay: float = 0.99
  moving_average_eps: float = 1e-6

  def __post_init__(self) -> None:
    if self.normalize_td and self.categorical_value:
      raise ValueError(
        'normalize_td=True cannot be combined with categorical_value=True.'
      )
    # How values are represented, as value_utils' functions take it.
    self._value_head: dict[str, Any] = dict(
      categorical_value=self.categorical_value,
      max_abs_value=self.max_abs_value,
      nonlinear_transform=self.nonlinear_value_transform,
    )
    # Two normalisers of the same settings: advantages, then TD errors.
    self._adv_ema, self._td_ema = (
      utils.MovingAverage(
        np.zeros(()),
        decay=self.moving_average_decay,
        eps=self.moving_average_eps,
      )
      for _ in range(2)
    )

  def init_params(self, rng: chex.PRNGKey):
    """No meta-parameters: a placeholder scalar, and no state."""
    del rng
    return dict(dummy=jnp.array(0.0)), {}

  def flat_output_spec(
    self, single_action_spec: types.ActionSpec
  ) -> types.Specs:
    bins = self.num_bins if self.categorical_value else 1
    return {
      'logits': utils.get_logits_specs(single_action_spec),
      'v': types.ArraySpec((bins,), np.float32),
    }

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
      rollout=rollout,
      pi_logits=rollout.agent_out['logits'],
      value_net_out=rollout.agent_out['v'],
      q_net_out=None,
      target_value_net_out=None,
      target_q_net_out=None,
      discount=hyper_params['discount_factor'],
      lambda_=hyper_params['vtrace_lambda'],
      drop_last=False,
      **self._value_head,
      adv_ema_fn=self._adv_ema,
      adv_ema_state=meta_state['adv_ema_state'],
      td_ema_fn=self._td_ema,
      td_ema_state=meta_state['td_ema_state'],
      axis_name=axis_name,
    )
    meta_out = {
      name: getattr(value_outs, field) for name, field in _META_OUT.items()
    }
    new_meta_state = dict(
      meta_state, adv_ema_state=adv_ema_state, td_ema_state=td_ema_state
    )
    return meta_out, new_meta_state

  def agent_loss(self, rollout, meta_out, hyper_params, backprop):
    """pg_cost * PG + value_cost * value loss - entropy_cost * H, [T, B]."""
    del backprop
    a_t = rollout.actions[:-1]
    logits_t = rollout.agent_out['logits'][:-1]
    adv_key = 'normalized_advs' if self.normalize_adv else 'raw_advs'
    td_key = 'normalized_tds' if self.normalize_td else 'tds'
    adv_t, td_t = meta_out[adv_key], meta_out[td_key]

    v_t = rollout.agent_out['v'][:-1]
    value_loss = value_utils.value_loss_from_td(
      v_t, jax.lax.stop_gradient(td_t), **self._value_head
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
