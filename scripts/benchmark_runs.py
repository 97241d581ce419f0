#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A sweep as one program: seeds x learning rates in one eval program
against the same runs as one program each, one after another.

The runs are a study's cell (default: the MinAtar study's regime,
studies/minatar.py, on Breakout): every seed at every rate, 300 learner
updates each after the warm-up. Two ways, each in a process of its own (so
that its peak memory is its own), one after the other:
  - one program: one eval job with `seeds` and `learning_rates` (one
    compilation; all runs advance together in every call);
  - one program per run: a job per (seed, rate), each compiled, as
    separate runs of the CLI would be.
Both run through the package's own loop (`make_eval`, `Job.program
.compile`, `runtime.host_loop.run` and its `Timing`). Prints, side by side:
compile time, running time, wall time, learner steps per second over all
runs, peak resident memory (on an accelerator also the device's peak) and
the ratios; and, as a check, how far apart each run's final parameters are
in the two ways (float rounding).

  python scripts/benchmark_runs.py               # 3 seeds x 3 rates, ~30 min
  python scripts/benchmark_runs.py --tiny        # the spec's test size
  python scripts/benchmark_runs.py --spec studies/catch_example.py \\
      --stage tune --env 'jittable_catch[rows=5,columns=5]' --rule ppo
"""

import argparse
import dataclasses
import json
import pathlib
import subprocess
import sys
import time

import jax
import numpy as np

from disco_rl.cli import study as study_cli
from disco_rl.jobs import config as config_lib
from disco_rl.jobs.eval import job as eval_lib
from disco_rl.runtime import host_loop
from disco_rl.runtime import metrics as metrics_lib
from disco_rl.studies import run as study_run

ROOT = pathlib.Path(__file__).resolve().parent.parent
WAYS = ('one_program', 'per_run')


def cell_config(args: argparse.Namespace) -> config_lib.EvalConfig:
  """The spec's cell (`studies.run.cell_config`) at the chosen runs and
  budget, on one device."""
  study = study_cli.load_study(pathlib.Path(args.spec))
  if args.tiny:
    study = study.shrunk()
  config = study_run.cell_config(
    study,
    study.stage(args.stage),
    args.env,
    study.rule(args.rule),
    tuple(args.rates),
  )
  return dataclasses.replace(
    config, seeds=tuple(args.seeds), num_steps=args.steps, num_devices=1
  )


def timed(config: config_lib.EvalConfig) -> dict:
  """One eval job compiled, then run for its warm-up and steps by
  `runtime.host_loop.run`: its times and final parameters ([R, ...] leaves)."""
  job = eval_lib.make_eval(config)
  state = job.init()
  compile_s = job.program.compile(state)
  outcome = host_loop.run(
    job, state, job.warmup + config.num_steps, [], progress=False
  )
  timing = outcome.timing
  first_call_s = timing.first_call_s  # Compiled before: the call alone.
  return dict(
    compile_s=compile_s,
    run_s=first_call_s + timing.steady_s,
    iterations=job.warmup + config.num_steps,
    params=jax.device_get(outcome.state.learner_state.params),
  )


def one_way(args: argparse.Namespace, out: pathlib.Path) -> int:
  """Runs `args.way` in this process: out/WAY.json (times, memory) and
  out/WAY.npz (each run's final parameters, in `config.runs` order)."""
  config = cell_config(args)
  if args.way == 'one_program':
    parts = [timed(config)]
  else:
    parts = [
      timed(
        dataclasses.replace(
          config, seeds=(run.seed,), learning_rates=(run.learning_rate,)
        )
      )
      for run in config.runs
    ]
  params = jax.tree.map(
    lambda *p: np.concatenate(p), *[p['params'] for p in parts]
  )
  np.savez(
    out / f'{args.way}.npz',
    **{
      jax.tree_util.keystr(path): np.asarray(leaf)
      for path, leaf in jax.tree_util.tree_leaves_with_path(params)
    },
  )
  stats = jax.devices()[0].memory_stats() or {}
  peak = stats.get('peak_bytes_in_use')
  row = dict(
    programs=len(parts),
    compile_s=sum(p['compile_s'] for p in parts),
    run_s=sum(p['run_s'] for p in parts),
    iterations=parts[0]['iterations'],
    peak_rss_mb=metrics_lib.peak_memory_mb(),
    peak_device_mb=(
      peak / 2**20
      if peak is not None and jax.default_backend() != 'cpu'
      else None
    ),
  )
  (out / f'{args.way}.json').write_text(json.dumps(row) + '\n')
  return 0


def table(results: dict) -> str:
  """The markdown table and the ratios."""
  rows, runs = results['rows'], results['runs']
  lines = [
    f'{runs} runs ({results["seeds"]} seeds x {results["rates"]} rates) '
    f'of {results["steps"]} learner steps (+ {results["warmup"]} warm-up '
    f'iterations), {results["rule"]} on {results["env"]}, '
    f'{results["device"]}',
    '',
    '| way | programs | compile s | running s | wall s | learner steps/s, '
    'all runs | peak RSS | peak device memory |',
    '|---|---|---|---|---|---|---|---|',
  ]
  for name, row in rows.items():
    device = row['peak_device_mb']
    lines.append(
      f'| {name.replace("_", " ")} | {row["programs"]} | '
      f'{row["compile_s"]:.1f} | {row["run_s"]:.1f} | {row["wall_s"]:.1f} '
      f'| {row["learner_steps_per_s"]:.2f} | '
      f'{row["peak_rss_mb"] / 1024:.2f} GB | '
      + (f'{device / 1024:.2f} GB |' if device is not None else '- |')
    )
  one, per = rows['one_program'], rows['per_run']
  lines += [
    '',
    f'one program vs one per run: wall {per["wall_s"] / one["wall_s"]:.2f}x '
    f'less, compile {per["compile_s"] / one["compile_s"]:.2f}x less, '
    f'running {per["run_s"] / one["run_s"]:.2f}x less, learner steps/s '
    f'{one["learner_steps_per_s"] / per["learner_steps_per_s"]:.2f}x',
    'largest parameter difference per run, one program vs alone: '
    + ', '.join(f'{g:.1e}' for g in results['max_param_gap_per_run']),
  ]
  return '\n'.join(lines)


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(
    description=(__doc__ or '').split('\n\n')[0],
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  parser.add_argument(
    '--spec', default=str(ROOT / 'studies' / 'minatar.py'), help='a study'
  )
  parser.add_argument('--stage', default=None, help='its stage (first)')
  parser.add_argument('--env', default='gymnax:Breakout-MinAtar')
  parser.add_argument('--rule', default='disco_103', help="a spec's rule")
  parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
  parser.add_argument(
    '--rates', type=float, nargs='+', default=[1e-3, 3e-3, 1e-2]
  )
  parser.add_argument(
    '--steps',
    type=int,
    default=None,
    help="learner steps of each run (default: 300; --tiny: the spec's)",
  )
  parser.add_argument('--tiny', action='store_true', help="spec's test size")
  parser.add_argument('--out', default='runs/bench_runs')
  parser.add_argument('--way', choices=WAYS, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  out = pathlib.Path(args.out)
  try:
    study = study_cli.load_study(pathlib.Path(args.spec))
    if args.stage is None:
      args.stage = study.stages[0].name
    if args.steps is None:
      tiny = study.shrunk().stage(args.stage).num_steps
      args.steps = tiny if args.tiny else 300
    if args.steps < 1:
      raise ValueError(f'--steps must be >= 1, got {args.steps}.')
    config = cell_config(args)
  except (OSError, ValueError, TypeError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  if args.way is not None:  # One way, in this process (see below).
    return one_way(args, out)
  if (out / 'results.json').exists():
    print(
      f'error: {out}/results.json exists: choose another --out', file=sys.stderr
    )
    return 2
  out.mkdir(parents=True, exist_ok=True)
  ways = {}
  for way in WAYS:
    print(f'{way.replace("_", " ")}: {config.num_runs} runs', flush=True)
    start = time.perf_counter()
    done = subprocess.run(
      [sys.executable, __file__, *(argv or sys.argv[1:]), '--way', way],
      check=False,
    )
    if done.returncode:
      print(
        f'error: the {way} runs failed (exit {done.returncode})',
        file=sys.stderr,
      )
      return 1
    ways[way] = json.loads((out / f'{way}.json').read_text())
    ways[way]['wall_s'] = time.perf_counter() - start
    (out / f'{way}.json').unlink()
  with (
    np.load(out / 'one_program.npz') as many,
    np.load(out / 'per_run.npz') as alone,
  ):
    gaps = [
      max(float(np.max(np.abs(many[k][j] - alone[k][j]))) for k in many.files)
      for j in range(config.num_runs)
    ]
  for way in WAYS:
    (out / f'{way}.npz').unlink()
  iterations = ways['one_program'].pop('iterations')
  ways['per_run'].pop('iterations')
  for row in ways.values():
    row['learner_steps_per_s'] = config.num_runs * args.steps / row['run_s']
  results = dict(
    runs=config.num_runs,
    seeds=len(args.seeds),
    rates=len(args.rates),
    steps=args.steps,
    warmup=iterations - args.steps,
    rule=args.rule,
    env=args.env,
    spec=args.spec,
    stage=args.stage,
    tiny=args.tiny,
    settings=dataclasses.asdict(config),
    device=str(jax.devices()[0]),
    rows=ways,
    max_param_gap_per_run=gaps,
  )
  text = table(results)
  print(text)
  (out / 'results.json').write_text(json.dumps(results, indent=2) + '\n')
  (out / 'results.md').write_text(text + '\n')
  return 0


if __name__ == '__main__':
  sys.exit(main())
