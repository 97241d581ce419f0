# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""scripts/study_plateau.py: the plateau's measures, and a tiny run of every
condition with the MinAtar study's committed Disco103 runs (their per-run
curves, docs/results/minatar) read beside them."""

import json
import math
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from smoke_env import fast_jax_env

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / 'scripts'
sys.path.insert(0, str(SCRIPTS))
import study_plateau  # pylint: disable=g-import-not-at-top,wrong-import-position


def test_plateau_is_where_the_return_is_half_way_from_start_to_end():
  updates = np.arange(1, 101, dtype=float)
  # -1 for 40 updates, then a ramp to +1 at update 60, then +1.
  returns = np.clip(-1 + (updates - 40) / 10, -1, 1)
  length, start, end = study_plateau.plateau_length(updates, returns, 1)
  assert (start, end) == (-1.0, 1.0)
  assert length == 50  # The ramp crosses 0 at update 50.
  # A 5-point trailing mean crosses later, by half its width.
  assert study_plateau.plateau_length(updates, returns, 5)[0] == 52
  # Nothing learned: no plateau to measure.
  assert math.isnan(study_plateau.plateau_length(updates, -returns, 1)[0])


def test_the_policy_leaves_uniform_below_90_percent_of_its_entropy():
  updates = np.arange(1, 11, dtype=float)
  entropy = np.full(10, math.log(3))
  entropy[6:] = 0.5
  assert study_plateau.leaves_uniform(updates, entropy, 3, 1) == 7
  assert math.isnan(study_plateau.leaves_uniform(updates, entropy[:6], 3, 1))
  # An early dip that comes back up does not count.
  dip = np.array([math.log(3), 0.5, math.log(3), math.log(3), 0.5, 0.5])
  assert study_plateau.leaves_uniform(updates[:6], dip, 3, 1) == 5


def test_a_run_whose_policy_stays_uniform_has_no_plateau_end():
  """Noise that leaves the end a little above the start is no learning
  while the policy stays uniform (Catch at learning rate 3e-2)."""
  updates = np.arange(1, 101, dtype=float)
  returns = np.where(updates > 90, -0.7, -0.8)
  uniform = np.full(100, math.log(3))
  run = study_plateau.measure_run(updates, returns, uniform, 3, 1)
  assert math.isnan(run['plateau']) and math.isnan(run['leaves_uniform'])
  assert (run['start'], run['end']) == (-0.8, -0.7)
  learned = np.where(updates > 60, 0.2, math.log(3))
  run = study_plateau.measure_run(updates, returns, learned, 3, 1)
  assert (run['plateau'], run['leaves_uniform']) == (91, 61)


def test_the_committed_minatar_runs_are_found():
  """The MinAtar study's Disco103 runs, as the plateau study reads them:
  the table's five games and the sweep's three rates on Breakout."""
  runs = study_plateau.minatar_runs(ROOT / 'docs' / 'results' / 'minatar')
  assert sorted((g, s, r) for g, s, r, _ in runs) == sorted(
    [
      (g, 'table', 1e-3)
      for g in ('Asterix', 'Breakout', 'Freeway', 'Seaquest', 'SpaceInvaders')
    ]
    + [('Breakout', 'sweep', r) for r in (1e-3, 3e-3, 1e-2)]
  )


@pytest.mark.slow
@pytest.mark.weights
def test_plateau_study_tiny_run(tmp_path):
  """Every condition (the warm ones from base's final state), the tables
  (with one committed MinAtar run) and the plot; run again, each condition
  is read back."""
  env = dict(
    os.environ, **fast_jax_env(), JAX_PLATFORMS='cpu', MPLBACKEND='Agg'
  )
  minatar = tmp_path / 'minatar'
  run = pathlib.Path('Breakout', 'disco_103', 'lr_0.001')
  shutil.copytree(ROOT / 'docs' / 'results' / 'minatar' / run, minatar / run)
  args = [
    sys.executable,
    str(SCRIPTS / 'study_plateau.py'),
    '--tiny',
    '--results',
    str(tmp_path / 'plateau'),
    '--minatar-results',
    str(minatar),
  ]
  first = subprocess.run(
    args, env=env, capture_output=True, text=True, check=False, timeout=1800
  )
  assert first.returncode == 0, first.stderr[-4000:]
  table = pd.read_csv(tmp_path / 'plateau/plateau.csv')
  settings = list(dict.fromkeys(table['setting']))
  assert settings[:6] == [f'Catch 8x8, {c}' for c in study_plateau.CONDITIONS]
  assert any(s.startswith('MinAtar Breakout, lr 0.001') for s in settings)
  assert (tmp_path / 'plateau/plateau.png').stat().st_size > 1000
  warm = json.loads((tmp_path / 'plateau/warm_rnn/summary.json').read_text())
  assert warm['carried'] == ['rnn_state']
  again = subprocess.run(
    args, env=env, capture_output=True, text=True, check=False, timeout=600
  )
  assert again.returncode == 0, again.stderr[-4000:]
  assert 'training' not in again.stdout
  assert pd.read_csv(tmp_path / 'plateau/plateau.csv').equals(table)
