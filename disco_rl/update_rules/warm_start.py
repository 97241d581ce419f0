# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A warm start: another rule's loss for the first updates, then the rule's.

`WarmStart(main, warm, steps, predictions)` trains an agent by `warm` (a
rule without meta-parameters, e.g. the actor-critic) for its first `steps`
updates and by `main` (e.g. Disco103) from then on, as one rule, so one
run holds both phases and resumes exactly across the switch (the update
count is part of the rule's per-agent state).

The agent has the outputs of both rules (their union: `logits` shared;
e.g. the actor-critic's value `v` beside Disco's `y`, `z`, `aux_pi`, `q`).
Both rules' per-agent states advance on every update (the main rule's
recurrent state, moving averages and target network follow the agent
through the warm start). The main rule's loss that takes no meta-gradient
(Disco's value loss on `q`) applies from the first update, so the values
the main rule reads are learnt by the switch. With `predictions`, the main
rule's other terms except the policy's (Disco's y, z and auxiliary-policy
KLs) apply during the warm start too; without, only the warm rule's loss
does. `warm=None` with `predictions`: the first `steps` updates train
everything but the policy (the policy's targets start at the switch).

Update `n` (0, 1, ...) is a warm-start update while `n < steps`; its
per-step loss [T, B] is

  w * warm + (1 - w) * main + w * main's other terms (with `predictions`)
  + main's loss without meta-gradient,

with w = 1 during the warm start and 0 after.
"""

from collections.abc import Mapping
import dataclasses
from typing import Any

import chex
import jax.numpy as jnp

from disco_rl import types
from disco_rl.update_rules import base

# The main rule's loss weight that is its policy's (the one term left out
# of a warm start with `predictions`).
POLICY_COST = 'pi_cost'
# The logs key of the warm-start weight w (1 during the warm start, else 0).
WARM_KEY = 'warm_start'


def _union(main: types.Specs, warm: types.Specs, what: str) -> dict[str, Any]:
  """The two rules' output specs in one dict; a name both use must have
  the same spec."""
  clash = [k for k in warm if k in main and main[k] != warm[k]]
  if clash:
    raise ValueError(
      f'warm_start: the rules give the {what} outputs {clash} different '
      f'specs: main {[main[k] for k in clash]}, warm '
      f'{[warm[k] for k in clash]}.'
    )
  return {**warm, **main}


@dataclasses.dataclass(eq=False)
class WarmStart(base.UpdateRule):
  """`warm`'s loss for the first `steps` updates, then `main`'s.

  Hyper-parameters are `{'main': main's, 'warm': warm's}`; meta-parameters
  are `main`'s (`warm` must have none that matter: it is not given any).

  Attributes:
    main: the rule from update `steps` on (its meta-parameters are this
      rule's).
    warm: the rule of the first `steps` updates, or None (nothing but
      `main`'s other terms, with `predictions`).
    steps: updates of the warm start (> 0).
    predictions: during the warm start, also `main`'s terms other than
      the policy's (`main`'s hyper-parameter `POLICY_COST` is set to 0).
  """

  main: base.UpdateRule
  warm: base.UpdateRule | None
  steps: int
  predictions: bool = False

  def __post_init__(self) -> None:
    if not isinstance(self.steps, int) or self.steps < 1:
      raise ValueError(
        f'warm_start: steps must be an integer >= 1, got {self.steps!r}.'
      )
    if self.warm is None and not self.predictions:
      raise ValueError(
        'warm_start: with warm=None, predictions must be True (else the '
        'warm start would train nothing but the values).'
      )

  def init_params(
    self, rng: chex.PRNGKey
  ) -> tuple[types.MetaParams, chex.ArrayTree]:
    return self.main.init_params(rng)

  def flat_output_spec(self, action_spec: types.ActionSpec) -> types.Specs:
    main = self.main.flat_output_spec(action_spec)
    if self.warm is None:
      return main
    return _union(main, self.warm.flat_output_spec(action_spec), 'per-state')

  def model_output_spec(self, action_spec: types.ActionSpec) -> types.Specs:
    main = self.main.model_output_spec(action_spec)
    if self.warm is None:
      return main
    return _union(main, self.warm.model_output_spec(action_spec), 'per-action')

  def init_meta_state(
    self, rng: chex.PRNGKey, params: types.AgentParams
  ) -> types.MetaState:
    """{'main': main's state, 'warm': warm's (or None), 'updates': [] int32,
    the updates done}."""
    return dict(
      main=self.main.init_meta_state(rng, params),
      warm=(
        None if self.warm is None else self.warm.init_meta_state(rng, params)
      ),
      updates=jnp.zeros((), jnp.int32),
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
    """Both rules' outputs (`{'main', 'warm'}`) and w ([], `WARM_KEY`)."""
    _check_hyper_params(hyper_params, self.warm is not None)
    updates = meta_state['updates']
    main_out, main_state = self.main.unroll_meta_net(
      meta_params,
      params,
      state,
      meta_state['main'],
      rollout,
      hyper_params['main'],
      unroll_policy_fn,
      rng,
      axis_name,
    )
    warm_out, warm_state = None, None
    if self.warm is not None:
      warm_out, warm_state = self.warm.unroll_meta_net(
        None,
        params,
        state,
        meta_state['warm'],
        rollout,
        hyper_params['warm'],
        unroll_policy_fn,
        rng,
        axis_name,
      )
    weight = (updates < self.steps).astype(jnp.float32)
    meta_out = {'main': main_out, 'warm': warm_out, WARM_KEY: weight}
    new_state = dict(main=main_state, warm=warm_state, updates=updates + 1)
    return meta_out, new_state

  def agent_loss(self, rollout, meta_out, hyper_params, backprop):
    """The weighted losses (module docstring); main's logs, the warm
    rule's under 'warm/', and w under `WARM_KEY`."""
    weight = meta_out[WARM_KEY]
    main_hp = dict(hyper_params['main'])
    if self.predictions:  # main's policy term off while w = 1.
      main_hp[POLICY_COST] = main_hp[POLICY_COST] * (1.0 - weight)
    main, log = self.main.agent_loss(
      rollout, meta_out['main'], main_hp, backprop
    )
    loss = main if self.predictions else (1.0 - weight) * main
    log = dict(log, **{WARM_KEY: weight})
    if self.warm is not None:
      warm, warm_log = self.warm.agent_loss(
        rollout, meta_out['warm'], hyper_params['warm'], backprop
      )
      loss = loss + weight * warm
      log.update({f'warm/{k}': v for k, v in warm_log.items()})
    return loss, log

  def agent_loss_no_meta(self, rollout, meta_out, hyper_params):
    """main's (from the first update), plus w times the warm rule's."""
    if meta_out is None:
      raise ValueError(
        'warm_start: needs meta_out (from unroll_meta_net), got None.'
      )
    loss, log = self.main.agent_loss_no_meta(
      rollout, meta_out['main'], hyper_params['main']
    )
    if self.warm is not None:
      warm, warm_log = self.warm.agent_loss_no_meta(
        rollout, meta_out['warm'], hyper_params['warm']
      )
      loss = loss + meta_out[WARM_KEY] * warm
      log = dict(log, **{f'warm/{k}': v for k, v in warm_log.items()})
    return loss, log


def _check_hyper_params(hyper_params: Mapping[str, Any], warm: bool) -> None:
  """Raises ValueError unless `hyper_params` has the two rules' parts."""
  needed = ('main', 'warm') if warm else ('main',)
  missing = [k for k in needed if k not in hyper_params]
  if missing or POLICY_COST not in hyper_params.get('main', {}):
    raise ValueError(
      f"warm_start: hyper_params must be {{'main': the main rule's (with "
      f"{POLICY_COST!r}), 'warm': the warm rule's}}; got keys "
      f'{sorted(hyper_params)}.'
    )
