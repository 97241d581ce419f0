# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.runtime.mesh on this process's devices (one CPU by default).

Several devices and processes: test_multidevice.py and
test_runtime_multiprocess.py.
"""

import argparse

import jax
from jax.sharding import PartitionSpec as P
import numpy as np
import pytest

from disco_rl.cli import flags
from disco_rl.runtime import distributed
from disco_rl.runtime import mesh as devices


def test_pick_devices_takes_the_most_that_divide_every_share():
  picked = devices.pick_devices({'a': 6, 'b': 4})
  count = len(picked)
  assert 6 % count == 0 and 4 % count == 0
  assert picked == jax.devices()[:count]


def test_pick_devices_names_what_does_not_divide():
  if len(jax.devices()) < 2:
    with pytest.raises(ValueError, match='num_devices=2 but 1 devices'):
      devices.pick_devices({'batch_size': 6}, 2)
  with pytest.raises(ValueError, match='num_devices=0'):
    devices.pick_devices({'batch_size': 6}, 0)


def test_place_and_fetch_round_trip():
  mesh = devices.make_mesh(jax.devices()[:1])
  tree = {'w': np.arange(6.0, dtype=np.float32).reshape(1, 6)}
  per_device = devices.shardings(mesh, P(devices.AXIS))
  placed = devices.place(tree, per_device)
  assert placed['w'].sharding == per_device
  np.testing.assert_array_equal(devices.fetch(placed)['w'], tree['w'])
  replicated = devices.place(tree, devices.replicated(mesh))
  assert replicated['w'].sharding.is_fully_replicated


def test_distributed_config_reads_flags_then_environment(monkeypatch):
  monkeypatch.setenv(distributed.ENV_COORDINATOR, '127.0.0.1:1234')
  monkeypatch.setenv(distributed.ENV_NUM_PROCESSES, '2')
  monkeypatch.setenv(distributed.ENV_PROCESS_ID, '1')
  config = distributed.DistributedConfig.from_environment(process_id=0)
  assert config == distributed.DistributedConfig('127.0.0.1:1234', 2, 0)
  assert config.enabled
  monkeypatch.setenv(distributed.ENV_NUM_PROCESSES, 'two')
  with pytest.raises(ValueError, match="DISCO_RL_NUM_PROCESSES='two'"):
    distributed.DistributedConfig.from_environment()


def test_one_process_needs_no_initialisation():
  assert not distributed.initialize(distributed.DistributedConfig())
  assert not distributed.initialize(
    distributed.DistributedConfig(num_processes=1)
  )


@pytest.mark.parametrize(
  'config,fragment',
  [
    (
      distributed.DistributedConfig(num_processes=2, process_id=0),
      'needs a coordinator address',
    ),
    (
      distributed.DistributedConfig('127.0.0.1:1', 2, 2),
      r'process_id must be in \[0, 2\) with num_processes=2, got 2',
    ),
    (
      distributed.DistributedConfig('127.0.0.1:1', 2, None),
      'process_id must be in',
    ),
    (
      distributed.DistributedConfig('127.0.0.1:1', 2, 0, peer_timeout_s=1.0),
      r'peer_timeout_s must be a number of seconds >= 4 .*got 1.0 '
      r'\(--peer-timeout-s or \$DISCO_RL_PEER_TIMEOUT_S\)',
    ),
    (
      distributed.DistributedConfig(
        '127.0.0.1:1', 2, 0, peer_timeout_s=float('nan')
      ),
      'peer_timeout_s must be a number of seconds',
    ),
  ],
)
def test_bad_distributed_settings_are_named(config, fragment):
  with pytest.raises(ValueError, match=fragment):
    distributed.initialize(config)


def test_distributed_flags_reach_the_config(monkeypatch):
  monkeypatch.delenv(distributed.ENV_PROCESS_ID, raising=False)
  monkeypatch.setenv(distributed.ENV_NUM_PROCESSES, '3')
  parser = argparse.ArgumentParser()
  flags.add_distributed_flags(parser)
  args = parser.parse_args(
    ['--coordinator-address', '127.0.0.1:9', '--process-id', '2']
  )
  assert flags.distributed_config(args) == distributed.DistributedConfig(
    '127.0.0.1:9', 3, 2
  )
  # The peer timeout: default, from the environment, the flag winning.
  assert args.peer_timeout_s is None
  assert flags.distributed_config(args).peer_timeout_s == 60
  monkeypatch.setenv(distributed.ENV_PEER_TIMEOUT, '12.5')
  assert flags.distributed_config(args).peer_timeout_s == 12.5
  args = parser.parse_args(['--peer-timeout-s', '30'])
  assert flags.distributed_config(args).peer_timeout_s == 30
  monkeypatch.setenv(distributed.ENV_PEER_TIMEOUT, 'soon')
  with pytest.raises(ValueError, match="DISCO_RL_PEER_TIMEOUT_S='soon'"):
    distributed.DistributedConfig.from_environment()
