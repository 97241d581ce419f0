# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Runs the commands (disco_rl.cli.*: `disco-rl eval`, `meta-train`,
`export-rule`) as subprocesses.

Tiny settings on one CPU device. Each command runs as a process of the
installed console script (`disco-rl SUBCOMMAND`, as users start it) in at
least one test; paths that do not depend on the process
(refusals, errors, an alternative rule or environment) run its `main` in
the test's process (`run_main`), without the ~3 s start-up. The runs
share the session's persistent JAX compilation cache with the notebook runs
of test_notebooks.py (the eval and meta-train settings here are the
notebooks' one-device settings, so whichever runs second reuses the
compiled programs), and compile with XLA's expensive optimisations off.
"""

import dataclasses
import functools
import importlib
import json
import math
import os
import pathlib
import re
import signal
import subprocess
import time

import jax
from live_curves import tensorboard_curves
from live_curves import wandb_history
import numpy as np
import pytest
from smoke_env import META_PLOTS
from smoke_env import disco_rl_command
from smoke_env import fast_jax_env
from smoke_env import xla_flags
import tiny

import disco_rl
from disco_rl import agent as agent_lib
from disco_rl import weights
from disco_rl.cli import common
from disco_rl.cli import flags as flags_lib
from disco_rl.jobs import config as config_lib
from disco_rl.jobs.meta import config as meta_config
from disco_rl.runtime import metrics as metrics_lib
from disco_rl.update_rules import disco

TIMEOUT_S = 1800
PNG_MAGIC = b'\x89PNG\r\n\x1a\n'

EVAL_TINY = tiny.eval_flags(
  rule=None, num_steps=4, rollout_len=6, steps_per_call=None
)
META_TINY = tiny.meta_flags(num_steps=2)


@pytest.fixture
def run_cli(tmp_path):
  """`run_cli(subcommand, *args)` -> CompletedProcess of `disco-rl
  subcommand args`, on one CPU device."""

  return functools.partial(_run_cli, tmp_path)


def _cli_env() -> dict[str, str]:
  """The environment of a CLI subprocess: one CPU device, fast compiles."""
  env = dict(os.environ)
  env.update(fast_jax_env(num_devices=1))
  env['JAX_PLATFORMS'] = 'cpu'
  env['MPLBACKEND'] = 'Agg'
  return env


def _run_cli(cwd, subcommand: str, *args: str) -> subprocess.CompletedProcess:
  """`disco-rl subcommand args` in `cwd` (`_cli_env`), output captured."""
  return subprocess.run(
    [*disco_rl_command(subcommand), *args],
    cwd=cwd,
    env=_cli_env(),
    capture_output=True,
    text=True,
    timeout=TIMEOUT_S,
  )


@pytest.fixture
def run_main(call_main):
  """`run_main(module, *args)`: the `main` of the command's module
  (`disco_rl.cli.MODULE`) in this process (`call_main`), for paths whose
  process start-up (about 3 s) the subprocess tests already cover."""
  return lambda module, *args: call_main(_main(module), *args)


@pytest.fixture(scope='module')
def tiny_meta_run(tmp_path_factory):
  """One finished tiny meta-training run of the CLI (META_TINY with one
  agent update per meta-step, live TensorBoard curves), shared by the tests
  that read it: (its directory, the CLI's stdout). Tests read it;
  test_meta_train_cli also resumes it (finished: the resumed call runs
  nothing)."""
  cwd = tmp_path_factory.mktemp('tiny_meta_run')
  out = cwd / 'out'
  result = _run_cli(
    cwd,
    'meta-train',
    *META_TINY,
    '--num-inner-steps',
    '1',
    '--out',
    str(out),
    '--log',
    'tensorboard',
  )
  return out, ok(result)


# The tests that read `tiny_meta_run` run on one xdist worker
# (tests/conftest.py).
shares_tiny_meta_run = pytest.mark.xdist_group('tiny_meta_run')


def ok(result: subprocess.CompletedProcess) -> str:
  assert result.returncode == 0, (
    f'exit {result.returncode}\nstdout:\n{result.stdout[-4000:]}\n'
    f'stderr:\n{result.stderr[-8000:]}'
  )
  return result.stdout


def summary_of(stdout: str) -> dict:
  """The JSON summary the CLIs print before their final lines."""
  start = stdout.index('{\n')
  summary, _ = json.JSONDecoder().raw_decode(stdout[start:])
  return summary


def line_value(stdout: str, prefix: str) -> str:
  lines = [ln for ln in stdout.splitlines() if ln.startswith(prefix)]
  assert len(lines) == 1, f'{prefix!r} not printed once in:\n{stdout}'
  return lines[0][len(prefix) :].strip()


def assert_png(path):
  path = pathlib.Path(path)
  assert path.is_file(), path
  assert path.read_bytes()[:8] == PNG_MAGIC, path


def check_eval_run(stdout: str, out: pathlib.Path, learner_keys):
  """Final lines, files and metrics of a 4-step eval run with 2 envs.

  `--steps 4` counts learner steps: 5 iterations, the first fills the
  buffer (a batch of 4 trajectories from 2 environments).
  """
  summary = summary_of(stdout)
  final = line_value(stdout, 'final average return (last 100 steps):')
  metrics_path = line_value(stdout, 'metrics:')
  plot_path = line_value(stdout, 'plot:')
  assert re.search(
    r'^steps/s: \S+ after \d+s of compilation and the first call$',
    stdout,
    re.M,
  ), stdout
  assert pathlib.Path(metrics_path) == out / 'metrics.csv'
  assert pathlib.Path(plot_path) == out / 'returns.png'
  assert_png(plot_path)
  assert summary['steps'] == 4 and summary['devices'] == 1
  assert summary['iterations'] == 5 and summary['interrupted'] is None

  metrics = metrics_lib.read_metrics(metrics_path)
  assert all(len(v) == 5 for v in metrics.values())
  np.testing.assert_array_equal(metrics['env_steps'], [12, 24, 36, 48, 60])
  np.testing.assert_array_equal(metrics['learned'], [0, 1, 1, 1, 1])
  learned = metrics['learned'] == 1
  for key in learner_keys:
    assert np.isfinite(metrics[key][learned]).all(), (key, metrics[key])
  returns = metrics['avg_return']
  ended = metrics['episodes'] > 0
  assert ended.any() and np.isfinite(returns[ended]).all()
  assert (np.abs(returns[ended]) <= 1).all(), returns
  assert math.isclose(float(final), np.nanmean(returns), abs_tol=5e-4)
  assert math.isclose(
    summary['final_avg_return'], np.nanmean(returns), rel_tol=1e-6
  )


@pytest.mark.weights
# Before the eval notebook of the same settings, on one worker
# (test_notebooks.py).
@pytest.mark.xdist_group('tiny_eval_programs')
def test_eval_cli_disco_103(run_cli, tmp_path, disco_103_path):
  out = tmp_path / 'out'
  stdout = ok(
    run_cli(
      'eval',
      *EVAL_TINY,
      '--out',
      str(out),
      '--weights',
      str(disco_103_path),
    )
  )
  check_eval_run(
    stdout,
    out,
    ('total_loss', 'pi_loss', 'q_loss', 'aux_kl_loss', 'global_gradient_norm'),
  )


def test_eval_cli_actor_critic_on_cpu_catch(run_main, tmp_path):
  """Both alternatives at once: the baseline rule, acting in dm_env Catch."""
  out = tmp_path / 'out'
  stdout = ok(
    run_main(
      'eval',
      *EVAL_TINY,
      '--out',
      str(out),
      '--rule',
      'actor_critic',
      '--env',
      'catch',
    )
  )
  check_eval_run(
    stdout, out, ('total_loss', 'pg_advs', 'avg_value', 'global_gradient_norm')
  )
  assert 'pi_loss' not in metrics_lib.read_metrics(out / 'metrics.csv')


@shares_tiny_meta_run
def test_meta_train_cli(run_cli, run_main, tmp_path, tiny_meta_run):
  out, stdout = tiny_meta_run
  summary = summary_of(stdout)
  pos = float(line_value(stdout, 'positive rewards per meta-step (last 100):'))
  assert math.isfinite(pos) and pos >= 0
  assert re.search(
    r'^meta-steps/s: \S+ after \d+s of compilation$', stdout, re.M
  ), stdout
  metrics_path = pathlib.Path(line_value(stdout, 'metrics:'))
  assert metrics_path == out / 'metrics.csv'

  metrics = metrics_lib.read_metrics(metrics_path)
  assert all(len(v) == 2 for v in metrics.values())
  for key in (
    'pos_rewards',
    'neg_rewards',
    'rewards',
    'meta_loss',
    'meta_grad_norm',
    'meta_up_norm',
  ):
    assert np.isfinite(metrics[key]).all(), (key, metrics[key])
  assert math.isclose(pos, np.mean(metrics['pos_rewards']), abs_tol=0.05)
  live = tensorboard_curves(out / 'tensorboard')['meta_loss']
  np.testing.assert_allclose(
    [live[s] for s in (0, 1)], metrics['meta_loss'], rtol=1e-6
  )
  assert summary['steps'] == 2 and summary['devices'] == 1
  assert set(summary['plots']) == set(META_PLOTS)
  # The policy target's entropy, and a uniform target's beside it.
  assert (
    metrics['agent_pi_hat_entropy'] <= metrics['uniform_entropy'] + 1e-5
  ).all()
  np.testing.assert_allclose(metrics['uniform_entropy'], np.log(3), rtol=1e-6)
  for png in summary['plots'].values():
    assert_png(png)
  # The learned rule is a valid Disco103-shaped parameter file.
  weights.load_disco_103(
    summary['params_npz'], download=False, check_architecture=True
  )
  # Resuming the finished run runs nothing and says so (the command's
  # main in this process: the run above started it as a process).
  stdout = ok(run_main('meta_train', '--resume', str(out), '--no-progress'))
  assert 'meta-steps/s: n/a (no meta-step ran in this call)' in stdout
  again = summary_of(stdout)
  assert again['completed'] and again['interrupted'] is None
  assert again['steps'] == 2
  # The rule at its (last) checkpoint, exported: the run's final rule.
  rule = tmp_path / 'rules/rule_2.npz'
  stdout = ok(run_cli('export-rule', str(out), '--out', str(rule)))
  assert stdout == f'rule of meta-step 2 of {out}: {rule}\n'
  with np.load(rule) as exported, np.load(summary['params_npz']) as final:
    assert sorted(exported.files) == sorted(final.files)
    for key in final.files:
      np.testing.assert_array_equal(exported[key], final[key])
  assert sorted(p.name for p in rule.parent.iterdir()) == ['rule_2.npz']


@shares_tiny_meta_run
def test_export_rule_bad_input_is_one_error_line(
  tmp_path, capsys, monkeypatch, fast_compile, tiny_meta_run
):
  """On test_meta_train_cli's run (read only: `run` links to it)."""
  del fast_compile
  monkeypatch.chdir(tmp_path)
  (tmp_path / 'run').symlink_to(tiny_meta_run[0], target_is_directory=True)
  before = {
    p: p.read_bytes() for p in tiny_meta_run[0].rglob('*') if p.is_file()
  }
  (tmp_path / 'taken.npz').write_bytes(b'kept')
  export = _main('export_rule')
  for args, message in [
    (
      ['--step', '1'],
      r'No checkpoint 1 in \S+/run/checkpoints; it has \[2\]\.',
    ),
    (
      ['--out', 'taken.npz'],
      r'--out taken.npz exists; pass --overwrite to '
      r'replace it\.',
    ),
    (['--out', '.'], r'--out \. is a directory; expected a file path\.'),
    (['--out', 'rule.npz', '--step', '2', 'extra'], None),
  ]:
    if message is None:  # argparse's own one line, exit 2.
      with pytest.raises(SystemExit) as stop:
        export(['run', *args])
      assert stop.value.code == 2
      assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith('error: unrecognized arguments: extra')
      )
      continue
    assert export(['run', '--out', 'rule.npz', *args]) == common.EXIT_BAD_INPUT
    assert re.fullmatch(message, _error_of(capsys)), message
  assert (tmp_path / 'taken.npz').read_bytes() == b'kept'
  assert sorted(p.name for p in tmp_path.iterdir()) == ['run', 'taken.npz']
  assert export(['nowhere', '--out', 'r.npz']) == common.EXIT_BAD_INPUT
  assert re.fullmatch(
    r'No run in \S+/nowhere: it has no run.json .*', _error_of(capsys)
  )
  evaluated = tmp_path / 'evaluated'
  disco_rl.Trainer(
    tiny.eval_config(num_steps=1, rollout_len=6, steps_per_call=None),
    evaluated,
    progress=False,
  ).fit()
  assert export([str(evaluated), '--out', 'r.npz']) == common.EXIT_BAD_INPUT
  assert 'holds a eval run, not a meta_train run' in _error_of(capsys)
  # --overwrite replaces an existing file.
  assert export(['run', '--out', 'taken.npz', '--overwrite']) == 0
  with np.load(tmp_path / 'taken.npz') as rule:
    assert 'lstm/linear/w' in rule.files
  # The run read is as it was.
  assert {
    p: p.read_bytes() for p in tiny_meta_run[0].rglob('*') if p.is_file()
  } == before


