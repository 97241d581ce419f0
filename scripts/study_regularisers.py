#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Do the meta-loss regularisers delay a rule's start from random parameters?

The test fixed on docs/studies/meta_suite.md before it ran (after stage 3d): a
lone Catch 5x5 agent meta-trains a rule from random parameters with stage
3b's settings (the upstream notebook's), once with upstream's meta-loss
weights ("base") and once with the two regularisers that drifted most in
scripts/meta_grad_parts.py switched off ("noreg":
`--meta-prediction-entropy-cost 0 --meta-target-mean-cost 0`), seeds 7, 8
and 9 each. The measure is the first meta-step t whose mean reward per
step over meta-steps t-99..t exceeds -0.05 ("crossing"; 1,000 if none in
1,000 meta-steps). A run stops once its crossing is known (the rows after
it change nothing measured). The reading, fixed before: the regularisers
delay the start if every seed's "noreg" run crosses before the same
seed's "base" run; otherwise the hypothesis is not supported here.

Each run's curve goes to RESULTS/<variant>_seed<S>.csv as it ends (the
committed seed-7 base run, stage3b/catch_alone.csv, is reused, not rerun)
and the table to RESULTS/crossings.md and crossings.json. The runs resume:
run directories live under --out, finished curves are not rerun.

  python scripts/study_regularisers.py            # runs what is missing
  python scripts/study_regularisers.py --report   # the table from files
"""

import argparse
import json
import pathlib
import signal
import subprocess
import sys
import time

import pandas as pd

from disco_rl import plots
from disco_rl import signals

TASK = 'catch[rows=5,columns=5]'
THRESHOLD = -0.05
WINDOW = 100
STEPS = 1000
SEEDS = (7, 8, 9)
VARIANTS = {
  'base': [],
  'noreg': [
    '--meta-prediction-entropy-cost',
    '0',
    '--meta-target-mean-cost',
    '0',
  ],
}
# The seed-7 base run made before this study (stage 3b's settings, the
# command below with --seed 7), kept as its own file.
COMMITTED = {('base', 7): 'docs/results/meta_suite_cpu/stage3b/catch_alone.csv'}
COLUMNS = ('step', 'rewards', 'entropy', 'meta_grad_norm', 'agent_pi_loss')


def crossing(rewards: pd.Series) -> int | None:
  """First index t with mean(rewards[t-99..t]) > THRESHOLD; None if none."""
  rolling = rewards.rolling(WINDOW).mean()
  above = rolling[rolling > THRESHOLD]
  return None if above.empty else int(above.index[0])


def read_metrics(path: pathlib.Path) -> pd.DataFrame | None:
  """The rows written so far (the run appends as it goes); None if none."""
  try:
    rows = pd.read_csv(path)
  except (FileNotFoundError, pd.errors.EmptyDataError, pd.errors.ParserError):
    return None
  rows = rows.dropna(subset=['rewards'])  # a row being written
  return rows if len(rows) else None


def command(seed: int, variant: str, run: pathlib.Path) -> list[str]:
  base = [sys.executable, '-m', 'disco_rl.examples.meta_train', '--no-progress']
  if (run / 'run.json').is_file():
    return base + ['--resume', str(run)]
  return (
    base
    + [
      '--tasks',
      TASK,
      '--num-agents',
      '1',
      '--seed',
      str(seed),
      '--init',
      'random',
      '--steps',
      str(STEPS),
      '--steps-per-call',
      '10',
      '--no-debug-checks',
      '--out',
      str(run),
    ]
    + VARIANTS[variant]
  )


def run_one(
  seed: int,
  variant: str,
  out: pathlib.Path,
  dest: pathlib.Path,
  stop: signals.StopOnSignal,
) -> None:
  """Runs (or resumes) one run until its crossing or its end; keeps its curve.

  Raises:
    KeyboardInterrupt: `stop` saw a signal; the run was stopped (it
      checkpoints).
  """
  if stop.signal_name:  # came between two runs
    raise KeyboardInterrupt
  run = out / f'{variant}_seed{seed}'
  metrics = run / 'metrics.csv'
  print(
    f'{variant} seed {seed}: {" ".join(command(seed, variant, run))}',
    flush=True,
  )
  proc = subprocess.Popen(command(seed, variant, run))
  try:
    waited = 0
    while proc.poll() is None:
      time.sleep(1)
      if stop.signal_name:
        raise KeyboardInterrupt
      waited += 1
      if waited % 20:  # The metrics every 20 s.
        continue
      rows = read_metrics(metrics)
      if rows is not None and crossing(rows['rewards']) is not None:
        proc.send_signal(signal.SIGTERM)  # saves a checkpoint, exits
        proc.wait()
        break
  except BaseException:
    proc.send_signal(signal.SIGTERM)
    proc.wait()
    raise
  rows = read_metrics(metrics)
  if rows is None:
    raise RuntimeError(
      f'{run} wrote no metrics (exit status {proc.returncode})'
    )
  done = crossing(rows['rewards']) is not None or len(rows) >= STEPS
  if not done:
    raise RuntimeError(
      f'{run} stopped at meta-step {len(rows)} before its '
      f'crossing or meta-step {STEPS} (exit status '
      f'{proc.returncode}); run again to resume'
    )
  rows[[c for c in COLUMNS if c in rows]].to_csv(
    dest / f'{variant}_seed{seed}.csv', index=False
  )


def curve(dest: pathlib.Path, variant: str, seed: int) -> pd.DataFrame | None:
  path = pathlib.Path(
    COMMITTED.get((variant, seed), dest / f'{variant}_seed{seed}.csv')
  )
  return pd.read_csv(path) if path.is_file() else None


def report(dest: pathlib.Path) -> None:
  """Writes crossings.md/json from the curves in `dest`."""
  rows = []
  for seed in SEEDS:
    row = {'seed': seed}
    for variant in VARIANTS:
      d = curve(dest, variant, seed)
      if d is None:
        row[variant] = None
        continue
      t = crossing(d['rewards'])
      row[variant] = STEPS if t is None else int(d['step'][t])
      row[f'{variant}_steps_run'] = len(d)
    rows.append(row)
  complete = all(r['base'] is not None and r['noreg'] is not None for r in rows)
  supported = complete and all(r['noreg'] < r['base'] for r in rows)
  (dest / 'crossings.json').write_text(
    json.dumps(
      dict(
        task=TASK,
        threshold=THRESHOLD,
        window=WINDOW,
        steps=STEPS,
        rows=rows,
        complete=complete,
        regularisers_delay_start=supported if complete else None,
      ),
      indent=1,
    )
    + '\n'
  )
  lines = [
    f'First meta-step whose {WINDOW}-step mean reward per step exceeds '
    f'{THRESHOLD} ({STEPS:,} if none), a lone {TASK} agent from random '
    'parameters (stage 3b settings).',
    '',
    '| seed | with the regularisers (upstream weights) | prediction '
    'entropy and target mean off | earlier without? |',
    '|---|---|---|---|',
  ]
  for r in rows:
    cells = [('not run' if r[v] is None else f'{r[v]:,}') for v in VARIANTS]
    earlier = (
      ''
      if None in (r['base'], r['noreg'])
      else 'yes'
      if r['noreg'] < r['base']
      else 'no'
    )
    lines.append(f'| {r["seed"]} | {cells[0]} | {cells[1]} | {earlier} |')
  verdict = (
    'incomplete'
    if not complete
    else 'supported (every seed earlier without)'
    if supported
    else 'not supported (not every seed earlier without)'
  )
  lines += ['', f'Reading fixed before the runs: {verdict}.']
  (dest / 'crossings.md').write_text('\n'.join(lines) + '\n')
  print('\n'.join(lines))
  draw(dest)


def draw(dest: pathlib.Path) -> None:
  """crossings.png: each run's 100-step mean reward per step."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, ax = plt.subplots(figsize=(7, 4))
  styles = {'base': '-', 'noreg': '--'}
  labels = {
    'base': 'with the regularisers',
    'noreg': 'prediction entropy, target mean off',
  }
  for i, seed in enumerate(SEEDS):  # Seeds are not rules: other colours.
    for variant in VARIANTS:
      d = curve(dest, variant, seed)
      if d is not None:
        ax.plot(
          d['step'],
          d['rewards'].rolling(WINDOW).mean(),
          styles[variant],
          color=plots.other_colour(i),
          label=f'seed {seed}, {labels[variant]}',
        )
  ax.axhline(THRESHOLD, color='grey', lw=0.8, ls=':', label='threshold')
  plots.random_play_line(ax, -0.15, 'random play (about)')
  ax.set_xlabel('meta-step (a run stops at its crossing)')
  ax.set_ylabel(f'reward per step, {WINDOW}-step mean')
  ax.set_title('A rule from random parameters, one Catch 5x5 agent')
  ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(dest / 'crossings.png', dpi=110)
  plt.close(fig)


