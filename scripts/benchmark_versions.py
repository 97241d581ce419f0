#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The same runs with two versions of the package, side by side.

Checks out `--base` (a git commit) into a temporary worktree and runs the
eval and meta-train commands with it and with this checkout, in alternating
rounds (base, this, base, this, ...) so that load from elsewhere on the
machine affects both alike. Each run is a fresh process with JAX's
persistent compilation cache off, so it compiles from scratch. Prints, per
job, the median over the rounds of each version's figures from its
`summary.json` and their ratio (this / base):

  eval:        steps/s after the first call, and the compilation with the
               first call (`compile_and_first_step_s`);
  meta-train:  meta-steps/s after the first call, and the compilation with
               the first call (`compile_s`).

  python scripts/benchmark_versions.py --base 3af18e4           # ~40 min
  python scripts/benchmark_versions.py --base 3af18e4 --rounds 1 \\
      --eval-args='--steps 40' --meta-args='--steps 4'

Settings: each job's defaults (the upstream notebooks': eval Catch 8x8,
Disco103, 64 trajectories of 29 steps per learner step, MLP 512x512;
meta-training Catch 5x5, 2 agents, 2 inner updates), for the number of
steps given (`--eval-args`, `--meta-args`: more flags of the commands).
"""

import argparse
import json
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
# (job, command module, summary key of the speed, of the compile time).
JOBS = (
  (
    'eval',
    'disco_rl.cli.eval',
    'steps_per_second',
    'compile_and_first_step_s',
  ),
  (
    'meta-train',
    'disco_rl.cli.meta_train',
    'meta_steps_per_second',
    'compile_s',
  ),
)
# Where the commands lived before disco_rl/cli (issue 72): a base from
# before the move runs them from there.
OLD_PACKAGE = ('disco_rl.cli.', 'disco_rl.examples.')


def _environment(tree: pathlib.Path) -> dict[str, str]:
  """The environment of a run of the package in `tree` (first on the path),
  compiling from scratch."""
  env = {
    k: v
    for k, v in os.environ.items()
    if not k.startswith(('JAX_COMPILATION_CACHE', 'JAX_PERSISTENT'))
  }
  env.pop('XLA_FLAGS', None)
  env.update(PYTHONPATH=str(tree), MPLBACKEND='Agg')
  return env


def run_once(
  tree: pathlib.Path, module: str, args: list[str], out: pathlib.Path
) -> dict:
  """One run of `module` with the package of `tree`; its summary."""
  if not (tree / (module.replace('.', '/') + '.py')).is_file():
    module = module.replace(*OLD_PACKAGE)
  command = [
    sys.executable,
    '-m',
    module,
    *args,
    '--no-progress',
    '--out',
    str(out),
    '--checkpoint-every',
    '0',
  ]
  result = subprocess.run(
    command,
    cwd=tree,
    env=_environment(tree),
    capture_output=True,
    text=True,
    check=False,
  )
  if result.returncode:
    raise RuntimeError(
      f'{module} with {tree} exited {result.returncode}: '
      + result.stderr[-2000:]
    )
  summary = json.loads((out / 'summary.json').read_text())
  where = subprocess.run(
    [sys.executable, '-c', 'import disco_rl; print(disco_rl.__file__)'],
    cwd=tree,
    env=_environment(tree),
    capture_output=True,
    text=True,
    check=True,
  ).stdout.strip()
  if not where.startswith(str(tree)):
    raise RuntimeError(f'the run imported {where}, not the package in {tree}')
  return summary


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument(
    '--base',
    required=True,
    help='the git commit to compare with (e.g. 3af18e4)',
  )
  parser.add_argument(
    '--rounds',
    type=int,
    default=3,
    help='runs of each job and version (default 3)',
  )
  parser.add_argument(
    '--eval-args',
    default='--steps 300',
    help='flags of the eval runs (default: --steps 300)',
  )
  parser.add_argument(
    '--meta-args',
    default='--steps 30',
    help='flags of the meta-train runs (default: --steps 30)',
  )
  parser.add_argument('--only', choices=('eval', 'meta-train'), default=None)
  parser.add_argument(
    '--json',
    default=None,
    metavar='PATH',
    help="also write every run's figures here",
  )
  args = parser.parse_args(argv)
  if args.rounds < 1:
    print(f'error: --rounds must be >= 1, got {args.rounds}', file=sys.stderr)
    return 2
  flags = {
    'eval': shlex.split(args.eval_args),
    'meta-train': shlex.split(args.meta_args),
  }
  jobs = [j for j in JOBS if args.only in (None, j[0])]
  with tempfile.TemporaryDirectory() as scratch:
    scratch = pathlib.Path(scratch)
    base = scratch / 'base'
    checkout = subprocess.run(
      ['git', 'worktree', 'add', '--detach', str(base), args.base],
      cwd=ROOT,
      capture_output=True,
      text=True,
      check=False,
    )
    if checkout.returncode:
      print(
        f'error: cannot check out --base {args.base}: '
        f'{checkout.stderr.strip()}',
        file=sys.stderr,
      )
      return 2
    try:
      figures = {
        (job, version): [] for job, *_ in jobs for version in ('base', 'this')
      }
      for round_ in range(args.rounds):
        for job, module, speed_key, compile_key in jobs:
          for version, tree in (('base', base), ('this', ROOT)):
            summary = run_once(
              tree, module, flags[job], scratch / f'{job}_{version}_{round_}'
            )
            figures[job, version].append(
              dict(speed=summary[speed_key], compile_s=summary[compile_key])
            )
            print(
              f'round {round_ + 1} {job:10s} {version:4s} '
              f'{summary[speed_key]:.3f}/s, compile and first call '
              f'{summary[compile_key]:.1f} s',
              flush=True,
            )
    finally:
      subprocess.run(
        ['git', 'worktree', 'remove', '--force', str(base)],
        cwd=ROOT,
        capture_output=True,
        check=False,
      )
  print(
    f'\nmedian of {args.rounds} round(s); base = {args.base}, this = '
    'the working tree'
  )
  print(
    f'{"job":10s} {"figure":28s} {"base":>9s} {"this":>9s} {"this/base":>9s}'
  )
  for job, *_ in jobs:
    for key, label in (
      ('speed', 'steps/s after the first call'),
      ('compile_s', 'compile + first call (s)'),
    ):
      base_value = statistics.median(f[key] for f in figures[job, 'base'])
      this_value = statistics.median(f[key] for f in figures[job, 'this'])
      print(
        f'{job:10s} {label:28s} {base_value:9.3f} {this_value:9.3f} '
        f'{this_value / base_value:9.3f}'
      )
  if args.json:
    pathlib.Path(args.json).write_text(
      json.dumps(
        {f'{job} {version}': runs for (job, version), runs in figures.items()},
        indent=2,
      )
      + '\n'
    )
  return 0


if __name__ == '__main__':
  sys.exit(main())