# Slow (moved to `make test-slow` 2026-12-04 for the 8-minute default run; the
# default run checks the seeds x rates program (test_jobs_eval.py) and the
# flags that make it (test_jobs_config.py))
@pytest.mark.slow
def test_eval_cli_runs_seeds_in_parallel(run_cli, tmp_path):
  out = tmp_path / 'out'
  stdout = ok(
    run_cli(
      'eval',
      *EVAL_TINY,
      '--out',
      str(out),
      '--rule',
      'actor_critic',
      '--seed',
      '7',
      '--num-seeds',
      '2',
      '--log',
      'tensorboard',
      'wandb',
    )
  )
  summary = summary_of(stdout)
  assert summary['steps'] == 4 and summary['iterations'] == 5
  per_run = summary['final_avg_return_per_run']
  assert sorted(per_run) == ['seed 7', 'seed 8']
  metrics = metrics_lib.read_metrics(out / 'metrics.csv')
  np.testing.assert_array_equal(metrics['seed'], [7, 8] * 5)
  np.testing.assert_array_equal(metrics['step'], np.repeat(np.arange(5), 2))
  for seed in (7, 8):
    returns = metrics['avg_return'][metrics['seed'] == seed]
    assert math.isclose(
      per_run[f'seed {seed}'], np.nanmean(returns), rel_tol=1e-6
    )
  assert 'per run: seed 7: ' in stdout
  assert_png(out / 'returns.png')
  # The live curves: the same numbers, a curve per seed.
  board, history = tensorboard_curves(out / 'tensorboard'), wandb_history(out)
  for seed in (7, 8):
    episodes = metrics['episodes'][metrics['seed'] == seed]
    assert [board[f'episodes/seed_{seed}'][s] for s in range(5)] == list(
      episodes
    )
    assert [history[s][f'episodes/seed_{seed}'] for s in range(5)] == list(
      episodes
    )