def main() -> int:
  parser = argparse.ArgumentParser(
    description=__doc__.split('\n', 1)[0],
    formatter_class=argparse.RawDescriptionHelpFormatter,
  )
  parser.add_argument(
    '--out',
    default='runs/regularisers',
    help='run directories (default: %(default)s)',
  )
  parser.add_argument(
    '--results',
    default='docs/results/meta_suite_cpu/regularisers',
    help='curves and table (default: %(default)s)',
  )
  parser.add_argument(
    '--report',
    action='store_true',
    help='only write the table from the curves there',
  )
  args = parser.parse_args()
  out, dest = pathlib.Path(args.out), pathlib.Path(args.results)
  dest.mkdir(parents=True, exist_ok=True)
  if not args.report:
    # Paired order: each seed's two runs back to back, so that a session
    # that ends early leaves whole pairs. A SIGINT or SIGTERM stops the run
    # in progress (run_one passes it on; the run checkpoints).
    try:
      with signals.StopOnSignal() as stop:
        for seed in SEEDS:
          for variant in VARIANTS:
            if curve(dest, variant, seed) is None:
              run_one(seed, variant, out, dest, stop)
              report(dest)
    except RuntimeError as e:
      print(f'error: {e}', file=sys.stderr)
      return 2
    except KeyboardInterrupt:
      print(
        f'error: interrupted; the run in progress checkpointed under '
        f'{out}: run again to resume',
        file=sys.stderr,
      )
      return 2
  report(dest)
  return 0


if __name__ == '__main__':
  sys.exit(main())
