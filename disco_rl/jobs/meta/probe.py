# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The meta-gradient at a rule's parameters, measured on fresh agents.

Is a meta-training stuck because its meta-gradient is noise, or because
a consistent force points back where the rule is? `probe` answers at one
rule's parameters: it starts `num_agents` fresh agents of a meta-training
config, lets the rule (held fixed) train them, and at each of `ages`
(agent updates taken before the meta-gradient's window) takes one
meta-gradient per agent, split into its policy-gradient and regularisers'
parts (`meta_objective.PARTS`), and reports per head of the meta-network
the norm of the agents' mean, their coherence and the share of significant
parameters (`meta_grad_stats`), with the policy target's entropy against a
uniform target's.

  rows = meta_probe.probe(config, params, num_agents=20, ages=(0, 50))

The command `disco-rl probe-rule` runs it on a meta-training run's
checkpoint or on a preset and a rule file.
"""

from collections.abc import Callable, Sequence
import dataclasses
import os
from typing import Any

import jax
import jax.numpy as jnp

from disco_rl import meta_grad_stats
from disco_rl import meta_objective
from disco_rl import types
from disco_rl.jobs import records
from disco_rl.jobs.meta import config as meta_config
from disco_rl.jobs.meta import job as meta_lib
from disco_rl.runtime import run_dir as run_dir_lib

# The statistics of each (head, part), as `meta_grad_stats.summary` names
# them.
STATS = ('norm', 'coherence', 't_share')


def probe_config(
  config: meta_config.MetaTrainConfig, num_agents: int
) -> meta_config.MetaTrainConfig:
  """`config` as the probe runs it: `num_agents` agents that all start
  fresh and live for the probe (no renewal), one meta-step per call, the
  meta-gradient's parts logged."""
  return dataclasses.replace(
    config,
    num_agents=num_agents,
    agent_lifetime=0,
    lifetime_sampling='fixed',
    min_agent_lifetime=0,
    steps_per_call=1,
    meta_grad_parts=True,
  )


def probe(
  config: meta_config.MetaTrainConfig,
  rule_params: types.MetaParams | None = None,
  *,
  num_agents: int = 20,
  ages: Sequence[int] = (0,),
  report: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
  """The meta-gradient's statistics per head and part at `rule_params`.

  Args:
    config: the meta-training settings (tasks, agents, rule sizes, the
      meta-objective's weights); its population, lifetimes and call length
      are the probe's (`probe_config`).
    rule_params: the rule (default per `config.init`: Disco103 or a fresh
      meta-network from `rule_seed`).
    num_agents: fresh agents measured (the noise level of coherence is
      1/sqrt(num_agents)).
    ages: agent updates taken before each measurement, multiples of
      `config.num_inner_steps`, e.g. (0, 50): fresh agents, then the same
      agents after 50 updates by the rule.
    report: called with a line after each measurement (e.g. `print`).

  Returns:
    One row per (age, part, head): {'age', 'part', 'head', 'norm',
    'coherence', 't_share', 'target_entropy', 'uniform_entropy',
    'noise_coherence'}, the last three the same for every row of an age:
    the policy target's entropy on the agents' training rollouts, a uniform
    target's (ln actions) and coherence's noise level.

  Raises:
    ValueError: `num_agents` below 2, an age that is negative or not a
      multiple of `config.num_inner_steps`.
  """
  if not isinstance(num_agents, int) or num_agents < 2:
    raise ValueError(f'num_agents must be an int >= 2, got {num_agents!r}.')
  every = config.num_inner_steps
  ages = sorted(set(ages))
  bad = [a for a in ages if not isinstance(a, int) or a < 0 or a % every]
  if bad or not ages:
    raise ValueError(
      f'ages must be multiples >= 0 of num_inner_steps={every} (the agent '
      f'updates of one meta-step), got {list(ages)!r}.'
    )
  job = meta_lib.make_meta_train(
    probe_config(config, num_agents), rule_params=rule_params
  )
  state = job.init()
  # Held fixed: each step's update undone (a copy: a call consumes the
  # state's arrays).
  params = jax.tree.map(jnp.copy, state.update_rule_params)
  noise = meta_grad_stats.noise_level(num_agents)['coherence']
  rows = []
  for meta_step in range(ages[-1] // every + 1):
    state, logs = job.step(state, 1)
    state = dataclasses.replace(
      state, update_rule_params=jax.tree.map(jnp.copy, params)
    )
    age = meta_step * every
    if age not in ages:
      continue
    common = dict(
      target_entropy=float(logs['agent_pi_hat_entropy'][0]),
      uniform_entropy=float(logs['uniform_entropy'][0]),
      noise_coherence=noise,
    )
    for part in meta_objective.PARTS:
      for head in meta_grad_stats.HEADS:
        key = f'meta_grad_{part}_{head}'
        if f'{key}_norm' not in logs:
          continue
        stats = {s: float(logs[f'{key}_{s}'][0]) for s in STATS}
        rows.append(dict(age=age, part=part, head=head, **stats, **common))
    if report is not None:
      report(
        f'age {age}: policy target entropy {common["target_entropy"]:.6f} '
        f'of {common["uniform_entropy"]:.6f} (uniform)'
      )
  return rows


def saved_config(
  output_dir: str | os.PathLike[str],
) -> meta_config.MetaTrainConfig:
  """The settings of the meta-training run in `output_dir` (read only).

  Raises:
    ValueError: `output_dir` holds no run, or an eval run.
  """
  run_dir = run_dir_lib.RunDir(output_dir, read_only=True)
  settings = records.upgrade_settings(
    meta_config.MetaTrainConfig, run_dir.saved_settings('meta_train')
  )
  return meta_config.MetaTrainConfig(**settings)


def table(rows: Sequence[dict[str, Any]]) -> str:
  """`probe`'s rows as a text table, one line per (age, head), the parts
  side by side."""
  by_key = {(r['age'], r['head'], r['part']): r for r in rows}
  parts = meta_objective.PARTS
  header = f'{"age":>5} {"head":<8}' + ''.join(
    f' {p + " " + s:>14}' for p in parts for s in STATS
  )
  lines = [header]
  for age, head in dict.fromkeys((r['age'], r['head']) for r in rows):
    cells = ''
    for part in parts:
      row = by_key.get((age, head, part))
      for s in STATS:
        cells += f' {row[s]:>14.3g}' if row else f' {"-":>14}'
    lines.append(f'{age:>5} {head:<8}' + cells)
  return '\n'.join(lines)
