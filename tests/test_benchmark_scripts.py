# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The benchmark scripts' smoke runs (--tiny), so that they do not rot."""

import dataclasses
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
from smoke_env import fast_jax_env

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / 'scripts'


@pytest.mark.slow
def test_meta_suite_benchmark_tiny_run_and_resume(tmp_path):
  """Meta-trains on the suite (with lifetimes), evaluates on the held-out
  tasks in both settings, writes the table and curves; run again, it reads
  everything back."""
  env = dict(
    os.environ, **fast_jax_env(), JAX_PLATFORMS='cpu', MPLBACKEND='Agg'
  )
  args = [
    sys.executable,
    str(SCRIPTS / 'benchmark_meta_suite.py'),
    '--tiny',
    '--seeds',
    '0',
    '1',
    '--rules',
    'learned',
    'actor_critic',
    '--meta-set',
    'agent_lifetime=4',
    'learning_rate=1e-3',
    '--eval-settings',
    'eval',
    'meta',
    '--out',
    str(tmp_path / 'out'),
  ]
  first = subprocess.run(
    args, env=env, capture_output=True, text=True, check=False, timeout=1800
  )
  assert first.returncode == 0, first.stderr[-4000:]
  settings = json.loads((tmp_path / 'out/meta/run.json').read_text())
  assert 'agent_lifetime' in json.dumps(settings)
  table = pd.read_csv(tmp_path / 'out/results.csv')
  assert sorted(set(table['env'])) == [
    'catch[rows=8,columns=8]',
    'gymnax:Catch-bsuite',
  ]
  assert sorted(set(table['rule'])) == ['actor_critic', 'learned']
  assert sorted(set(table['setting'])) == ['eval', 'meta']
  assert (table['seeds'] == 2).all()
  for setting in ('eval', 'meta'):
    for name in ('catch_rows_8_columns_8_', 'gymnax_Catch-bsuite'):
      png = tmp_path / f'out/curves_{setting}_{name}.png'
      assert png.stat().st_size > 1000
  assert (tmp_path / 'out/curves.png').stat().st_size > 1000  # All panels.
  assert (tmp_path / 'out/meta_tasks.png').stat().st_size > 1000
  results = (tmp_path / 'out/results.md').read_text()
  assert '| setting | held-out env | rule |' in results
  assert "'agent_lifetime': 4" in results
  # The 'meta' setting trains as the meta-training agents did.
  run = json.loads(
    (
      tmp_path / 'out/eval_meta/catch_rows_8_columns_8_/learned/run.json'
    ).read_text()
  )['settings']
  assert (run['learning_rate'], run['replay_ratio'], run['num_seeds']) == (
    1e-3,
    1,
    2,
  )
  runs = sorted((tmp_path / 'out').glob('**/metrics.csv'))
  # Meta-training; settings x envs x rules (seeds in parallel).
  assert len(runs) == 1 + 2 * 2 * 2
  written = [p.stat().st_mtime_ns for p in runs]
  again = subprocess.run(
    args, env=env, capture_output=True, text=True, check=False, timeout=600
  )
  assert again.returncode == 0, again.stderr[-4000:]
  assert pd.read_csv(tmp_path / 'out/results.csv').equals(table)
  assert [p.stat().st_mtime_ns for p in runs] == written  # Read back.


@pytest.mark.slow
def test_meta_suite_benchmark_second_stage_starts_from_the_given_rule(tmp_path):
  """--meta-init: meta-training continues from an earlier run's rule (each
  of its 4 meta-steps moves a parameter by at most about the meta learning
  rate, Adam's step bound), and the table says where it started."""
  env = dict(
    os.environ, **fast_jax_env(), JAX_PLATFORMS='cpu', MPLBACKEND='Agg'
  )
  common = [
    sys.executable,
    str(SCRIPTS / 'benchmark_meta_suite.py'),
    '--tiny',
    '--seeds',
    '0',
    '--rules',
    'learned',
    '--held-out',
    'catch[rows=8,columns=8]',
  ]
  first = subprocess.run(
    common + ['--out', str(tmp_path / 'one')],
    env=env,
    capture_output=True,
    text=True,
    check=False,
    timeout=1800,
  )
  assert first.returncode == 0, first.stderr[-4000:]
  start = tmp_path / 'one/meta/update_rule_params.npz'
  second = subprocess.run(
    common
    + [
      '--meta-init',
      str(start),
      '--meta-set',
      'agent_lifetime=4',
      '--out',
      str(tmp_path / 'two'),
    ],
    env=env,
    capture_output=True,
    text=True,
    check=False,
    timeout=1800,
  )
  assert second.returncode == 0, second.stderr[-4000:]
  settings = json.loads((tmp_path / 'two/meta/run.json').read_text())
  assert settings['settings']['init'] == 'disco_103'
  lr = settings['settings']['meta_learning_rate']
  with (
    np.load(start) as a,
    np.load(tmp_path / 'two/meta/update_rule_params.npz') as b,
  ):
    assert sorted(a.files) == sorted(b.files)
    moved = max(float(np.max(np.abs(a[k] - b[k]))) for k in a.files)
  assert 0 < moved <= 4 * lr * 1.01, moved
  assert (
    f'from the rule in {start}' in (tmp_path / 'two/results.md').read_text()
  )
  assert (tmp_path / 'two/meta_tasks.png').stat().st_size > 1000


