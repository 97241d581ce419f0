#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Meta-gradient windows: memory and speed for K agent updates per meta-step.

For each K (num_inner_steps, the updates the meta-gradient backpropagates
through) and with or without rematerialisation (`remat`), runs a few
meta-steps in a fresh process and prints, side by side: meta-steps/s, agent
updates/s (K per meta-step), compile time and peak memory, plus each row's
memory relative to K=2 without remat. Windows of at most
`max_unrolled_inner_steps` updates (5 by default) are unrolled, longer ones
run as a loop (the job's default; the table says which). The paper
backpropagates through 20 updates; with remat the memory should grow far
less than K.

  python scripts/benchmark_meta_window.py --windows 2 5 20 --steps 6
  python scripts/benchmark_meta_window.py --tiny   # a smoke run (minutes)
"""

import argparse
import json
import subprocess
import sys

from disco_rl.loops import config as config_lib

_CHILD = """
import json, resource, sys, time
import jax
from disco_rl.loops import config as config_lib, meta
settings = json.loads(sys.argv[1])
config = config_lib.MetaTrainConfig(**settings)
job = meta.make_meta_train(config)
state = job.init()  # Its key: PRNGKey(config.seed).
start = time.perf_counter()
state, _ = job.step(state, 1)
compile_s = time.perf_counter() - start
start = time.perf_counter()
steps = config.num_steps - 1
done = 0
while done < steps:
  count = min(config.steps_per_call, steps - done)
  state, logs = job.step(state, count)
  done += count
jax.block_until_ready(state)
elapsed = time.perf_counter() - start
print('RESULT ' + json.dumps(dict(
    compile_s=compile_s, meta_steps_per_s=steps / elapsed,
    peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))
"""


def measure(settings: dict) -> dict:
  proc = subprocess.run(
    [sys.executable, '-c', _CHILD, json.dumps(settings)],
    capture_output=True,
    text=True,
    check=False,
  )
  lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('RESULT ')]
  if proc.returncode or not lines:
    raise SystemExit(f'{settings} failed:\n{proc.stderr[-3000:]}')
  return json.loads(lines[-1][len('RESULT ') :])


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--windows', type=int, nargs='+', default=[2, 5, 20])
  parser.add_argument(
    '--steps',
    type=int,
    default=6,
    help='meta-steps per run (the first one compiles)',
  )
  parser.add_argument(
    '--tiny',
    action='store_true',
    help='tiny networks and batches (a smoke run)',
  )
  args = parser.parse_args()
  # Seed 0: every run starts from PRNGKey(0).
  base = dict(
    num_steps=args.steps,
    steps_per_call=max(1, args.steps - 1),
    num_devices=1,
    debug_checks=False,
    seed=0,
  )
  if args.tiny:
    base.update(
      num_agents=2,
      batch_size_per_device=4,
      rollout_len=4,
      dense=(16,),
      model_lstm_size=8,
      model_head_hiddens=(8,),
      value_dense=(8,),
    )
  rows = []
  for window in args.windows:
    for remat in (False, True):
      settings = dict(base, num_inner_steps=window, remat=remat)
      result = measure(settings)
      config = config_lib.MetaTrainConfig(**settings)
      unrolled = config.num_inner_steps <= config.max_unrolled_inner_steps
      rows.append(dict(K=window, remat=remat, unrolled=unrolled, **result))
      print(
        f'K={window:3d} remat={remat!s:5} unrolled={unrolled!s:5}: '
        f'{result["meta_steps_per_s"]:.3f} meta-steps/s, '
        f'{result["meta_steps_per_s"] * window:.2f} agent updates/s, '
        f'compile {result["compile_s"]:.0f}s, peak '
        f'{result["peak_mb"]:.0f} MB',
        flush=True,
      )
  reference = next(
    r for r in rows if r['K'] == min(args.windows) and not r['remat']
  )
  print(
    '\n| K | inner updates | remat | meta-steps/s | agent updates/s | '
    f'compile (s) | peak MB | memory vs K={reference["K"]} |'
  )
  print('|---|---|---|---|---|---|---|---|')
  for r in rows:
    print(
      f'| {r["K"]} | {"unrolled" if r["unrolled"] else "loop"} | '
      f'{"yes" if r["remat"] else "no"} | '
      f'{r["meta_steps_per_s"]:.3f} | '
      f'{r["meta_steps_per_s"] * r["K"]:.2f} | {r["compile_s"]:.0f} | '
      f'{r["peak_mb"]:.0f} | {r["peak_mb"] / reference["peak_mb"]:.2f}x |'
    )
  return 0


if __name__ == '__main__':
  sys.exit(main())
