# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Faults a user meets with a run directory (issue 71), through the eval
command as users start it (its `main` in this process): a metrics row cut
by a power loss, a short row, an edited checkpoint or run.json, a damaged
checkpoint, a second writer, a full disk (a write that raises ENOSPC; on a
real small tmpfs too, where the test runs as root), an empty --out and a
rule file of NaN. Each ends in a run that recovers exactly (its rows equal
to the run never faulted), a note, or one `error:` line; nothing is lost
silently.
"""

import errno
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap

import numpy as np
import orbax.checkpoint as ocp
import pytest
import smoke_env
import tiny

from disco_rl import weights
from disco_rl.cli import eval as eval_cli
from disco_rl.jobs import trainer as trainer_lib
from disco_rl.runtime import metrics as metrics_lib
from disco_rl.runtime import run_dir as run_dir_lib
from disco_rl.update_rules import disco

pytestmark = pytest.mark.usefixtures('fast_compile')

# A tiny eval run: 11 loop steps (rows), checkpoints 4, 8 and 11.
TINY = tiny.eval_flags(num_steps=10, rollout_len=6, checkpoint_every=4)
RESUME = ['--no-progress']  # A resumed run keeps its settings.
TIMING = ['rss_mb', 'time_s']


def rows_of(directory: pathlib.Path):
  """The run's metrics rows but the wall-clock columns."""
  return metrics_lib.read_table(directory / 'metrics.csv').drop(columns=TIMING)


def assert_rows_whole(directory: pathlib.Path) -> None:
  """Every line of metrics.csv ends in a line break with every field."""
  lines = (directory / 'metrics.csv').read_text().splitlines(keepends=True)
  width = lines[0].count(',')
  for number, line in enumerate(lines, 1):
    assert line.endswith('\n') and line.count(',') == width, (number, line)


def one_error_line(result) -> str:
  """The one `error:` line of a failed command (no traceback, no notes)."""
  assert result.stderr.startswith('error: '), result.stderr[-4000:]
  assert result.stderr.count('\n') == 1, result.stderr[-4000:]
  return result.stderr[len('error: ') :].strip()


@pytest.fixture(scope='module')
def finished(tmp_path_factory, fast_compile):
  """A finished tiny run of the eval command (never faulted)."""
  del fast_compile
  out = tmp_path_factory.mktemp('finished') / 'run'
  assert eval_cli.main(['--out', str(out), *TINY]) == 0
  assert sorted(p.name for p in (out / 'checkpoints').iterdir()) == [
    '11',
    '4',
    '8',
  ]
  return out


@pytest.fixture
def copy_of(tmp_path, finished):
  """`copy_of()`: a copy of the finished run to damage."""

  def copy() -> pathlib.Path:
    target = tmp_path / f'run{len(list(tmp_path.iterdir()))}'
    shutil.copytree(finished, target)
    return target

  return copy


def resume(call_main, directory, *args):
  return call_main(eval_cli.main, '--resume', str(directory), *RESUME, *args)


# ----------------------------------------------------------------------------
# Rows and checkpoints.


