# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Runs the notebooks in colabs/ headless (papermill) with tiny settings.

Each run starts a fresh Jupyter kernel, so the number of CPU devices it sees
is set through XLA_FLAGS in the environment it inherits, whatever this
process has already initialised. Compilation dominates the run time, so the
kernels run with XLA's expensive optimisations off and share one persistent
JAX compilation cache for the session with the CLI runs of test_examples.py
(see `fast_jax_env`).
"""

import math
import pathlib
import re

import nbformat
import numpy as np
import papermill
import pytest
from smoke_env import META_PLOTS
from smoke_env import fast_jax_env

from disco_rl import weights
from disco_rl.runtime import metrics as metrics_lib

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
COLABS = REPO_ROOT / 'colabs'
PNG_MAGIC = b'\x89PNG\r\n\x1a\n'
# A run that hangs (e.g. a kernel waiting on a download) fails instead.
CELL_TIMEOUT_S = 1800

# Papermill passes a tuple as text ('(16,)'), a list as a list: both are used.
EVAL_TINY = dict(
  num_steps=4,
  replay_ratio=2,
  rollout_len=6,
  dense=(16,),
  model_lstm_size=8,
  model_head_hiddens=[8],
)
# Per device count: 2 environments per device, a learner batch of 4 and a
# buffer of 8 trajectories per device.
EVAL_SPLIT = {
  1: dict(batch_size=4, buffer_capacity=8),
  2: dict(batch_size=8, buffer_capacity=16),
}
# One agent update per meta-step (the notebook's default is 2): a smaller
# program to trace and compile; the paper section has its own.
META_TINY = dict(
  num_steps=3,
  num_agents=2,
  batch_size_per_device=2,
  rollout_len=3,
  dense=[16],
  model_lstm_size=8,
  model_head_hiddens=(8,),
  value_dense=[8],
  num_inner_steps=1,
)
# The paper's recipe on a two-task suite (Catch and CartPole): two meta-steps
# of two agent updates, agents renewed after four updates (the second step).
META_PAPER_TINY = dict(
  paper_steps=2,
  paper_num_agents=2,
  paper_inner_steps=2,
  paper_lifetime=4,
  paper_tasks=('catch[rows=5,columns=5]', 'gymnax:CartPole-v1'),
)


@pytest.fixture
def execute(tmp_path):
  """`execute(name, parameters, num_devices, weights_file=None)`.

  Runs colabs/NAME.ipynb in a new kernel on `num_devices` CPU devices and
  returns the executed notebook. The environment the kernel inherits is set
  only around the call, so this process (which may not have initialised JAX
  yet) keeps its own.
  """

  def run(name: str, parameters: dict, num_devices: int, weights_file=None):
    env = dict(
      fast_jax_env(num_devices=num_devices),
      JAX_PLATFORMS='cpu',
      MPLBACKEND='Agg',
    )
    if weights_file is not None:
      env[weights.ENV_WEIGHTS] = str(weights_file)
    executed = tmp_path / f'{name}.executed.ipynb'
    with pytest.MonkeyPatch.context() as patch:
      for key, value in env.items():
        patch.setenv(key, value)
      nb = papermill.execute_notebook(
        str(COLABS / f'{name}.ipynb'),
        str(executed),
        parameters=parameters,
        kernel_name='python3',
        cwd=str(tmp_path),
        progress_bar=False,
        execution_timeout=CELL_TIMEOUT_S,
      )
    nbformat.validate(nbformat.read(str(executed), as_version=4))
    return nb

  return run


def stdout_of(nb, cell_id: str) -> str:
  """What a cell printed on stdout."""
  cell = next(c for c in nb.cells if c.get('id') == cell_id)
  return ''.join(
    o.get('text', '')
    for o in cell.get('outputs', [])
    if o.get('output_type') == 'stream' and o.get('name') == 'stdout'
  )


def images_of(nb, cell_id: str) -> int:
  cell = next(c for c in nb.cells if c.get('id') == cell_id)
  return sum('image/png' in o.get('data', {}) for o in cell.get('outputs', []))


def assert_png(path: pathlib.Path):
  assert path.is_file(), path
  data = path.read_bytes()
  assert data[:8] == PNG_MAGIC and len(data) > 1000, path


def number_after(text: str, label: str) -> float:
  match = re.search(re.escape(label) + r'\s*(-?[0-9.]+|nan)', text)
  assert match, f'{label!r} not found in:\n{text}'
  return float(match.group(1))


# ----------------------------------------------------------------------------
# The committed notebooks themselves.


@pytest.mark.parametrize('name', ['eval', 'meta_train'])
def test_notebook_is_clean(name):
  """Valid nbformat 4, python3 kernel, a parameters cell, no outputs."""
  nb = nbformat.read(str(COLABS / f'{name}.ipynb'), as_version=4)
  nbformat.validate(nb)
  assert nb.nbformat == 4
  assert nb.metadata.kernelspec.name == 'python3'
  tagged = [c for c in nb.cells if 'parameters' in c.metadata.get('tags', [])]
  assert len(tagged) == 1 and tagged[0].cell_type == 'code'
  for cell in nb.cells:
    if cell.cell_type == 'code':
      assert not cell.outputs and cell.execution_count is None, cell.id
  # Every parameter the tests override exists in the parameters cell.
  declared = papermill.inspect_notebook(str(COLABS / f'{name}.ipynb'))
  overridden = (
    dict(EVAL_TINY, **EVAL_SPLIT[1], output_dir='', weights_path='')
    if name == 'eval'
    else dict(META_TINY, output_dir='')
  )
  assert set(overridden) <= set(declared), set(overridden) - set(declared)


# ----------------------------------------------------------------------------
# Eval notebook: Disco103 training on jittable Catch.


@pytest.mark.weights
# Two devices: slow (the default run covers both loops on 2 devices in
# test_runtime_multiprocess.py, the notebook on 1).
@pytest.mark.parametrize(
  'num_devices', [1, pytest.param(2, marks=pytest.mark.slow)]
)
# On the worker that runs test_examples.py's eval CLI of the same settings,
# after it: the program is then read from the session's compilation cache
# (run at once on two workers, both compiled it).
@pytest.mark.xdist_group('tiny_eval_programs')
def test_eval_notebook(
  num_devices, tmp_path, execute, disco_103_path, disco_103_params
):
  out = tmp_path / 'out'
  params = dict(
    EVAL_TINY,
    **EVAL_SPLIT[num_devices],
    output_dir=str(out),
    weights_path=str(disco_103_path),
  )
  nb = execute('eval', params, num_devices, weights_file=disco_103_path)

  # Weights: the printed counts are those of the file.
  leaves = [
    np.asarray(x) for m in disco_103_params.values() for x in m.values()
  ]
  printed = stdout_of(nb, 'load-weights')
  assert f'{len(leaves)} tensors' in printed, printed
  assert f'{sum(x.size for x in leaves):,} parameters' in printed, printed
  assert 'same tree' in stdout_of(nb, 'check-specs')
  # The trainer's job (`trainer.job`) acts compiled on the devices.
  printed = stdout_of(nb, 'build-agent')
  assert 'job: eval (acting compiled on the devices)' in printed, printed

  # Devices: environments, buffer and batch split evenly.
  printed = stdout_of(nb, 'devices')
  assert f'training on {num_devices} device(s)' in printed, printed
  assert (
    'runs 2 environment(s), stores up to 8 trajectories and learns '
    'from 4 per step'
  ) in printed, printed

  # Metrics: one row of scalars per iteration (and seed: one here);
  # num_steps counts learner steps, after replay_ratio - 1 iterations that
  # only fill the buffer.
  metrics = metrics_lib.read_metrics(out / 'metrics.csv')
  steps = params['num_steps'] + params['replay_ratio'] - 1
  num_envs = params['batch_size'] // params['replay_ratio']
  learner_keys = (
    'total_loss',
    'global_gradient_norm',
    'global_update_norm',
    'entropy',
    'pi_loss',
    'q_loss',
    'aux_kl_loss',
    'pi_hat_entropy',
  )
  assert list(metrics)[:7] == [
    'step',
    'seed',
    'learning_rate',
    'env_steps',
    'episodes',
    'avg_return',
    'learned',
  ]
  assert len(set(metrics['seed'])) == 1  # One run.
  assert set(learner_keys) <= set(metrics), sorted(metrics)
  assert all(len(v) == steps for v in metrics.values())
  np.testing.assert_array_equal(metrics['step'], np.arange(steps))
  np.testing.assert_array_equal(
    metrics['env_steps'],
    np.arange(1, steps + 1) * num_envs * params['rollout_len'],
  )
  # Each device's buffer holds a learner batch after the second rollout.
  np.testing.assert_array_equal(metrics['learned'], [0] + [1] * (steps - 1))
  learned = metrics['learned'] == 1
  for key in learner_keys:
    assert np.isfinite(metrics[key][learned]).all(), (key, metrics[key])
    assert np.isnan(metrics[key][~learned]).all(), (key, metrics[key])
  ended = metrics['episodes'] > 0
  assert ended.any(), metrics['episodes']
  returns = metrics['avg_return']
  assert np.isfinite(returns[ended]).all() and np.isnan(returns[~ended]).all()
  assert (np.abs(returns[ended]) <= 1).all(), returns  # Catch: +1 or -1.

  # The devices' copies of the agent agree after the learner steps.
  printed = stdout_of(nb, 'replicas')
  assert f'{num_devices} device(s)' in printed, printed
  assert number_after(printed, 'differ by at most') == 0.0, printed

  # Plot and final number.
  assert_png(out / 'returns.png')
  assert images_of(nb, 'plot') == 1
  printed = stdout_of(nb, 'plot')
  final = number_after(printed, f'over the last {steps} steps:')
  assert math.isclose(final, np.nanmean(returns), abs_tol=5e-4), printed


# The pixel families with the residual torso: Atari (on the host), Sokoban
# and Craftax from pixels. Slow (three notebooks); the default run trains
# each family from the CLI (test_environments_*.py).
@pytest.mark.slow
@pytest.mark.weights
@pytest.mark.parametrize(
  'env,env_kwargs,package',
  [
    ('envpool:Breakout-v5', {}, 'envpool'),
    ('jumanji:Sokoban-v0', {'generator': 'toy'}, 'jumanji'),
    ('craftax:Craftax-Classic-Pixels-v1', {}, 'craftax'),
  ],
)
def test_eval_notebook_trains_a_pixel_family(
  env, env_kwargs, package, tmp_path, execute, disco_103_path
):
  pytest.importorskip(package)
  out = tmp_path / 'out'
  params = dict(
    EVAL_TINY,
    **EVAL_SPLIT[1],
    output_dir=str(out),
    weights_path=str(disco_103_path),
    env=env,
    env_kwargs=env_kwargs,
    net='resnet',
    resnet_channels=(4,),
    resnet_blocks=1,
  )
  nb = execute('eval', params, 1, weights_file=disco_103_path)
  metrics = metrics_lib.read_metrics(out / 'metrics.csv')
  learned = metrics['learned'] == 1
  assert learned.sum() == params['num_steps']
  assert np.isfinite(metrics['total_loss'][learned]).all()
  printed = stdout_of(nb, 'build-agent')
  assert "'resnet_blocks': 1" in printed, printed
  acting = (
    'environments stepped on the host'
    if env.startswith('envpool:')
    else 'acting compiled on the devices'
  )
  assert f'job: eval ({acting})' in printed, printed
  assert_png(out / 'returns.png')


# ----------------------------------------------------------------------------
# Meta-training notebook: a random rule, meta-trained for two steps.


# The default run skips the notebook's last section (paper_steps=0): the
# paper's recipe on a task suite compiles a second meta-training program
# (about a minute); the default run covers that recipe through the Trainer
# in test_jobs_trainer.py (a two-task suite, per-agent Adam, lifetimes).
@pytest.mark.parametrize(
  'num_devices,paper',
  [
    (1, False),
    pytest.param(1, True, marks=pytest.mark.slow),
    pytest.param(2, True, marks=pytest.mark.slow),
  ],
)
# With test_examples.py's tiny meta-training CLI run (the same program), as
# the eval notebook above.
@pytest.mark.xdist_group('tiny_meta_run')
def test_meta_train_notebook(num_devices, paper, tmp_path, execute):
  out = tmp_path / 'out'
  params = dict(META_TINY, **META_PAPER_TINY, output_dir=str(out))
  if not paper:
    params['paper_steps'] = 0
  nb = execute('meta_train', params, num_devices)

  printed = stdout_of(nb, 'build-trainer')
  assert f'meta-training on {num_devices} device(s)' in printed, printed
  assert f'{2 * num_devices} in all' in printed, printed

  metrics = metrics_lib.read_metrics(out / 'metrics.csv')
  steps = params['num_steps']
  assert all(len(v) == steps for v in metrics.values())
  np.testing.assert_array_equal(metrics['step'], np.arange(steps))
  for key in META_PLOTS + ('pg_loss', 'reg_loss', 'agent_total_loss'):
    assert key in metrics, sorted(metrics)
  for key, values in metrics.items():
    assert np.isfinite(values).all(), (key, values)
  # Counts of +1/-1 rewards in an agent's training rollouts (mean over
  # agents and devices): at most one per step.
  most = (
    params['num_inner_steps']
    * params['batch_size_per_device']
    * params['rollout_len']
  )
  for key in ('pos_rewards', 'neg_rewards'):
    assert ((metrics[key] >= 0) & (metrics[key] <= most)).all(), metrics[key]
  assert (metrics['meta_grad_norm'] > 0).all()
  assert (metrics['meta_up_norm'] > 0).all()

  # Rule, meta-optimiser, agents and value functions: identical copies.
  printed = stdout_of(nb, 'replicas')
  assert f'ran on {num_devices} device(s)' in printed, printed
  spreads = re.findall(
    r'^(.*): copies differ by at most (\S+)$', printed, re.MULTILINE
  )
  assert len(spreads) == 4, printed
  assert all(float(value) == 0.0 for _, value in spreads), printed

  for key in META_PLOTS:
    assert_png(out / f'{key}.png')
  assert images_of(nb, 'plots') == len(META_PLOTS)

  # The saved rule loads back through the explicit path, with the
  # architecture check, although it is not the published file.
  path = out / 'update_rule_params.npz'
  assert path.is_file()
  assert 'loaded it back' in stdout_of(nb, 'save')
  loaded = weights.load_disco_103(path, download=False, check_architecture=True)
  weights.validate_params(loaded)
  assert all(np.isfinite(x).all() for m in loaded.values() for x in m.values())
  moved = number_after(stdout_of(nb, 'save'), 'rule parameters:')
  assert moved > 0

  # The paper's recipe: one agent per task, both tasks' curves, renewals.
  printed = stdout_of(nb, 'paper')
  if not paper:
    assert not printed and not (out / 'paper_recipe').exists(), printed
    return
  assert '1 agent(s) on catch[rows=5,columns=5]' in printed, printed
  assert '1 agent(s) on gymnax:CartPole-v1' in printed, printed
  assert 'agents renewed: 2;' in printed, printed  # Both, at the 2nd step.
  paper = metrics_lib.read_metrics(out / 'paper_recipe/metrics.csv')
  assert len(paper['step']) == 2
  for key in ('rewards_task0', 'rewards_task1', 'meta_loss'):
    assert np.isfinite(paper[key]).all(), (key, paper[key])
  # CartPole pays +1 per step until the pole falls.
  assert (paper['rewards_task1'] > 0).all(), paper['rewards_task1']
  assert images_of(nb, 'paper') == 2


# ----------------------------------------------------------------------------
# Eval notebook on a gymnax environment: a MinAtar game with the conv torso.


# 20 s of the default suite's 20 min (2026-12-03): in the slow target; the
# conv torso on MinAtar through the CLI and the eval notebook on Catch stay.
@pytest.mark.slow
# Slow (moved to `make test-slow` 2026-12-04 for the 8-minute default run; the
# default run runs the eval notebook on Catch and the conv torso on MinAtar
# through the CLI)
@pytest.mark.slow
def test_eval_notebook_on_minatar_with_the_conv_torso(tmp_path, execute):
  out = tmp_path / 'out'
  params = dict(
    EVAL_TINY,
    **EVAL_SPLIT[1],
    output_dir=str(out),
    rule='actor_critic',
    env='gymnax:Breakout-MinAtar',
    env_kwargs={'max_steps_in_episode': 6},
    net='conv',
    conv_channels=(4,),
  )
  nb = execute('eval', params, 1)
  assert "'conv_channels': (4,)" in stdout_of(nb, 'build-agent') or (
    "'conv_channels': [4]" in stdout_of(nb, 'build-agent')
  )
  metrics = metrics_lib.read_metrics(out / 'metrics.csv')
  assert len(metrics['step']) == params['num_steps'] + 1
  ended = metrics['episodes'] > 0
  assert ended.any(), metrics['episodes']  # Episodes of 6 steps end.
  assert np.isfinite(metrics['avg_return'][ended]).all()
  assert_png(out / 'returns.png')
