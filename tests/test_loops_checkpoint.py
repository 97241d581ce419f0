# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.loops.checkpoint: save, restore, keep the last k, survive kill -9."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco_rl.loops import checkpoint


@chex.dataclass
class _State:
  params: dict
  rng: jax.Array
  step: jax.Array
  nothing: object = None


def _state(value: float) -> _State:
  return _State(params={'w': jnp.full((3, 4), value), 'b': jnp.arange(4.)},
                rng=jax.random.PRNGKey(int(value)),
                step=jnp.int32(int(value)))


def test_save_restore_and_keep_the_last(tmp_path):
  ckpt = checkpoint.Checkpointer(tmp_path / 'ckpt', keep=2)
  assert ckpt.latest_step() is None
  with pytest.raises(FileNotFoundError, match='No checkpoint in'):
    ckpt.restore(checkpoint.abstract_like(_state(0)))
  for step in (1, 2, 3):
    ckpt.save(step, _state(step), {'rows': step, 'note': 'x'})
  assert ckpt.steps() == [2, 3]
  target = checkpoint.abstract_like(_state(0))
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
    checkpoint.Checkpointer(tmp_path / 'other', keep=0)


def test_host_objects_round_trip():
  rng = np.random.RandomState(3)
  rng.rand(5)
  copy = checkpoint.decode_object(checkpoint.encode_object(rng))
  np.testing.assert_array_equal(copy.rand(4), rng.rand(4))


_WRITER = textwrap.dedent('''
    import sys
    import jax.numpy as jnp
    from disco_rl.loops import checkpoint
    ckpt = checkpoint.Checkpointer(sys.argv[1], keep=2)
    step = 0
    while True:  # Big enough that a write takes a while.
      step += 1
      ckpt.save(step, {'big': jnp.full((4096, 1024), float(step))},
                {'rows': step})
      print(step, flush=True)
''')


def test_kill_9_while_writing_leaves_the_last_checkpoint_usable(tmp_path):
  directory = tmp_path / 'ckpt'
  proc = subprocess.Popen(
      [sys.executable, '-c', _WRITER, str(directory)],
      stdout=subprocess.PIPE, text=True,
      env=dict(os.environ, JAX_PLATFORMS='cpu'))
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
  ckpt = checkpoint.Checkpointer(directory, keep=2)
  latest = ckpt.latest_step()
  assert latest is not None and latest >= 3
  state, extra = ckpt.restore(
      {'big': jax.ShapeDtypeStruct((4096, 1024), jnp.float32)})
  assert extra == {'rows': latest}
  np.testing.assert_array_equal(np.asarray(state['big']),
                                np.full((4096, 1024), float(latest)))
  # A new checkpoint can be written after the crash.
  ckpt.save(latest + 1, {'big': jnp.zeros((4096, 1024))}, {'rows': 0})
  assert ckpt.latest_step() == latest + 1


def test_a_checkpoint_of_other_shapes_is_refused_before_reading(tmp_path):
  ckpt = checkpoint.Checkpointer(tmp_path / 'ckpt')
  ckpt.save(1, _state(1.0), {'rows': 1})
  wider = checkpoint.abstract_like(
      _state(1.0).replace(params={'w': jnp.zeros((1, 3, 4)),
                                  'b': jnp.arange(4.)}))
  with pytest.raises(ValueError, match=(
      r"Checkpoint 1 in .* cannot be resumed by this run: its params/w has "
      r"shape \(3, 4\), this run's \(1, 3, 4\)\. It was written by another "
      r'version of disco_rl .* or with other settings; start a new run\.')):
    ckpt.restore(wider)
  restored, _ = ckpt.restore(checkpoint.abstract_like(_state(0.0)))
  np.testing.assert_array_equal(restored.params['w'], np.ones((3, 4)))
  ckpt.close()