def test_a_last_row_cut_by_a_power_loss_is_run_again(
  call_main, copy_of, finished
):
  """The checkpoint counts the last row, which a power loss cut short
  (rows were flushed, not synced): the checkpoint before it is resumed and
  the rows come again, equal to the run's; before, the next row was
  appended onto the cut one and the file no longer parsed."""
  run = copy_of()
  metrics = run / 'metrics.csv'
  text = metrics.read_text()
  metrics.write_text(text[: len(text) - len(text.splitlines()[-1]) // 2 - 1])
  result = resume(call_main, run)
  assert result.returncode == 0, result.stderr[-4000:]
  assert (
    'note: checkpoint 11 cannot be resumed: '
    f'{metrics} line 12 is not a whole metrics row (cut short'
  ) in result.stderr
  assert 'the run continues from checkpoint 8' in result.stderr
  assert_rows_whole(run)
  assert rows_of(run).equals(rows_of(finished))


def test_a_short_row_is_one_error_line_and_changes_nothing(call_main, copy_of):
  """A row of 3 fields among the checkpoints' rows (every checkpoint needs
  it): before, it was read with its other columns empty."""
  run = copy_of()
  metrics = run / 'metrics.csv'
  lines = metrics.read_text().splitlines(keepends=True)
  lines[2] = '1,0,0.01\n'
  metrics.write_text(''.join(lines))
  before = metrics.read_bytes()
  result = resume(call_main, run, '--steps', '12')
  assert result.returncode == 2
  error = one_error_line(result)
  assert error.startswith(
    f'checkpoint 11 cannot be resumed: {metrics} line 3 is not a whole '
    'metrics row (short: 3 fields, the header has 15)'
  ), error
  assert 'nor can the ones before it be resumed' in error
  assert '--overwrite' in error
  assert metrics.read_bytes() == before


def test_a_checkpoint_whose_row_count_was_edited_is_passed_over(
  call_main, copy_of, finished
):
  """A checkpoint's record edited to 5 rows: before, metrics.csv was cut
  to 5 rows and the run went on from step 11's state."""
  run = copy_of()
  record = run / 'checkpoints/11/extra/metadata'
  record.write_text(record.read_text().replace('"rows": 11', '"rows": 5'))
  result = resume(call_main, run)
  assert result.returncode == 0, result.stderr[-4000:]
  assert (
    f'note: checkpoint 11 cannot be resumed: {run}/metrics.csv row 5 (line '
    '6) is of step 4, but the checkpoint of step 11 follows step 10'
  ) in result.stderr
  assert rows_of(run).equals(rows_of(finished))


def test_a_run_json_edited_after_the_start_is_refused_naming_the_setting(
  call_main, copy_of
):
  """run.json edited to another learning rate and seed: before, the run
  went on under them after the rows of the old ones."""
  run = copy_of()
  settings = run / 'run.json'
  settings.write_text(
    settings.read_text()
    .replace('"learning_rate": 0.01', '"learning_rate": 0.5')
    .replace('"seed": 0', '"seed": 3')
  )
  before = (run / 'metrics.csv').read_bytes()
  result = resume(call_main, run, '--steps', '12')
  assert result.returncode == 2
  error = one_error_line(result)
  assert error.startswith(
    f'{settings} does not match checkpoint 11 of the run: learning_rate: '
    'run.json has 0.5, the checkpoint 0.01; seed: run.json has 3, the '
    'checkpoint 0.'
  ), error
  assert (run / 'metrics.csv').read_bytes() == before


def _damage(checkpoint: pathlib.Path) -> None:
  """Cuts every data file of a checkpoint to half (a crash, a bad disk)."""
  files = list((checkpoint / 'state').rglob('d/*'))
  assert files
  for file in files:
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2])


def test_a_damaged_checkpoint_falls_back_to_the_one_before(
  call_main, copy_of, finished
):
  """The latest checkpoint's data cut short: before, a long traceback
  ending in a bare Exception; now the one before is resumed (a note) and
  the rows come again the same; with every checkpoint damaged, one
  `error:` line naming the latest and the way out."""
  run = copy_of()
  _damage(run / 'checkpoints/11')
  result = resume(call_main, run)
  assert result.returncode == 0, result.stderr[-4000:]
  assert f'note: checkpoint 11 in {run}/checkpoints cannot be read (' in (
    result.stderr
  )
  assert 'the run continues from checkpoint 8' in result.stderr
  assert rows_of(run).equals(rows_of(finished))

  run = copy_of()
  for step in ('4', '8', '11'):
    _damage(run / 'checkpoints' / step)
  result = resume(call_main, run)
  assert result.returncode == 2
  error = one_error_line(result)
  assert error.startswith(
    f'checkpoint 11 in {run}/checkpoints cannot be read ('
  ), error
  assert error.endswith(
    f'nor can the ones before it be resumed. Remove {run}/checkpoints/11 '
    'to resume from an earlier checkpoint, if one is left, or start the '
    'run again (--overwrite).'
  ), error


# ----------------------------------------------------------------------------
# One writer.

_HOLDER = textwrap.dedent("""
    import os, sys
    from disco_rl.runtime import run_dir
    held = sys.argv[1]  # A new run there, or the one there resumed.
    run_dir.RunDir(held, resume=os.path.exists(f'{held}/run.json'))
    print('locked', flush=True)
    sys.stdin.read()  # Until the test closes it (or kills this process).
""")


def _holder(directory: pathlib.Path) -> subprocess.Popen:
  """Another process that holds `directory`'s lock, as a run does."""
  env = dict(os.environ, JAX_PLATFORMS='cpu')
  proc = subprocess.Popen(
    [sys.executable, '-c', _HOLDER, str(directory)],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    text=True,
    env=env,
  )
  assert proc.stdout.readline() == 'locked\n'
  return proc