def test_meta_suite_benchmark_refuses_bad_overrides(
  tmp_path, capsys, monkeypatch
):
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import benchmark_meta_suite  # pylint: disable=g-import-not-at-top

  for bad, fragment in (
    (['--meta-set', 'lifetime=3'], 'MetaTrainConfig field'),
    (['--meta-set', 'agent_lifetime=x'], 'an integer'),
    (['--meta-set', 'agent_lifetime=1'], 'shorter than'),
    (['--meta-set', 'tasks=catch'], '--suite'),
    (['--meta-set', 'init=random'], '--meta-init'),
    (['--meta-init', str(tmp_path / 'no.npz')], 'no.npz'),
    (['--seeds', '0', '2'], 'consecutive'),
    (['--tune-rates', '1e-3', '0'], 'positive'),
    (['--tune-rates', '1e-3', '--tune-seeds', '100', '102'], 'consecutive'),
    (['--tune-rates', '1e-3', '--tune-seeds', '2', '3'], 'must differ'),
    (['--learned', str(tmp_path / 'no.npz')], 'no.npz'),
    (['--learned', 'a.npz', '--meta-init', 'b.npz'], 'give one of them'),
    (['--tune-only'], 'needs --tune-rates'),
  ):
    with pytest.raises(SystemExit) as stop:
      benchmark_meta_suite.main(
        ['--tiny', *bad, '--out', str(tmp_path / 'out')]
      )
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert fragment in err[-1], err
  assert not (tmp_path / 'out').exists()
  with pytest.raises(SystemExit) as stop:
    benchmark_meta_suite.main(
      ['--tiny', '--report', '--out', str(tmp_path / 'out')]
    )
  assert stop.value.code == 2
  assert 'no results in' in capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.slow
def test_meta_suite_benchmark_baselines_alone_meta_train_nothing(tmp_path):
  env = dict(
    os.environ, **fast_jax_env(), JAX_PLATFORMS='cpu', MPLBACKEND='Agg'
  )
  run = subprocess.run(
    [
      sys.executable,
      str(SCRIPTS / 'benchmark_meta_suite.py'),
      '--tiny',
      '--seeds',
      '0',
      '--rules',
      'actor_critic',
      '--held-out',
      'catch[rows=8,columns=8]',
      '--out',
      str(tmp_path / 'out'),
    ],
    env=env,
    capture_output=True,
    text=True,
    check=False,
    timeout=1200,
  )
  assert run.returncode == 0, run.stderr[-4000:]
  assert not (tmp_path / 'out/meta').exists()
  assert (
    tmp_path / 'out/eval_eval/catch_rows_8_columns_8_/actor_critic/summary.json'
  ).is_file()
  assert (
    (tmp_path / 'out/results.md')
    .read_text()
    .startswith('Fresh agents trained with actor-critic (no rule meta-trained')
  )


