# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The benchmark scripts' smoke runs (--tiny), so that they do not rot."""

import json
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


def test_save_meta_segment_task_rewards_name_each_tasks_column(
  tmp_path, monkeypatch
):
  """A suite's rewards_task<g> columns are read under their tasks' names; a
  one-task run's under 'rewards'."""
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import save_meta_segment  # pylint: disable=g-import-not-at-top

  for tasks, columns in (
    (['catch', 'gymnax:CartPole-v1'], ['rewards_task0', 'rewards_task1']),
    ([], ['rewards']),
  ):
    run = tmp_path / str(len(tasks))
    run.mkdir()
    (run / 'run.json').write_text(json.dumps({'settings': {'tasks': tasks}}))
    table = {'step': [0, 1, 2], 'rewards': [9.0, 9.0, 9.0]}
    table.update(
      {
        c: [g + 0.1, g + 0.2, g + 0.3]
        for g, c in enumerate(columns)
        if c != 'rewards'
      }
    )
    if columns == ['rewards']:
      table['rewards'] = [0.1, 0.2, 0.3]
    pd.DataFrame(table).to_csv(run / 'metrics.csv', index=False)
    read = save_meta_segment.task_rewards(run)
    assert list(read) == (tasks or ['catch'])
    for g, (steps, rewards) in enumerate(read.values()):
      np.testing.assert_array_equal(steps, [0, 1, 2])
      np.testing.assert_allclose(rewards, [g + 0.1, g + 0.2, g + 0.3])


def _meta_steps(*args: str, tmp_path) -> tuple[str, list[dict]]:
  """benchmark_meta_steps.py's output and rows (--json)."""
  env = dict(os.environ, **fast_jax_env(), JAX_PLATFORMS='cpu')
  proc = subprocess.run(
    [
      sys.executable,
      str(SCRIPTS / 'benchmark_meta_steps.py'),
      '--tiny',
      '--steps',
      '2',
      '--json',
      str(tmp_path / 'rows.json'),
      *args,
    ],
    env=env,
    capture_output=True,
    text=True,
    check=False,
    timeout=1800,
  )
  assert proc.returncode == 0, proc.stderr[-4000:]
  return proc.stdout, json.loads((tmp_path / 'rows.json').read_text())['rows']


@pytest.mark.slow
def test_meta_steps_benchmark_over_windows(tmp_path):
  """K=2 (unrolled) and K=6 (a loop): one row each, timed by the loop."""
  out, rows = _meta_steps(
    '--vary', 'num_inner_steps', '2', '6', tmp_path=tmp_path
  )
  lines = [ln for ln in out.splitlines() if ln.startswith(('| 2 |', '| 6 |'))]
  assert len(lines) == 2, out
  assert '| unrolled |' in lines[0] and '| loop |' in lines[1]
  assert [r['settings']['num_inner_steps'] for r in rows] == [2, 6]
  assert all(r['compile_s'] > r['s_per_step'] > 0 for r in rows)


@pytest.mark.slow
def test_meta_steps_benchmark_over_rule_sizes_on_gridworlds(tmp_path):
  """The lpg preset (tabular agents on LPG gridworlds) with the tiny rule
  and 51 value bins: the rule's parameters and its cost."""
  _, (row,) = _meta_steps(
    '--preset',
    'lpg',
    '--set',
    'num_bins=51',
    '--set',
    'tasks=lpg:all[layout_seed=-1,net=tabular]',
    '--vary',
    'rule_sizes',
    'tiny',
    tmp_path=tmp_path,
  )
  assert row['settings']['num_bins'] == 51
  assert row['settings']['tasks'] == ['lpg:all[layout_seed=-1,net=tabular]']
  assert 1000 < row['params'] < 20000
  assert row['compile_s'] > row['s_per_step'] > 0


