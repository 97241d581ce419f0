# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.runtime.run_dir: a run's directory (when it may be written, its
record) and its checkpoints (save, restore, keep the last k, kill -9)."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco_rl.jobs import config as config_lib
from disco_rl.jobs import records
from disco_rl.jobs.meta import config as meta_config
from disco_rl.runtime import checkpoints
from disco_rl.runtime import run_dir


def test_new_and_empty_directories_are_fine(tmp_path):
  new = run_dir.RunDir(tmp_path / 'a' / 'b')
  # Made to hold the lock alone; released unused, nothing is left.
  assert [p.name for p in (tmp_path / 'a/b').iterdir()] == ['run.lock']
  new.release()
  assert not (tmp_path / 'a').exists()
  new = run_dir.RunDir(tmp_path / 'a' / 'b')
  new.start('eval', config_lib.EvalConfig())
  assert new.path.is_dir() and new.path.is_absolute()
  assert (new.path / 'run.json').is_file()
  (tmp_path / 'empty').mkdir()
  run_dir.RunDir(tmp_path / 'empty')  # No run in it yet.


@pytest.mark.parametrize(
  'make, fragment',
  [
    (lambda p: p.write_text('x') and p, 'is a file; expected a directory'),
    (lambda p: p.write_text('x') and p / 'sub', 'cannot be created: '),
    (lambda p: '/sys/kernel/disco_rl', 'inside a system directory'),
    (lambda p: '/proc', 'inside a system directory'),
    (lambda p: '/dev/shm/x', 'inside a system directory'),
  ],
)
def test_unusable_paths(tmp_path, make, fragment):
  path = make(tmp_path / 'f')
  with pytest.raises(ValueError, match=fragment):
    run_dir.RunDir(path)


def test_unwritable_directory_is_named(tmp_path, monkeypatch):
  """Root writes everywhere, so the probe's failure is simulated here."""

  def refuse(*args, **kwargs):
    del args, kwargs
    raise PermissionError(13, 'Permission denied')

  monkeypatch.setattr(tempfile, 'TemporaryFile', refuse)
  with pytest.raises(
    ValueError,
    match=f'output directory {tmp_path}/new '
    f'cannot be written: {tmp_path}: Permission denied',
  ):
    run_dir.RunDir(tmp_path / 'new')
  assert not (tmp_path / 'new').exists()


@pytest.mark.skipif(os.geteuid() == 0, reason='root writes everywhere')
def test_read_only_directory(tmp_path):
  locked = tmp_path / 'locked'
  locked.mkdir(mode=0o555)
  with pytest.raises(ValueError, match='cannot be written'):
    run_dir.RunDir(locked / 'run')


def test_a_run_is_only_replaced_when_asked(tmp_path):
  first = run_dir.RunDir(tmp_path / 'run')
  first.start('eval', config_lib.EvalConfig())
  path = first.path
  first.write_summary({'steps': 1})
  (path / 'metrics.csv').write_text('step\n0\n')
  (path / 'checkpoints' / '5').mkdir(parents=True)
  first.file('returns.png').write_bytes(b'png')  # The run's (its manifest).
  (path / 'update_rule_params.npz').write_bytes(b'npz')
  (path / 'mine.txt').write_text('keep')
  (path / 'mine.png').write_bytes(b'the user figure')
  first.release()
  assert first.holds_run()
  before = sorted(p.name for p in path.iterdir())
  with pytest.raises(ValueError, match='already holds a run'):
    run_dir.RunDir(path)
  with pytest.raises(ValueError, match='overwrite and resume exclude'):
    run_dir.RunDir(path, overwrite=True, resume=True)
  resumed = run_dir.RunDir(path, resume=True)
  assert resumed.path == path
  resumed.release()
  replacing = run_dir.RunDir(path, overwrite=True)
  assert sorted(p.name for p in path.iterdir()) == sorted(
    before + ['run.lock']
  )  # Not yet.
  replacing.start('meta_train', meta_config.MetaTrainConfig())
  replacing.release()
  # Every file of the old run is gone (summary.json, its plot too), the
  # user's stay (their figures too).
  assert sorted(p.name for p in path.iterdir()) == [
    'mine.png',
    'mine.txt',
    'run.json',
  ]