def test_meta_suite_learning_rates_chosen_by_normalised_suite_scores(
  monkeypatch,
):
  """choose_rates on hand-made means, its expected scores worked out by
  hand: per task (mean - random) / (best mean there - random), averaged
  over the tasks; the lower rate on a tie; a task nobody beat random play
  on scores 0."""
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import benchmark_meta_suite  # pylint: disable=g-import-not-at-top

  means = {  # (setting, task, rule, rate): mean final return
    ('eval', 'a', 'r1', 1e-3): 1.0,
    ('eval', 'a', 'r1', 1e-2): 0.5,
    ('eval', 'a', 'r2', 1e-3): 0.2,
    ('eval', 'a', 'r2', 1e-2): 0.8,
    ('eval', 'b', 'r1', 1e-3): -1.0,
    ('eval', 'b', 'r1', 1e-2): 1.0,
    ('eval', 'b', 'r2', 1e-3): 1.0,
    ('eval', 'b', 'r2', 1e-2): -0.5,
    ('eval', 'c', 'r1', 1e-3): -0.5,
    ('eval', 'c', 'r1', 1e-2): -0.5,
    ('eval', 'c', 'r2', 1e-3): -0.5,
    ('eval', 'c', 'r2', 1e-2): -0.5,
    ('meta', 'a', 'r1', 1e-3): 0.4,
    ('meta', 'a', 'r1', 1e-2): 0.4,
  }
  rows = [
    dict(
      setting=k[0], env=k[1], rule=k[2], learning_rate=k[3], final_return_mean=v
    )
    for k, v in means.items()
  ]
  randoms = {'a': 0.0, 'b': -1.0, 'c': 0.0}
  chosen, scores = benchmark_meta_suite.choose_rates(rows, randoms)
  # eval: a's best 1.0, b's best 1.0 (span 2), c scores 0.
  expected = {
    ('eval', 'r1', 1e-3): (1.0 + 0.0 + 0) / 3,
    ('eval', 'r1', 1e-2): (0.5 + 1.0 + 0) / 3,
    ('eval', 'r2', 1e-3): (0.2 + 1.0 + 0) / 3,
    ('eval', 'r2', 1e-2): (0.8 + 0.25 + 0) / 3,
    ('meta', 'r1', 1e-3): 1.0,
    ('meta', 'r1', 1e-2): 1.0,
  }
  got = {
    (r['setting'], r['rule'], r['learning_rate']): r['score'] for r in scores
  }
  assert got.keys() == expected.keys()
  for key, value in expected.items():
    assert got[key] == pytest.approx(value), key
  assert chosen == {
    ('eval', 'r1'): 1e-2,
    ('eval', 'r2'): 1e-3,
    ('meta', 'r1'): 1e-3,
  }
  with pytest.raises(ValueError, match=r"random-play return for \['c'\]"):
    benchmark_meta_suite.choose_rates(rows, {'a': 0.0, 'b': -1.0})


def test_meta_suite_random_returns_are_kept_and_played_only_when_missing(
  tmp_path, monkeypatch
):
  """random_returns.json keeps random play's return per task (the tuning
  tasks' and the held-out environments', whose curves draw it): a task
  there is read back, a missing one played once and added."""
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import benchmark_meta_suite  # pylint: disable=g-import-not-at-top

  played = []
  monkeypatch.setattr(
    benchmark_meta_suite.comparison,
    'random_return',
    lambda env: played.append(env) or -0.25,
  )
  (tmp_path / 'random_returns.json').write_text(
    json.dumps({'catch[rows=5,columns=5]': -0.6})
  )
  got = benchmark_meta_suite.random_returns(
    tmp_path, ['catch[rows=5,columns=5]', 'catch[rows=8,columns=8]']
  )
  assert got == {
    'catch[rows=5,columns=5]': -0.6,
    'catch[rows=8,columns=8]': -0.25,
  }
  assert len(played) == 1
  assert json.loads((tmp_path / 'random_returns.json').read_text()) == got
  assert benchmark_meta_suite.random_returns(
    tmp_path, ['catch[rows=8,columns=8]']
  ) == {'catch[rows=8,columns=8]': -0.25}
  assert len(played) == 1


def test_meta_suite_continues_from_committed_results(tmp_path, monkeypatch):
  """What a new machine reuses from --results: a tuning row read back from
  tuning.csv matches its run only with the same steps and seeds (a row
  without them matches none); a held-out run's saved files only with the
  same settings."""
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import benchmark_meta_suite  # pylint: disable=g-import-not-at-top

  from disco_rl.loops import config as config_lib  # pylint: disable=g-import-not-at-top

  row = dict(
    setting='eval',
    env='catch',
    rule='actor_critic',
    learning_rate=3e-4,
    steps=3000,
    first_seed=100,
    seeds=3,
    final_return_mean=0.5,
    final_returns=[0.4, 0.5, 0.6],
  )
  old = {k: v for k, v in row.items() if k not in ('steps', 'first_seed')}
  pd.DataFrame([row, old]).to_csv(tmp_path / 'tuning.csv', index=False)
  back = benchmark_meta_suite.read_tuning(tmp_path / 'tuning.csv')
  key = benchmark_meta_suite.tuning_key
  assert back[0]['final_returns'] == [0.4, 0.5, 0.6]
  assert (
    key(back[0])
    == key(row)
    == ('eval', 'catch', 'actor_critic', 3e-4, 3000, 100, 3, '')
  )
  assert key(back[1]) is None and key(old) is None
  assert key(dict(row, steps=1000)) != key(row)
  assert key(dict(row, first_seed=0)) != key(row)
  # The learned rule's rows also name its parameters.
  learned = dict(row, rule='learned')
  assert key(learned) is None
  assert key(dict(learned, rule_sha256='ab')) != key(
    dict(learned, rule_sha256='cd')
  )

  config = config_lib.EvalConfig(num_steps=30, seed=0, num_seeds=2)
  saved = tmp_path / 'run'
  saved.mkdir()
  assert not benchmark_meta_suite.is_saved(saved, config)
  (saved / 'run.json').write_text(
    json.dumps(
      dict(
        job='eval', settings=json.loads(json.dumps(dataclasses.asdict(config)))
      )
    )
  )
  assert not benchmark_meta_suite.is_saved(saved, config)  # No finals.json.
  (saved / 'finals.json').write_text('{"0": 0.1, "1": 0.2}')
  assert benchmark_meta_suite.is_saved(saved, config)
  other = dataclasses.replace(config, learning_rate=3e-4)
  assert not benchmark_meta_suite.is_saved(saved, other)
  assert not benchmark_meta_suite.is_saved(saved, config, 'ab')
  (saved / 'run.json').write_text(
    json.dumps(
      dict(
        job='eval',
        rule_sha256='ab',
        settings=json.loads(json.dumps(dataclasses.asdict(config))),
      )
    )
  )
  assert benchmark_meta_suite.is_saved(saved, config, 'ab')
  assert not benchmark_meta_suite.is_saved(saved, config, 'cd')