def test_meta_steps_benchmark_reads_settings_as_the_config_takes_them():
  """Values become the config's types; a bad name fails before any run."""
  sys.path.insert(0, str(SCRIPTS))
  try:
    import benchmark_meta_steps as bench  # pylint: disable=g-import-not-at-top
  finally:
    sys.path.remove(str(SCRIPTS))
  assert bench.parse_value('remat', 'true') is True
  assert bench.parse_value('dense', '8x16') == (8, 16)
  assert bench.parse_value('dense', '8') == (8,)
  assert bench.parse_value('tasks', 'catch[rows=5,columns=5]') == (
    'catch[rows=5,columns=5]',
  )
  assert bench.parse_value('rule_sizes', 'lpg') == {'prediction_size': 8}
  assert bench.parse_value('rule_sizes', 'hidden_size=64') == {
    'hidden_size': 64
  }
  with pytest.raises(SystemExit, match="unknown setting 'num_agent'"):
    bench.parse_value('num_agent', '2')
  with pytest.raises(SystemExit, match='rule_sizes'):
    bench.parse_value('rule_sizes', 'width=3')


@pytest.mark.slow  # About 1.5 min: five programs compiled.
def test_runs_benchmark_tiny_run(tmp_path):
  """A 2 x 2 sweep both ways side by side: the same runs (parameters apart
  by rounding), one compilation against four, a table with the ratios; an
  existing result is never overwritten."""
  env = dict(os.environ, **fast_jax_env(), JAX_PLATFORMS='cpu')
  args = [
    sys.executable,
    str(SCRIPTS / 'benchmark_runs.py'),
    '--spec',
    str(ROOT / 'studies' / 'catch_example.py'),
    '--env',
    'jittable_catch[rows=5,columns=5]',
    '--rule',
    'ppo',
    '--tiny',
    '--seeds',
    '0',
    '1',
    '--rates',
    '1e-3',
    '1e-2',
    '--steps',
    '4',
    '--out',
    str(tmp_path / 'out'),
  ]
  proc = subprocess.run(
    args, env=env, capture_output=True, text=True, check=False, timeout=1800
  )
  assert proc.returncode == 0, proc.stderr[-4000:]
  results = json.loads((tmp_path / 'out/results.json').read_text())
  assert (results['runs'], results['seeds'], results['rates']) == (4, 2, 2)
  assert results['settings']['learning_rates'] == [1e-3, 1e-2]
  assert results['settings']['rule'] == 'ppo'
  assert len(results['max_param_gap_per_run']) == 4
  assert max(results['max_param_gap_per_run']) < 1e-4
  rows = results['rows']
  assert (rows['one_program']['programs'], rows['per_run']['programs']) == (
    1,
    4,
  )
  for row in rows.values():
    assert row['learner_steps_per_s'] > 0 and row['compile_s'] > 0
    assert row['wall_s'] > row['compile_s'] + row['run_s']
    assert row['peak_rss_mb'] > 0  # Its own process's.
    assert row['peak_device_mb'] is None  # A CPU.
  assert sorted(p.name for p in (tmp_path / 'out').iterdir()) == [
    'results.json',
    'results.md',
  ]
  assert 'one program vs one per run: wall' in proc.stdout
  again = subprocess.run(
    args, env=env, capture_output=True, text=True, check=False, timeout=600
  )
  assert again.returncode == 2
  assert again.stderr.strip() == (
    f'error: {tmp_path / "out"}/results.json exists: choose another --out'
  )


@pytest.mark.slow  # About 2.5 min: four families compiled.
def test_envs_benchmark_tiny_run(tmp_path):
  """Every family trains and both Atari acting modes report a speed."""
  env = dict(os.environ, **fast_jax_env(), JAX_PLATFORMS='cpu')
  done = subprocess.run(
    [
      sys.executable,
      str(SCRIPTS / 'benchmark_envs.py'),
      '--tiny',
      '--out',
      str(tmp_path / 'out'),
    ],
    env=env,
    capture_output=True,
    text=True,
    check=False,
    timeout=1800,
  )
  assert done.returncode == 0, done.stderr[-4000:]
  results = json.loads((tmp_path / 'out/results.json').read_text())
  assert len(results['training']) == 4
  assert all(r['learner_steps_per_second'] > 0 for r in results['training'])
  assert [a['mode'] for a in results['acting']] == ['host', 'xla']
  assert results['acting'][0]['env_steps_per_second'] > 0
  assert '| family | env | net |' in (tmp_path / 'out/results.md').read_text()