def test_nothing_to_resume_or_read(tmp_path):
  with pytest.raises(ValueError, match='Nothing to resume in .* no run.json'):
    run_dir.RunDir(tmp_path / 'none', resume=True)
  with pytest.raises(ValueError, match='No run in .* no run.json'):
    run_dir.RunDir(tmp_path / 'none', read_only=True)
  assert not (tmp_path / 'none').exists()


@pytest.mark.parametrize(
  'config',
  [
    config_lib.EvalConfig(
      seed=3,
      dense=(8, 4),
      behaviour_outputs=None,
      env_kwargs={'size': 10},
      env='gymnax:DeepSea-bsuite',
    ),
    meta_config.MetaTrainConfig(
      num_agents=4,
      value_dense=(16,),
      tasks=('catch', 'gymnax:CartPole-v1'),
      # Tuples within a dict setting read back as tuples.
      rule_sizes=dict(prediction_size=8, embedding_size=(8, 1)),
    ),
  ],
)
def test_the_record_round_trips_and_is_read_once(tmp_path, config):
  job = 'eval' if isinstance(config, config_lib.EvalConfig) else 'meta_train'
  run_dir.RunDir(tmp_path / 'a').start(job, config)
  resumed = run_dir.RunDir(tmp_path / 'a', resume=True)
  assert type(config)(**resumed.saved_settings(job)) == config
  (tmp_path / 'a/run.json').unlink()  # Read once: the object keeps it.
  assert resumed.record() == (job, resumed.saved_settings(job))
  given = dataclasses.asdict(config)
  resumed.check_same_settings(resumed.saved_settings(job), given)
  with pytest.raises(
    ValueError,
    match=r'these differ: seed: saved \d+, '
    'given 99',
  ):
    resumed.check_same_settings(
      resumed.saved_settings(job), dict(given, seed=99)
    )
  # The number of steps may change.
  resumed.check_same_settings(
    resumed.saved_settings(job), dict(given, num_steps=7)
  )
  # (Not 'seeds', a field of EvalConfig since issue 53.)
  with pytest.raises(ValueError, match=r"has no settings \['seedz'\]"):
    resumed.check_same_settings(resumed.saved_settings(job), dict(seedz=1))


def test_unreadable_or_foreign_settings(tmp_path):
  run_dir.RunDir(tmp_path).start('eval', config_lib.EvalConfig())
  with pytest.raises(ValueError, match='holds a eval run, not a meta_train'):
    run_dir.RunDir(tmp_path, resume=True).saved_settings('meta_train')
  record = json.loads((tmp_path / 'run.json').read_text())
  record['settings']['num_stepz'] = 3
  (tmp_path / 'run.json').write_text(json.dumps(record))
  resumed = run_dir.RunDir(tmp_path, resume=True)
  with pytest.raises(
    ValueError,
    match=r"settings \['num_stepz'\] that "
    'EvalConfig does not know',
  ):
    records.upgrade_settings(
      config_lib.EvalConfig, resumed.saved_settings('eval')
    )
  (tmp_path / 'run.json').write_text('{not json')
  with pytest.raises(ValueError, match='Cannot read the run record'):
    run_dir.RunDir(tmp_path, resume=True).record()


def test_the_summary_is_written_whole_without_nan(tmp_path):
  out = run_dir.RunDir(tmp_path)
  out.start('eval', config_lib.EvalConfig())
  safe = out.write_summary(
    {'x': float('nan'), 'y': [np.float32(2.5)], 'z': np.int64(3)}
  )
  assert safe == {'x': None, 'y': [2.5], 'z': 3}
  assert json.loads((tmp_path / 'summary.json').read_text()) == safe


# ----------------------------------------------------------------------------
# Checkpoints.


@chex.dataclass
class _State:
  params: dict
  rng: jax.Array
  step: jax.Array
  nothing: object = None


def _shapes(state):
  return jax.eval_shape(lambda: state)


def _state(value: float) -> _State:
  return _State(
    params={'w': jnp.full((3, 4), value), 'b': jnp.arange(4.0)},
    rng=jax.random.PRNGKey(int(value)),
    step=jnp.int32(int(value)),
  )