# Slow (moved to `make test-slow` 2026-12-04 for the 8-minute default run; the
# default run keeps the other refusals of a resume: changed settings, a
# finished run)
@pytest.mark.slow
def test_resuming_a_checkpoint_of_other_shapes_is_one_error_line(
  run_cli, tmp_path
):
  """As a run written before the seed axis: its checkpoint's arrays have
  other shapes than the resumed run's (here: its record says 2 seeds)."""
  out = tmp_path / 'out'
  ok(
    run_cli(
      'eval',
      *EVAL_TINY,
      '--out',
      str(out),
      '--rule',
      'actor_critic',
    )
  )
  record = json.loads((out / 'run.json').read_text())
  record['settings']['num_seeds'] = 2
  (out / 'run.json').write_text(json.dumps(record))
  result = run_cli(
    'eval',
    '--resume',
    str(out),
    '--steps',
    '6',
    '--no-progress',
  )
  assert result.returncode == 2, result.stderr[-4000:]
  assert result.stderr.startswith(
    f'error: Checkpoint 5 in {out}/checkpoints cannot be resumed by this '
    "run: its acc_rewards has shape (1, 1, 2), this run's (1, 2, 2)."
  ), result.stderr[-4000:]
  assert result.stderr.count('\n') == 1, result.stderr[-4000:]  # No trace.


