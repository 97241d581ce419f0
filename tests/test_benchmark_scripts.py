# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The benchmark scripts' smoke runs (--tiny), so that they do not rot."""

import os
import pathlib
import subprocess
import sys

import pandas as pd
import pytest
from smoke_env import fast_jax_env

SCRIPTS = pathlib.Path(__file__).resolve().parent.parent / 'scripts'


@pytest.mark.slow
def test_meta_suite_benchmark_tiny_run_and_resume(tmp_path, tmp_path_factory):
  """Meta-trains on the suite, evaluates on the held-out tasks, writes the
  table and curves; run again, it reads everything back."""
  env = dict(os.environ, **fast_jax_env(tmp_path_factory),
             JAX_PLATFORMS='cpu', MPLBACKEND='Agg')
  args = [sys.executable, str(SCRIPTS / 'benchmark_meta_suite.py'), '--tiny',
          '--seeds', '0', '1', '--rules', 'learned', 'actor_critic',
          '--out', str(tmp_path / 'out')]
  first = subprocess.run(args, env=env, capture_output=True, text=True,
                         check=False, timeout=1800)
  assert first.returncode == 0, first.stderr[-4000:]
  table = pd.read_csv(tmp_path / 'out/results.csv')
  assert sorted(set(table['env'])) == ['catch[rows=8,columns=8]',
                                       'gymnax:Catch-bsuite']
  assert sorted(set(table['rule'])) == ['actor_critic', 'learned']
  assert (table['seeds'] == 2).all()
  for name in ('catch_rows_8_columns_8_', 'gymnax_Catch-bsuite'):
    assert (tmp_path / f'out/curves_{name}.png').stat().st_size > 1000
  assert '| held-out env | rule |' in (tmp_path / 'out/results.md').read_text()
  runs = sorted((tmp_path / 'out').glob('**/metrics.csv'))
  assert len(runs) == 1 + 2 * 2 * 2  # Meta-training, envs x rules x seeds.
  written = [p.stat().st_mtime_ns for p in runs]
  again = subprocess.run(args, env=env, capture_output=True, text=True,
                         check=False, timeout=600)
  assert again.returncode == 0, again.stderr[-4000:]
  assert pd.read_csv(tmp_path / 'out/results.csv').equals(table)
  assert [p.stat().st_mtime_ns for p in runs] == written  # Read back.
