# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The meta-training job on the host: rows, summary, outputs, progress.

Everything here reads what a compiled call returned ({name: [K]} logs of K
meta-steps) or the rows made from them; nothing is traced. The compiled
meta-step is in `steps.py`.
"""

from collections.abc import Mapping
import functools
from typing import Any

import jax
import numpy as np

from disco_rl import meta_objective
from disco_rl import plots
from disco_rl.jobs.meta import setup as meta_setup
from disco_rl.runtime import job as job_lib
from disco_rl.runtime import mesh as mesh_lib
from disco_rl.runtime import metrics as metrics_lib
from disco_rl.runtime import run_dir as run_dir_lib

# The curves plotted: (log key, label).
PLOTS = (
  ('pos_rewards', 'positive rewards per meta-step'),
  ('neg_rewards', 'negative rewards per meta-step'),
  ('meta_loss', 'meta loss'),
  ('meta_grad_norm', 'meta-gradient norm'),
  ('meta_up_norm', 'meta-update norm'),
  ('agent_pi_hat_entropy', "policy target's entropy"),
  ('rewards', 'mean reward'),
)


def rows(logs: Mapping[str, np.ndarray], first_step: int) -> job_lib.Rows:
  """One row per meta-step from {name: [K]} logs."""
  return [
    dict(step=first_step + i, **{k: float(v[i]) for k, v in logs.items()})
    for i in range(len(logs['meta_loss']))
  ]


def progress(rows: job_lib.Rows) -> dict[str, str]:
  """The progress bar's figures: the last meta-step's, with the policy
  target's entropy against a uniform target's (equal: a stuck rule)."""
  last = rows[-1]
  return dict(
    pos_rewards=f'{last["pos_rewards"]:.1f}',
    meta_loss=f'{last["meta_loss"]:.3f}',
    target_entropy=(
      f'{last["agent_pi_hat_entropy"]:.6f} of {last["uniform_entropy"]:.6f}'
    ),
  )


def summary(
  setup: meta_setup.MetaSetup,
  state: meta_setup.PopulationState,
  rows: job_lib.Rows,
  timing: job_lib.Timing,
) -> dict[str, Any]:
  """Positive rewards (last 100 meta-steps), speed, memory."""
  del state
  pos_rewards = [r['pos_rewards'] for r in rows] or [float('nan')]
  return dict(
    final_pos_rewards=float(np.mean(pos_rewards[-100:])),
    first_pos_rewards=pos_rewards[0],
    steps=len(rows),
    compile_s=timing.first_call_s,
    meta_steps_per_second=timing.steps_per_second,
    peak_memory_mb=metrics_lib.peak_memory_mb(),
    devices=setup.num_devices,
    processes=jax.process_count(),
    tasks=[t.spec() for t in setup.tasks],
    agents_per_task=list(setup.group_sizes),
  )


def outputs(
  setup: meta_setup.MetaSetup,
  state: meta_setup.PopulationState,
  rows: job_lib.Rows,
  run_dir: run_dir_lib.RunDir,
  lead: bool,
) -> dict[str, Any]:
  """A plot per logged curve, and the learned rule's parameters (every
  process fetches them; the `lead` one writes)."""
  params = mesh_lib.fetch(state.update_rule_params)
  if not lead:
    return {}
  curves = list(PLOTS) + [
    (f'rewards_task{g}', f'mean reward on {t.spec()}')
    for g, t in enumerate(setup.tasks)
    if len(setup.tasks) > 1
  ]
  curve_paths = {
    key: str(
      plots.plot_curve(
        [r['step'] for r in rows],
        [r[key] for r in rows],
        run_dir.file(f'{key}.png'),
        'meta-step',
        label,
        f'meta-training: {label}',
        smooth=20,
      )
    )
    for key, label in curves
  }
  path = run_dir.file(run_dir_lib.RULE)
  meta_objective.save_params(params, path)
  return dict(plots=curve_paths, params_npz=str(path))


def make(
  setup: meta_setup.MetaSetup,
) -> job_lib.Report[meta_setup.PopulationState]:
  """The meta-training job's report: its rows, summary, outputs, progress."""
  return job_lib.Report(
    rows=rows,
    summary=functools.partial(summary, setup),
    outputs=functools.partial(outputs, setup),
    progress=progress,
    description='meta-train',
  )