def test_eval_cli_rejects_bad_setting(run_main, tmp_path):
  """Exits non-zero before building anything heavy, naming the setting."""
  result = run_main(
    'eval',
    '--batch-size',
    '5',
    '--replay-ratio',
    '2',
    '--steps',
    '1',
    '--no-progress',
    '--out',
    str(tmp_path / 'out'),
  )
  assert result.returncode != 0, result.stdout
  assert 'batch_size' in result.stderr, result.stderr[-4000:]
  assert 'Traceback' not in result.stderr, result.stderr[-4000:]
  assert not (tmp_path / 'out' / 'metrics.csv').exists()


@pytest.mark.parametrize(
  'module, args, setting',
  [
    ('eval', ['--buffer-capacity', '2'], 'buffer_capacity'),
    ('eval', ['--rule', 'actor_critic', '--rollout-len', '1'], 'rollout_len'),
    ('meta_train', ['--rollout-len', '1'], 'rollout_len'),
    ('meta_train', ['--num-agents', '0'], 'num_agents'),
    (
      'meta_train',
      ['--tasks', 'catch', 'catch[size=3]'],
      "Unknown CatchJittableEnvironment setting(s) 'size'",
    ),
    (
      'meta_train',
      [
        '--tasks',
        'catch',
        'gymnax:CartPole-v1',
        'catch[rows=6]',
        '--num-agents',
        '2',
      ],
      'num_agents=2 is smaller than',
    ),
    ('eval', ['--steps-per-call', '0'], 'steps_per_call'),
    ('meta_train', ['--steps-per-call', '0'], 'steps_per_call'),
    (
      'eval',
      ['--rule', 'actor_critic', '--weights', 'w.npz'],
      "--weights is for the disco_103 rule; rule 'actor_critic'",
    ),
    (
      'eval',
      ['--num-processes', '2', '--process-id', '0'],
      'needs a coordinator address',
    ),
    (
      'meta_train',
      ['--num-processes', '2', '--coordinator-address', '127.0.0.1:1'],
      'process_id must be in [0, 2)',
    ),
    (
      'eval',
      ['--learning-rate', 'nan'],
      'learning_rate must be a finite number > 0, got nan',
    ),
    (
      'eval',
      ['--learning-rate', '-1'],
      'learning_rate must be a finite number > 0, got -1.0',
    ),
    (
      'meta_train',
      ['--learning-rate', 'nan'],
      'learning_rate must be a finite number > 0, got nan',
    ),
    (
      'meta_train',
      ['--meta-learning-rate', '-0.1'],
      'meta_learning_rate must be a finite number > 0, got -0.1',
    ),
  ],
)
def test_cli_main_rejects_bad_settings(module, args, setting, tmp_path, capsys):
  """The same checks in-process (`main` returns the exit status): fast."""
  main = _main(module)
  status = main(
    [*args, '--steps', '1', '--no-progress', '--out', str(tmp_path / 'out')]
  )
  assert status == 2
  err = capsys.readouterr().err
  assert err.startswith('error: ') and err.count('\n') == 1, err
  assert setting in err
  assert not (tmp_path / 'out').exists()


# ----------------------------------------------------------------------------
# Interrupt and resume, output directories, weights files, flags.


def _rows_written(path) -> int:
  try:
    return max(0, len(pathlib.Path(path).read_text().splitlines()) - 1)
  except FileNotFoundError:
    return 0


def _timing_free_metrics(path):
  from disco_rl.runtime import metrics as metrics_lib  # pylint: disable=g-import-not-at-top

  return metrics_lib.read_table(path).drop(columns=['rss_mb', 'time_s'])


INTERRUPTED_RUNS = {
  'eval': [*EVAL_TINY, '--rule', 'actor_critic', '--steps-per-call', '2'],
  'meta_train': [*META_TINY, '--steps-per-call', '1'],
}


