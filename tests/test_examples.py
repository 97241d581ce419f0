# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Runs the command-line examples (disco_rl.examples.*) as subprocesses.

Tiny settings on one CPU device. The runs share the session's persistent JAX
compilation cache with the notebook runs of test_notebooks.py (the eval and
meta-train settings here are the notebooks' one-device settings, so whichever
runs second reuses the compiled programs), and compile with XLA's expensive
optimisations off.
"""

import importlib
import json
import math
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from smoke_env import fast_jax_env

from disco_rl import evaluation
from disco_rl import weights

TIMEOUT_S = 1800
PNG_MAGIC = b'\x89PNG\r\n\x1a\n'

EVAL_TINY = ['--steps', '4', '--batch-size', '4', '--replay-ratio', '2',
             '--buffer-capacity', '8', '--rollout-len', '6', '--dense', '16',
             '--model-lstm-size', '8', '--model-head-hiddens', '8',
             '--no-progress']
META_TINY = ['--steps', '2', '--num-agents', '2', '--batch-size-per-device',
             '2', '--rollout-len', '3', '--dense', '16', '--model-lstm-size',
             '8', '--model-head-hiddens', '8', '--value-dense', '8',
             '--no-progress']


@pytest.fixture
def run_cli(tmp_path, tmp_path_factory):
  """`run_cli(module, *args)` -> CompletedProcess, on one CPU device."""

  def run(module: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.update(fast_jax_env(tmp_path_factory))
    env['JAX_PLATFORMS'] = 'cpu'
    env['XLA_FLAGS'] = '--xla_force_host_platform_device_count=1'
    env['MPLBACKEND'] = 'Agg'
    return subprocess.run([sys.executable, '-m', module, *args],
                          cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S)

  return run


def ok(result: subprocess.CompletedProcess) -> str:
  assert result.returncode == 0, (
      f'exit {result.returncode}\nstdout:\n{result.stdout[-4000:]}\n'
      f'stderr:\n{result.stderr[-8000:]}')
  return result.stdout


def summary_of(stdout: str) -> dict:
  """The JSON summary the CLIs print before their final lines."""
  start = stdout.index('{\n')
  summary, _ = json.JSONDecoder().raw_decode(stdout[start:])
  return summary


def line_value(stdout: str, prefix: str) -> str:
  lines = [l for l in stdout.splitlines() if l.startswith(prefix)]
  assert len(lines) == 1, f'{prefix!r} not printed once in:\n{stdout}'
  return lines[0][len(prefix):].strip()


def assert_png(path):
  path = pathlib.Path(path)
  assert path.is_file(), path
  assert path.read_bytes()[:8] == PNG_MAGIC, path


def check_eval_run(stdout: str, out: pathlib.Path, learner_keys):
  """Final lines, files and metrics of a 4-step eval run with 2 envs."""
  summary = summary_of(stdout)
  final = line_value(stdout, 'final average return (last 100 steps):')
  metrics_path = line_value(stdout, 'metrics:')
  plot_path = line_value(stdout, 'plot:')
  assert pathlib.Path(metrics_path) == out / 'metrics.csv'
  assert pathlib.Path(plot_path) == out / 'returns.png'
  assert_png(plot_path)
  assert summary['steps'] == 4 and summary['devices'] == 1

  metrics = evaluation.read_metrics(metrics_path)
  assert all(len(v) == 4 for v in metrics.values())
  np.testing.assert_array_equal(metrics['env_steps'], [12, 24, 36, 48])
  np.testing.assert_array_equal(metrics['learned'], [0, 1, 1, 1])
  learned = metrics['learned'] == 1
  for key in learner_keys:
    assert np.isfinite(metrics[key][learned]).all(), (key, metrics[key])
  returns = metrics['avg_return']
  ended = metrics['episodes'] > 0
  assert ended.any() and np.isfinite(returns[ended]).all()
  assert (np.abs(returns[ended]) <= 1).all(), returns
  assert math.isclose(float(final), np.nanmean(returns), abs_tol=5e-4)
  assert math.isclose(summary['final_avg_return'], np.nanmean(returns),
                      rel_tol=1e-6)


@pytest.mark.weights
def test_eval_cli_disco_103(run_cli, tmp_path, disco_103_path):
  out = tmp_path / 'out'
  stdout = ok(run_cli('disco_rl.examples.eval', *EVAL_TINY, '--out', str(out),
                      '--weights', str(disco_103_path)))
  check_eval_run(stdout, out, ('total_loss', 'pi_loss', 'q_loss',
                               'aux_kl_loss', 'global_gradient_norm'))


def test_eval_cli_actor_critic_on_cpu_catch(run_cli, tmp_path):
  """Both alternatives at once: the baseline rule, acting in dm_env Catch."""
  out = tmp_path / 'out'
  stdout = ok(run_cli('disco_rl.examples.eval', *EVAL_TINY, '--out', str(out),
                      '--rule', 'actor_critic', '--env', 'catch'))
  check_eval_run(stdout, out, ('total_loss', 'pg_advs', 'avg_value',
                               'global_gradient_norm'))
  assert 'pi_loss' not in evaluation.read_metrics(out / 'metrics.csv')


def test_meta_train_cli(run_cli, tmp_path):
  out = tmp_path / 'out'
  stdout = ok(run_cli('disco_rl.examples.meta_train', *META_TINY, '--out',
                      str(out)))
  summary = summary_of(stdout)
  pos = float(line_value(stdout,
                         'positive rewards per meta-step (last 100):'))
  assert math.isfinite(pos) and pos >= 0
  assert re.search(r'^meta-steps/s: \S+ after \d+s of compilation$', stdout,
                   re.M), stdout
  metrics_path = pathlib.Path(line_value(stdout, 'metrics:'))
  assert metrics_path == out / 'metrics.csv'

  metrics = evaluation.read_metrics(metrics_path)
  assert all(len(v) == 2 for v in metrics.values())
  for key in ('pos_rewards', 'neg_rewards', 'rewards', 'meta_loss',
              'meta_grad_norm', 'meta_up_norm'):
    assert np.isfinite(metrics[key]).all(), (key, metrics[key])
  assert math.isclose(pos, np.mean(metrics['pos_rewards']), abs_tol=0.05)
  assert summary['steps'] == 2 and summary['devices'] == 1
  assert set(summary['plots']) == {'pos_rewards', 'neg_rewards', 'meta_loss',
                                   'meta_grad_norm', 'meta_up_norm',
                                   'rewards'}
  for png in summary['plots'].values():
    assert_png(png)
  # The learned rule is a valid Disco103-shaped parameter file.
  weights.load_disco_103(summary['params_npz'], download=False,
                         check_architecture=True)


def test_eval_cli_rejects_bad_setting(run_cli, tmp_path):
  """Exits non-zero before building anything heavy, naming the setting."""
  result = run_cli('disco_rl.examples.eval', '--batch-size', '5',
                   '--replay-ratio', '2', '--steps', '1', '--no-progress',
                   '--out', str(tmp_path / 'out'))
  assert result.returncode != 0, result.stdout
  assert 'batch_size' in result.stderr, result.stderr[-4000:]
  assert 'Traceback' not in result.stderr, result.stderr[-4000:]
  assert not (tmp_path / 'out' / 'metrics.csv').exists()


@pytest.mark.parametrize('module, args, setting', [
    ('eval', ['--buffer-capacity', '2'], 'buffer_capacity'),
    ('eval', ['--rule', 'actor_critic', '--rollout-len', '1'], 'rollout_len'),
    ('meta_train', ['--rollout-len', '1'], 'rollout_len'),
    ('meta_train', ['--num-agents', '0'], 'num_agents'),
    ('eval', ['--steps-per-call', '0'], 'steps_per_call'),
    ('meta_train', ['--steps-per-call', '0'], 'steps_per_call'),
    ('eval', ['--rule', 'actor_critic', '--weights', 'w.npz'],
     "--weights is for the disco_103 rule; rule 'actor_critic'"),
    ('eval', ['--num-processes', '2', '--process-id', '0'],
     'needs a coordinator address'),
    ('meta_train', ['--num-processes', '2', '--coordinator-address',
                    '127.0.0.1:1'], 'process_id must be in [0, 2)'),
])
def test_cli_main_rejects_bad_settings(module, args, setting, tmp_path,
                                       capsys):
  """The same checks in-process (`main` returns the exit status): fast."""
  main = importlib.import_module(f'disco_rl.examples.{module}').main
  status = main([*args, '--steps', '1', '--no-progress', '--out',
                 str(tmp_path / 'out')])
  assert status == 2
  err = capsys.readouterr().err
  assert err.startswith('error: ') and err.count('\n') == 1, err
  assert setting in err
  assert not (tmp_path / 'out').exists()