@pytest.mark.slow
def test_meta_suite_benchmark_tunes_rates_on_the_suite(
  tmp_path, disco_103_path
):
  """--tune-rates with --learned (here Disco103's parameters in its place):
  every rule at every rate on every suite task, tuning.md and .csv, then
  the held-out runs at the chosen rates; no meta-training."""
  env = dict(
    os.environ, **fast_jax_env(), JAX_PLATFORMS='cpu', MPLBACKEND='Agg'
  )
  out, results = tmp_path / 'out', tmp_path / 'results'
  command = [
    sys.executable,
    str(SCRIPTS / 'benchmark_meta_suite.py'),
    '--tiny',
    '--learned',
    str(disco_103_path),
    '--rules',
    'learned',
    'actor_critic',
    '--suite',
    'catch[rows=5,columns=5]',
    'catch[rows=6,columns=5]',
    '--held-out',
    'catch[rows=8,columns=8]',
    '--tune-rates',
    '1e-3',
    '3e-2',
    '--tune-seeds',
    '100',
    '--seeds',
    '0',
    '--out',
    str(out),
    '--results',
    str(results),
  ]
  # The actor-critic first, alone (--tune-only: no held-out runs); the
  # full command then trains the other rule's tuning runs only.
  first = [a if a != 'learned' else 'actor_critic' for a in command]
  first.remove('actor_critic')
  run = subprocess.run(
    first + ['--tune-only'],
    env=env,
    capture_output=True,
    text=True,
    check=False,
    timeout=1800,
  )
  assert run.returncode == 0, run.stderr[-4000:]
  assert len(pd.read_csv(results / 'tuning.csv')) == 2 * 2
  assert not list(out.glob('eval_*')) and not (results / 'results.csv').exists()
  run = subprocess.run(
    command, env=env, capture_output=True, text=True, check=False, timeout=1800
  )
  assert run.returncode == 0, run.stderr[-4000:]
  trained = [ln for ln in run.stdout.splitlines() if ln.startswith('[tune ')]
  assert len(trained) == 2 * 2, trained  # The learned rule's only.
  assert all(' learned seeds' in ln for ln in trained), trained
  assert not (out / 'meta').exists()
  out = results  # The tables, plots and per-run files are all there.
  tuning = pd.read_csv(out / 'tuning.csv')
  assert len(tuning) == 2 * 2 * 2  # rules x rates x suite tasks
  assert sorted(set(tuning['learning_rate'])) == [1e-3, 3e-2]
  chosen_line = [
    ln
    for ln in (out / 'tuning.md').read_text().splitlines()
    if ln.startswith('| eval | ')
  ][:2]
  chosen = {
    ln.split(' | ')[1]: float(ln.split(' | ')[-1].rstrip(' |'))
    for ln in chosen_line
  }
  assert set(chosen) == {'meta-trained here', 'actor-critic'}, chosen_line
  results = pd.read_csv(out / 'results.csv')
  for rule, label in (
    ('learned', 'meta-trained here'),
    ('actor_critic', 'actor-critic'),
  ):
    rate = results.loc[results['rule'] == rule, 'learning_rate'].item()
    assert rate == chosen[label]
    settings = json.loads(
      (
        tmp_path
        / 'out/eval_eval/catch_rows_8_columns_8_'
        / rule
        / f'lr_{rate:g}/run.json'
      ).read_text()
    )['settings']
    assert settings['learning_rate'] == rate
  assert (
    'Learning rates chosen on the suite' in (out / 'results.md').read_text()
  )
  assert (out / 'curves.png').stat().st_size > 1000
  # A new machine (no full runs) continues from --results: nothing trains.
  shutil.rmtree(tmp_path / 'out')
  tables = {
    name: (out / name).read_text()
    for name in ('results.csv', 'results.md', 'tuning.md')
  }
  again = subprocess.run(
    command, env=env, capture_output=True, text=True, check=False, timeout=600
  )
  assert again.returncode == 0, again.stderr[-4000:]
  assert not [p for p in (tmp_path / 'out').rglob('run.json')]
  assert {name: (out / name).read_text() for name in tables} == tables
  # The report redoes every table and plot from --results alone.
  (out / 'curves.png').unlink()
  again = subprocess.run(
    command + ['--report'],
    env=env,
    capture_output=True,
    text=True,
    check=False,
    timeout=600,
  )
  assert again.returncode == 0, again.stderr[-4000:]
  assert {name: (out / name).read_text() for name in tables} == tables
  assert (out / 'curves.png').stat().st_size > 1000
  # A run missing there: one error line naming it.
  (
    out
    / 'eval_eval/catch_rows_8_columns_8_/actor_critic'
    / f'lr_{results_rate(out):g}/finals.json'
  ).unlink()
  missing = subprocess.run(
    command + ['--report'],
    env=env,
    capture_output=True,
    text=True,
    check=False,
    timeout=600,
  )
  assert missing.returncode == 2
  assert missing.stderr.strip().splitlines()[-1].startswith('error: ')
  assert 'finals.json' in missing.stderr