@pytest.mark.parametrize(
  'module, sig',
  [
    # Both slow (the eval case since 2026-12-04, for the 8-minute default
    # run): the default run interrupts and resumes the eval CLI in two
    # processes (test_cli_multiprocess.py) and a Trainer in one
    # (test_jobs_trainer.py's exact-resume tests).
    pytest.param('eval', signal.SIGTERM, marks=pytest.mark.slow),
    pytest.param('meta_train', signal.SIGINT, marks=pytest.mark.slow),
  ],
)
def test_cli_interrupt_then_resume_equals_a_straight_run(
  module, sig, run_cli, tmp_path
):
  """A signal stops the run with its outputs saved; --resume finishes it,
  giving the metrics rows (and rule) of a run never interrupted."""
  out = tmp_path / 'interrupted'
  proc = subprocess.Popen(
    [
      *disco_rl_command(_subcommand(module)),
      *INTERRUPTED_RUNS[module],
      '--steps',
      '100000',
      '--out',
      str(out),
    ],
    cwd=tmp_path,
    env=_cli_env(),
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )
  try:
    deadline = time.monotonic() + TIMEOUT_S
    while _rows_written(out / 'metrics.csv') < 3:
      assert proc.poll() is None and time.monotonic() < deadline, (
        proc.communicate()
      )
      time.sleep(0.2)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
  finally:
    proc.kill()
  assert proc.returncode == 128 + sig.value, stderr[-4000:]
  assert f'interrupted by {sig.name} after step' in stdout
  assert f'--resume {out}' in stdout
  summary = summary_of(stdout)
  assert summary['interrupted'] == sig.name
  done = summary['stopped_at_step']
  assert done >= 1 and (out / 'checkpoints').is_dir()
  assert summary['checkpoint_step'] == _rows_written(out / 'metrics.csv')
  if module == 'eval':
    assert_png(out / 'returns.png')
  else:  # The rule learned so far is saved, in the Disco103 layout.
    weights.load_disco_103(
      out / 'update_rule_params.npz', download=False, check_architecture=True
    )

  target = str(done + 3)
  ok(
    run_cli(
      _subcommand(module),
      '--resume',
      str(out),
      '--steps',
      target,
      '--no-progress',
    )
  )
  straight = tmp_path / 'straight'
  ok(
    run_cli(
      _subcommand(module),
      *INTERRUPTED_RUNS[module],
      '--steps',
      target,
      '--out',
      str(straight),
    )
  )
  resumed, expected = (
    _timing_free_metrics(out / 'metrics.csv'),
    _timing_free_metrics(straight / 'metrics.csv'),
  )
  assert list(resumed['step']) == list(range(len(expected)))
  assert resumed.equals(expected)
  if module == 'meta_train':
    rule, rule_straight = (
      np.load(out / 'update_rule_params.npz'),
      np.load(straight / 'update_rule_params.npz'),
    )
    for key in rule_straight.files:
      np.testing.assert_array_equal(rule[key], rule_straight[key])


def _main(module):
  return importlib.import_module(f'disco_rl.cli.{module}').main


def _subcommand(module: str) -> str:
  """The `disco-rl` subcommand of the command's module (meta_train ->
  meta-train)."""
  return module.replace('_', '-')


def _error_of(capsys) -> str:
  err = capsys.readouterr().err
  assert err.startswith('error: ') and err.count('\n') == 1, err
  return err[len('error: ') :].strip()


@pytest.mark.parametrize('module', ['eval', 'meta_train'])
def test_cli_refuses_unusable_output_dirs(module, tmp_path, capsys):
  main = _main(module)
  a_file = tmp_path / 'file'
  a_file.write_text('x')
  cases = [
    (['--out', str(a_file)], f'output directory {a_file} is a file'),
    (['--out', str(a_file / 'sub')], f'cannot be created: {a_file} is a file'),
    (['--out', '/sys/disco_rl_run'], 'inside a system directory'),
    (['--out', '/proc/disco_rl_run'], 'inside a system directory'),
    (['--resume', str(tmp_path / 'none')], 'Nothing to resume in'),
    (
      ['--resume', str(tmp_path / 'none'), '--overwrite'],
      '--resume and --overwrite exclude each other',
    ),
    (
      ['--resume', str(tmp_path), '--out', str(tmp_path)],
      '--resume DIR is the run directory: leave out --out',
    ),
    (
      ['--keep-checkpoints', '0', '--out', str(tmp_path / 'k')],
      '--keep-checkpoints must be >= 1, got 0',
    ),
  ]
  for args, message in cases:
    assert main([*args, '--steps', '1', '--no-progress']) == 2, args
    assert message in _error_of(capsys), args
  assert sorted(p.name for p in tmp_path.iterdir()) == ['file']


def test_eval_cli_never_overwrites_a_run_unless_told(
  tmp_path, capsys, fast_compile
):
  out = tmp_path / 'run'
  tiny = [*EVAL_TINY, '--rule', 'actor_critic', '--out', str(out)]
  assert _main('eval')(tiny) == 0
  capsys.readouterr()
  before = (out / 'metrics.csv').read_bytes()
  assert _main('eval')(tiny) == 2
  assert 'already holds a run' in _error_of(capsys)
  assert (out / 'metrics.csv').read_bytes() == before
  # A resumed run keeps its settings: another seed is refused.
  assert _main('eval')(['--resume', str(out), '--seed', '5']) == 2
  assert 'these differ: seed: saved 0, given 5' in _error_of(capsys)
  assert _main('eval')(['--resume', str(out), '--weights', 'w.npz']) == 2
  assert '--weights cannot be given with --resume' in _error_of(capsys)
  # Resuming the finished run runs nothing and says so.
  assert _main('eval')(['--resume', str(out), '--no-progress']) == 0
  stdout = capsys.readouterr().out
  assert 'steps/s: n/a (no step ran in this call)' in stdout
  assert summary_of(stdout)['completed']
  assert (out / 'metrics.csv').read_bytes() == before
  assert _main('eval')([*tiny, '--overwrite', '--steps', '2']) == 0
  assert len(metrics_lib.read_metrics(out / 'metrics.csv')['step']) == 3


