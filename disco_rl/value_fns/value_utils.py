# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Value estimation helpers: V-trace / Retrace targets, value losses.

Shapes: B is the batch, A the number of actions and N the number of bins of a
categorical (two-hot) value head. In the estimators T counts transitions, so
values span T+1 states; `get_value_outs` counts T in network-output steps (see
its docstring).

Network value heads come in two flavours:
  * scalar: the last axis has size 1;
  * categorical: the last axis holds N logits over an evenly spaced support in
    [-max_abs_value, max_abs_value].
Either may live in the signed-hyperbolic transformed space
(`nonlinear_transform=True`), in which case the inverse transform is applied
to recover values in reward units.
"""

import dataclasses
import functools
import operator

import chex
import distrax
import jax
import jax.numpy as jnp
import optax
import rlax

from disco_rl import types
from disco_rl import utils

# Type aliases (as rlax spells them).
Array = chex.Array
ArrayTree = chex.ArrayTree
ArrayLike = jax.typing.ArrayLike

DEFAULT_DISCOUNT = 0.995
DEFAULT_TD_LAMBDA = 0.95

# h(x) squashes values into the space the network predicts; h^-1 undoes it.
_squash, _unsquash = rlax.SIGNED_HYPERBOLIC_PAIR


# ----------------------------------------------------------------------------
# Argument checks.


def _require_max_abs_value(
  categorical_value: bool, max_abs_value: float | None
) -> None:
  """A categorical head has no meaning without the extent of its support."""
  if categorical_value:
    _support_bound(max_abs_value)


def _support_bound(max_abs_value: float | None) -> float:
  """The extent of a categorical head's support, which must be given."""
  if max_abs_value is None:
    raise ValueError(
      '`max_abs_value` must be given when `categorical_value=True`: it sets '
      'the support [-max_abs_value, max_abs_value] of the value bins.'
    )
  return max_abs_value


def _require_positive_bound(max_abs_value: float) -> None:
  if max_abs_value <= 0.0:
    raise ValueError(
      f'`max_abs_value` must be greater than 0, got {max_abs_value}.'
    )


def _check_leading_dims(
  name: str, tree: ArrayTree, expected: tuple[int, ...], hint: str = ''
) -> None:
  """Raises a ValueError naming `name` unless every leaf starts `expected`."""
  for leaf in jax.tree.leaves(tree):
    shape = tuple(jnp.shape(leaf))
    if shape[: len(expected)] != tuple(expected):
      raise ValueError(
        f'`{name}` should have leading dimensions {tuple(expected)}, but '
        f'has shape {shape}.{" " + hint if hint else ""}'
      )


def _over_batch(time_major_fn):
  """Lifts a function of [T] sequences to [T, B] arrays (batch on axis 1)."""
  return jax.vmap(time_major_fn, in_axes=1, out_axes=1)


def _first_leaf(tree: ArrayTree) -> Array:
  return jax.tree.leaves(tree)[0]


def _all_but_last_step(tree: ArrayTree) -> ArrayTree:
  return jax.tree.map(lambda x: x[:-1], tree)


def _with_zero_first_step(x_t: Array) -> Array:
  """[T, ...] -> [T+1, ...] with an all-zero entry in front."""
  return jnp.concatenate([jnp.zeros_like(x_t[:1]), x_t], axis=0)


def _behaviour_of(
  rollout: types.ActorRollout | types.UpdateRuleInputs,
) -> tuple[Array, ArrayTree, str]:
  """Returns (env discounts, behaviour logits, how the discounts are named)."""
  if isinstance(rollout, types.ActorRollout):
    return rollout.discounts, rollout.logits, 'rollout.discounts'
  if not isinstance(rollout, types.UpdateRuleInputs):
    raise TypeError(
      '`rollout` must be an ActorRollout or UpdateRuleInputs, got '
      f'{type(rollout).__name__}.'
    )
  if rollout.behaviour_agent_out is None:
    raise ValueError(
      '`rollout.behaviour_agent_out` is None; its "logits" are needed for '
      'the importance weights.'
    )
  not_done = 1.0 - rollout.is_terminal
  return (
    not_done,
    rollout.behaviour_agent_out['logits'],
    '1 - rollout.is_terminal',
  )


