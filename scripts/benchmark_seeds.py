#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Seeds in parallel: S eval runs in one program vs the same runs one by one.

Disco103 on Catch 8x8 at the eval job's defaults (the upstream notebook's
settings: 2 environments x 29 steps per iteration, a learner batch of 64),
on one device, in one process, side by side:
  - parallel: one eval job (`make_eval`) with `num_seeds=S` (seeds
    0..S-1): one compilation, the S runs advance together in every call;
  - sequential: S eval jobs with one seed each, run one after another, each
    compiled (as S separate runs of the CLI would be).
Each run takes the warm-up iterations and `--steps` learner steps (one per
iteration after the warm-up). Each way runs in a process of its own, one
after the other, so that its peak memory is its own. Prints, for both:
compile time, running time, iterations/s of one run and of all runs
together, the whole wall time, the process's peak resident memory (on an
accelerator also the device's peak) and the ratios; and, as a check, how
far apart each seed's final parameters are in the two ways (float
rounding).

  python scripts/benchmark_seeds.py                  # 3 seeds, 100 steps
  python scripts/benchmark_seeds.py --seeds 8 --steps 200
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

from disco_rl import metrics as metrics_lib
from disco_rl import weights
from disco_rl.loops import config as config_lib
from disco_rl.loops import eval as eval_lib

TINY = dict(
  batch_size=4,
  replay_ratio=2,
  buffer_capacity=8,
  rollout_len=5,
  dense=(16,),
  model_lstm_size=8,
  model_head_hiddens=(8,),
)


def _timed_run(config, rule_params) -> dict:
  """Builds, compiles and runs one eval job for config.num_steps learner
  steps (after the warm-up); the times and the final parameters."""
  job = eval_lib.make_eval(config, rule_params=rule_params)
  state = job.init()  # The runs of seeds config.seed, config.seed + 1...
  start = time.perf_counter()
  job.program.compile(state)
  compile_s = time.perf_counter() - start
  remaining = job.warmup + config.num_steps
  start = time.perf_counter()
  while remaining:
    count = min(remaining, config.steps_per_call)
    state, _ = job.step(state, count)  # Fetches its metrics: waits.
    remaining -= count
  run_s = time.perf_counter() - start
  params = jax.device_get(state.learner_state.params)
  return dict(
    compile_s=compile_s,
    run_s=run_s,
    params=params,
    iterations=job.warmup + config.num_steps,
  )