def test_a_second_writer_is_refused_naming_the_first(
  call_main, tmp_path, copy_of
):
  """A new run, --overwrite and --resume started on a directory another
  process writes: before, both ran, mixing their files."""
  run = copy_of()
  before = {p: p.read_bytes() for p in run.rglob('*') if p.is_file()}
  holder = _holder(run)
  try:
    expected = (
      f'{run} is being written by another run: process {holder.pid} on '
      f'{socket.gethostname()} (since '
    )
    for args in (
      ['--out', str(run), *TINY],
      ['--out', str(run), '--overwrite', *TINY],
      ['--resume', str(run), *RESUME, '--steps', '12'],
    ):
      result = call_main(eval_cli.main, *args)
      assert result.returncode == 2, (args, result.stderr[-4000:])
      error = one_error_line(result)
      assert error.startswith(expected), error
      assert f'holds its lock {run}/run.lock' in error
    with pytest.raises(run_dir_lib.RunDirLocked, match=re.escape(expected)):
      trainer_lib.Trainer.resume(run, progress=False)
  finally:
    holder.kill()
    holder.wait()
  # Nothing of the run was touched; the lock of the process killed (which
  # could not release it) is taken over, saying so.
  after = {p: p.read_bytes() for p in run.rglob('*') if p.is_file()}
  assert after.pop(run / 'run.lock')
  assert after == before
  with pytest.raises(ValueError) as refused:
    run_dir_lib.RunDir(run)  # A new run: the directory holds one.
  assert 'already holds a run' in str(refused.value)


def test_a_lock_left_by_a_killed_run_is_taken_over(tmp_path, capsys):
  run = tmp_path / 'run'
  holder = _holder(run)
  holder.send_signal(signal.SIGKILL)
  holder.wait()
  capsys.readouterr()
  resumed = run_dir_lib.RunDir(run)  # Empty: a new run may start there.
  err = capsys.readouterr().err
  assert err.startswith(
    f'note: took over the lock {run}/run.lock of process {holder.pid} on '
    f'{socket.gethostname()} (since '
  ), err
  assert err.endswith('which ended without releasing it.\n'), err
  resumed.release()
  assert not list(run.iterdir())  # The lock is removed with its release.


def test_an_empty_out_is_an_error(call_main, tmp_path, monkeypatch):
  """Before, `--out ''` wrote the run into the current directory."""
  monkeypatch.chdir(tmp_path)
  result = call_main(eval_cli.main, '--out', '', *TINY)
  assert result.returncode == 2
  assert one_error_line(result).startswith('--out is empty')
  assert not list(tmp_path.iterdir())


# ----------------------------------------------------------------------------
# A full disk.


class _FullDisk:
  """A file that takes `budget[0]` more bytes, then writes what fits and
  raises ENOSPC, as a file on a full disk does."""

  def __init__(self, file, budget: list[int]):
    self._file, self._budget = file, budget

  def write(self, text: str) -> int:
    if len(text) > self._budget[0]:
      self._file.write(text[: self._budget[0]])
      self._file.flush()
      self._budget[0] = 0
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    self._budget[0] -= len(text)
    return self._file.write(text)

  def __getattr__(self, name):
    return getattr(self._file, name)