# ----------------------------------------------------------------------------
# Full pipeline.


def get_value_outs(
  # Network heads (online, then target).
  value_net_out: Array | None,
  q_net_out: ArrayTree | None,
  target_value_net_out: Array | None,
  target_q_net_out: ArrayTree | None,
  # Trajectory and the policy being evaluated.
  rollout: types.ActorRollout | types.UpdateRuleInputs,
  pi_logits: Array,
  # Estimator settings.
  discount: ArrayLike,
  lambda_: ArrayLike = DEFAULT_TD_LAMBDA,
  nonlinear_transform: bool = False,
  categorical_value: bool = False,
  max_abs_value: float | None = None,
  drop_last: bool = True,
  # Moving-average normalisation.
  adv_ema_state: types.EmaState | ArrayTree | None = None,
  adv_ema_fn: utils.MovingAverage | None = None,
  td_ema_state: types.EmaState | ArrayTree | None = None,
  td_ema_fn: utils.MovingAverage | None = None,
  axis_name: str | None = None,
) -> tuple[types.ValueOuts, types.EmaState | None, types.EmaState | None]:
  """Computes value targets and advantages, and advances their EMA statistics.

  With only a state-value head, targets come from V-trace; as soon as an
  action-value head is given, Retrace targets for Q are used (V being read
  from `value_net_out` or, if that is None, as E_pi[Q]).

  Let T be the number of time steps of the network outputs (the leading axis
  of `value_net_out` / `q_net_out`). The estimates cover the T-1 transitions
  between them.

  Args:
    value_net_out: state-value head [T, B, 1] or logits [T, B, N], or None.
    q_net_out: action-value head (tree) [T, B, A, 1] or [T, B, A, N], or None.
    target_value_net_out: like `value_net_out`, from a target network, used
      for bootstrapping; None (together with `target_q_net_out`) to bootstrap
      from the online outputs.
    target_q_net_out: like `q_net_out`, from a target network, or None.
    rollout: an `ActorRollout` (rewards/discounts/actions [T, B], behaviour
      logits [T, B, A]) or `UpdateRuleInputs` (actions [T, B], rewards and
      is_terminal [T-1, B], behaviour_agent_out['logits'] [T, B, A]).
    pi_logits: logits of the policy being evaluated [T, B, A].
    discount: discount factor applied on top of the environment discounts.
    lambda_: trace parameter of V-trace / Retrace.
    nonlinear_transform: the heads predict signed-hyperbolic squashed values.
    categorical_value: the heads output two-hot logits rather than scalars.
    max_abs_value: extent of the categorical support; required when
      `categorical_value` is True, ignored otherwise.
    drop_last: the rollout's rewards and discounts have T entries (actor
      convention) and the final one is dropped; if False they have T-1.
    adv_ema_state: moving-average state of the advantages, or None.
    adv_ema_fn: the `MovingAverage` normalising advantages, or None.
    td_ema_state: moving-average state of the TD errors, or None.
    td_ema_fn: the `MovingAverage` normalising TD errors, or None.
    axis_name: axis to average EMA statistics over (under pmap), or None.

  Returns:
    (value_outs, new_adv_ema_state, new_td_ema_state); a new state is None
    when the corresponding state or function was not given, in which case the
    normalised fields are zeros.
  """
  for arg_name, ema_state in (
    ('adv_ema_state', adv_ema_state),
    ('td_ema_state', td_ema_state),
  ):
    if ema_state is not None and not isinstance(ema_state, types.EmaState):
      raise TypeError(
        f'`{arg_name}` must be a types.EmaState or None, got '
        f'{type(ema_state).__name__}.'
      )
  if value_net_out is None and q_net_out is None:
    raise ValueError(
      'Either `value_net_out` or `q_net_out` must be given; both are None.'
    )
  _require_max_abs_value(categorical_value, max_abs_value)
  if categorical_value:
    _require_positive_bound(_support_bound(max_abs_value))
  uses_targets = (
    target_value_net_out is not None or target_q_net_out is not None
  )
  if uses_targets and q_net_out is not None and target_q_net_out is None:
    raise ValueError(
      '`target_q_net_out` is None while `q_net_out` and '
      '`target_value_net_out` are given; pass target Q outputs too (or no '
      'target outputs at all).'
    )

  if value_net_out is not None:
    num_steps, batch_size = value_net_out.shape[:2]
  else:
    num_steps, batch_size = _first_leaf(q_net_out).shape[:2]

  rewards, actions = rollout.rewards, rollout.actions
  env_discounts, mu_logits, discounts_name = _behaviour_of(rollout)

  # Shapes: everything per state has T steps; rewards/discounts T or T-1.
  per_state = (num_steps, batch_size)
  _check_leading_dims('pi_logits', pi_logits, per_state)
  _check_leading_dims('rollout.actions', actions, per_state)
  _check_leading_dims('behaviour logits', mu_logits, per_state)
  if drop_last:
    per_transition = per_state
    hint = '(drop_last=True: one entry per value step, the last is dropped.)'
  else:
    per_transition = (num_steps - 1, batch_size)
    hint = (
      f'(drop_last=False: one entry per transition, i.e. T-1={num_steps - 1} '
      f'for values with T={num_steps} steps.)'
    )
  _check_leading_dims('rollout.rewards', rewards, per_transition, hint)
  _check_leading_dims(discounts_name, env_discounts, per_transition, hint)

  to_scalars = functools.partial(
    extract_scalar_values_from_net_out,
    pi_logits=pi_logits,
    categorical_value=categorical_value,
    max_abs_value=max_abs_value,
    nonlinear_transform=nonlinear_transform,
  )
  v_online, q_online = to_scalars(value_net_out, q_net_out)
  if uses_targets:
    v_boot, q_boot = to_scalars(target_value_net_out, target_q_net_out)
  else:
    v_boot, q_boot = v_online, q_online

  if drop_last:
    rewards = rewards[:-1]
    env_discounts = env_discounts[:-1]
  # The final action (and both policies there) has no transition after it.
  actions_t = _all_but_last_step(actions)
  rho_t = importance_weight(
    _all_but_last_step(pi_logits), _all_but_last_step(mu_logits), actions_t
  )

  if q_online is None:
    value_outs = estimate_values(
      rewards,
      actions_t,
      env_discounts,
      rho_t,
      v_online,
      v_boot,
      discount,
      lambda_,
    )
  else:
    value_outs = estimate_q_values(
      rewards,
      actions_t,
      env_discounts,
      rho_t,
      v_online,
      v_boot,
      q_online,
      q_boot,
      discount,
      lambda_,
    )

  # Advantage normalisation (mean and scale).
  if adv_ema_state is not None and adv_ema_fn is not None:
    new_adv_ema_state = adv_ema_fn.update_state(
      value_outs.adv, adv_ema_state, axis_name
    )
    scale_adv = functools.partial(adv_ema_fn.normalize, state=new_adv_ema_state)
    normalized_adv = scale_adv(value_outs.adv)
    # Mapping over the action structure stops at its leaves, so each action
    # component's advantages are normalised as one block.
    normalized_qv_adv = jax.tree.map(
      lambda _, block: scale_adv(block), rollout.actions, value_outs.qv_adv
    )
  else:
    new_adv_ema_state = None
    normalized_adv = jax.tree.map(jnp.zeros_like, value_outs.td)
    normalized_qv_adv = jax.tree.map(jnp.zeros_like, value_outs.qv_adv)

  # TD normalisation (scale only), of Q's TD if there is a Q head.
  if td_ema_state is not None and td_ema_fn is not None:
    td_source = value_outs.td if q_net_out is None else value_outs.q_td
    new_td_ema_state = td_ema_fn.update_state(
      td_source, td_ema_state, axis_name
    )
    scaled_td = td_ema_fn.normalize(
      td_source, new_td_ema_state, subtract_mean=False
    )
    if q_net_out is None:
      normalized_td = scaled_td
      normalized_q_td = jax.tree.map(jnp.zeros_like, value_outs.q_td)
    else:
      normalized_td = jax.tree.map(jnp.zeros_like, value_outs.td)
      normalized_q_td = scaled_td
  else:
    new_td_ema_state = None
    normalized_td = jax.tree.map(jnp.zeros_like, value_outs.td)
    normalized_q_td = jax.tree.map(jnp.zeros_like, value_outs.q_td)

  value_outs = dataclasses.replace(
    value_outs,
    normalized_adv=normalized_adv,
    normalized_qv_adv=normalized_qv_adv,
    normalized_td=normalized_td,
    normalized_q_td=normalized_q_td,
  )
  return value_outs, new_adv_ema_state, new_td_ema_state


