# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Two processes on 127.0.0.1 run the jobs as one process with 2 devices.

The eval job (`make_eval`) and meta-training (`make_meta_train`, two task
groups), both in the slow run; the default run runs both commands in two
processes (test_cli_multiprocess.py).

Each process has one CPU device and joins the run through
`distributed.initialize` (gloo collectives); the learned agent and
rule parameters and every metric must equal those of one process with two
devices (tests/multiprocess_run.py does the runs).
"""

import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest
import smoke_env

HERE = pathlib.Path(__file__).resolve().parent
TIMEOUT_S = 900


def _env(num_devices: int) -> dict[str, str]:
  env = dict(os.environ)
  env.update(
    JAX_PLATFORMS='cpu',
    JAX_DISABLE_MOST_OPTIMIZATIONS='1',
    XLA_FLAGS=smoke_env.xla_flags(num_devices),
  )
  return env


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


def _start(out, num_devices, job, *args):
  return subprocess.Popen(
    [sys.executable, str(HERE / 'multiprocess_run.py'), job, str(out), *args],
    cwd=HERE,
    env=_env(num_devices),
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
  )


def _finish(processes):
  outputs = []
  try:
    for p in processes:
      outputs.append(p.communicate(timeout=TIMEOUT_S)[0])
  finally:
    for p in processes:
      if p.poll() is None:
        p.kill()
  for p, out in zip(processes, outputs, strict=False):
    assert p.returncode == 0, out[-6000:]
  return outputs


@pytest.mark.parametrize(
  'job',
  [
    # Both slow (eval since 2026-12-04, for the 8-minute default run): the
    # default run runs both commands in two processes, stopped and resumed
    # (test_cli_multiprocess.py). Meta-training here has two task groups
    # and compiles for minutes in each of the three processes.
    pytest.param('eval', marks=pytest.mark.slow),
    pytest.param('meta', marks=pytest.mark.slow),
  ],
)
def test_two_processes_equal_one_process_with_two_devices(job, tmp_path):
  single, multi = tmp_path / 'single.npz', tmp_path / 'multi.npz'
  (out,) = _finish([_start(single, 2, job)])
  assert 'process 0 of 1: done' in out
  address = f'127.0.0.1:{_free_port()}'
  outs = _finish(
    [_start(multi, 1, job, address, '2', str(i)) for i in range(2)]
  )
  assert 'process 0 of 2: done' in outs[0]
  assert 'process 1 of 2: done' in outs[1]

  a, b = np.load(single), np.load(multi)
  assert sorted(a.files) == sorted(b.files)
  if job == 'eval':
    assert any(k.startswith('agent') for k in a.files)
    assert 'eval_metrics/1/learned' in a.files
  else:
    assert any(k.startswith('rule') for k in a.files)
    assert 'meta_logs/pos_rewards' in a.files
    assert 'meta_logs/rewards_task1' in a.files  # Two task groups.
  for key in a.files:
    np.testing.assert_array_equal(a[key], b[key], err_msg=key)