def test_a_full_disk_while_writing_metrics(
  call_main, tmp_path, monkeypatch, finished
):
  """metrics.csv's disk fills mid-row: before, a traceback of OSError; now
  one `error:` line that names the file and says how to continue, and the
  run resumed (space freed) gives the rows of the run never stopped."""
  budget = [len((finished / 'metrics.csv').read_text()) * 6 // 11]
  real_open = open

  def full_disk_open(file, mode='r', *args, **kwargs):
    opened = real_open(file, mode, *args, **kwargs)
    if pathlib.Path(file).name == 'metrics.csv' and mode in ('a', 'w'):
      return _FullDisk(opened, budget)
    return opened

  monkeypatch.setattr(metrics_lib, 'open', full_disk_open, raising=False)
  run = tmp_path / 'run'
  result = call_main(eval_cli.main, '--out', str(run), *TINY)
  assert result.returncode == 1, result.stderr[-4000:]
  assert one_error_line(result) == (
    f'cannot write {run}/metrics.csv: No space left on device; the run '
    'keeps its last complete checkpoint: free space, then continue it with '
    f'--resume {run}'
  )
  assert not (run / 'run.lock').exists()
  monkeypatch.undo()  # Space freed.
  result = resume(call_main, run)
  assert result.returncode == 0, result.stderr[-4000:]
  assert_rows_whole(run)
  assert rows_of(run).equals(rows_of(finished))


_NO_SPACE = (
  'RESOURCE_EXHAUSTED: Error writing local file "{0}/_sharding": Failed '
  'writing: "{0}/_sharding.__lock": No space left on device '
  '[os_error_code=\'28\'] [tensorstore_spec=\'{{"driver": "zarr"}}\']'
)


def test_a_full_disk_while_checkpointing(
  call_main, tmp_path, monkeypatch, finished
):
  """The disk fills during checkpoint 8 (orbax raises tensorstore's
  RESOURCE_EXHAUSTED): one `error:` line saying so and how to continue,
  the partial checkpoint removed; resumed, the rows of the run never
  stopped."""
  real_save = ocp.CheckpointManager.save

  def save(manager, step, *args, **kwargs):
    if step == 8:
      partial = pathlib.Path(manager.directory) / '8.orbax-checkpoint-tmp-1'
      partial.mkdir()
      raise ValueError(_NO_SPACE.format(partial))
    return real_save(manager, step, *args, **kwargs)

  monkeypatch.setattr(ocp.CheckpointManager, 'save', save)
  run = tmp_path / 'run'
  result = call_main(eval_cli.main, '--out', str(run), *TINY)
  assert result.returncode == 1, result.stderr[-4000:]
  assert one_error_line(result) == (
    f'cannot write checkpoint 8 in {run}/checkpoints: no space left on '
    'device (the checkpoints before it are complete: 4); the run keeps its '
    f'last complete checkpoint: free space, then continue it with --resume '
    f'{run}'
  )
  assert sorted(p.name for p in (run / 'checkpoints').iterdir()) == ['4']
  monkeypatch.undo()
  result = resume(call_main, run)
  assert result.returncode == 0, result.stderr[-4000:]
  assert rows_of(run).equals(rows_of(finished))


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason='mounting a tmpfs needs root')
def test_a_full_disk_on_a_small_tmpfs_is_one_error_line(tmp_path):
  """A real full disk (a 256 KiB tmpfs fills at the second checkpoint):
  orbax's threads print a traceback per failed write; the command prints
  one `error:` line."""
  mount = tmp_path / 'small'
  mount.mkdir()
  if subprocess.run(
    ['mount', '-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', str(mount)],
    capture_output=True,
  ).returncode:
    pytest.skip('cannot mount a tmpfs here')
  try:
    env = dict(os.environ, **smoke_env.fast_jax_env(num_devices=1))
    env.update(JAX_PLATFORMS='cpu', MPLBACKEND='Agg')
    result = subprocess.run(
      [
        sys.executable,
        '-m',
        'disco_rl.cli.eval',
        '--out',
        str(mount / 'run'),
        *TINY,
        '--steps',
        '40',
        '--checkpoint-every',
        '2',
      ],
      capture_output=True,
      text=True,
      env=env,
      timeout=600,
    )
    assert result.returncode == 1, result.stderr[-4000:]
    error = one_error_line(result)
    assert 'no space left on device' in error.lower(), error
    assert error.endswith(f'continue it with --resume {mount / "run"}')
  finally:
    subprocess.run(['umount', str(mount)], check=False)


# ----------------------------------------------------------------------------
# Rule files.


def test_a_rule_file_of_nan_is_named_as_such(call_main, tmp_path):
  """Before, a rule of NaN was loaded, and the run's divergence blamed the
  learning rate."""
  sizes = disco.NAMED_SIZES['tiny']
  shapes = weights.expected_shapes(sizes)
  params = {
    module: {k: np.zeros(v.shape, v.dtype) for k, v in leaves.items()}
    for module, leaves in shapes.items()
  }
  module = sorted(params)[0]
  leaf = params[module]['w']
  leaf.reshape(-1)[:2] = np.nan
  leaf.reshape(-1)[2] = -np.inf
  path = tmp_path / 'nan.npz'
  weights.save_params(params, path)
  with pytest.raises(
    ValueError,
    match=(
      f"{path}: parameter '{module}/w' holds non-finite values "
      rf'\(2 NaN, 1 infinite, of {leaf.size}\)'
    ),
  ):
    weights.load_rule(path)
  result = call_main(
    eval_cli.main,
    '--out',
    str(tmp_path / 'run'),
    '--weights',
    str(path),
    '--steps',
    '1',
  )
  assert result.returncode == 2
  assert 'holds non-finite values (2 NaN, 1 infinite' in one_error_line(result)
  assert not (tmp_path / 'run').exists()