# ----------------------------------------------------------------------------
# Estimators.


def _check_transition_arrays(values: Array, **per_transition: Array) -> None:
  """Every per-transition array must be [T, B] for values of shape [T+1, B]."""
  expected = (values.shape[0] - 1,) + tuple(values.shape[1:])
  for arg_name, arr in per_transition.items():
    if tuple(jnp.shape(arr)) != expected:
      raise ValueError(
        f'`{arg_name}` should have shape {expected} (one entry per '
        f'transition for values of shape {tuple(values.shape)}), but has '
        f'shape {tuple(jnp.shape(arr))}.'
      )


def estimate_values(
  rewards: Array,
  actions: ArrayTree,
  env_discounts: Array,
  rho: Array,
  values: Array,
  target_values: Array,
  discount: ArrayLike = DEFAULT_DISCOUNT,
  lambda_: ArrayLike = DEFAULT_TD_LAMBDA,
) -> types.ValueOuts:
  """V-trace value targets and policy-gradient advantages.

  Bootstraps from `target_values`; the TD is measured against `values`.
  Q-related fields of the result are zero placeholders.

  Args:
    rewards: r_t [T, B].
    actions: a_t, tree of [T, B] arrays (used only for placeholder shapes).
    env_discounts: environment continuation flags [T, B] (0 at termination).
    rho: importance weights pi(a_t|s_t) / mu(a_t|s_t) [T, B].
    values: V(s_t) [T+1, B].
    target_values: bootstrap values [T+1, B].
    discount: discount factor multiplied into `env_discounts`.
    lambda_: V-trace trace parameter.

  Returns:
    A `types.ValueOuts` with adv, value, target_value, rho, value_target, td
    and zeroed qv_adv, q_target, q_value, target_q_value, q_td.
  """
  chex.assert_rank([values, target_values], 2)
  chex.assert_equal_shape([values, target_values])
  _check_transition_arrays(
    values, rewards=rewards, env_discounts=env_discounts, rho=rho
  )
  vtrace_over_batch = _over_batch(
    functools.partial(rlax.vtrace_td_error_and_advantage, lambda_=lambda_)
  )
  discount_t = env_discounts * discount
  v_tm1, v_t = target_values[:-1], target_values[1:]
  vtrace_out = vtrace_over_batch(v_tm1, v_t, rewards, discount_t, rho)
  value_target = vtrace_out.errors + v_tm1

  no_q = jax.tree.map(jnp.zeros_like, actions)
  no_q_target = jax.tree.map(lambda _: jnp.zeros_like(value_target), actions)
  return types.ValueOuts(
    value=values,
    target_value=target_values,
    rho=rho,
    adv=vtrace_out.pg_advantage,
    value_target=value_target,
    td=value_target - values[:-1],
    qv_adv=no_q,
    q_value=no_q,
    target_q_value=no_q,
    q_target=no_q_target,
    q_td=no_q_target,
  )


