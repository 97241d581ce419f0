#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The held-out comparison of rules, from a results.csv that
`scripts/benchmark_meta_suite.py` wrote (its committed per-seed final
returns), with no training:

  python scripts/compare_rules.py \
      docs/results/meta_suite_cpu/stage2/results.csv \
      --out docs/results/meta_suite_cpu/stage2/comparison.md

Per setting and environment, each rule's mean final return over its seeds
and their range (min-max: with 3 seeds no interval is claimed), and where
it stands. A rule is *ahead* when its lowest seed is above every other
rule's highest; *level* when its range overlaps the range of the rule with
the highest mean (that rule included); *behind* otherwise. Final return:
the script's own, the mean return of the episodes that ended in the last
10% of the run's environment steps.
"""

import argparse
import ast
import pathlib
import sys

import benchmark_meta_suite  # scripts/benchmark_meta_suite.py, beside this
import comparison  # scripts/comparison.py, beside this
import numpy as np


def read_rows(path) -> list[dict]:
  """results.csv's rows: setting (absent: 'eval'), env, rule, the agents'
  learning rate (None where the runs did not choose one per rule) and the
  per-seed final returns (a list)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  table = pd.read_csv(path)
  return [
    dict(
      setting=row.get('setting', 'eval'),
      env=row['env'],
      rule=row['rule'],
      learning_rate=row.get('learning_rate'),
      finals=[float(v) for v in ast.literal_eval(row['final_returns'])],
    )
    for row in table.to_dict('records')
  ]


def standings(finals: dict[str, list[float]]) -> dict[str, str]:
  """{rule: 'ahead', 'level' or 'behind'} among rules of one environment
  and setting (see the module's docstring)."""
  low = {r: min(v) for r, v in finals.items()}
  high = {r: max(v) for r, v in finals.items()}
  top = max(finals, key=lambda r: np.mean(finals[r]))
  out = {}
  for rule in finals:
    others = [high[r] for r in finals if r != rule]
    if others and low[rule] > max(others):
      out[rule] = 'ahead'
    elif low[rule] <= high[top] and high[rule] >= low[top]:
      out[rule] = 'level'
    else:
      out[rule] = 'behind'
  return out


def table(rows: list[dict]) -> list[str]:
  """The comparison as markdown lines, a row per setting and environment."""
  rules = list(dict.fromkeys(r['rule'] for r in rows))
  groups, rates = {}, {}
  for row in rows:
    groups.setdefault((row['setting'], row['env']), {})[row['rule']] = row[
      'finals'
    ]
    rate = row.get('learning_rate')
    if rate is not None and np.isfinite(rate):
      rates[row['setting'], row['env'], row['rule']] = rate
  names = [benchmark_meta_suite.RULE_LABELS[r] for r in rules]
  lines = [
    '| setting | held-out environment | ' + ' | '.join(names) + ' |',
    '|---|---|' + '---|' * len(rules),
  ]
  for (setting, env), finals in groups.items():
    where = standings(finals)
    cells = [
      _cell(finals[r], where[r], rates.get((setting, env, r)))
      if r in finals
      else '-'
      for r in rules
    ]
    lines.append(f'| {setting} | {env} | ' + ' | '.join(cells) + ' |')
  return lines


def _cell(values: list[float], standing: str, rate=None) -> str:
  text = f'{comparison.mean_range(values)}, {standing}' + (
    '' if rate is None else f', lr {rate:g}'
  )
  return f'**{text}**' if standing == 'ahead' else text


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('results', help="benchmark_meta_suite's results.csv")
  parser.add_argument(
    '--out', default=None, help='also write the table to this markdown file'
  )
  args = parser.parse_args(argv)
  try:
    rows = read_rows(args.results)
  except (FileNotFoundError, KeyError, ValueError, SyntaxError) as e:
    print(f'error: {args.results}: {e}', file=sys.stderr)
    return 2
  seeds = sorted({len(r['finals']) for r in rows})
  lines = [
    f'Final return (mean return of the episodes that ended in the last '
    f'10% of environment steps): mean over {"/".join(map(str, seeds))} '
    'seeds and their range (min to max); ahead = lowest seed above every '
    "other rule's highest, level = range overlapping that of the rule "
    'with the highest mean, behind = neither. From '
    f'`{args.results}` by `python scripts/compare_rules.py`.',
    '',
    *table(rows),
    '',
  ]
  text = '\n'.join(lines)
  if args.out:
    pathlib.Path(args.out).write_text(text)
  print(text)
  return 0


if __name__ == '__main__':
  sys.exit(main())