def test_save_meta_segment_keeps_the_small_files_and_draws_all_segments(
  tmp_path, monkeypatch, capsys
):
  """save_meta_segment: the rule, settings, summary and the listed metrics
  columns (others dropped) per segment; one figure of every segment; one
  error line for a run that has not ended or a destination holding
  another rule."""
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import save_meta_segment  # pylint: disable=g-import-not-at-top

  def fake_run(name, rule: bytes, steps: int):
    run = tmp_path / 'runs' / name
    run.mkdir(parents=True)
    (run / 'run.json').write_text(
      json.dumps(
        dict(
          job='meta_train', settings=dict(tasks=['catch', 'gymnax:Acrobot-v1'])
        )
      )
    )
    (run / 'summary.json').write_text(json.dumps(dict(steps=steps)))
    (run / 'update_rule_params.npz').write_bytes(rule)
    pd.DataFrame(
      dict(
        step=range(steps),
        rewards_task0=np.linspace(0, 1, steps),
        rewards_task1=np.zeros(steps),
        agent_y=np.ones(steps),
        meta_grad_norm=np.ones(steps),
      )
    ).to_csv(run / 'metrics.csv', index=False)
    return run

  results = tmp_path / 'results'
  for i, rule in enumerate((b'rule one', b'rule two'), start=1):
    run = fake_run(f'seg{i}', rule, steps=30)
    assert save_meta_segment.main([str(run), str(results / f'seg{i}')]) == 0
    assert (results / f'seg{i}/update_rule_params.npz').read_bytes() == rule
    kept = pd.read_csv(results / f'seg{i}/metrics.csv')
    assert list(kept.columns) == [
      'step',
      'rewards_task0',
      'rewards_task1',
      'meta_grad_norm',
    ]
    assert (results / f'seg{i}/run.json').read_text() == (
      run / 'run.json'
    ).read_text()
  out = capsys.readouterr().out
  assert '30 meta-steps' in out and 'meta_tasks.png' in out
  assert (results / 'meta_tasks.png').stat().st_size > 1000
  # Another rule into seg1, and a run that has not ended: one error line.
  assert save_meta_segment.main([str(run), str(results / 'seg1')]) == 2
  assert 'another rule' in capsys.readouterr().err.strip().splitlines()[-1]
  (run / 'summary.json').unlink()
  assert save_meta_segment.main([str(run), str(results / 'seg3')]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith('error: ') and 'summary' in err[0]
  assert not (results / 'seg3').exists()


def test_save_meta_segment_refuses_a_rule_git_would_ignore(
  tmp_path, monkeypatch, capsys
):
  """A rule saved where .gitignore drops it would be lost with the machine:
  one error line, nothing written; where it is not ignored it is saved."""
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import save_meta_segment  # pylint: disable=g-import-not-at-top

  if shutil.which('git') is None:
    pytest.skip('git is not installed')
  repo = tmp_path / 'repo'
  repo.mkdir()
  subprocess.run(['git', 'init', '-q', str(repo)], check=True)
  (repo / '.gitignore').write_text('*.npz\n!kept/**/update_rule_params.npz\n')
  run = tmp_path / 'run'
  run.mkdir()
  (run / 'run.json').write_text(
    json.dumps(dict(job='meta_train', settings=dict(tasks=['catch'])))
  )
  (run / 'summary.json').write_text(json.dumps(dict(steps=3)))
  (run / 'update_rule_params.npz').write_bytes(b'rule')
  pd.DataFrame(
    dict(step=range(3), rewards=np.zeros(3), rewards_task0=np.zeros(3))
  ).to_csv(run / 'metrics.csv', index=False)
  assert save_meta_segment.main([str(run), str(repo / 'dropped/seg1')]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and err[0].startswith('error: ')
  assert 'git ignores' in err[0] and 'dropped/seg1' in err[0]
  assert not (repo / 'dropped').exists()
  assert save_meta_segment.main([str(run), str(repo / 'kept/seg1')]) == 0
  assert (repo / 'kept/seg1/update_rule_params.npz').read_bytes() == b'rule'
