#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Keeps the small files of a finished meta-training segment, to commit.

Long meta-training runs here in segments that each fit a session (the
machine does not outlive it); the next segment starts from the previous
segment's rule (`meta_train --init disco_103 --weights RULE`). This copies
from a segment's run directory what the next machine and the study page
need: the rule (update_rule_params.npz, the disco_103.npz layout), its
settings (run.json), summary (summary.json) and the meta-curves
(metrics.csv, only the columns listed in COLUMNS). Then it draws every
segment under the destination's parent, in name order, into one figure
(meta_tasks.png there: each task's reward per step against meta-steps).

  python scripts/save_meta_segment.py runs/stage3/seg1 \
      docs/results/meta_suite_cpu/stage3/seg1
"""

import argparse
import json
import pathlib
import shutil
import subprocess
import sys

from disco_rl.runtime import run_dir as run_files

RULE = 'update_rule_params.npz'
SUMMARY = 'summary.json'
METRICS = 'metrics.csv'
# Meta-curves worth keeping: rewards (all, per task), the agents' entropy
# and policy loss, the meta-gradient and update, renewals, time.
COLUMNS = (
  'step',
  'pos_rewards',
  'rewards',
  'entropy',
  'agent_pi_loss',
  'meta_grad_norm',
  'meta_up_norm',
  'agents_renewed',
  'time_s',
)


def git_ignores(path: pathlib.Path) -> bool:
  """Whether the git repository holding `path` ignores it; False outside one."""
  folder = path.parent
  while not folder.is_dir():  # the destination may not exist yet
    folder = folder.parent
  try:
    proc = subprocess.run(
      ['git', 'check-ignore', '-q', str(path.resolve())],
      cwd=folder,
      capture_output=True,
      check=False,
    )
  except FileNotFoundError:  # no git
    return False
  return proc.returncode == 0  # 1: not ignored; 128: not a repository


def save_segment(run: pathlib.Path, dest: pathlib.Path) -> list[str]:
  """Copies the segment in `run` to `dest`; the names of what it wrote.

  Raises:
    FileNotFoundError: naming a file the run lacks (it has not ended).
    FileExistsError: `dest` holds a different segment's rule.
    PermissionError: `dest` is in a git repository that ignores the rule
      (it would never be committed: lost with the machine).
  """
  import pandas as pd  # pylint: disable=g-import-not-at-top

  for name in (RULE, SUMMARY, METRICS, run_files.SETTINGS):
    if not (run / name).is_file():
      raise FileNotFoundError(f'{run / name}: missing (has the segment ended?)')
  if git_ignores(dest / RULE):
    raise PermissionError(
      f'{dest / RULE}: git ignores it (see `git check-ignore -v`), so it '
      'would never be committed; un-ignore it in .gitignore first'
    )
  rule = (run / RULE).read_bytes()
  if (dest / RULE).is_file() and (dest / RULE).read_bytes() != rule:
    raise FileExistsError(
      f'{dest / RULE} holds another rule; give a new destination'
    )
  dest.mkdir(parents=True, exist_ok=True)
  (dest / RULE).write_bytes(rule)
  for name in (SUMMARY, run_files.SETTINGS):
    shutil.copyfile(run / name, dest / name)
  metrics = pd.read_csv(run / METRICS)
  keep = [
    c for c in metrics.columns if c in COLUMNS or c.startswith('rewards_task')
  ]
  metrics[keep].to_csv(dest / METRICS, index=False, float_format='%.6g')
  return [RULE, SUMMARY, run_files.SETTINGS, METRICS]


def task_rewards(meta_dir: pathlib.Path) -> dict[str, tuple]:
  """{task: (meta-steps [S], mean reward per step of its agents' training
  rollouts [S])} of a meta-training run's metrics.csv."""
  from disco_rl.runtime import metrics as metrics_lib  # pylint: disable=g-import-not-at-top

  settings = json.loads((meta_dir / run_files.SETTINGS).read_text())
  metrics = metrics_lib.read_metrics(meta_dir / 'metrics.csv')
  names = settings['settings'].get('tasks') or ['catch']
  columns = (
    [f'rewards_task{g}' for g in range(len(names))]
    if len(names) > 1
    else ['rewards']
  )
  return {
    name: (metrics['step'], metrics[column])
    for name, column in zip(names, columns, strict=False)
  }


def plot_meta_tasks(path: pathlib.Path, stages) -> pathlib.Path:
  """Each task's reward per step against meta-steps, the stages one after
  another (a dashed line where one starts), 20-step moving means.

  Args:
    path: the PNG to write.
    stages: [(label, meta-training run directory)], in order.
  """
  from disco_rl import plots  # pylint: disable=g-import-not-at-top

  fig, ax = plots.new_figure()
  colours, offset = {}, 0  # Tasks, not rules: `plots.other_colour`.
  for i, (label, meta_dir) in enumerate(stages):
    if i:
      ax.axvline(offset, color='gray', linestyle='--', linewidth=1)
      ax.text(
        offset,
        1.0,
        f' {label}',
        transform=ax.get_xaxis_transform(),
        va='top',
        fontsize=8,
        color='gray',
      )
    last = offset
    for task, (steps, rewards) in task_rewards(meta_dir).items():
      labelled = task in colours
      colours.setdefault(task, plots.other_colour(len(colours)))
      ax.plot(
        offset + steps,
        plots.smoothed(rewards, 20),
        color=colours[task],
        label=None if labelled else task,
      )
      last = max(last, offset + steps[-1] + 1)
    offset = last
  return plots.save_figure(
    fig,
    ax,
    path,
    'meta-step',
    'reward per step (training rollouts)',
    "meta-training: each task's agents (20-step means)",
    dpi=120,
  )


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument(
    'run', type=pathlib.Path, help="a meta-training segment's run directory"
  )
  parser.add_argument(
    'dest',
    type=pathlib.Path,
    help='where its small files go (one directory per '
    'segment, named in order: seg1, seg2, ...)',
  )
  args = parser.parse_args(argv)
  try:
    written = save_segment(args.run, args.dest)
  except (FileNotFoundError, FileExistsError, PermissionError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  summary = json.loads((args.dest / SUMMARY).read_text())
  print(
    f'{args.dest}: {", ".join(written)} ({summary["steps"]} meta-steps'
    + (
      f', interrupted: {summary["interrupted"]}'
      if summary.get('interrupted')
      else ''
    )
    + ')'
  )
  segments = sorted(
    (
      d
      for d in args.dest.parent.iterdir()
      if (d / RULE).is_file() and (d / METRICS).is_file()
    ),
    key=lambda d: (len(d.name), d.name),
  )  # seg2 < seg10.
  png = plot_meta_tasks(
    args.dest.parent / 'meta_tasks.png', [(d.name, d) for d in segments]
  )
  print(f'plot: {png}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