def test_save_restore_and_keep_the_last(tmp_path):
  ckpt = checkpoints.Checkpointer(tmp_path / 'ckpt', keep=2)
  assert ckpt.latest_step() is None
  with pytest.raises(FileNotFoundError, match='No checkpoint in'):
    ckpt.restore(_shapes(_state(0)))
  for step in (1, 2, 3):
    ckpt.save(step, _state(step), {'rows': step, 'note': 'x'})
  assert ckpt.steps() == [2, 3]
  target = _shapes(_state(0))
  state, extra = ckpt.restore(target)
  chex.assert_trees_all_equal(state, _state(3))
  assert isinstance(state, _State) and extra == {'rows': 3, 'note': 'x'}
  state, extra = ckpt.restore(target, step=2)
  chex.assert_trees_all_equal(state, _state(2))
  with pytest.raises(FileNotFoundError, match=r'No checkpoint 1 .* \[2, 3\]'):
    ckpt.restore(target, step=1)
  # Saving a step again replaces it.
  ckpt.save(3, _state(7), {'rows': 7})
  state, extra = ckpt.restore(target)
  chex.assert_trees_all_equal(state, _state(7))
  assert extra == {'rows': 7}
  ckpt.close()
  with pytest.raises(ValueError, match='keep must be >= 1 checkpoint, got 0'):
    checkpoints.Checkpointer(tmp_path / 'other', keep=0)


def test_host_objects_round_trip():
  rng = np.random.RandomState(3)
  rng.rand(5)
  copy = checkpoints.decode_object(checkpoints.encode_object(rng))
  np.testing.assert_array_equal(copy.rand(4), rng.rand(4))


_WRITER = textwrap.dedent("""
    import sys
    import jax.numpy as jnp
    from disco_rl.runtime import checkpoints
    ckpt = checkpoints.Checkpointer(sys.argv[1], keep=2)
    step = 0
    while True:  # Big enough that a write takes a while.
      step += 1
      ckpt.save(step, {'big': jnp.full((4096, 1024), float(step))},
                {'rows': step})
      print(step, flush=True)
""")


def test_kill_9_while_writing_leaves_the_last_checkpoint_usable(tmp_path):
  directory = tmp_path / 'ckpt'
  proc = subprocess.Popen(
    [sys.executable, '-c', _WRITER, str(directory)],
    stdout=subprocess.PIPE,
    text=True,
    env=dict(os.environ, JAX_PLATFORMS='cpu'),
  )
  try:
    # Let a few checkpoints complete, then kill it in the middle of the next
    # one (a write takes far longer than reading a line).
    for _ in range(3):
      line = proc.stdout.readline()
      assert line, 'the writer died'
    time.sleep(0.05)
  finally:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
  ckpt = checkpoints.Checkpointer(directory, keep=2)
  latest = ckpt.latest_step()
  assert latest is not None and latest >= 3
  state, extra = ckpt.restore(
    {'big': jax.ShapeDtypeStruct((4096, 1024), jnp.float32)}
  )
  assert extra == {'rows': latest}
  np.testing.assert_array_equal(
    np.asarray(state['big']), np.full((4096, 1024), float(latest))
  )
  # A new checkpoint can be written after the crash.
  ckpt.save(latest + 1, {'big': jnp.zeros((4096, 1024))}, {'rows': 0})
  assert ckpt.latest_step() == latest + 1


def test_a_checkpoint_of_other_shapes_is_refused_before_reading(tmp_path):
  ckpt = checkpoints.Checkpointer(tmp_path / 'ckpt')
  ckpt.save(1, _state(1.0), {'rows': 1})
  wider = _shapes(
    _state(1.0).replace(
      params={'w': jnp.zeros((1, 3, 4)), 'b': jnp.arange(4.0)}
    )
  )
  with pytest.raises(
    ValueError,
    match=(
      r'Checkpoint 1 in .* cannot be resumed by this run: its params/w has '
      r"shape \(3, 4\), this run's \(1, 3, 4\)\. It was written by another "
      r'version of disco_rl or with other settings; start a new run\.'
    ),
  ):
    ckpt.restore(wider)
  # Another layout (an older version's): named before anything is read.
  with pytest.raises(
    ValueError,
    match=r'cannot be resumed by this run: it '
    r'has no loop/params/b\.',
  ):
    ckpt.restore({'loop': _shapes(_state(0.0))})
  restored, _ = ckpt.restore(_shapes(_state(0.0)))
  np.testing.assert_array_equal(restored.params['w'], np.ones((3, 4)))
  ckpt.close()
