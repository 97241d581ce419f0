# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.loops.run_dir: when an output directory may be written."""

import json
import os
import tempfile

import pytest

from disco_rl.loops import config as config_lib
from disco_rl.loops import run_dir


def test_new_and_empty_directories_are_fine(tmp_path):
  path = run_dir.prepare(tmp_path / 'a' / 'b')
  assert path.is_dir() and path.is_absolute()
  (tmp_path / 'empty').mkdir()
  run_dir.prepare(tmp_path / 'empty')  # No run in it yet.


@pytest.mark.parametrize('make, fragment', [
    (lambda p: p.write_text('x') and p, 'is a file; expected a directory'),
    (lambda p: p.write_text('x') and p / 'sub', 'cannot be created: '),
    (lambda p: '/sys/kernel/disco_rl', 'inside a system directory'),
    (lambda p: '/proc', 'inside a system directory'),
    (lambda p: '/dev/shm/x', 'inside a system directory'),
])
def test_unusable_paths(tmp_path, make, fragment):
  path = make(tmp_path / 'f')
  with pytest.raises(ValueError, match=fragment):
    run_dir.prepare(path)


def test_unwritable_directory_is_named(tmp_path, monkeypatch):
  """Root writes everywhere, so the probe's failure is simulated here."""

  def refuse(*args, **kwargs):
    del args, kwargs
    raise PermissionError(13, 'Permission denied')

  monkeypatch.setattr(tempfile, 'TemporaryFile', refuse)
  with pytest.raises(ValueError, match=f'output directory {tmp_path}/new '
                     f'cannot be written: {tmp_path}: Permission denied'):
    run_dir.prepare(tmp_path / 'new')
  assert not (tmp_path / 'new').exists()


@pytest.mark.skipif(os.geteuid() == 0, reason='root writes everywhere')
def test_read_only_directory(tmp_path):
  locked = tmp_path / 'locked'
  locked.mkdir(mode=0o555)
  with pytest.raises(ValueError, match='cannot be written'):
    run_dir.prepare(locked / 'run')


def test_a_run_is_only_replaced_when_asked(tmp_path):
  path = run_dir.prepare(tmp_path / 'run')
  run_dir.write_settings(path, 'eval', config_lib.EvalConfig())
  (path / 'metrics.csv').write_text('step\n0\n')
  (path / 'checkpoints' / '5').mkdir(parents=True)
  (path / 'returns.png').write_bytes(b'png')
  (path / 'mine.txt').write_text('keep')
  assert run_dir.holds_run(path)
  with pytest.raises(ValueError, match='already holds a run'):
    run_dir.prepare(path)
  with pytest.raises(ValueError, match='overwrite and resume exclude'):
    run_dir.prepare(path, overwrite=True, resume=True)
  assert run_dir.prepare(path, resume=True) == path
  assert (path / 'metrics.csv').exists()
  # check() says the same and changes nothing.
  before = sorted(p.name for p in path.iterdir())
  with pytest.raises(ValueError, match='already holds a run'):
    run_dir.check(path)
  assert run_dir.check(path, overwrite=True) == path
  assert run_dir.check(path, resume=True) == path
  assert sorted(p.name for p in path.iterdir()) == before
  run_dir.prepare(path, overwrite=True)
  assert sorted(p.name for p in path.iterdir()) == ['mine.txt']


def test_check_creates_nothing(tmp_path):
  assert run_dir.check(tmp_path / 'a' / 'b') == tmp_path / 'a' / 'b'
  assert not (tmp_path / 'a').exists()


def test_nothing_to_resume(tmp_path):
  with pytest.raises(ValueError, match='Nothing to resume in .* no run.json'):
    run_dir.prepare(tmp_path / 'none', resume=True)
  assert not (tmp_path / 'none').exists()


@pytest.mark.parametrize('config', [
    config_lib.EvalConfig(seed=3, dense=(8, 4), behaviour_outputs=None),
    config_lib.MetaTrainConfig(num_agents=4, value_dense=(16,)),
])
def test_settings_round_trip(tmp_path, config):
  job = 'eval' if isinstance(config, config_lib.EvalConfig) else 'meta_train'
  run_dir.write_settings(tmp_path, job, config)
  assert run_dir.read_settings(tmp_path, job, type(config)) == config
  record = json.loads((tmp_path / 'run.json').read_text())
  assert record['job'] == job


def test_unreadable_or_foreign_settings(tmp_path):
  run_dir.write_settings(tmp_path, 'eval', config_lib.EvalConfig())
  with pytest.raises(ValueError, match='holds a eval run, not a meta_train'):
    run_dir.read_settings(tmp_path, 'meta_train', config_lib.MetaTrainConfig)
  record = json.loads((tmp_path / 'run.json').read_text())
  record['settings']['num_stepz'] = 3
  (tmp_path / 'run.json').write_text(json.dumps(record))
  with pytest.raises(ValueError, match=r"settings \['num_stepz'\] that "
                     'EvalConfig does not know'):
    run_dir.read_settings(tmp_path, 'eval', config_lib.EvalConfig)
  (tmp_path / 'run.json').write_text('{not json')
  with pytest.raises(ValueError, match='Cannot read the run record'):
    run_dir.read_settings(tmp_path, 'eval', config_lib.EvalConfig)