def estimate_q_values(
  rewards: Array,
  actions: ArrayTree,
  env_discounts: Array,
  rho: Array,
  values: Array,
  target_values: Array,
  q_values: ArrayTree,
  target_q_values: ArrayTree,
  discount: ArrayLike = DEFAULT_DISCOUNT,
  lambda_: ArrayLike = DEFAULT_TD_LAMBDA,
) -> types.ValueOuts:
  """Retrace targets for Q, and the state-value targets they imply.

  With c_t = lambda * min(1, rho_t) and gamma_t = discount * env_discounts_t,
  the target for Q(s_t, a_t) is
    G_t = r_t + gamma_t * (V_{t+1} + c_{t+1} * (G_{t+1} - Q_{t+1}(a_{t+1})))
  with G_{T-1} = r_{T-1} + gamma_{T-1} * V_T, where V_t = V(s_t) and
  Q_t(a) = Q(s_t, a) are the target estimates. Then adv_t = G_t - V_t and the
  state-value target is V_t + min(1, rho_t) * adv_t.

  Args:
    rewards: r_t [T, B].
    actions: a_t [T, B] (indexes the action axis of the Q-values).
    env_discounts: environment continuation flags [T, B].
    rho: importance weights [T, B].
    values: V(s_t) [T+1, B].
    target_values: bootstrap values [T+1, B].
    q_values: Q(s_t, .) tree of [T+1, B, A].
    target_q_values: bootstrap Q(s_t, .) tree of [T+1, B, A].
    discount: discount factor multiplied into `env_discounts`.
    lambda_: Retrace trace parameter.

  Returns:
    A `types.ValueOuts`; q_target and q_td are [T, B] trees, qv_adv is
    target Q minus target V, [T+1, B, A].
  """
  chex.assert_rank(values, 2)
  chex.assert_rank(jax.tree.leaves(q_values), 3)
  _check_transition_arrays(
    values, rewards=rewards, env_discounts=env_discounts, rho=rho
  )
  chex.assert_equal_shape_prefix([values, _first_leaf(q_values)], 2)

  def taken(q_tree):
    return jax.tree.map(lambda q: utils.batch_lookup(q[:-1], actions), q_tree)

  q_a_t = taken(q_values)
  target_q_a_t = taken(target_q_values)

  discount_t = env_discounts * discount
  clipped_rho_t = jnp.minimum(rho, 1.0)
  trace_t = lambda_ * clipped_rho_t

  # rlax's estimator returns a value for the state *before* its first reward;
  # a zero-reward, zero-discount step in front aligns it with ours and is
  # discarded afterwards. It also shifts `trace_t` so that step t's return
  # uses the trace and Q-value of step t+1, as Retrace requires.
  retrace_over_batch = _over_batch(
    functools.partial(
      rlax.general_off_policy_returns_from_q_and_v, stop_target_gradients=True
    )
  )
  padded_rewards = _with_zero_first_step(rewards)
  padded_discounts = _with_zero_first_step(discount_t)
  q_target = jax.tree.map(
    lambda q_a: retrace_over_batch(
      q_a, target_values, padded_rewards, padded_discounts, trace_t
    )[1:],
    target_q_a_t,
  )
  chex.assert_trees_all_equal_shapes(q_a_t, q_target)

  v_tm1 = target_values[:-1]
  adv = _first_leaf(q_target) - v_tm1
  value_target = v_tm1 + clipped_rho_t * adv
  return types.ValueOuts(
    value=values,
    target_value=target_values,
    rho=rho,
    adv=adv,
    value_target=value_target,
    td=value_target - values[:-1],
    qv_adv=jax.tree.map(
      lambda q: q - target_values[..., None], target_q_values
    ),
    q_value=q_values,
    target_q_value=target_q_values,
    q_target=q_target,
    q_td=jax.tree.map(operator.sub, q_target, q_a_t),
  )