def results_rate(results) -> float:
  table = pd.read_csv(results / 'results.csv')
  return table.loc[table['rule'] == 'actor_critic', 'learning_rate'].item()


def test_random_play_returns_on_catch_and_their_spread(monkeypatch):
  """Catch 5x5 ends every episode after 4 steps with +1 or -1: 32
  instances x 40 steps end 320 episodes, each worth +-1; `spread` on
  hand-made returns."""
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import comparison  # pylint: disable=g-import-not-at-top
  import random_play  # pylint: disable=g-import-not-at-top

  from disco_rl.loops import config as config_lib  # pylint: disable=g-import-not-at-top

  env = config_lib.parse_task('catch[rows=5,columns=5]').make_env(32)
  returns = comparison.random_play_returns(env, steps=40, seed=1)
  assert returns.shape == (320,)
  assert set(np.unique(returns)) <= {-1.0, 1.0}
  assert comparison.random_return(env, steps=40, seed=1) == pytest.approx(
    returns.mean()
  )
  assert random_play.spread(np.array([-1.0, -1.0, -1.0, 1.0])) == dict(
    episodes=4,
    mean=-0.5,
    std=pytest.approx(np.sqrt(0.75)),
    min=-1.0,
    max=1.0,
    differ=0.25,
    at_max=0.25,
  )
  assert random_play.spread(np.full(3, -500.0))['differ'] == 0.0


def test_meta_suite_task_rewards_name_each_tasks_column(tmp_path, monkeypatch):
  """A suite's rewards_task<g> columns are read under their tasks' names; a
  one-task run's under 'rewards'."""
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import benchmark_meta_suite  # pylint: disable=g-import-not-at-top

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
    read = benchmark_meta_suite.task_rewards(run)
    assert list(read) == (tasks or ['catch'])
    for g, (steps, rewards) in enumerate(read.values()):
      np.testing.assert_array_equal(steps, [0, 1, 2])
      np.testing.assert_allclose(rewards, [g + 0.1, g + 0.2, g + 0.3])


def test_meta_suite_benchmark_stopped_by_a_signal_says_so(
  tmp_path, capsys, monkeypatch
):
  """Meta-training stopped by a signal: one `stopped:` line, exit 130, as
  the other benchmark scripts; the same command resumes it."""
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import benchmark_meta_suite  # pylint: disable=g-import-not-at-top

  class StoppedTrainer:
    def __init__(self, *args, **kwargs):
      pass

    def fit(self):
      return dict(interrupted='SIGTERM')

    def close(self):
      pass

  monkeypatch.setattr(benchmark_meta_suite.trainer, 'Trainer', StoppedTrainer)
  code = benchmark_meta_suite.main(['--tiny', '--out', str(tmp_path / 'out')])
  assert code == 130
  err = capsys.readouterr().err.strip().splitlines()
  assert err == [
    'stopped: meta-training interrupted (SIGTERM); run the same '
    'command again to resume.'
  ]