def _one_way(args, config, out: pathlib.Path) -> int:
  """Runs one way (`args.way`) here; writes its times, memory and the
  final parameters ([S, ...] leaves) to out/{way}.json and .npz."""
  rule_params = weights.load_disco_103()
  seeds = args.seeds
  if args.way == 'parallel':
    runs = [
      _timed_run(dataclasses.replace(config, num_seeds=seeds), rule_params)
    ]
    params = runs[0]['params']
  else:
    runs = [
      _timed_run(dataclasses.replace(config, seed=seed), rule_params)
      for seed in range(seeds)
    ]
    params = jax.tree.map(
      lambda *p: np.concatenate(p), *[r['params'] for r in runs]
    )
  flat = {
    jax.tree_util.keystr(path): np.asarray(leaf)
    for path, leaf in jax.tree_util.tree_leaves_with_path(params)
  }
  np.savez(out / f'{args.way}.npz', **flat)
  stats = jax.devices()[0].memory_stats() or {}
  peak_device = stats.get('peak_bytes_in_use')
  row = dict(
    compile_s=sum(r['compile_s'] for r in runs),
    run_s=sum(r['run_s'] for r in runs),
    iterations=runs[0]['iterations'],
    peak_rss_mb=metrics_lib.peak_memory_mb(),
    peak_device_mb=(
      peak_device / 2**20
      if peak_device is not None and jax.default_backend() != 'cpu'
      else None
    ),
  )
  (out / f'{args.way}.json').write_text(json.dumps(row) + '\n')
  return 0


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--seeds', type=int, default=3, help='runs (S)')
  parser.add_argument(
    '--steps', type=int, default=100, help='learner steps of each run'
  )
  parser.add_argument('--steps-per-call', type=int, default=50)
  parser.add_argument('--out', default='runs/bench_seeds')
  parser.add_argument(
    '--tiny', action='store_true', help='tiny networks and batch (a smoke run)'
  )
  parser.add_argument(
    '--way',
    choices=('parallel', 'sequential'),
    default=None,
    help=argparse.SUPPRESS,
  )  # Internal.
  args = parser.parse_args(argv)
  for name in ('seeds', 'steps', 'steps_per_call'):
    if getattr(args, name) < 1:
      print(
        f'error: --{name.replace("_", "-")} must be >= 1, got '
        f'{getattr(args, name)}',
        file=sys.stderr,
      )
      return 2
  out = pathlib.Path(args.out)
  if args.way is None and (out / 'results.json').exists():
    print(
      f'error: {out}/results.json exists: choose another --out', file=sys.stderr
    )
    return 2
  config = config_lib.EvalConfig(
    num_steps=args.steps,
    steps_per_call=args.steps_per_call,
    num_devices=1,
    **(TINY if args.tiny else {}),
  )
  seeds = args.seeds
  if args.way is not None:  # One way, in this process (see below).
    return _one_way(args, config, out)

  out.mkdir(parents=True, exist_ok=True)
  ways = {}
  for way in ('parallel', 'sequential'):
    print(
      f'{way}: {seeds} runs'
      + (' in one program' if way == 'parallel' else ', one after another'),
      flush=True,
    )
    done = subprocess.run(
      [
        sys.executable,
        __file__,
        *(argv if argv is not None else sys.argv[1:]),
        '--way',
        way,
      ],
      check=False,
    )
    if done.returncode:
      print(
        f'error: the {way} runs failed (exit {done.returncode})',
        file=sys.stderr,
      )
      return 1
    ways[way] = json.loads((out / f'{way}.json').read_text())
    (out / f'{way}.json').unlink()
  with (
    np.load(out / 'parallel.npz') as many,
    np.load(out / 'sequential.npz') as alone,
  ):
    gaps = [
      max(float(np.max(np.abs(many[k][j] - alone[k][j]))) for k in many.files)
      for j in range(seeds)
    ]
  for way in ways:
    (out / f'{way}.npz').unlink()

  # Iterations timed per run: the warm-up's (acting only) and the steps'.
  iterations = ways['parallel']['iterations']
  rows = {
    way: {k: v for k, v in ways[way].items() if k != 'iterations'}
    for way in ways
  }
  for row in rows.values():
    row['total_s'] = row['compile_s'] + row['run_s']
    row['all_runs_iterations_per_s'] = seeds * iterations / row['run_s']
  rows['parallel']['one_run_iterations_per_s'] = (
    iterations / rows['parallel']['run_s']
  )
  rows['sequential']['one_run_iterations_per_s'] = (
    seeds * iterations / rows['sequential']['run_s']
  )
  results = dict(
    seeds=seeds,
    learner_steps_per_run=args.steps,
    settings=dataclasses.asdict(config),
    device=str(jax.devices()[0]),
    rows=rows,
    wall_ratio=rows['sequential']['total_s'] / rows['parallel']['total_s'],
    throughput_ratio=(
      rows['parallel']['all_runs_iterations_per_s']
      / rows['sequential']['all_runs_iterations_per_s']
    ),
    max_param_gap_per_seed=gaps,
  )

  lines = [
    f'Seeds in parallel: {seeds} runs of {args.steps} learner steps '
    f'(+ warm-up), Disco103 on Catch 8x8, {results["device"]}',
    '',
    '| way | compile s | running s | total s | iterations/s, all runs '
    '| per run | peak RSS | peak device memory |',
    '|---|---|---|---|---|---|---|---|',
  ]
  for name, row in rows.items():
    device = row['peak_device_mb']
    lines.append(
      f'| {name} | {row["compile_s"]:.1f} | {row["run_s"]:.1f} | '
      f'{row["total_s"]:.1f} | {row["all_runs_iterations_per_s"]:.2f} | '
      f'{row["one_run_iterations_per_s"]:.2f} | '
      f'{row["peak_rss_mb"] / 1024:.2f} GB | '
      + (f'{device / 1024:.2f} GB |' if device is not None else '- |')
    )
  lines += [
    '',
    f'parallel vs sequential: {results["wall_ratio"]:.2f}x faster in all '
    f'(wall), {results["throughput_ratio"]:.2f}x the iterations/s of all '
    f'runs together ({iterations} iterations per run: '
    f'{iterations - args.steps} of warm-up, then one learner step each)',
    'largest parameter difference per seed, parallel vs alone: '
    + ', '.join(f'{g:.1e}' for g in gaps),
  ]
  table = '\n'.join(lines)
  print(table)
  (out / 'results.json').write_text(json.dumps(results, indent=2) + '\n')
  (out / 'results.md').write_text(table + '\n')
  return 0


if __name__ == '__main__':
  sys.exit(main())