# ----------------------------------------------------------------------------
# From network outputs to scalars.


def get_values_from_net_outs(
  x: Array,
  categorical_value: bool,
  max_abs_value: float | None,
  nonlinear_transform: bool,
) -> Array:
  """Reads scalar values off a value head.

  Args:
    x: head output [T, B, 1] (scalar) or [T, B, N] (categorical logits).
    categorical_value: whether `x` holds two-hot logits.
    max_abs_value: extent of the categorical support (categorical only).
    nonlinear_transform: undo the signed-hyperbolic squashing.

  Returns:
    Values [T, B].
  """
  if jnp.ndim(x) != 3:
    raise ValueError(
      'Value head output should be [T, B, 1 or num_bins], got shape '
      f'{tuple(jnp.shape(x))}.'
    )
  _require_max_abs_value(categorical_value, max_abs_value)
  if categorical_value:
    v = value_logits_to_scalar(x, _support_bound(max_abs_value))
  else:
    if x.shape[-1] != 1:
      raise ValueError(
        'A scalar value head (categorical_value=False) should end in an '
        f'axis of size 1, got shape {tuple(x.shape)}.'
      )
    v = jnp.squeeze(x, axis=2)
  return _unsquash(v) if nonlinear_transform else v


def extract_scalar_values_from_net_out(
  value_net_out: Array,
  q_net_out: ArrayTree | None,
  pi_logits: ArrayTree,
  categorical_value: bool,
  max_abs_value: float | None,
  nonlinear_transform: bool,
) -> tuple[Array, ArrayTree | None]:
  """Scalar state and action values from the heads.

  Args:
    value_net_out: [T, B, 1 or N], or None to derive V = sum_a pi(a) Q(a).
    q_net_out: tree of [T, B, A, 1 or N], or None.
    pi_logits: policy logits [T, B, A] (used only when V comes from Q).
    categorical_value: whether heads hold two-hot logits.
    max_abs_value: extent of the categorical support (categorical only).
    nonlinear_transform: undo the signed-hyperbolic squashing.

  Returns:
    (values [T, B], q_values tree of [T, B, A] or None).
  """
  _require_max_abs_value(categorical_value, max_abs_value)
  if value_net_out is None and q_net_out is None:
    raise ValueError('`value_net_out` and `q_net_out` are both None.')
  read_values = functools.partial(
    get_values_from_net_outs,
    categorical_value=categorical_value,
    max_abs_value=max_abs_value,
    nonlinear_transform=nonlinear_transform,
  )

  if q_net_out is None:
    q_values = None
  else:
    chex.assert_rank(jax.tree.leaves(q_net_out), 4)  # [T, B, A, 1 or N]
    per_action = jax.vmap(read_values, in_axes=2, out_axes=2)
    q_values = jax.tree.map(per_action, q_net_out)

  if value_net_out is not None:
    values = read_values(value_net_out)
  else:
    pi_probs = jax.tree.map(jax.nn.softmax, pi_logits)
    values = jax.tree.map(
      lambda p, q: jnp.sum(p * q, axis=2), pi_probs, q_values
    )
  return values, q_values