@pytest.mark.slow
def test_loops_benchmark_tiny_run(tmp_path):
  """The previous and fused loops side by side, both jobs: the table and a
  summary with every variant's speed and compile times."""
  env = dict(os.environ, **fast_jax_env(), JAX_PLATFORMS='cpu')
  proc = subprocess.run(
    [
      sys.executable,
      str(SCRIPTS / 'benchmark_loops.py'),
      '--tiny',
      '--rounds',
      '1',
      '--compile-rounds',
      '1',
      '--out',
      str(tmp_path / 'out'),
    ],
    env=env,
    capture_output=True,
    text=True,
    check=False,
    timeout=1800,
  )
  assert proc.returncode == 0, proc.stderr[-4000:]
  summary = json.loads((tmp_path / 'out/summary.json').read_text())
  for job, names in (
    (
      'eval',
      (
        'step_per_call',
        'fused',
        'learner_alone',
        'learner_scanned',
        'fused_bfloat16',
      ),
    ),
    ('meta', ('step_per_call', 'fused')),
  ):
    for name in names:
      assert summary[job][name]['steps_per_s'] > 0, (job, name)
      assert summary[job][name]['compile_s'] > 0, (job, name)
    assert summary[job]['fused_speedup'] > 0
  assert 'fused vs step-per-call' in proc.stdout


@pytest.mark.slow
def test_meta_window_benchmark_tiny_run():
  """K=2 (unrolled) and K=6 (a loop), with and without remat."""
  env = dict(os.environ, **fast_jax_env(), JAX_PLATFORMS='cpu')
  proc = subprocess.run(
    [
      sys.executable,
      str(SCRIPTS / 'benchmark_meta_window.py'),
      '--tiny',
      '--windows',
      '2',
      '6',
      '--steps',
      '2',
    ],
    env=env,
    capture_output=True,
    text=True,
    check=False,
    timeout=1800,
  )
  assert proc.returncode == 0, proc.stderr[-4000:]
  rows = [
    ln
    for ln in proc.stdout.splitlines()
    if ln.startswith('| 2 |') or ln.startswith('| 6 |')
  ]
  assert len(rows) == 4, proc.stdout
  assert all('| unrolled |' in r for r in rows[:2])
  assert all('| loop |' in r for r in rows[2:])


@pytest.mark.slow
def test_rule_sizes_benchmark_tiny_run(tmp_path):
  """The tiny rule meta-trains tabular agents on LPG gridworlds; the tables
  and the rows (--json) give its cost."""
  env = dict(os.environ, **fast_jax_env(), JAX_PLATFORMS='cpu')
  proc = subprocess.run(
    [
      sys.executable,
      str(SCRIPTS / 'benchmark_rule_sizes.py'),
      '--tiny',
      '--json',
      str(tmp_path / 'rows.json'),
    ],
    env=env,
    capture_output=True,
    text=True,
    check=False,
    timeout=1800,
  )
  assert proc.returncode == 0, proc.stderr[-4000:]
  assert 'seconds per meta-step (after compiling)' in proc.stdout
  (row,) = json.loads((tmp_path / 'rows.json').read_text())['rows']
  assert (row['size'], row['agents']) == ('tiny', 2)
  assert row['s_per_step'] > 0 and row['compile_s'] > row['s_per_step']
  assert 1000 < row['params'] < 20000


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


def test_meta_grad_parts_summary_of_hand_made_gradients(monkeypatch):
  """The norm of each part's mean, the mean of its norms, their ratio and
  the cosine with the whole, on gradients written by hand: a part that
  flips sign each meta-step averages to 0; one that repeats keeps its
  norm."""
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import meta_grad_parts  # pylint: disable=g-import-not-at-top

  steps = 2
  # pg: (3, 0) then (-3, 0); entropy: (0, 1) twice; the others: 0.
  sums = dict(
    pg=np.array([0.0, 0.0]),
    entropy=np.array([0.0, 2.0]),
    prediction_entropy=np.zeros(2),
    target_mean=np.zeros(2),
    target_kl=np.zeros(2),
  )
  norm_sums = dict(
    pg=6.0, entropy=2.0, prediction_entropy=0.0, target_mean=0.0, target_kl=0.0
  )
  out = meta_grad_parts.summarise(sums, norm_sums, steps)
  assert out['whole']['norm_of_mean'] == pytest.approx(1.0)
  assert out['pg'] == dict(
    norm_of_mean=0.0,
    mean_norm=3.0,
    consistency=0.0,
    cosine_with_whole=pytest.approx(np.nan, nan_ok=True),
  )
  assert out['entropy'] == dict(
    norm_of_mean=1.0, mean_norm=1.0, consistency=1.0, cosine_with_whole=1.0
  )
  assert np.isnan(out['target_kl']['consistency'])


