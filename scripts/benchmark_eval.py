#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Eval benchmark: Disco103 on Catch 8x8 with the upstream notebook settings.

For each seed: 1000 learner steps; prints the average return over the last
100 steps (target >= 0.95), speed, peak memory and the resident-memory growth
from step 100 to the end (target <= 1.3x). Each seed runs in its own process
so memory figures are per run. Writes summary.json in --out.

  python scripts/benchmark_eval.py --seeds 0 1 2 --out runs/bench_eval
"""

import argparse
import json
import pathlib
import subprocess
import sys

TARGET_RETURN = 0.95
MAX_MEMORY_GROWTH = 1.3


def run_seed(
  seed: int,
  steps: int,
  out: pathlib.Path,
  rule: str,
  precision: str,
  overwrite: bool,
) -> dict:
  code = (
    'import json, sys\n'
    'import disco_rl\n'
    f'config = disco_rl.EvalConfig(rule={rule!r}, num_steps={steps}, '
    f'seed={seed}, precision={precision!r})\n'
    f'summary = disco_rl.Trainer(config, {str(out / f"seed_{seed}")!r}, '
    f'progress=False, log_every=100, overwrite={overwrite}).fit()\n'
    'print("SUMMARY " + json.dumps(summary))\n'
  )
  proc = subprocess.run(
    [sys.executable, '-c', code], capture_output=True, text=True, check=False
  )
  sys.stderr.write(proc.stderr[-3000:] if proc.returncode else '')
  lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('SUMMARY ')]
  if proc.returncode or not lines:
    raise SystemExit(f'seed {seed} failed:\n{proc.stdout}\n{proc.stderr}')
  for line in proc.stdout.splitlines():
    if line.startswith('step '):
      print(f'  seed {seed}: {line}', flush=True)
  return json.loads(lines[-1][len('SUMMARY ') :])


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
  parser.add_argument('--steps', type=int, default=1000)
  parser.add_argument('--rule', default='disco_103')
  parser.add_argument(
    '--precision',
    default='float32',
    choices=('float32', 'bfloat16'),
    help='compute dtype of the agent network',
  )
  parser.add_argument('--out', default='runs/bench_eval')
  parser.add_argument(
    '--overwrite', action='store_true', help='replace the runs already in --out'
  )
  args = parser.parse_args()
  out = pathlib.Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  results = {}
  for seed in args.seeds:
    s = run_seed(
      seed, args.steps, out, args.rule, args.precision, args.overwrite
    )
    growth = s['rss_mb_final'] / s['rss_mb_at_100']
    s['rss_growth_100_to_end'] = growth
    results[seed] = s
    print(
      f'seed {seed}: avg return (last 100) {s["final_avg_return"]:.3f} | '
      f'{s["steps_per_second"]:.2f} steps/s | compile+first '
      f'{s["compile_and_first_step_s"]:.0f}s | peak {s["peak_memory_mb"]:.0f}'
      f' MB | RSS {s["rss_mb_at_100"]:.0f} -> {s["rss_mb_final"]:.0f} MB '
      f'(x{growth:.2f}) | {s["plot_png"]}',
      flush=True,
    )
  ok = all(
    r['final_avg_return'] >= TARGET_RETURN
    and r['rss_growth_100_to_end'] <= MAX_MEMORY_GROWTH
    for r in results.values()
  )
  (out / 'summary.json').write_text(json.dumps(results, indent=2))
  print(
    f'{"PASS" if ok else "FAIL"}: target avg return >= {TARGET_RETURN} '
    f'and RSS growth <= {MAX_MEMORY_GROWTH}x for every seed; summary in '
    f'{out / "summary.json"}'
  )
  return 0 if ok else 1


if __name__ == '__main__':
  sys.exit(main())