def importance_weight(
  pi_logits: ArrayTree,
  mu_logits: ArrayTree,
  actions: ArrayTree,
) -> Array:
  """rho = pi(a|s) / mu(a|s), joint over action components, no gradient.

  Args:
    pi_logits: target policy logits, tree of [T, B, A].
    mu_logits: behaviour policy logits, same structure.
    actions: taken actions, tree of [T, B].

  Returns:
    Importance weights [T, B].
  """

  def joint_log_prob(logits_tree):
    per_component = jax.tree.map(
      lambda logits, a: distrax.Softmax(logits).log_prob(a),
      logits_tree,
      actions,
    )
    return functools.reduce(operator.add, jax.tree.leaves(per_component))

  log_ratio = joint_log_prob(pi_logits) - joint_log_prob(mu_logits)
  return jax.lax.stop_gradient(jnp.exp(log_ratio))


# ----------------------------------------------------------------------------
# Two-hot categorical values.


def value_logits_to_scalar(value_logits: Array, max_abs_value: float) -> Array:
  """Expected value of softmax(logits) over N evenly spaced bins.

  Args:
    value_logits: [..., N] logits.
    max_abs_value: the bins span [-max_abs_value, max_abs_value].

  Returns:
    [...] expected values.
  """
  _require_positive_bound(max_abs_value)
  return rlax.transform_from_2hot(
    jax.nn.softmax(value_logits),
    min_value=-max_abs_value,
    max_value=max_abs_value,
    num_bins=value_logits.shape[-1],
  )