def test_meta_grad_parts_refuses_a_missing_rule(tmp_path, capsys, monkeypatch):
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import meta_grad_parts  # pylint: disable=g-import-not-at-top

  missing = tmp_path / 'no_rule.npz'
  assert (
    meta_grad_parts.main(
      ['--task', 'catch[rows=5,columns=5]', '--rule', str(missing)]
    )
    == 2
  )
  err = capsys.readouterr().err
  assert err.startswith('error: ') and str(missing) in err
  assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_meta_grad_parts_tiny_run(tmp_path):
  """Three meta-steps of a tiny agent on Catch, the first not summarised:
  per-step norms of the policy gradient's part and each regulariser's, and
  the summary of the last two beside."""
  env = dict(os.environ, **fast_jax_env(), JAX_PLATFORMS='cpu')
  out = tmp_path / 'parts.csv'
  proc = subprocess.run(
    [
      sys.executable,
      str(SCRIPTS / 'meta_grad_parts.py'),
      '--task',
      'catch[rows=5,columns=5]',
      '--steps',
      '3',
      '--skip',
      '1',
      '--set',
      'dense=16',
      'model_lstm_size=8',
      'model_head_hiddens=8',
      'value_dense=8',
      'batch_size_per_device=4',
      'rollout_len=4',
      '--out',
      str(out),
    ],
    env=env,
    capture_output=True,
    text=True,
    check=False,
    timeout=1800,
  )
  assert proc.returncode == 0, proc.stderr[-4000:]
  rows = pd.read_csv(out)
  assert list(rows['step']) == [0, 1, 2]
  parts = ('pg', 'entropy', 'prediction_entropy', 'target_mean', 'target_kl')
  for part in parts:
    assert (rows[f'{part}_norm'] > 0).all(), part
  # The entropy bonus's part is not the policy gradient's.
  assert (rows['entropy_cosine'] != rows['pg_cosine']).all()
  summary = json.loads(out.with_suffix('.json').read_text())
  assert summary['steps'] == 3 and summary['skip'] == 1
  assert summary['settings']['dense'] == [16]
  assert set(summary['parts']) == {'whole', *parts}
  for part in parts:
    got = summary['parts'][part]
    assert 0 < got['consistency'] <= 1 + 1e-9
    # Two summarised steps (1 and 2): the median of two norms is their mean.
    assert got['median_norm'] == pytest.approx(rows[f'{part}_norm'][1:].mean())


def test_study_regularisers_crossing_is_the_end_of_the_first_window_above(
  monkeypatch,
):
  """The crossing is the last step of the first 100-step window whose mean
  exceeds -0.05: a run at -0.15 that jumps to +0.3 at step 300 crosses
  where 23 of the last 100 steps are at +0.3 (mean -0.0465; 22 give
  -0.051); one that stays at -0.15 never crosses."""
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import study_regularisers  # pylint: disable=g-import-not-at-top

  rewards = pd.Series([-0.15] * 300 + [0.3] * 200)
  # The window ending at t holds t - 299 steps at +0.3: its mean is
  # -0.15 + 0.45 * (t - 299) / 100 > -0.05 first at t - 299 = 23.
  assert study_regularisers.crossing(rewards) == 322
  assert study_regularisers.crossing(pd.Series([-0.15] * 500)) is None
  assert study_regularisers.crossing(pd.Series([0.3] * 99)) is None


def test_study_regularisers_report_reads_the_pre_registered_verdict(
  tmp_path, monkeypatch
):
  """'supported' only when every seed crosses earlier without the
  regularisers; a run that never crossed counts as 1,000; a missing run
  leaves the table incomplete."""
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import study_regularisers  # pylint: disable=g-import-not-at-top

  monkeypatch.setattr(study_regularisers, 'COMMITTED', {})

  def write(variant, seed, jump):
    rewards = (
      [-0.15] * 1000
      if jump is None
      else ([-0.15] * jump + [0.3] * (1000 - jump))
    )
    pd.DataFrame(dict(step=range(1000), rewards=rewards)).to_csv(
      tmp_path / f'{variant}_seed{seed}.csv', index=False
    )

  for seed, (base, noreg) in zip(
    (7, 8, 9), ((700, 300), (None, 500), (400, 200)), strict=False
  ):
    write('base', seed, base)
    write('noreg', seed, noreg)
  study_regularisers.report(tmp_path)
  got = json.loads((tmp_path / 'crossings.json').read_text())
  assert [(r['base'], r['noreg']) for r in got['rows']] == [
    (722, 322),
    (1000, 522),
    (422, 222),
  ]
  assert got['complete'] and got['regularisers_delay_start'] is True
  write('noreg', 8, None)  # never crosses: not earlier than base's 1,000
  study_regularisers.report(tmp_path)
  got = json.loads((tmp_path / 'crossings.json').read_text())
  assert got['regularisers_delay_start'] is False
  assert 'not supported' in (tmp_path / 'crossings.md').read_text()
  (tmp_path / 'noreg_seed9.csv').unlink()
  study_regularisers.report(tmp_path)
  got = json.loads((tmp_path / 'crossings.json').read_text())
  assert not got['complete'] and got['regularisers_delay_start'] is None


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