def test_a_resumed_run_reads_and_checks_its_settings_once(
  tmp_path, capsys, monkeypatch, fast_compile
):
  """One record read, one config made and checked, whatever the flags."""
  out = tmp_path / 'run'
  assert (
    _main('eval')([*EVAL_TINY, '--rule', 'actor_critic', '--out', str(out)])
    == 0
  )
  checks, reads = [], []
  check = config_lib.RunConfig._check  # pylint: disable=protected-access
  read_text = pathlib.Path.read_text

  def counted_check(self):
    checks.append(type(self).__name__)
    return check(self)

  def counted_read(path, *args, **kwargs):
    if path.name == 'run.json':
      reads.append(path)
    return read_text(path, *args, **kwargs)

  monkeypatch.setattr(config_lib.RunConfig, '_check', counted_check)
  monkeypatch.setattr(pathlib.Path, 'read_text', counted_read)
  assert (
    _main('eval')(
      [
        '--resume',
        str(out),
        '--steps',
        '6',
        '--rule',
        'actor_critic',
        '--no-progress',
      ]
    )
    == 0
  )
  assert checks == ['EvalConfig'] and reads == [out / 'run.json']
  capsys.readouterr()
  assert len(metrics_lib.read_metrics(out / 'metrics.csv')['step']) == 7


def test_a_resume_without_keep_checkpoints_keeps_as_many_as_the_run_holds(
  tmp_path, capsys, fast_compile
):
  """A run started with --keep-checkpoints 4 holds 4; resumed without the
  flag it still keeps 4 (the default, 3, would delete one), the newest;
  resumed with the flag, the flag's number."""
  out = tmp_path / 'run'
  common = ['--rule', 'actor_critic', '--no-progress']

  def held() -> list[int]:
    return sorted(
      int(p.name) for p in (out / 'checkpoints').iterdir() if p.name.isdigit()
    )

  started = [*EVAL_TINY, *common, '--checkpoint-every', '1']
  started += ['--steps-per-call', '1']
  assert (
    _main('eval')([*started, '--keep-checkpoints', '4', '--out', str(out)]) == 0
  )
  assert held() == [2, 3, 4, 5]
  resume = ['--resume', str(out), *common, '--checkpoint-every', '1']
  resume += ['--steps-per-call', '1']
  assert _main('eval')([*resume, '--steps', '6']) == 0
  assert held() == [4, 5, 6, 7]
  assert (
    _main('eval')([*resume, '--steps', '7', '--keep-checkpoints', '2']) == 0
  )
  assert held() == [7, 8]
  capsys.readouterr()


def _broken_weights(tmp_path, disco_103_path):
  """(description, path) of files a user might pass by mistake."""
  truncated = tmp_path / 'truncated.npz'
  truncated.write_bytes(pathlib.Path(disco_103_path).read_bytes()[:4096])
  with np.load(disco_103_path) as full:
    kept = {k: full[k] for k in list(full.files)[1:]}
  missing_leaf = tmp_path / 'missing_leaf.npz'
  np.savez(missing_leaf, **kept)
  return [
    ('missing', tmp_path / 'missing.npz', 'file not found'),
    ('truncated', truncated, 'not a valid npz file'),
    ('wrong tree', missing_leaf, 'missing_leaf.npz'),
  ]


@pytest.mark.weights
@pytest.mark.parametrize(
  'module, extra', [('eval', []), ('meta_train', ['--init', 'disco_103'])]
)
def test_cli_bad_weights_file_is_one_error_line(
  module, extra, tmp_path, capsys, monkeypatch, disco_103_path
):
  """Missing, truncated or mis-shaped: the same error as $DISCO_RL_WEIGHTS."""
  for what, path, fragment in _broken_weights(tmp_path, disco_103_path):
    out = tmp_path / f'out_{what.replace(" ", "_")}'
    status = _main(module)(
      [
        *extra,
        '--weights',
        str(path),
        '--out',
        str(out),
        '--steps',
        '1',
        '--no-progress',
      ]
    )
    assert status == 2, what
    flag_error = _error_of(capsys)
    assert fragment in flag_error and str(path.name) in flag_error, what
    assert not out.exists(), what
    if what == 'missing':
      continue  # $DISCO_RL_WEIGHTS names itself when it points nowhere.
    monkeypatch.setenv('DISCO_RL_WEIGHTS', str(path))
    status = _main(module)(
      [*extra, '--out', str(out), '--steps', '1', '--no-progress']
    )
    assert status == 2, what
    assert _error_of(capsys) == flag_error, what
    monkeypatch.setenv('DISCO_RL_WEIGHTS', str(disco_103_path))


