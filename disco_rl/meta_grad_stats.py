# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""How much the agents of a population agree on the meta-gradient, per head.

A meta-gradient averaged over N agents moves the rule where the agents
agree; where they disagree the mean is noise. Per head of the meta-network
(`meta_nets.HEAD_NAMES`: the policy target's last layer and convolutions,
the y and z heads, the rest) these statistics of the per-agent gradients
g_i (i < N) tell the two apart:

  norm:      |mean_i g_i|, the size of the step the mean asks for;
  coherence: |mean_i g_i / |g_i||, 1 when every agent points the same way,
             about 1/sqrt(N) when the directions are independent (noise);
  t_share:   the share of the head's parameters whose mean over agents is
             significant, |t| = |mean| / (std / sqrt(N)) above the
             two-sided 5% point of Student's t with N-1 degrees of freedom
             (about 0.05 for noise).

Each function takes a pytree of the rule's parameters' shape (Haiku's
{module: {name: array}}), with a leading agent axis [N, ...] where it says
so, and returns {head: scalar}; everything is jittable.
"""

from collections.abc import Mapping

import chex
import jax.numpy as jnp
import numpy as np
from scipy import stats

from disco_rl import types
from disco_rl.networks import meta_nets

HEADS = meta_nets.HEAD_NAMES


def _by_head(tree: types.MetaParams) -> dict[str, list[chex.Array]]:
  """The leaves of a Haiku tree grouped by head (a head without
  parameters, e.g. a rule that is not the LSTM meta-network, is absent)."""
  groups: dict[str, list[chex.Array]] = {}
  for module, leaves in sorted(tree.items()):
    head = meta_nets.head_of(module)
    groups.setdefault(head, []).extend(leaves[k] for k in sorted(leaves))
  return groups


def _flat(leaves: list[chex.Array], agent_axis: bool) -> chex.Array:
  """[P] (or [N, P] with `agent_axis`) of a head's leaves."""
  if agent_axis:
    return jnp.concatenate([x.reshape(x.shape[0], -1) for x in leaves], 1)
  return jnp.concatenate([x.reshape(-1) for x in leaves])


def head_norms(grads: types.MetaParams) -> dict[str, chex.Array]:
  """{head: |g|} of one gradient (no agent axis)."""
  return {
    head: jnp.linalg.norm(_flat(leaves, agent_axis=False))
    for head, leaves in _by_head(grads).items()
  }


def coherence(per_agent: types.MetaParams) -> dict[str, chex.Array]:
  """{head: |mean_i g_i / |g_i||} of per-agent gradients [N, ...]; an
  agent whose head's gradient is 0 counts as a zero vector."""
  out = {}
  for head, leaves in _by_head(per_agent).items():
    g = _flat(leaves, agent_axis=True)  # [N, P]
    norm = jnp.linalg.norm(g, axis=1, keepdims=True)
    unit = g / jnp.where(norm > 0, norm, 1.0)
    out[head] = jnp.linalg.norm(jnp.mean(unit, axis=0))
  return out


def t_critical(num_agents: int) -> float:
  """The two-sided 5% point of Student's t with `num_agents - 1` degrees
  of freedom (2.09 for 20 agents); inf for fewer than 2 agents."""
  if num_agents < 2:
    return float('inf')
  return float(stats.t.ppf(0.975, num_agents - 1))


def t_share(per_agent: types.MetaParams) -> dict[str, chex.Array]:
  """{head: share of parameters with |t| > t_critical(N)} of per-agent
  gradients [N, ...]; a parameter whose gradient is the same for every
  agent (std 0) counts as significant when its mean is not 0."""
  out = {}
  for head, leaves in _by_head(per_agent).items():
    g = _flat(leaves, agent_axis=True)  # [N, P]
    n = g.shape[0]
    mean = jnp.mean(g, axis=0)
    if n < 2:
      out[head] = jnp.zeros(())
      continue
    sem = jnp.std(g, axis=0, ddof=1) / np.sqrt(n)
    significant = jnp.where(
      sem > 0,
      jnp.abs(mean) > t_critical(n) * sem,
      mean != 0,
    )
    out[head] = jnp.mean(significant.astype(jnp.float32))
  return out


def summary(per_agent: types.MetaParams, prefix: str) -> dict[str, chex.Array]:
  """{f'{prefix}_{head}_{stat}': scalar} of per-agent gradients [N, ...]:
  the norm of their mean, their coherence and t_share, per head."""
  mean = {
    m: {k: jnp.mean(x, 0) for k, x in v.items()} for m, v in per_agent.items()
  }
  logs = {}
  for stat, values in (
    ('norm', head_norms(mean)),
    ('coherence', coherence(per_agent)),
    ('t_share', t_share(per_agent)),
  ):
    logs.update({f'{prefix}_{h}_{stat}': v for h, v in values.items()})
  return logs


def noise_level(num_agents: int) -> Mapping[str, float]:
  """What `coherence` and `t_share` read for independent directions:
  1/sqrt(N) and 0.05."""
  return dict(coherence=1 / np.sqrt(num_agents), t_share=0.05)