def scalar_to_categorical_value(
  num_bins: int, value: Array, max_abs_value: float
) -> Array:
  """Two-hot encoding of `value` over N evenly spaced bins.

  Args:
    num_bins: N.
    value: [...] scalars (clipped to the support).
    max_abs_value: the bins span [-max_abs_value, max_abs_value].

  Returns:
    [..., N] probabilities with at most two non-zero entries.
  """
  _require_positive_bound(max_abs_value)
  return rlax.transform_to_2hot(
    value,
    min_value=-max_abs_value,
    max_value=max_abs_value,
    num_bins=num_bins,
  )


# ----------------------------------------------------------------------------
# Losses.


def value_loss_from_target(
  value_net_out: Array,
  value_target: Array,
  nonlinear_transform: bool = False,
  categorical_value: bool = False,
  max_abs_value: float | None = None,
) -> Array:
  """Per-step loss pulling a value head towards `value_target`.

  The target is used as is: stop its gradient beforehand if needed. With
  `nonlinear_transform` the target is squashed into the head's space first.

  Args:
    value_net_out: [..., 1] scalar head or [..., N] logits.
    value_target: [...] targets in reward units.
    nonlinear_transform: the head predicts squashed values.
    categorical_value: cross-entropy to the two-hot target instead of a
      squared error.
    max_abs_value: extent of the categorical support (categorical only).

  Returns:
    [...] losses: 0.5 * (v - target)^2 or the cross-entropy.
  """
  _require_max_abs_value(categorical_value, max_abs_value)
  head_target = _squash(value_target) if nonlinear_transform else value_target
  if not categorical_value:
    prediction = jnp.squeeze(value_net_out, axis=-1)
    return 0.5 * jnp.square(prediction - head_target)
  target_probs = scalar_to_categorical_value(
    value_net_out.shape[-1], head_target, _support_bound(max_abs_value)
  )
  chex.assert_equal_shape([value_net_out, target_probs])
  return optax.losses.softmax_cross_entropy(value_net_out, target_probs)


def value_loss_from_td(
  value_net_out: Array,
  td: Array,
  nonlinear_transform: bool = False,
  categorical_value: bool = False,
  max_abs_value: float | None = None,
) -> Array:
  """Per-step value loss towards stop_gradient(v + td).

  For a plain scalar head this is 0.5 * td^2 in value and its gradient is
  -td * dv, so `td` may be a rescaled (e.g. EMA-normalised) TD error.

  Args:
    value_net_out: [T, B, 1] scalar head or [T, B, N] logits.
    td: [T, B] TD errors (no gradient is taken through them).
    nonlinear_transform: the head predicts squashed values.
    categorical_value: the head outputs two-hot logits.
    max_abs_value: extent of the categorical support (categorical only).

  Returns:
    [T, B] losses.
  """
  _require_max_abs_value(categorical_value, max_abs_value)
  v_t = get_values_from_net_outs(
    value_net_out,
    categorical_value=categorical_value,
    max_abs_value=max_abs_value,
    nonlinear_transform=nonlinear_transform,
  )
  if jnp.shape(td) != v_t.shape:
    raise ValueError(
      f'`td` should have shape {v_t.shape} to match `value_net_out` of '
      f'shape {tuple(value_net_out.shape)}, but has shape '
      f'{tuple(jnp.shape(td))}.'
    )
  target_t = jax.lax.stop_gradient(v_t + td)
  return value_loss_from_target(
    value_net_out,
    target_t,
    nonlinear_transform=nonlinear_transform,
    categorical_value=categorical_value,
    max_abs_value=max_abs_value,
  )
