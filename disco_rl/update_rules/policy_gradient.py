# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""REINFORCE-style policy gradient with advantages from an outside critic."""

import dataclasses

import chex
import distrax
import jax.numpy as jnp

from disco_rl import types
from disco_rl import utils
from disco_rl.update_rules import base


@dataclasses.dataclass(eq=False)
class PolicyGradientUpdate(base.UpdateRule):
  """Policy gradient on `rollout.value_out` advantages, with an entropy bonus.

  The advantages come from a value function outside the rule (in
  `UpdateRuleInputs.value_out`), e.g. the meta-training `ValueFunction`.
  The constructor's arguments are these attributes.

  Attributes:
    entropy_cost: weight of the entropy bonus.
    normalize_adv: use the EMA-normalised advantage.
    pg_cost: weight of the policy-gradient term.
    kl_prior_cost: kept for configuration compatibility (unused).
    p_actor_prior: kept for configuration compatibility (unused).
    p_uniform_prior: kept for configuration compatibility (unused).
    target_params_coeff: kept for configuration compatibility (unused).
  """

  entropy_cost: float = 0.01
  normalize_adv: bool = True
  pg_cost: float = 1
  kl_prior_cost: float = 0.5
  p_actor_prior: float = 0.03
  p_uniform_prior: float = 0.003
  target_params_coeff: float = 0.1

  def init_params(self, rng: chex.PRNGKey):
    """No meta-parameters: a placeholder scalar, and no state."""
    del rng
    return dict(dummy=jnp.array(0.0)), {}

  def flat_output_spec(
    self, single_action_spec: types.ActionSpec
  ) -> types.Specs:
    logits_spec = utils.get_logits_specs(single_action_spec)
    return {'logits': logits_spec}

  def init_meta_state(
    self, rng: chex.PRNGKey, params: types.AgentParams
  ) -> types.MetaState:
    del rng, params
    return {}

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
    """Picks the (normalised) advantage [T, B] out of `rollout.value_out`."""
    del meta_params, params, state, hyper_params, unroll_policy_fn, rng
    del axis_name
    if rollout.value_out is None:
      raise ValueError(
        'PolicyGradientUpdate needs rollout.value_out with '
        'advantages [T, B], got None.'
      )
    value_out = rollout.value_out
    adv_t = value_out.normalized_adv if self.normalize_adv else value_out.adv
    return dict(pi=adv_t), meta_state

  def agent_loss(self, rollout, meta_out, hyper_params, backprop):
    """-log pi(a_t) * adv_t - entropy_cost * H(pi) per step, [T, B]."""
    del hyper_params, backprop
    a_t = rollout.actions[:-1]
    logits_t = rollout.agent_out['logits'][:-1]
    pg_loss = utils.differentiable_policy_gradient_loss(
      logits_t, a_t, adv_t=meta_out['pi'], backprop=False
    )
    entropy = distrax.Softmax(logits_t).entropy()
    chex.assert_rank([pg_loss, entropy], 2)
    loss = self.pg_cost * pg_loss - self.entropy_cost * entropy
    return loss, dict(
      entropy=jnp.mean(entropy), pg_advs=jnp.mean(meta_out['pi'])
    )
