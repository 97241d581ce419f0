# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval job on the host: checks, rows, summary and outputs.

Everything here reads what a compiled call returned ([K, S] metrics: K
iterations of S runs) or the rows made from it; nothing is traced. The
compiled iteration is in `eval.py`.
"""

import functools
from typing import Any

import jax
import numpy as np

from disco_rl import environments
from disco_rl import plots
from disco_rl import replay
from disco_rl import rollout_checks
from disco_rl.jobs import config as config_lib
from disco_rl.jobs.eval import setup as setup_lib
from disco_rl.runtime import divergence
from disco_rl.runtime import host_loop
from disco_rl.runtime import job as job_lib
from disco_rl.runtime import metrics as metrics_lib
from disco_rl.runtime import run_dir as run_dir_lib

RETURNS_PLOT = 'returns.png'
# The window of the final average return, in iterations.
RECENT = 100


def raise_first_problem(
  config, metrics: dict[str, np.ndarray], first_step: int
) -> None:
  """Raises for the first problem of a call's [K, S] `metrics` (and drops
  the checks' entries): a rollout that failed the debug checks
  (`RolloutError`) or a learner step whose loss or parameters are not
  finite (`DivergedError`), whichever came first, in run order. The error
  carries the call's metrics and its steps before the first problem of any
  run (`divergence.good_steps`): their rows are kept."""
  faults = metrics.pop(rollout_checks.KEY, None)
  flags = metrics.pop(divergence.KEY)
  checks = []
  good = len(flags)
  for j, run in enumerate(config.runs):
    run_faults = (
      None if faults is None else jax.tree.map(lambda x, j=j: x[:, j], faults)
    )
    columns = {k: v[:, j] for k, v in metrics.items()}
    columns[divergence.KEY] = flags[:, j]
    fault = rollout_checks.first_index(run_faults)
    diverged = divergence.first_diverged(
      columns, _FINITE, active=columns['learned'] > 0, until=fault
    )
    good = min([good] + [i for i in (fault, diverged) if i is not None])
    checks.append((run, run_faults, columns, fault))
  with divergence.keep_good(metrics, good):
    for run, run_faults, columns, fault in checks:
      name = '' if config.num_runs == 1 else f'{run_name(config, run)} '
      divergence.raise_if_diverged(
        columns,
        _FINITE,
        first_step,
        name + 'loop step',
        "the agent's parameters",
        active=columns['learned'] > 0,
        hint='Try a smaller learning_rate (--learning-rate).',
        until=fault,
      )
      rollout_checks.raise_if_faulty(run_faults, name + 'rollout')


# The quantities of a learner step that must be finite.
_FINITE = ('total_loss',)


def rows(config, log_keys, metrics, first_step: int) -> job_lib.Rows:
  """One row per iteration and run, in that order, from [K, S] metrics."""
  per_iteration = config.num_envs * config.rollout_len
  out = []
  for i in range(len(metrics['episodes'])):
    for j, run in enumerate(config.runs):
      episodes = float(metrics['episodes'][i, j])
      out.append(
        dict(
          step=first_step + i,
          seed=run.seed,
          learning_rate=run.learning_rate,
          env_steps=(first_step + i + 1) * per_iteration,
          episodes=episodes,
          avg_return=(
            float(metrics['return_sum'][i, j]) / episodes
            if episodes
            else float('nan')
          ),
          learned=int(metrics['learned'][i, j]),
          **{k: float(metrics[k][i, j]) for k in log_keys},
        )
      )
  return out


def run_rows(config, rows: job_lib.Rows) -> list[job_lib.Rows]:
  """The rows of each run, in run order (rows alternate over runs)."""
  return [rows[j :: config.num_runs] for j in range(config.num_runs)]


def run_name(config, run) -> str:
  """'seed 3', or 'seed 3, lr 0.001' in a program of several rates."""
  if len({r.learning_rate for r in config.runs}) == 1:
    return f'seed {run.seed}'
  return f'seed {run.seed}, lr {run.learning_rate:g}'


def recent_return(rows: job_lib.Rows) -> float:
  """The mean `avg_return` of the last `RECENT` iterations' rows (of every
  run in `rows`)."""
  last = host_loop.steps_done(rows) - RECENT
  recent = np.asarray(
    [r['avg_return'] for r in rows if r['step'] >= last], float
  )
  return (
    float(np.nanmean(recent)) if np.isfinite(recent).any() else float('nan')
  )


def summary(
  setup, state, rows: job_lib.Rows, timing: job_lib.Timing
) -> dict[str, Any]:
  """Final average return (last 100 iterations; over the runs and per
  run), speed, memory. Every process calls it (it reads sharded state)."""
  config = setup.config
  per_run = run_rows(config, rows)
  rss = [r['rss_mb'] for r in per_run[0]] or [float('nan')]
  one_buffer = jax.tree.map(lambda x: x[0, 0], state.replay)
  return dict(
    final_avg_return=recent_return(rows),
    final_avg_return_per_run={
      run_name(config, run): recent_return(run_rows_)
      for run, run_rows_ in zip(config.runs, per_run, strict=True)
    },
    steps=max(0, len(per_run[0]) - setup.warmup),
    iterations=len(per_run[0]),
    compile_and_first_step_s=timing.first_call_s,
    steps_per_second=timing.steps_per_second,
    peak_memory_mb=metrics_lib.peak_memory_mb(),
    rss_mb_at_100=rss[min(99, len(rss) - 1)],
    rss_mb_final=rss[-1],
    devices=setup.num_devices,
    processes=jax.process_count(),
    replay_bytes_per_trajectory=replay.bytes_per_trajectory(one_buffer),
  )


def outputs(
  config,
  rule_title: str,
  rows: job_lib.Rows,
  run_dir: run_dir_lib.RunDir,
  lead: bool,
) -> dict[str, str]:
  """The learning curve of every run (`returns.png`, by the `lead`
  process)."""
  if not lead:
    return {}
  per_run = run_rows(config, rows)
  path = plots.plot_runs(
    [r['env_steps'] for r in per_run[0]],
    {
      run_name(config, run): [r['avg_return'] for r in run_rows_]
      for run, run_rows_ in zip(config.runs, per_run, strict=True)
    },
    run_dir.file(RETURNS_PLOT),
    'environment steps',
    'average return',
    f'{rule_title} on {env_title(config)} ({seeds_title(config)})',
    smooth=20,
  )
  return dict(plot_png=str(path))


def progress_title(config: config_lib.EvalConfig) -> str:
  """The progress bar's title: 'eval disco_103 on catch[rows=8] seeds 0-2'
  (the rule, the environment with its settings, the runs)."""
  env = environments.format_spec(config.env, config.env_kwargs)
  return f'eval {config.rule} on {env} {seeds_title(config)}'


def seeds_title(config) -> str:
  """'seed 3', 'seeds 0-7', 'seeds 0, 5' (and 'x lr 0.001, 0.003' with
  several rates)."""
  seeds = sorted({run.seed for run in config.runs})
  if len(seeds) == 1:
    title = f'seed {seeds[0]}'
  elif seeds == list(range(seeds[0], seeds[-1] + 1)):
    title = f'seeds {seeds[0]}-{seeds[-1]}'
  else:
    title = 'seeds ' + ', '.join(map(str, seeds))
  rates = sorted({run.learning_rate for run in config.runs})
  if len(rates) > 1:
    title += ' x lr ' + ', '.join(f'{r:g}' for r in rates)
  return title


def env_title(config) -> str:
  """'jittable_catch columns=8,rows=8' (the family's defaults filled in),
  'gymnax:DeepSea-bsuite size=10', 'custom'."""
  settings = dict(config.env_kwargs)
  if config.env != config_lib.CUSTOM_ENV:
    settings = environments.with_defaults(config.env, settings)
    settings.pop(environments.SEED_KEY, None)  # The run's seed: not a title.
  kwargs = ','.join(f'{k}={v}' for k, v in settings.items())
  return f'{config.env} {kwargs}'.strip()


def make(setup: setup_lib.EvalSetup, rule_title: str) -> job_lib.Report:
  """The eval job's report: rows, summary, the learning curves (titled with
  `rule_title`), the progress bar's return."""
  config = setup.config
  return job_lib.Report(
    rows=lambda metrics, first: rows(config, setup.log_keys, metrics, first),
    summary=functools.partial(summary, setup),
    outputs=lambda state, rows_, run_dir, lead: outputs(
      config, rule_title, rows_, run_dir, lead
    ),
    progress=lambda rows_: dict(avg_return=f'{recent_return(rows_):.3f}'),
    description=progress_title(config),
  )
