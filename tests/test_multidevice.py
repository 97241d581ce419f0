# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Multi-device behaviour on N forced CPU devices (each case a subprocess)."""

import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent


def run_check(name: str, num_devices: int, extra_env=None, timeout=900):
  env = dict(os.environ, **(extra_env or {}))
  env['XLA_FLAGS'] = (
    env.get('XLA_FLAGS', '') + ' --xla_force_host_platform'
    f'_device_count={num_devices}'
  ).strip()
  env['JAX_PLATFORMS'] = 'cpu'
  result = subprocess.run(
    [
      sys.executable,
      str(HERE / 'multidevice_checks.py'),
      name,
      str(num_devices),
    ],
    cwd=HERE,
    env=env,
    capture_output=True,
    text=True,
    timeout=timeout,
  )
  assert result.returncode == 0, (
    f'{name} on {num_devices} devices failed:\n{result.stdout}\n'
    f'{result.stderr[-6000:]}'
  )
  return result.stdout


@pytest.mark.golden
@pytest.mark.weights
def test_pmap_golden_two_devices(golden_dir, disco_103_path):
  import smoke_env  # pylint: disable=g-import-not-at-top

  # Compiled as the other golden tests are (tests/conftest.py).
  compile_env = {} if smoke_env.optimised_golden() else smoke_env.fast_jax_env()
  out = run_check(
    'pmap_golden',
    2,
    {
      **compile_env,
      'DISCO_RL_GOLDEN_DIR': str(golden_dir),
      'DISCO_RL_WEIGHTS': str(disco_103_path),
    },
  )
  assert 'pmap golden (current_jax): ok' in out
  assert 'pmap golden (jax_0.6.2): ok' in out


@pytest.mark.parametrize('num_devices', [2, 4])
def test_sharding(num_devices):
  assert 'sharding: ok' in run_check('sharding', num_devices)


# Two devices are covered by the pmap golden case; four here (slow: the
# default run covers 4 devices with test_sharding).
@pytest.mark.slow
@pytest.mark.parametrize('num_devices', [4])
def test_replicated_learner_stays_identical(num_devices):
  assert 'replicated learner: ok' in run_check(
    'replicated_learner', num_devices
  )


# Slow (moved to `make test-slow` 2026-12-04 for the 8-minute default run; the
# default run covers seeds in one program (test_jobs_eval's sweep) and
# sharding over 2 and 4 devices (test_sharding))
@pytest.mark.slow
def test_seeds_sharded_over_devices_run_as_alone_and_resume():
  import smoke_env  # pylint: disable=g-import-not-at-top

  assert 'seed shards: ok' in run_check(
    'seed_shards', 4, smoke_env.fast_jax_env()
  )
