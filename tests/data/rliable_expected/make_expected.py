# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Writes expected.json: rliable's own numbers on fixed scores, which
tests/test_studies_stats.py compares disco_rl.studies.stats with.

Run by hand, in a virtualenv of its own (rliable 1.2.0 pins `arch<8`, and
arch 7.x does not import with the pandas 3 the project installs), from the
repository root:

  python3 -m venv /tmp/rliable-venv
  /tmp/rliable-venv/bin/pip install 'pandas==2.3.3' 'arch==7.2.0' \
      'rliable==1.2.0' numpy scipy
  /tmp/rliable-venv/bin/python tests/data/rliable_expected/make_expected.py

The scores: three made-up algorithms (A and B with 5 runs, C with 3, on 4
tasks; B and C rounded to one decimal, so that runs tie) and 3 x 4 curves
of 3 points, kept in expected.json as they are; and MinAtar's normalised
final scores, read from docs/results/minatar/results.csv (3 seeds x 4
games per rule; the file keeps 10 significant digits, so scores made from
it now differ from expected.json's, made from the study's per-run files
before it moved onto the study facility, by less than 1e-9).

rliable's bootstraps draw their resampling indices with numpy's global
generator (`np.random.choice`) and ignore their `random_state`, and
`create_performance_profile` takes no seed: so each call below is made
right after `np.random.seed(SEED)`, with one algorithm (or pair) at a time,
except `iqm_stream`: one `get_interval_estimates` over A, B and C after one
seed, the three drawn one after the other from the same stream.
"""

from importlib import metadata
import json
import pathlib
import platform
import warnings

import arch
import numpy as np
import pandas as pd
from rliable import library as rly
from rliable import metrics
import scipy

HERE = pathlib.Path(__file__).resolve().parent
MINATAR = HERE.parents[2] / 'docs' / 'results' / 'minatar'
SEED = 0
REPS = 2000
CONFIDENCE = 0.95
AGGREGATES = {
  'iqm': metrics.aggregate_iqm,
  'mean': metrics.aggregate_mean,
  'median': metrics.aggregate_median,
  'optimality_gap': metrics.aggregate_optimality_gap,
}


def synthetic() -> dict:
  a = np.random.RandomState(1).normal([0.2, 0.5, 1.0, 1.5], 0.3, (5, 4))
  b = np.random.RandomState(2).normal([0.1, 0.6, 0.8, 1.2], 0.3, (5, 4))
  c = np.random.RandomState(3).normal([0.1, 0.6, 0.8, 1.2], 0.3, (3, 4))
  curves = np.random.RandomState(4).normal(0.5, 0.4, (3, 4, 3))
  return dict(
    scores=dict(A=np.round(a, 3), B=np.round(b, 1), C=np.round(c, 1)),
    pairs=[('A', 'B'), ('A', 'C'), ('C', 'B')],
    taus=np.linspace(0.0, 2.0, 9),
    curves=np.round(curves, 3),
  )


def minatar() -> dict:
  """The normalised final scores of the MinAtar study's table
  (docs/results/minatar/results.csv, studies/minatar.py): per rule [seeds,
  games] over the games with a reference return, in the file's order."""
  table = pd.read_csv(MINATAR / 'results.csv')
  table = table[(table['stage'] == 'table') & table['reference_return'].notna()]
  games = list(dict.fromkeys(table['env']))
  scores = {}
  for rule, rows in table.groupby('rule', sort=False):
    scores[rule] = (
      rows.pivot(index='seed', columns='env', values='normalised_score')
      .reindex(columns=games)
      .to_numpy()
    )
  return dict(
    scores=scores,
    pairs=[('disco_103', 'actor_critic')],
    taus=np.array([0.0, 0.05, 0.1, 0.2, 0.3]),
  )


def estimate(scores, func, confidence=CONFIDENCE) -> dict:
  """rliable's point and percentile interval of `func` (one key)."""
  np.random.seed(SEED)
  points, intervals = rly.get_interval_estimates(
    {'key': scores}, func, reps=REPS, confidence_interval_size=confidence
  )
  point, ci = np.ravel(points['key']), np.asarray(intervals['key'])
  if point.size == 1:
    return dict(
      point=float(point[0]), interval=[float(ci[0, 0]), float(ci[1, 0])]
    )
  return dict(point=point.tolist(), low=ci[0].tolist(), high=ci[1].tolist())


def results(data: dict) -> dict:
  out = dict(aggregates={}, profiles={}, pairs={})
  for name, scores in data['scores'].items():
    out['aggregates'][name] = {
      key: estimate(scores, lambda x, f=f: np.array([f(x)]))
      for key, f in AGGREGATES.items()
    }
    for task_means in (False, True):
      np.random.seed(SEED)
      profile, band = rly.create_performance_profile(
        {'key': scores},
        data['taus'],
        reps=REPS,
        use_score_distribution=not task_means,
      )
      out['profiles'].setdefault(name, {})[
        'task_means' if task_means else 'runs'
      ] = dict(
        profile=profile['key'].tolist(),
        low=band['key'][0].tolist(),
        high=band['key'][1].tolist(),
      )
  for x, y in data['pairs']:
    pair = [data['scores'][x], data['scores'][y]]
    out['pairs'][f'{x}>{y}'] = dict(
      probability_of_improvement=estimate(
        pair, metrics.probability_of_improvement
      ),
      # rliable has no function of its own for it: its bootstrap of a pair
      # (StratifiedIndependentBootstrap) of IQM(X) - IQM(Y).
      iqm_difference=estimate(
        pair,
        lambda a, b: np.array(
          [metrics.aggregate_iqm(a) - metrics.aggregate_iqm(b)]
        ),
      ),
    )
  return out


def main():
  warnings.simplefilter('ignore', FutureWarning)  # arch's random_state.
  expected = dict(
    produced_by='tests/data/rliable_expected/make_expected.py',
    versions=dict(
      rliable=metadata.version('rliable'),
      arch=arch.__version__,
      numpy=np.__version__,
      pandas=pd.__version__,
      scipy=scipy.__version__,
      python=platform.python_version(),
    ),
    seed=SEED,
    reps=REPS,
    confidence=CONFIDENCE,
    datasets={},
  )
  for name, data in (('synthetic', synthetic()), ('minatar', minatar())):
    entry = dict(
      scores={k: v.tolist() for k, v in data['scores'].items()},
      pairs=[list(p) for p in data['pairs']],
      taus=data['taus'].tolist(),
      results=results(data),
    )
    expected['datasets'][name] = entry
  data = synthetic()
  iqm = lambda x: np.array([metrics.aggregate_iqm(x)])
  # A point's IQM and interval at 90%.
  expected['iqm_90'] = estimate(data['scores']['A'], iqm, confidence=0.9)
  # One call over three algorithms: one stream, drawn in key order.
  np.random.seed(SEED)
  _, intervals = rly.get_interval_estimates(data['scores'], iqm, reps=REPS)
  expected['iqm_stream'] = {
    k: np.ravel(v).tolist() for k, v in intervals.items()
  }
  # IQM curves: [runs, tasks, points] scores, a statistic of every point.
  curves = data['curves']
  curve = estimate(
    curves,
    lambda c: np.array(
      [metrics.aggregate_iqm(c[:, :, i]) for i in range(c.shape[2])]
    ),
  )
  expected['iqm_curve'] = dict(curves=curves.tolist(), **curve)
  path = HERE / 'expected.json'
  path.write_text(json.dumps(expected, indent=1) + '\n')
  print(f'{path}: {expected["versions"]}')


if __name__ == '__main__':
  main()
