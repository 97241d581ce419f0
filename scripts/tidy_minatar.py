#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The committed MinAtar study (docs/results/minatar/: per run summary.json
and curves.csv, random_returns.json) as the study facility's tidy tables,
and its report from them (`disco_rl.studies.report`).

results.csv: one row per run (stage 'table': the five games at the chosen
rates, normalised by gymnax's PPO returns, Seaquest without one; stage
'sweep': Breakout at every rate, normalised by the best mean there), the
final return the committed one (the script's: the last 10% of updates).
curves.csv: the committed compact curves, one row per point.

  python scripts/tidy_minatar.py --out /tmp/minatar_tidy
"""

import argparse
import json
import pathlib
import sys

import benchmark_minatar as bench  # scripts/, beside this script
import pandas as pd

from disco_rl.studies import measure
from disco_rl.studies import report

STUDY = 'minatar'
IDS = ('study', 'stage', 'env', 'rule', 'seed', 'learning_rate')


def read_runs(
  stage: str, folder: pathlib.Path
) -> tuple[pd.DataFrame, pd.DataFrame]:
  """(runs, curves) of every summary.json under `folder`."""
  runs, curves = [], []
  for path in sorted(folder.glob('*/*/lr_*/summary.json')):
    s = json.loads(path.read_text())
    ids = dict(
      study=STUDY,
      stage=stage,
      env=s['env'],
      rule=s['rule'],
      learning_rate=float(s['learning_rate']),
    )
    for seed, final in zip(s['seeds'], s['final_returns'], strict=True):
      runs.append(
        dict(
          ids,
          seed=int(seed),
          budget=int(s['updates']),
          final_return=float(final),
        )
      )
    table = pd.read_csv(path.parent / 'curves.csv')
    curves.append(
      table.assign(**ids)[
        [*IDS, 'env_steps', 'updates', 'episodes', 'avg_return']
      ]
    )
  if not runs:
    raise ValueError(f'no summary.json under {folder}.')
  return pd.DataFrame(runs), pd.concat(curves, ignore_index=True)


def tidy(results: pathlib.Path) -> tuple[pd.DataFrame, pd.DataFrame]:
  """The tidy (results, curves) of the committed study in `results`."""
  randoms = {
    bench.env_name(g): v
    for g, v in json.loads(
      (results / 'random_returns.json').read_text()
    ).items()
  }
  references = {bench.env_name(g): v for g, v in bench.PPO_RETURNS.items()}
  table, table_curves = read_runs('table', results)
  sweep, sweep_curves = read_runs('sweep', results / 'sweep')
  runs = pd.concat(
    [
      measure.normalised_scores(table, randoms, references),
      measure.normalised_scores(sweep, randoms),
    ],
    ignore_index=True,
  )
  curves = pd.concat([table_curves, sweep_curves], ignore_index=True)
  # The page's order: stage, game, then Disco103 before actor-critic.
  order = {r: i for i, r in enumerate(bench.RULES)}

  def ordered(t):
    return (
      t.assign(rule_order=t['rule'].map(order))
      .sort_values(
        ['stage', 'env', 'rule_order'],
        ascending=[False, True, True],
        kind='stable',
      )
      .drop(columns='rule_order')
      .reset_index(drop=True)
    )

  return ordered(runs[list(report.RESULT_COLUMNS)]), ordered(curves)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--results', default='docs/results/minatar')
  parser.add_argument('--out', required=True)
  args = parser.parse_args(argv)
  out = pathlib.Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  runs, curves = tidy(pathlib.Path(args.results))
  runs.to_csv(out / 'results.csv', index=False)
  curves.to_csv(out / 'curves.csv', index=False)
  runs, curves = (
    report.read_results(out / 'results.csv'),
    report.read_curves(out / 'curves.csv'),
  )
  for stage, baseline in (('table', 'actor_critic'), ('sweep', None)):
    paths = report.write_report(
      runs,
      curves,
      out / stage,
      stage=stage,
      baseline_rule=baseline,
      title=f'MinAtar, {stage}',
    )
    print('\n'.join(map(str, paths.values())))
  return 0


if __name__ == '__main__':
  sys.exit(main())