# Slow (moved to `make test-slow` 2026-12-04 for the 8-minute default run; the
# default run reads a rule's sizes from its file (test_weights.py) and trains
# with a smaller rule (test_rule_sizes.py))
@pytest.mark.slow
def test_eval_cli_reads_a_smaller_rule_s_sizes_from_its_file(tmp_path, capsys):
  """A rule meta-trained here at another size runs with `--weights` alone
  (its sizes are read from the file and recorded in run.json);
  `--rule-sizes` that contradict the file, or sizes with no file, are one
  error line each."""
  sizes = dict(prediction_size=8, hidden_size=16, embedding_size=(8, 1))
  rule = disco.DiscoUpdateRule(
    **agent_lib.get_settings_disco(sizes).update_rule
  )
  path = tmp_path / 'small_rule.npz'
  weights.save_params(rule.init_params(jax.random.PRNGKey(0))[0], path)
  out = tmp_path / 'run'
  assert (
    _main('eval')([*EVAL_TINY, '--weights', str(path), '--out', str(out)]) == 0
  )
  capsys.readouterr()
  record = json.loads((out / 'run.json').read_text())
  assert disco.as_sizes(record['settings']['rule_sizes']) == disco.as_sizes(
    sizes
  )
  metrics = metrics_lib.read_metrics(out / 'metrics.csv')
  assert np.isfinite(metrics['total_loss'][1:]).all()  # 0: filling replay.
  conflict = tmp_path / 'conflict'
  assert (
    _main('eval')(
      [
        *EVAL_TINY,
        '--weights',
        str(path),
        '--rule-sizes',
        'prediction_size=16',
        '--out',
        str(conflict),
      ]
    )
    == 2
  )
  assert _error_of(capsys) == (
    '--rule-sizes prediction_size=16 differ from the sizes of the --weights '
    f'file {path} (prediction_size=8,hidden_size=16,embedding_size=8x1): '
    "leave out --rule-sizes (a rule file's sizes are read from it)."
  )
  assert not conflict.exists()
  no_file = tmp_path / 'no_file'
  assert (
    _main('eval')(
      [*EVAL_TINY, '--rule-sizes', 'prediction_size=8', '--out', str(no_file)]
    )
    == 2
  )
  assert _error_of(capsys) == (
    'rule_sizes prediction_size=8: Disco103 has its own sizes, so a rule of '
    'these sizes needs its parameters (--weights FILE, or rule_params=).'
  )
  assert not (no_file / 'run.json').exists()


def test_meta_train_cli_weights_need_init_disco_103(tmp_path, capsys):
  status = _main('meta_train')(
    ['--weights', 'w.npz', '--out', str(tmp_path / 'o'), '--steps', '1']
  )
  assert status == 2
  assert (
    '--weights is the rule to fine-tune: it needs --init disco_103, '
    'got --init random'
  ) in _error_of(capsys)


@pytest.mark.parametrize(
  'module, flags, expected',
  [
    (
      'eval',
      [
        '--seed',
        '7',
        '--rows',
        '5',
        '--columns',
        '6',
        '--learning-rate',
        '0.003',
        '--num-devices',
        '1',
        '--dense',
        '32,16',
        '--steps',
        '12',
        '--precision',
        'bfloat16',
        '--no-debug-checks',
      ],
      dict(
        seed=7,
        env_kwargs=dict(rows=5, columns=6),
        learning_rate=0.003,
        num_devices=1,
        dense=(32, 16),
        num_steps=12,
        precision='bfloat16',
        debug_checks=False,
      ),
    ),
    (
      'meta_train',
      [
        '--seed',
        '3',
        '--rule-seed',
        '9',
        '--num-inner-steps',
        '4',
        '--learning-rate',
        '0.001',
        '--meta-learning-rate',
        '0.0002',
        '--rows',
        '6',
        '--columns',
        '7',
        '--init',
        'disco_103',
        '--num-devices',
        '2',
        '--value-dense',
        '64',
      ],
      dict(
        seed=3,
        rule_seed=9,
        num_inner_steps=4,
        learning_rate=0.001,
        meta_learning_rate=0.0002,
        tasks=('catch[rows=6,columns=7]',),
        init='disco_103',
        num_devices=2,
        value_dense=(64,),
      ),
    ),
    (
      'meta_train',
      [
        '--tasks',
        'catch[rows=7,columns=5]',
        'gymnax:DeepSea-bsuite[size=8]',
        '--num-agents',
        '4',
      ],
      dict(
        tasks=('catch[rows=7,columns=5]', 'gymnax:DeepSea-bsuite[size=8]'),
        num_agents=4,
      ),
    ),
  ],
)
def test_cli_flags_reach_the_settings(module, flags, expected):
  config_cls = (
    config_lib.EvalConfig if module == 'eval' else meta_config.MetaTrainConfig
  )
  parser = common.make_parser('test', config_cls, 'runs/x')
  values, shorthands = flags_lib.values_from_flags(
    config_cls, parser.parse_args(flags)
  )
  config = config_cls(**values)
  for name, value in expected.items():
    assert getattr(config, name) == value, name
  # Everything else keeps its default.
  default = config_cls()
  for name in (f.name for f in dataclasses.fields(default)):
    if name not in expected:
      assert getattr(config, name) == getattr(default, name), name
  assert (
    common.given_flags(parser, flags) - {'rows', 'columns'} | shorthands
  ) == set(expected)


