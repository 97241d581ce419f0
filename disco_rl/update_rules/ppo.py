# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""PPO-clip, written as an update rule (a hand-designed baseline).

The agent outputs policy logits [A] and a scalar value v [1]. The loss per
step is PPO's (Schulman et al. 2017, arXiv:1707.06347): a clipped surrogate
policy gradient on generalised advantage estimates, a value regression
towards the GAE returns and an entropy bonus. The importance ratio is
pi(a|s) / mu(a|s), with mu the behaviour policy whose logits the rollout
stores: the eval job learns from a replay buffer, so its data are a few
updates old, which is the staleness PPO's clipping is made for.
"""

import math

import chex
import distrax
import jax
import jax.numpy as jnp
import numpy as np
import rlax

from disco_rl import types
from disco_rl import utils
from disco_rl.update_rules import base

# The defaults are purejaxrl's PPO (the config of purejaxrl/ppo.py: GAMMA
# 0.99, GAE_LAMBDA 0.95, CLIP_EPS 0.2, VF_COEF 0.5, ENT_COEF 0.01);
# gymnax-blines' MinAtar PPO (agents/<game>-MinAtar/ppo.yaml) has the same
# lambda, clip and costs, but gamma 0.999.
DEFAULT_HYPER_PARAMS = dict(
  discount_factor=0.99,
  gae_lambda=0.95,
  clip_epsilon=0.2,
  value_cost=0.5,
  entropy_cost=0.01,
)
HYPER_PARAMS = tuple(DEFAULT_HYPER_PARAMS)
# Each hyper-parameter's allowed range: (low, high, low included, high
# included); None: unbounded.
_RANGES = dict(
  discount_factor=(0.0, 1.0, True, True),
  gae_lambda=(0.0, 1.0, True, True),
  clip_epsilon=(0.0, 1.0, False, False),
  value_cost=(0.0, None, True, False),
  entropy_cost=(0.0, None, True, False),
)
# Added to the advantages' standard deviation before dividing by it, as in
# purejaxrl.
_ADV_NORM_EPS = 1e-8


def _range_text(low, high, low_in, high_in) -> str:
  """'>= 0', '> 0' or 'in [0, 1]', '(0, 1)'..."""
  if high is None:
    return f'{">=" if low_in else ">"} {low:g}'
  left, right = '[' if low_in else '(', ']' if high_in else ')'
  return f'in {left}{low:g}, {high:g}{right}'


def check_hyper_params(hyper_params: types.HyperParams) -> None:
  """Checks PPO's hyper-parameters: all of `HYPER_PARAMS`, each in range.

  discount_factor and gae_lambda must lie in [0, 1], clip_epsilon in
  (0, 1), value_cost and entropy_cost be >= 0. Traced values (a
  hyper-parameter under `jit`) are not range-checked.

  Args:
    hyper_params: {name: number}.

  Raises:
    ValueError: a missing or unknown key, or a value that is not a finite
      number in its range; the message names the hyper-parameter, the range
      expected and the value received.
  """
  missing = [k for k in HYPER_PARAMS if k not in hyper_params]
  if missing:
    raise ValueError(
      f'ppo: hyper_params lacks {missing}; got '
      f'{sorted(hyper_params)} (defaults: '
      f'{DEFAULT_HYPER_PARAMS}).'
    )
  utils.check_keys(hyper_params, HYPER_PARAMS, 'ppo hyper_params')
  for name, (low, high, low_in, high_in) in _RANGES.items():
    value = hyper_params[name]
    expected = f'a finite number {_range_text(low, high, low_in, high_in)}'
    try:
      number = float(value)
    except jax.errors.ConcretizationTypeError:
      continue  # Traced: the range cannot be checked here.
    except (TypeError, ValueError):
      raise ValueError(
        f"ppo: hyper_params['{name}'] must be {expected}, got {value!r}."
      ) from None
    ok = (
      math.isfinite(number)
      and (number >= low if low_in else number > low)
      and (high is None or (number <= high if high_in else number < high))
    )
    if not ok:
      raise ValueError(
        f"ppo: hyper_params['{name}'] must be {expected}, got {value!r}."
      )


def clipped_surrogate_per_step(
  ratio_t: chex.Array, adv_t: chex.Array, epsilon: float
) -> chex.Array:
  """rlax's clipped surrogate loss of every step on its own.

  -min(r_t * adv_t, clip(r_t, 1 - eps, 1 + eps) * adv_t), elementwise: the
  loss of `rlax.clipped_surrogate_pg_loss` on each entry as a sequence of
  one (rlax averages over its sequence; the agent averages over steps with
  its mask). No gradient flows into the advantages.

  Args:
    ratio_t: [T, B] importance ratios pi(a_t|s_t) / mu(a_t|s_t).
    adv_t: [T, B] advantages.
    epsilon: the clipping range.

  Returns:
    [T, B] losses.
  """
  chex.assert_rank([ratio_t, adv_t], 2)
  chex.assert_equal_shape([ratio_t, adv_t])

  def one_step(r, adv):
    return rlax.clipped_surrogate_pg_loss(
      r[None], adv[None], epsilon, use_stop_gradient=True
    )

  return jax.vmap(jax.vmap(one_step))(ratio_t, adv_t)


class PPO(base.UpdateRule):
  """PPO-clip with GAE, a scalar value loss and an entropy bonus.

  Hyper-parameters (the agent settings' `hyper_params`, `HYPER_PARAMS`;
  defaults `DEFAULT_HYPER_PARAMS`, from purejaxrl's PPO):
    discount_factor: gamma, 0.99 (gymnax-blines' MinAtar PPO: 0.999).
    gae_lambda: lambda of GAE, 0.95.
    clip_epsilon: the ratio's clipping range epsilon, 0.2.
    value_cost: weight of the value loss, 0.5.
    entropy_cost: weight of the entropy bonus, 0.01.

  Per transition t (action a_t in state s_t, then reward r_t and discount
  gamma_t = discount_factor * (1 - is_terminal_t)) the loss is

    -min(rho_t A_t, clip(rho_t, 1 - eps, 1 + eps) A_t)
    + value_cost * 0.5 * (v(s_t) - sg[G_t])^2 - entropy_cost * H(pi(.|s_t)),

  with rho_t = pi(a_t|s_t) / mu(a_t|s_t), A_t the GAE advantage (normalised
  over the batch by default) and G_t = A_t + v(s_t) (the raw advantage).

  Where it differs from purejaxrl's PPO: the advantages are computed from
  the learner's current values at every update (the replay buffer keeps only
  the behaviour logits, not the behaviour values), so the value loss is not
  clipped around old values; the agent's optimiser clips each update
  element (`max_abs_update`) rather than the global gradient norm; epochs
  and minibatches are the eval job's replay (`replay_ratio`).
  """

  def __init__(self, normalize_adv: bool = True) -> None:
    """Configures the rule.

    Args:
      normalize_adv: standardise the advantages in the policy loss by their
        mean and standard deviation over the batch [T, B] (and the devices
        of `axis_name`), as purejaxrl does per minibatch.

    Raises:
      ValueError: `normalize_adv` that is not a bool.
    """
    if not isinstance(normalize_adv, (bool, np.bool_)):
      raise ValueError(
        f'ppo: normalize_adv must be a bool, got {normalize_adv!r}.'
      )
    self._normalize_adv = bool(normalize_adv)

  def init_params(self, rng: chex.PRNGKey):
    """No meta-parameters: a placeholder scalar, and no state."""
    del rng
    return dict(dummy=jnp.array(0.0)), {}

  def flat_output_spec(
    self, single_action_spec: types.ActionSpec
  ) -> types.Specs:
    return {
      'logits': utils.get_logits_specs(single_action_spec),
      'v': types.ArraySpec((1,), np.float32),  # A scalar value.
    }

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
    """GAE advantages and value targets from the agent's values.

    Args:
      meta_params: unused (PPO has no meta-parameters).
      params: unused.
      state: unused.
      meta_state: the rule's state ({}), returned as it is.
      rollout: rewards and is_terminal [T, B]; actions [T+1, B];
        agent_out['v'] [T+1, B, 1] and agent_out['logits'] [T+1, B, A];
        behaviour_agent_out['logits'] [T+1, B, A].
      hyper_params: see the class docstring.
      unroll_policy_fn: unused.
      rng: unused.
      axis_name: the axis over which to average the advantages' statistics
        (normalisation), or None.

    Returns:
      ({'raw_advs': [T, B] GAE advantages, 'normalized_advs': [T, B] those
      standardised (zeros with normalize_adv=False), 'value_targets': [T, B]
      raw_advs + v, 'values': [T+1, B] v}, meta_state), all without
      gradient.
    """
    del meta_params, params, state, unroll_policy_fn, rng
    t, b = base.check_update_rule_inputs(rollout, ('logits', 'v'), 'ppo')
    check_hyper_params(hyper_params)
    _check_behaviour_logits(rollout)
    chex.assert_shape(rollout.agent_out['v'], (t + 1, b, 1))

    # rlax's time indices: values at times 0..T, r_t and discount_t at
    # 1..T (they follow the state at t - 1), advantages at 0..T-1.
    values = jax.lax.stop_gradient(rollout.agent_out['v'][..., 0])
    r_t = rollout.rewards.astype(values.dtype)  # [T, B]
    discount_t = hyper_params['discount_factor'] * (
      1.0 - rollout.is_terminal.astype(values.dtype)
    )  # [T, B]

    def gae(r_t, discount_t, values):  # [T], [T], [T+1] -> [T]
      return rlax.truncated_generalized_advantage_estimation(
        r_t,
        discount_t,
        hyper_params['gae_lambda'],
        values,
        stop_target_gradients=True,
      )

    adv_tm1 = jax.vmap(gae, in_axes=1, out_axes=1)(r_t, discount_t, values)
    if self._normalize_adv:
      normalized_adv_tm1 = _standardise(adv_tm1, axis_name)
    else:
      normalized_adv_tm1 = jnp.zeros_like(adv_tm1)
    meta_out = dict(
      raw_advs=adv_tm1,
      normalized_advs=normalized_adv_tm1,
      value_targets=adv_tm1 + values[:-1],
      values=values,
    )
    return meta_out, meta_state

  def agent_loss(self, rollout, meta_out, hyper_params, backprop):
    """PPO's clipped surrogate + value_cost * value loss - entropy_cost * H.

    Args:
      rollout: the trajectory with the agent's differentiable outputs
        (shapes as in `unroll_meta_net`).
      meta_out: what `unroll_meta_net` returned.
      hyper_params: see the class docstring.
      backprop: unused (the rule has no meta-parameters).

    Returns:
      ([T, B] loss per step, logs): the logs hold the eval job's scalars
      'entropy', 'pg_advs' (the advantages in the policy loss), 'avg_value',
      and 'raw_advs', 'pg_loss', 'value_loss', 'ratio', 'clip_fraction'
      (the share of steps whose ratio lies outside [1 - eps, 1 + eps]) and
      'approx_kl' (the mean of (rho - 1) - log rho), all means over [T, B].
    """
    del backprop
    a_t = rollout.actions[:-1]  # [T, B]
    logits_t = rollout.agent_out['logits'][:-1]  # [T, B, A]
    mu_logits_t = jax.lax.stop_gradient(
      rollout.behaviour_agent_out['logits'][:-1]
    )  # [T, B, A]
    v_t = rollout.agent_out['v'][:-1, ..., 0]  # [T, B]
    adv_t = (
      meta_out['normalized_advs']
      if self._normalize_adv
      else meta_out['raw_advs']
    )
    target_t = jax.lax.stop_gradient(meta_out['value_targets'])
    chex.assert_rank([a_t, logits_t, adv_t, target_t], [2, 3, 2, 2])
    chex.assert_equal_shape([a_t, v_t, adv_t, target_t])
    chex.assert_equal_shape([logits_t, mu_logits_t])
    chex.assert_type([a_t, logits_t, adv_t], [int, float, float])
    check_hyper_params(hyper_params)

    log_pi_a_t = rlax.batched_index(jax.nn.log_softmax(logits_t), a_t)
    log_mu_a_t = rlax.batched_index(jax.nn.log_softmax(mu_logits_t), a_t)
    log_ratio_t = log_pi_a_t - log_mu_a_t
    ratio_t = jnp.exp(log_ratio_t)
    epsilon = hyper_params['clip_epsilon']
    pg_loss = clipped_surrogate_per_step(ratio_t, adv_t, epsilon)
    value_loss = 0.5 * jnp.square(v_t - target_t)
    entropy = distrax.Softmax(logits_t).entropy()
    chex.assert_equal_shape([pg_loss, value_loss, entropy])
    loss = (
      pg_loss
      + hyper_params['value_cost'] * value_loss
      - hyper_params['entropy_cost'] * entropy
    )
    clipped = jnp.abs(ratio_t - 1.0) > epsilon
    log = dict(
      entropy=jnp.mean(entropy),
      pg_advs=jnp.mean(adv_t),
      avg_value=jnp.mean(meta_out['values']),
      raw_advs=jnp.mean(meta_out['raw_advs']),
      pg_loss=jnp.mean(pg_loss),
      value_loss=jnp.mean(value_loss),
      ratio=jnp.mean(ratio_t),
      clip_fraction=jnp.mean(clipped.astype(jnp.float32)),
      approx_kl=jnp.mean(jax.lax.stop_gradient((ratio_t - 1.0) - log_ratio_t)),
    )
    return loss, log


def _check_behaviour_logits(rollout: types.UpdateRuleInputs) -> None:
  """The behaviour logits must be there, shaped like the agent's."""
  behaviour = rollout.behaviour_agent_out
  if behaviour is None or 'logits' not in behaviour:
    got = None if behaviour is None else sorted(behaviour)
    raise ValueError(
      "ppo: rollout.behaviour_agent_out['logits'] (the behaviour policy's "
      f'logits, [T+1, B, A]) is needed for the importance ratio; got '
      f'behaviour outputs {got}.'
    )
  want = jnp.shape(rollout.agent_out['logits'])
  got_shape = jnp.shape(behaviour['logits'])
  if got_shape != want:
    raise ValueError(
      "ppo: rollout.behaviour_agent_out['logits'] must have the shape of "
      f"agent_out['logits'] {want}, got {got_shape}."
    )


def _standardise(x: chex.Array, axis_name: str | None) -> chex.Array:
  """(x - mean) / (std + eps) over all of x (and the devices of axis_name)."""
  mean = jnp.mean(x)
  if axis_name is not None:
    mean = jax.lax.pmean(mean, axis_name=axis_name)
  var = jnp.mean(jnp.square(x - mean))
  if axis_name is not None:
    var = jax.lax.pmean(var, axis_name=axis_name)
  return (x - mean) / (jnp.sqrt(var) + _ADV_NORM_EPS)