def test_study_regularisers_passes_sigterm_on_to_its_run(tmp_path):
  """A SIGTERM sent to the study stops the run in progress (which then
  checkpoints) instead of leaving it running: the study ends with one
  error line and exit status 2, and its child got the signal."""
  marker = tmp_path / 'child'
  child = (
    'import pathlib, signal, sys, time\n'
    f'marker = pathlib.Path({str(marker)!r})\n'
    'def stop(*_):\n'
    '  marker.write_text("terminated")\n'
    '  sys.exit(0)\n'
    'signal.signal(signal.SIGTERM, stop)\n'
    'marker.write_text("started")\n'
    'time.sleep(120)\n'
  )
  driver = tmp_path / 'driver.py'
  driver.write_text(
    'import sys\n'
    f'sys.path.insert(0, {str(SCRIPTS)!r})\n'
    'import study_regularisers as s\n'
    's.COMMITTED = {}\n'
    f's.command = lambda *_: [sys.executable, "-c", {child!r}]\n'
    'sys.argv = ["study_regularisers.py", "--out", '
    f'{str(tmp_path / "out")!r}, "--results", {str(tmp_path / "res")!r}]\n'
    'sys.exit(s.main())\n'
  )
  proc = subprocess.Popen(
    [sys.executable, str(driver)],
    env=dict(os.environ, MPLBACKEND='Agg'),
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )
  deadline = time.monotonic() + 120
  while not marker.is_file() and time.monotonic() < deadline:
    time.sleep(0.1)
  assert marker.read_text() == 'started'
  proc.send_signal(signal.SIGTERM)
  _, stderr = proc.communicate(timeout=60)
  assert proc.returncode == 2, stderr
  lines = stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith('error: interrupted'), stderr
  assert marker.read_text() == 'terminated'


def test_meta_suite_results_md_says_nothing_was_meta_trained_for_learned(
  tmp_path, monkeypatch
):
  """With --learned (a rule meta-trained before), results.md does not list
  meta-training settings as if this run had meta-trained: only as the meta
  setting's source, when that setting was evaluated."""
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import benchmark_meta_suite  # pylint: disable=g-import-not-at-top

  from disco_rl import MetaTrainConfig  # pylint: disable=g-import-not-at-top

  rows = [
    dict(
      setting='eval',
      env='catch',
      rule='learned',
      seeds=1,
      final_return_mean=0.5,
      final_return_ci95=0.0,
      final_returns=[0.5],
    )
  ]
  meta = MetaTrainConfig(num_steps=7)
  for used, expected in (
    (['eval'], None),
    (['eval', 'meta'], "The meta setting's source"),
  ):
    benchmark_meta_suite.write_tables(
      tmp_path,
      rows,
      'cmd',
      meta,
      {'eval': {}, 'meta': {}},
      used,
      None,
      learned='rule.npz',
    )
    text = (tmp_path / 'results.md').read_text()
    assert 'Meta-training settings' not in text
    if expected is None:
      assert 'num_steps' not in text
    else:
      assert expected in text and "'num_steps': 7" in text
  benchmark_meta_suite.write_tables(
    tmp_path,
    rows,
    'cmd',
    meta,
    {'eval': {}},
    ['eval'],
    dict(final_pos_rewards=1.0, first_pos_rewards=0.0),
  )
  assert (
    'Meta-training settings (MetaTrainConfig fields other than their '
    "defaults): `{'num_steps': 7}`" in (tmp_path / 'results.md').read_text()
  )


def test_meta_suite_results_md_gives_the_range_over_seeds(
  tmp_path, monkeypatch
):
  """results.md gives each row's mean and range (min to max) over seeds,
  not a t interval, which with 3 seeds on Catch (returns within +-1) runs
  past the returns possible."""
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import benchmark_meta_suite  # pylint: disable=g-import-not-at-top

  from disco_rl import MetaTrainConfig  # pylint: disable=g-import-not-at-top

  finals = [
    0.9779518950437318,
    0.990615889212828,
    0.47512755102040816,
  ]  # A committed meta-setting row (Catch 8x8).
  rows = [
    dict(
      setting='meta',
      env='catch',
      rule='learned',
      seeds=3,
      final_return_mean=float(np.mean(finals)),
      final_return_ci95=0.73,
      final_returns=finals,
    )
  ]
  benchmark_meta_suite.write_tables(
    tmp_path,
    rows,
    'cmd',
    MetaTrainConfig(),
    {'meta': {}},
    ['meta'],
    None,
    learned='rule.npz',
  )
  text = (tmp_path / 'results.md').read_text()
  assert (
    '| meta | catch | meta-trained here | 3 | 0.815 (0.475 to 0.991) | '
    '0.98, 0.99, 0.48 |' in text
  ), text
  assert '+-' not in text and 't interval' in text