def test_meta_train_preset_flag_and_overrides(tmp_path, capsys, monkeypatch):
  """--preset paper gives the paper's settings; flags given override them."""
  from disco_rl.cli import meta_train as meta_train_command  # pylint: disable=g-import-not-at-top

  seen = {}

  class Stop(Exception):
    pass

  def fake_trainer(config, *args, **kwargs):
    del args, kwargs
    seen['config'] = config
    raise Stop

  from disco_rl.jobs import trainer  # pylint: disable=g-import-not-at-top

  monkeypatch.setattr(trainer, 'Trainer', fake_trainer)
  with pytest.raises(Stop):
    _main('meta_train')(
      [
        '--preset',
        'paper',
        '--num-agents',
        '2',
        '--out',
        str(tmp_path / 'o'),
        '--no-progress',
      ]
    )
  paper = meta_train_command.PRESETS['paper']
  assert seen['config'] == meta_config.MetaTrainConfig(
    **{**paper, 'num_agents': 2}
  )
  # Flags are checked with the preset, not alone: 8 tasks need the paper's
  # 8 agents (the defaults' 2 would be too few).
  suite = [f'catch[rows={r}]' for r in range(5, 13)]
  with pytest.raises(Stop):
    _main('meta_train')(
      [
        '--preset',
        'paper',
        '--tasks',
        *suite,
        '--out',
        str(tmp_path / 'o8'),
        '--no-progress',
      ]
    )
  assert seen['config'] == meta_config.MetaTrainConfig(
    **paper, tasks=tuple(suite)
  )
  assert (
    _main('meta_train')(
      ['--preset', 'paper', '--resume', str(tmp_path / 'none')]
    )
    == 2
  )
  assert '--preset cannot be given with --resume' in _error_of(capsys)


# ----------------------------------------------------------------------------
# Signals whenever they come, and learning that diverges.


def _start(module, args, out, tmp_path, cache=None):
  """The CLI in a process of its own (no compilation cache unless given)."""
  env = dict(
    os.environ,
    JAX_PLATFORMS='cpu',
    MPLBACKEND='Agg',
    XLA_FLAGS=xla_flags(num_devices=1),
    JAX_DISABLE_MOST_OPTIMIZATIONS='1',
  )
  env.update(cache or {})
  return subprocess.Popen(
    [
      *disco_rl_command(_subcommand(module)),
      *args,
      '--out',
      str(out),
    ],
    cwd=tmp_path,
    env=env,
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )


def _when_settings_written(proc, out):
  """Waits until the run's record exists: the Trainer is built and `fit`
  compiles the run program next."""
  deadline = time.monotonic() + TIMEOUT_S
  while not (out / 'run.json').is_file():
    assert proc.poll() is None and time.monotonic() < deadline, (
      proc.communicate()
    )
    time.sleep(0.02)


@pytest.mark.parametrize(
  'module, sig',
  [
    ('eval', signal.SIGINT),
    # Slow (~50 s: a meta-training compile); the same Trainer.fit path.
    pytest.param('meta_train', signal.SIGTERM, marks=pytest.mark.slow),
  ],
)
def test_a_signal_during_compilation_stops_before_the_first_step(
  module, sig, tmp_path
):
  out = tmp_path / 'run'
  proc = _start(
    module, [*INTERRUPTED_RUNS[module], '--steps', '1'], out, tmp_path
  )
  try:
    _when_settings_written(proc, out)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
  finally:
    proc.kill()
  assert proc.returncode == 128 + sig.value, stderr[-4000:]
  assert 'Traceback' not in stderr, stderr[-4000:]
  summary = summary_of(stdout)
  assert summary['interrupted'] == sig.name and not summary['completed']
  assert summary['stopped_at_step'] == 0 and summary['checkpoint_step'] == 0
  assert (
    f'interrupted by {sig.name} after step 0: checkpoint, metrics and '
    f'outputs saved; continue with --resume {out}' in stdout
  )
  assert _rows_written(out / 'metrics.csv') == 0


def test_a_second_signal_stops_at_once_with_one_error_line(tmp_path):
  """Both signals come while the run program compiles (one C++ call, during
  which Python's own handler would see the two as one)."""
  out = tmp_path / 'run'
  proc = _start(
    'eval', [*INTERRUPTED_RUNS['eval'], '--steps', '100000'], out, tmp_path
  )
  try:
    _when_settings_written(proc, out)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
  finally:
    proc.kill()
  assert proc.returncode == 128 + signal.SIGINT.value, stderr[-4000:]
  assert 'Traceback' not in stderr, stderr[-4000:]
  assert stderr.strip().splitlines()[-1] == (
    'error: stopped at once by a second SIGINT; the run keeps its last '
    'checkpoint (continue it with --resume)'
  ), stdout[-2000:]


def test_a_diverging_run_stops_with_one_error_line(run_main, tmp_path):
  result = run_main(
    'eval',
    *EVAL_TINY,
    '--rule',
    'actor_critic',
    '--learning-rate',
    '1e30',
    '--no-debug-checks',
    '--steps',
    '20',
    '--out',
    str(tmp_path / 'out'),
  )
  assert result.returncode == 2, result.stdout[-2000:]
  err = result.stderr
  assert err.startswith('error: learning diverged at loop step ') and (
    err.count('\n') == 1
  ), err[-2000:]
  assert 'total_loss = nan' in err
  assert err.endswith('Try a smaller learning_rate (--learning-rate).\n')


@pytest.mark.parametrize(
  'module', ['eval', 'meta_train', 'export_rule', 'probe_rule', 'study']
)
def test_help_names_the_command_as_users_type_it(module, capsys):
  """`python -m disco_rl.cli.MODULE --help` names that; the console
  script passes its own spelling (`disco-rl meta-train`; run as users
  type it in test_cli_main.py)."""
  script = f'disco-rl {_subcommand(module)}'
  for prog, given in (
    (f'python -m disco_rl.cli.{module}', {}),  # The default.
    (script, {'prog': script}),
  ):
    with pytest.raises(SystemExit) as exit_info:
      _main(module)(['--help'], **given)
    assert exit_info.value.code == 0
    usage = capsys.readouterr().out
    assert usage.startswith(f'usage: {prog} '), usage[:200]
