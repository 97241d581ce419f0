# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The discovered update rule (DiscoRL, Oh et al., Nature 2025).

The agent outputs policy logits [A], a prediction y [Y], and, per action,
a prediction z [A, Y], auxiliary policy logits aux_pi [A, A] and a
categorical action value q [A, bins]. The meta-network maps the trajectory to
targets pi, y, z; the agent minimises KL(target || output) for each, plus an
auxiliary one-step policy prediction loss and a Retrace value loss on q.

The meta-network's sizes are `MetaNetSizes` (Disco103's by default); a rule
of other sizes is the same modules with other shapes, and
`sizes_from_params` reads the sizes back from a rule's parameters.
"""

from collections.abc import Mapping, Sequence
import dataclasses
import re
from typing import Any

import chex
import distrax
import haiku as hk
import jax
import jax.numpy as jnp
import optax

from disco_rl import types
from disco_rl import utils
from disco_rl.networks import meta_nets
from disco_rl.update_rules import base
from disco_rl.value_fns import value_utils

META_NETWORKS = {'lstm': meta_nets.LSTM}
AGENT_OUTPUTS = ('logits', 'y', 'z', 'aux_pi', 'q')
HYPER_PARAMS = (
  'pi_cost',
  'y_cost',
  'z_cost',
  'value_cost',
  'aux_policy_cost',
  'target_params_coeff',
  'value_fn_td_lambda',
)
# The value quantities (`types.ValueOuts` fields) passed on in meta_out.
_VALUE_OUTS = (
  'adv',
  'normalized_adv',
  'qv_adv',
  'normalized_qv_adv',
  'q_value',
  'q_target',
  'q_td',
  'normalized_q_td',
)


@dataclasses.dataclass(frozen=True)
class MetaNetSizes:
  """The sizes of the meta-network (`meta_nets.LSTM`); defaults: Disco103's.

  Only shapes change with them: the Haiku module and parameter names are
  the same at every size (so Disco103's weights load at the defaults).

  Attributes:
    prediction_size: Y, the categories of the agent's predictions y [Y] and
      z [A, Y] and of their targets (LPG: 8).
    hidden_size: the backward (per-trajectory) LSTM, run over every step.
    embedding_size: hidden sizes of the MLPs embedding y and z [.., Y] (the
      last is the width of each embedded prediction).
    policy_channels: channels of the per-action input embedding.
    policy_target_channels: channels of the policy-target head.
    meta_hidden_size: the lifetime LSTM (one step per agent update).
    meta_embedding_size: hidden sizes of the lifetime LSTM's summary MLP.
    meta_pred_embedding_size: the lifetime LSTM's y/z embedding MLPs.
    meta_policy_channels: the lifetime LSTM's per-action input embedding.
  """

  prediction_size: int = 600
  hidden_size: int = 256
  embedding_size: tuple[int, ...] = (16, 1)
  policy_channels: tuple[int, ...] = (16, 2)
  policy_target_channels: tuple[int, ...] = (16,)
  meta_hidden_size: int = 128
  meta_embedding_size: tuple[int, ...] = (16,)
  meta_pred_embedding_size: tuple[int, ...] = (16, 1)
  meta_policy_channels: tuple[int, ...] = (16, 2)

  def __post_init__(self):
    for field in dataclasses.fields(self):
      value = getattr(self, field.name)
      if isinstance(field.default, tuple):
        value = tuple(int(v) for v in _sizes_tuple(value, field.name))
        object.__setattr__(self, field.name, value)
        if not value or min(value) < 1:
          raise ValueError(
            f'MetaNetSizes.{field.name} must be one or more '
            f'positive sizes, got {value}.'
          )
      elif isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
          f'MetaNetSizes.{field.name} must be a positive '
          f'integer, got {value!r}.'
        )

  def changes(self) -> dict[str, Any]:
    """The fields that differ from Disco103's: `as_sizes(changes())` is
    these sizes (a job's `rule_sizes` setting)."""
    default = MetaNetSizes()
    return {
      name: getattr(self, name)
      for name in SIZE_FIELDS
      if getattr(self, name) != getattr(default, name)
    }

  def text(self) -> str:
    """The changes from Disco103's as `--rule-sizes` takes them
    ('prediction_size=8,embedding_size=8x1'), or "Disco103's"."""
    changes = self.changes()
    if not changes:
      return "Disco103's"
    return ','.join(
      f'{name}={"x".join(map(str, v)) if isinstance(v, tuple) else v}'
      for name, v in changes.items()
    )

  def net_kwargs(self) -> dict[str, Any]:
    """The size arguments of `meta_nets.LSTM` (with its `MetaLSTM`'s)."""
    own = (
      'prediction_size',
      'hidden_size',
      'embedding_size',
      'policy_channels',
      'policy_target_channels',
    )
    kwargs: dict[str, Any] = {name: getattr(self, name) for name in own}
    # The lifetime LSTM's sizes are the `meta_` fields, less the prefix.
    lifetime = (
      'meta_policy_channels',
      'meta_embedding_size',
      'meta_pred_embedding_size',
      'meta_hidden_size',
    )
    kwargs['meta_rnn_kwargs'] = {
      name.removeprefix('meta_'): getattr(self, name) for name in lifetime
    }
    return kwargs


SIZE_FIELDS = tuple(f.name for f in dataclasses.fields(MetaNetSizes))


def _sizes_tuple(value: Any, name: str) -> tuple[Any, ...]:
  """A tuple-valued size from a tuple, a list, an int or text '16x1' (the
  form a command line's `--rule-sizes embedding_size=16x1` gives)."""
  if isinstance(value, int) and not isinstance(value, bool):
    return (value,)
  if isinstance(value, str) and re.fullmatch(r'\d+(x\d+)*', value.strip()):
    return tuple(int(v) for v in value.strip().split('x'))
  if isinstance(value, Sequence) and not isinstance(value, str):
    return tuple(value)
  raise ValueError(
    f'MetaNetSizes.{name} must be a sequence of positive sizes (or text '
    f"such as '16x1'), got {value!r}."
  )


def as_sizes(sizes: 'MetaNetSizes | Mapping[str, Any] | None') -> MetaNetSizes:
  """`sizes` as `MetaNetSizes`: a `MetaNetSizes`, a mapping of some of its
  fields (the others Disco103's), or None (Disco103's).

  Raises:
    ValueError: a key that is not a field, naming the fields.
  """
  if sizes is None:
    return MetaNetSizes()
  if isinstance(sizes, MetaNetSizes):
    return sizes
  sizes = dict(sizes)
  unknown = sorted(set(sizes) - set(SIZE_FIELDS))
  if unknown:
    raise ValueError(
      f'Unknown meta-network size(s) {unknown}; expected some '
      f'of {list(SIZE_FIELDS)}.'
    )
  return MetaNetSizes(**sizes)


# Named sizes of the rule (issue 54's cost grid, scripts/
# benchmark_meta_steps.py): Disco103's; LPG's 8 prediction categories with
# Disco103's LSTMs (GROOVE: an LSTM of 256 over 16-wide embeddings, which
# Disco103's backward LSTM already is); smaller LSTMs; and the 'tiny' rule
# meta-trained here (docs/studies/lpg_transfer.md).
NAMED_SIZES = {
  'disco_103': MetaNetSizes(),
  'lpg': MetaNetSizes(prediction_size=8),
  'small': MetaNetSizes(prediction_size=8, hidden_size=64, meta_hidden_size=32),
  'tiny': MetaNetSizes(
    prediction_size=8,
    hidden_size=16,
    embedding_size=(8, 1),
    policy_channels=(8, 2),
    policy_target_channels=(8,),
    meta_hidden_size=8,
    meta_embedding_size=(8,),
    meta_pred_embedding_size=(8, 1),
    meta_policy_channels=(8, 2),
  ),
}


def _numbered(
  params: Mapping[str, Any], prefix: str, layer: str
) -> tuple[int, ...]:
  """Output sizes of the layers `prefix/layer`, `prefix/layer_1`, ... in
  order (their biases' lengths)."""
  pattern = re.compile(re.escape(f'{prefix}/{layer}') + r'(?:_(\d+))?$')
  found = {}
  for name, leaves in params.items():
    match = pattern.match(name)
    if match:
      found[int(match.group(1) or 0)] = int(leaves['b'].shape[-1])
  if not found or sorted(found) != list(range(len(found))):
    raise ValueError(
      f'No layers {prefix}/{layer}, {layer}_1, ... in the '
      f'meta-network parameters (have {sorted(params)}).'
    )
  return tuple(found[i] for i in range(len(found)))


def has_action_head(params: Mapping[str, Any], name: str = 'lstm') -> bool:
  """Whether a rule's parameters hold the meta-network's action head (a
  rule of an action target, `ACTION_TARGETS`; `meta_nets.LSTM`'s
  `action_head`)."""
  return f'{name}/linear_5' in params


def sizes_from_params(
  params: Mapping[str, Any], name: str = 'lstm'
) -> MetaNetSizes:
  """The `MetaNetSizes` of a rule's parameters (arrays or shapes).

  Args:
    params: the meta-network's Haiku parameters, e.g. Disco103's or a
      meta-trained rule's (`init_params(...)[0]`, or a loaded npz).
    name: the meta-network's module name (`net['name']`).

  Raises:
    ValueError: parameters that are not a Disco meta-network's.
  """
  meta = f'{name}/~/meta_lstm/~unroll'
  try:
    return MetaNetSizes(
      prediction_size=int(params[f'{name}/linear_2']['b'].shape[-1]),
      hidden_size=int(params[f'{name}/lstm/linear']['b'].shape[-1]) // 4,
      embedding_size=_numbered(params, f'{name}/mlp/~', 'linear'),
      policy_channels=_numbered(params, f'{name}/sequential', 'conv1_d'),
      policy_target_channels=_numbered(
        params, f'{name}/sequential_1', 'conv1_d'
      ),
      meta_hidden_size=int(params[f'{meta}/lstm/linear']['b'].shape[-1]) // 4,
      meta_embedding_size=_numbered(params, f'{meta}/mlp_2/~', 'linear'),
      meta_pred_embedding_size=_numbered(params, f'{meta}/mlp/~', 'linear'),
      meta_policy_channels=_numbered(params, f'{meta}/sequential', 'conv1_d'),
    )
  except KeyError as e:
    raise ValueError(
      f'Not the parameters of a Disco meta-network named '
      f'{name!r}: no {e} (have {sorted(params)}).'
    ) from None


# How the meta-network's policy output becomes the policy target
# (`DiscoUpdateRule.policy_target`).
POLICY_TARGETS = ('absolute', 'residual', 'action', 'action_pg')
# The policy targets that read the meta-network's action head.
ACTION_TARGETS = ('action', 'action_pg')


@dataclasses.dataclass(eq=False)
class DiscoUpdateRule(base.UpdateRule):
  """The discovered rule; `net` configures its meta-network.

  The constructor's arguments are these attributes.

  Attributes:
    net: meta-network settings: 'name' (a key of `META_NETWORKS`, also the
      Haiku module name), 'prediction_size' and that network's arguments.
    value_discount: discount of the Retrace action-value targets.
    max_abs_value: range of the categorical value [-max, max].
    num_bins: number of bins of the categorical value.
    moving_average_decay: decay of the advantage/TD normalisation EMAs.
    moving_average_eps: epsilon of that normalisation.
    policy_target: how the meta-network's policy output `pi` becomes the
      policy target (`POLICY_TARGETS`): 'absolute' (Disco103, the upstream)
      takes it as the target's logits; 'residual' adds it to the agent's
      own logits (gradient stopped), pi_hat = sg(logits) + pi, so that an
      output of 0 asks for no change of the policy; 'action' (LPG's actor
      term, to first order) adds a scalar per step s_t of the network's
      action head (`action_head`, which the settings must give) to the
      logit of the action taken: pi_hat = sg(logits) + s_t * onehot(a_t),
      whose KL moves the logits by about s_t * pi(a_t) * (onehot(a_t) -
      pi): a step that favours likely actions, so that a constant s_t > 0
      narrows the policy without any reward; 'action_pg' divides the
      scalar by pi(a_t), pi_hat = sg(logits) + s_t / pi(a_t) * onehot(a_t),
      whose KL moves the logits by about s_t * (onehot(a_t) - pi), the step
      of LPG's actor term s_t * log pi(a_t), zero on average over a ~ pi
      for a constant s_t.
  """

  net: Mapping[str, Any]
  value_discount: float
  max_abs_value: float
  num_bins: int
  moving_average_decay: float = 0.99
  moving_average_eps: float = 1e-6
  policy_target: str = 'absolute'

  def __post_init__(self) -> None:
    if self.policy_target not in POLICY_TARGETS:
      raise ValueError(
        f'policy_target must be one of {POLICY_TARGETS}, got '
        f'{self.policy_target!r}.'
      )
    if bool(dict(self.net).get('action_head')) != (
      self.policy_target in ACTION_TARGETS
    ):
      raise ValueError(
        f'policy_target {" or ".join(map(repr, ACTION_TARGETS))} and only '
        "they need the meta-network's "
        f'action head: got policy_target={self.policy_target!r} with '
        f'net action_head={dict(self.net).get("action_head")!r}.'
      )
    settings = dict(self.net)  # A ConfigDict or a mapping.
    net_name = settings.get('name')
    if net_name not in META_NETWORKS:
      raise ValueError(
        f'Unknown meta-network name {net_name!r}; expected one '
        f'of {sorted(META_NETWORKS)}.'
      )
    net_cls = META_NETWORKS[net_name]
    utils.check_kwargs(net_cls, settings, 'disco meta-network (net)')
    self._prediction_size = settings['prediction_size']
    # Two normalisers of the same settings: advantages, then TD errors.
    self._adv_ema, self._td_ema = (
      utils.MovingAverage(
        jnp.zeros(()),
        decay=self.moving_average_decay,
        eps=self.moving_average_eps,
      )
      for _ in range(2)
    )

    def forward(inputs, axis_name):
      return net_cls(**settings)(inputs, axis_name)

    self._eta_init_fn, self._eta_apply = hk.transform_with_state(forward)
    # Compiled once per rule: running the meta-network's initialisation op by
    # op costs tens of seconds, and every new agent needs its initial state.
    self._jit_init = jax.jit(self._eta_init_fn, static_argnames='axis_name')

  # --------------------------------------------------------------------------
  # Parameters, specs and state.

  def _meta_net_example(self) -> types.UpdateRuleInputs:
    """A small trajectory with every input the meta-network reads."""
    return self._get_dummy_input(
      include_behaviour_out=True, include_agent_adv=True
    )

  def init_params(
    self, rng: chex.PRNGKey
  ) -> tuple[types.MetaParams, chex.ArrayTree]:
    return self._eta_init_fn(rng, self._meta_net_example(), axis_name=None)

  def init_meta_state(
    self, rng: chex.PRNGKey, params: types.AgentParams
  ) -> types.MetaState:
    example = self._meta_net_example()
    _, rnn_state = self._jit_init(rng, example, axis_name=None)
    return dict(
      rnn_state=rnn_state,
      adv_ema_state=self._adv_ema.init_state(),
      td_ema_state=self._td_ema.init_state(),
      target_params=params,
    )

  def flat_output_spec(
    self, single_action_spec: types.ActionSpec
  ) -> types.Specs:
    y_spec = types.ArraySpec((self._prediction_size,), jnp.float32)
    return {'logits': utils.get_logits_specs(single_action_spec), 'y': y_spec}

  def model_output_spec(
    self, single_action_spec: types.ActionSpec
  ) -> types.Specs:
    # Per action: z [Y], the auxiliary policy [A] and q's bins.
    return {
      'z': types.ArraySpec((self._prediction_size,), jnp.float32),
      'aux_pi': utils.get_logits_specs(single_action_spec),
      'q': types.ArraySpec((self.num_bins,), jnp.float32),
    }

  # --------------------------------------------------------------------------
  # The meta-network.

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
    """Targets pi/y/z [T, B, ...], value quantities, and the next meta state.

    Also advances the target network's parameters, an EMA of `params` with
    weight `hyper_params['target_params_coeff']` on the old value.
    """
    del rng  # The rule draws no random numbers.
    base.check_update_rule_inputs(rollout, AGENT_OUTPUTS, 'disco rule')
    missing = [k for k in HYPER_PARAMS if k not in hyper_params]
    if missing:
      raise ValueError(
        f'disco rule: hyper_params lacks {missing}; got {sorted(hyper_params)}.'
      )

    # The target network's outputs on the same observations.
    old_target_params = meta_state['target_params']
    obs, resets = rollout.observations, rollout.should_reset_mask_fwd
    target_out, _ = unroll_policy_fn(old_target_params, state, obs, resets)

    # Retrace targets for the categorical q head only (no state-value head);
    # advantages and TD errors are normalised by the rule's moving averages.
    value_outs, adv_ema_state, td_ema_state = value_utils.get_value_outs(
      rollout=rollout,
      pi_logits=rollout.agent_out['logits'],
      q_net_out=rollout.agent_out['q'],
      target_q_net_out=target_out['q'],
      value_net_out=None,
      target_value_net_out=None,
      discount=self.value_discount,
      lambda_=hyper_params['value_fn_td_lambda'],
      drop_last=False,
      categorical_value=True,
      nonlinear_transform=True,
      max_abs_value=self.max_abs_value,
      adv_ema_fn=self._adv_ema,
      adv_ema_state=meta_state['adv_ema_state'],
      td_ema_fn=self._td_ema,
      td_ema_state=meta_state['td_ema_state'],
      axis_name=axis_name,
    )

    # What the meta-network reads under 'extra_from_rule/...'.
    extra_from_rule = {
      name: getattr(value_outs, name)
      for name in ('adv', 'normalized_adv', 'qv_adv', 'normalized_qv_adv')
    }
    extra_from_rule.update(
      v_scalar=value_outs.value,
      q=value_outs.target_q_value,
      target_out=target_out,
    )
    meta_inputs = dataclasses.replace(rollout, extra_from_rule=extra_from_rule)
    targets, new_rnn_state = self._eta_apply(
      meta_params, meta_state['rnn_state'], None, meta_inputs, axis_name
    )
    chex.assert_rank([targets['pi'], targets['y'], targets['z']], 3)
    if self.policy_target != 'absolute':  # A change of the agent's policy.
      logits_t = jax.lax.stop_gradient(rollout.agent_out['logits'][:-1])
      chex.assert_equal_shape([logits_t, targets['pi']])
      if self.policy_target == 'residual':
        change = targets['pi']
      else:  # The action targets: the step's scalar on the action taken.
        change = action_change(
          logits_t,
          rollout.actions[:-1],
          targets['pi_action'],
          self.policy_target,
        )
      targets = dict(targets, pi=logits_t + change)

    # The targets, with the value quantities the losses and logs read.
    meta_out = {name: getattr(value_outs, name) for name in _VALUE_OUTS}
    meta_out.update(targets, target_out=target_out)

    # The target network moves towards the agent: with c the coefficient,
    # new = c * old + (1 - c) * params.
    coeff = hyper_params['target_params_coeff']
    new_target_params = optax.incremental_update(
      params, old_target_params, step_size=1.0 - coeff
    )
    new_meta_state = dict(
      meta_state,
      rnn_state=new_rnn_state,
      adv_ema_state=adv_ema_state,
      td_ema_state=td_ema_state,
      target_params=new_target_params,
    )
    return meta_out, new_meta_state

  # --------------------------------------------------------------------------
  # Losses.

  def agent_loss(self, rollout, meta_out, hyper_params, backprop):
    """KL to the meta-network's targets plus the auxiliary policy loss.

    Returns the per-step loss [T, B]: pi_cost * KL(pi_hat || pi) + y_cost *
    KL(y_hat || y) + z_cost * KL(z_hat || z(a_t)) + aux_policy_cost * the
    auxiliary KL, and logs.
    """
    t, b = base.check_update_rule_inputs(rollout, AGENT_OUTPUTS, 'disco rule')
    out_t = jax.tree.map(lambda x: x[:-1], rollout.agent_out)
    a_t = rollout.actions[:-1]
    logits_t, y_t = out_t['logits'], out_t['y']
    z_a_t = utils.batch_lookup(out_t['z'], a_t)  # [T, B, Y]

    pi_hat, y_hat, z_hat = meta_out['pi'], meta_out['y'], meta_out['z']
    if not backprop:
      pi_hat, y_hat, z_hat = jax.lax.stop_gradient((pi_hat, y_hat, z_hat))
    # Auxiliary: from (s_t, a_t) predict the policy at s_{t+1}; no target
    # across an episode boundary.
    aux_pi_a_t = utils.batch_lookup(out_t['aux_pi'], a_t)  # [T, B, A]
    next_logits = rollout.agent_out['logits'][1:]
    # Each term's (target, output) logits; its loss is KL(target || output)
    # per step, weighted by hyper_params[f'{name}_cost'].
    terms = dict(
      pi=(pi_hat, logits_t),
      y=(y_hat, y_t),
      z=(z_hat, z_a_t),
      aux_policy=(jax.lax.stop_gradient(next_logits), aux_pi_a_t),
    )
    kl = {}
    for name, (target, out) in terms.items():
      chex.assert_equal_shape([target, out])
      kl[name] = distrax.Softmax(target).kl_divergence(distrax.Softmax(out))
    kl['aux_policy'] = kl['aux_policy'] * (1.0 - rollout.is_terminal)
    chex.assert_shape(list(kl.values()), (t, b))
    loss = sum(hyper_params[f'{name}_cost'] * kl[name] for name in terms)

    means = dict(
      logits=logits_t,
      y=y_t,
      z=out_t['z'],
      pi_loss=kl['pi'],
      aux_kl_loss=kl['aux_policy'],
      pi_hat=pi_hat,
      y_hat=y_hat,
      z_hat=z_hat,
    )
    entropies = dict(
      entropy=logits_t,
      y_entropy=y_t,
      z_entropy=z_a_t,
      pi_hat_entropy=pi_hat,
      aux_policy_entropy=aux_pi_a_t,
      aux_target_entropy=next_logits,
    )
    log = {k: jnp.mean(v) for k, v in means.items()}
    log.update(
      {k: jnp.mean(distrax.Softmax(v).entropy()) for k, v in entropies.items()}
    )
    log.update(_signal_logs(rollout.rewards, meta_out))
    return loss, log

  def agent_loss_no_meta(self, rollout, meta_out, hyper_params):
    """Categorical Retrace loss on q(s_t, a_t); no meta-gradient flows here.

    Returns value_cost times the per-step loss [T, B], and logs.
    """
    if meta_out is None:
      raise ValueError(
        'The disco rule needs meta_out (from unroll_meta_net) '
        'for its value loss, got None.'
      )
    q_a_t = utils.batch_lookup(rollout.agent_out['q'], rollout.actions)[:-1]
    td_t = jax.lax.stop_gradient(meta_out['q_td'])
    q_loss = value_utils.value_loss_from_td(
      q_a_t,
      td_t,
      max_abs_value=self.max_abs_value,
      categorical_value=True,
      nonlinear_transform=True,
    )
    means = dict(
      q_target=meta_out['q_target'],
      agent_q_mean=meta_out['q_value'],
      q_loss=q_loss,
      td=meta_out['q_td'],
      normalized_td=meta_out['normalized_q_td'],
    )
    log = {k: jnp.mean(v) for k, v in means.items()}
    return q_loss * hyper_params['value_cost'], log


# What `_signal_logs` adds for a rule of an action target.
ACTION_SIGNAL_KEYS = (
  'adv_abs',
  'normalized_adv_abs',
  'pi_action',
  'pi_action_abs',
  'pi_action_unrewarded',
  'unrewarded',
)


def action_change(
  logits_t: chex.Array,
  a_t: chex.Array,
  s_t: chex.Array,
  policy_target: str,
) -> chex.Array:
  """The change [T, B, A] an action target makes to the agent's logits.

  'action': s_t on the logit of a_t; 'action_pg': s_t / pi(a_t) there, so
  that the KL to the target moves the logits by about s_t * (onehot(a_t) -
  pi), whose mean over a_t ~ pi is 0 for a constant s_t (see
  `DiscoUpdateRule.policy_target`).

  Args:
    logits_t: the agent's logits [T, B, A] (gradient stopped by the caller).
    a_t: the actions taken [T, B].
    s_t: the action head's scalars [T, B].
    policy_target: one of `ACTION_TARGETS`.
  """
  chex.assert_rank([logits_t, a_t, s_t], [3, 2, 2])
  chex.assert_equal_shape([a_t, s_t])
  if policy_target not in ACTION_TARGETS:
    raise ValueError(
      f'policy_target must be one of {ACTION_TARGETS}, got {policy_target!r}.'
    )
  onehot = jax.nn.one_hot(a_t, logits_t.shape[-1], dtype=logits_t.dtype)
  if policy_target == 'action_pg':
    s_t = s_t / jnp.sum(jax.nn.softmax(logits_t) * onehot, axis=-1)
  return s_t[..., None] * onehot


def _signal_logs(
  rewards: chex.Array, meta_out: types.UpdateRuleOuts
) -> dict[str, chex.Array]:
  """What an action target's head does where no reward came: the scalars
  `ACTION_SIGNAL_KEYS` (none for the other targets, whose logs stay the
  upstream's).

  `pi_action` and `pi_action_abs` are the head's mean and mean |output|,
  `pi_action_unrewarded` its mean over the steps whose reward r_t is 0,
  `unrewarded` their share; `adv_abs` and `normalized_adv_abs` the mean
  |advantage| before and after the rule's moving-average normalisation.

  Args:
    rewards: r_t [T, B].
    meta_out: the rule's outputs ('adv', 'normalized_adv' [T, B]; with an
      action head 'pi_action' [T, B]).
  """
  if 'pi_action' not in meta_out:
    return {}
  pi_action = jax.lax.stop_gradient(meta_out['pi_action'])
  chex.assert_equal_shape([pi_action, rewards])
  unrewarded = (rewards == 0).astype(pi_action.dtype)
  count = jnp.sum(unrewarded)
  log = dict(
    adv_abs=jnp.mean(jnp.abs(meta_out['adv'])),
    normalized_adv_abs=jnp.mean(jnp.abs(meta_out['normalized_adv'])),
    pi_action=jnp.mean(pi_action),
    pi_action_abs=jnp.mean(jnp.abs(pi_action)),
    pi_action_unrewarded=jnp.sum(pi_action * unrewarded)
    / jnp.maximum(count, 1.0),
    unrewarded=count / unrewarded.size,
  )
  assert set(log) == set(ACTION_SIGNAL_KEYS), sorted(log)  # One list.
  return log


def _option(source: str, *transforms: str) -> types.TransformConfig:
  return types.TransformConfig(source=source, transforms=transforms)


def get_input_option() -> types.MetaNetInputOption:
  """The inputs of Disco103's meta-network (see the paper's Methods).

  Per step: the probability of the taken action under the agent, behaviour
  and target policies; the reward; the discount; values, advantages and their
  normalised version; embedded y and z predictions of the agent and target
  networks (z at the taken action, policy-averaged and maxed over actions).
  Per action: the three policies, embedded z, and the Q-value quantities.
  """
  pick_a = ('drop_last', 'softmax', 'stop_grad', 'select_a')
  probs = ('drop_last', 'softmax', 'stop_grad')
  z_a = ('drop_last', 'softmax', 'z_net', 'select_a')
  z_avg = ('softmax', 'z_net', 'pi_weighted_avg', 'td_pair')
  z_max = ('softmax', 'z_net', 'max_a', 'td_pair')
  y_pair = ('softmax', 'y_net', 'td_pair')
  q_like = ('sign_log', 'drop_last', 'stop_grad')
  target = 'extra_from_rule/target_out'
  return types.MetaNetInputOption(
    base=(
      _option('agent_out/logits', *pick_a),
      _option('behaviour_agent_out/logits', *pick_a),
      _option('rewards', 'sign_log'),
      _option('is_terminal', 'masks_to_discounts'),
      _option('extra_from_rule/v_scalar', 'sign_log', 'td_pair', 'stop_grad'),
      _option('extra_from_rule/adv', 'sign_log', 'stop_grad'),
      _option('extra_from_rule/normalized_adv', 'stop_grad'),
      _option(f'{target}/logits', *pick_a),
      _option('agent_out/y', *y_pair),
      _option(f'{target}/y', *y_pair),
      _option('agent_out/z', *z_a),
      _option('agent_out/z', *z_avg),
      _option('agent_out/z', *z_max),
      _option(f'{target}/z', *z_a),
      _option(f'{target}/z', *z_avg),
      _option(f'{target}/z', *z_max),
    ),
    action_conditional=(
      _option('agent_out/logits', *probs),
      _option('behaviour_agent_out/logits', *probs),
      _option(f'{target}/logits', *probs),
      _option('agent_out/z', 'drop_last', 'softmax', 'z_net'),
      _option(f'{target}/z', 'drop_last', 'softmax', 'z_net'),
      _option('extra_from_rule/q', *q_like),
      _option('extra_from_rule/qv_adv', *q_like),
      _option('extra_from_rule/normalized_qv_adv', 'drop_last', 'stop_grad'),
    ),
  )
