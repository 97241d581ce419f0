# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A run's directory: every file in it, when it may be written, checkpoints.

A run directory holds `run.json` (the job and its settings), `metrics.csv`,
`summary.json`, plots (`*.png`), `checkpoints/` and, for meta-training, the
learned rule. `RunDir` owns all of it: the names, the checks (made once,
when it is made, before anything is created), the settings record and the
checkpoints. A directory that holds a run is never written over unless the
caller says so (`overwrite=True`: the previous run's files are removed
first, those its manifest names and nothing else) or continues that run
(`resume=True`).

A run directory has one writer: the `RunDir` of a new, resumed or
replacing run takes the directory's lock (`run.lock`, naming the process,
its host and since when) before it checks anything, and keeps it until
`release()` or the process's exit; another writer is refused
(`RunDirLocked`), naming the holder. A lock left by a process that ended
without releasing it (killed) is taken over, saying so. In a run of
several processes only process 0 takes it (`lock=False` in the others).

Its checkpoints are `disco_rl.runtime.checkpoints.Checkpointer`s in
`checkpoints/`.
"""

import atexit
from collections.abc import Sequence
import dataclasses
import errno
import fcntl
import hashlib
import json
import os
import pathlib
import shutil
import socket
import sys
import tempfile
import time
from typing import Any

from disco_rl.runtime import checkpoints as checkpoints_lib
from disco_rl.runtime import metrics as metrics_lib

SETTINGS = 'run.json'
METRICS = 'metrics.csv'
SUMMARY = 'summary.json'
CHECKPOINTS = 'checkpoints'
RULE = 'update_rule_params.npz'
LOCK = 'run.lock'
# The names of the files a run wrote besides the fixed ones below (plots,
# the loggers' folders), recorded before each is written.
MANIFEST = 'run_files.json'
# What every run writes (removed by overwrite=True, with the files its
# manifest names; nothing else is touched, the lock is the new run's).
_RUN_FILES = (SETTINGS, METRICS, SUMMARY, CHECKPOINTS, RULE, MANIFEST)
_TMP = '.tmp'  # A file being written whole (`RunDir._write`, `read_rows`).
_SYSTEM_ROOTS = ('/proc', '/sys', '/dev')
# Settings a resumed run may change: they do not change its numbers.
RESUMABLE_CHANGES = ('num_steps',)


def check_writable(path) -> pathlib.Path:
  """The absolute path, if a directory can be created or written there.

  Raises:
    ValueError: naming the path if it is a file, lies under a system
      directory (/proc, /sys, /dev) or cannot be written, or is empty
      (an empty string is not the current directory: that is '.').
  """
  if not str(path).strip():
    raise ValueError(
      f'output directory {str(path)!r} is empty; expected a path (--out DIR '
      "or output_dir=DIR; '.' for the current directory)."
    )
  path = pathlib.Path(path).expanduser().absolute()
  if any(
    path == pathlib.Path(root) or pathlib.Path(root) in path.parents
    for root in _SYSTEM_ROOTS
  ):
    raise ValueError(
      f'output directory {path} is inside a system directory '
      f'({", ".join(_SYSTEM_ROOTS)}); expected a directory '
      'for run files.'
    )
  if path.exists() and not path.is_dir():
    raise ValueError(
      f'output directory {path} is a file; expected a '
      'directory (or a path that does not exist yet).'
    )
  existing = path
  while not existing.exists():
    existing = existing.parent
  if not existing.is_dir():
    raise ValueError(
      f'output directory {path} cannot be created: {existing} is a file.'
    )
  try:  # Root passes os.access everywhere: write a probe file instead.
    with tempfile.TemporaryFile(dir=existing):
      pass
  except OSError as e:
    raise ValueError(
      f'output directory {path} cannot be written: '
      f'{existing}: {e.strerror or e}.'
    ) from None
  return path


# ----------------------------------------------------------------------------
# The lock: one writer per run directory.


class RunDirLocked(ValueError):
  """Another process holds the run directory's lock (a second writer)."""


# directory -> (the lock file's descriptor, the process that took it, the
# folders made for the lock: removed with it while nothing else is in them).
_HELD: dict[pathlib.Path, tuple[int, int, list[pathlib.Path]]] = {}


def checkpoints_held(directory: str | os.PathLike[str]) -> int:
  """How many complete checkpoints a run directory holds (their folders
  are named by their steps; a save cut short leaves a temporary name),
  read from the disk: unlike `Checkpointer.steps()` it starts no
  checkpoint manager, so it can be asked before the processes of a
  distributed run are joined, or of a directory not opened as a run."""
  folder = pathlib.Path(directory) / CHECKPOINTS
  if not folder.is_dir():
    return 0
  return sum(p.is_dir() and p.name.isdigit() for p in folder.iterdir())


def _holder_text(text: str) -> str:
  """Who a lock file's `text` names: 'process 12 on host (since ...)'."""
  try:
    holder = json.loads(text)
    return (
      f'process {holder["pid"]} on {holder["host"]} (since {holder["since"]})'
    )
  except (ValueError, KeyError, TypeError):
    return (
      'a process that left no name in it'
      if not text.strip()
      else repr(text[:200])
    )


def _read_fd(fd: int) -> str:
  os.lseek(fd, 0, os.SEEK_SET)
  chunks = []
  while chunk := os.read(fd, 4096):
    chunks.append(chunk)
  return b''.join(chunks).decode('utf-8', 'replace')


def acquire_lock(directory: pathlib.Path) -> str | None:
  """Takes `directory`'s lock (`LOCK`) for this process, or keeps it if
  this process holds it already; the directory (and its parents) is made if
  it does not exist (`release_lock` removes what it made if still empty).

  Returns:
    None, or a note naming the process whose stale lock was taken over (it
    ended without releasing it).

  Raises:
    RunDirLocked: another process holds it, naming that process.
    ValueError: the lock cannot be taken (e.g. a file system without
      locks), naming the file.
  """
  directory = pathlib.Path(directory)
  held = _HELD.get(directory)
  if held is not None and held[1] == os.getpid():
    return None
  made = [p for p in (directory, *directory.parents) if not p.exists()]
  directory.mkdir(parents=True, exist_ok=True)
  file = directory / LOCK
  while True:
    fd = os.open(file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      text = _read_fd(fd)
      os.close(fd)
      _remove_empty(made)
      if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
        raise ValueError(
          f'Cannot lock the run directory {directory}: {file}: '
          f'{e.strerror or e}.'
        ) from None
      raise RunDirLocked(
        f'{directory} is being written by another run: '
        f'{_holder_text(text)} holds its lock {file}; wait for that run to '
        'end or stop it, or choose another directory.'
      ) from None
    try:  # Released (removed) between the open and the lock: again.
      same = os.stat(file).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
      same = False
    if same:
      break
    os.close(fd)
  stale = _read_fd(fd)
  record = dict(
    pid=os.getpid(),
    host=socket.gethostname(),
    since=time.strftime('%Y-%m-%d %H:%M:%S %Z'),
  )
  os.ftruncate(fd, 0)
  os.pwrite(fd, (json.dumps(record) + '\n').encode(), 0)
  _HELD[directory] = (fd, os.getpid(), made)
  if stale.strip():
    return (
      f'took over the lock {file} of {_holder_text(stale)}, which ended '
      'without releasing it.'
    )
  return None


def release_lock(directory: pathlib.Path) -> None:
  """Releases (and removes) `directory`'s lock if this process holds it."""
  directory = pathlib.Path(directory)
  held = _HELD.pop(directory, None)
  if held is None:
    return
  fd, pid, made = held
  if pid == os.getpid():  # Not a forked child's copy: the lock is ours.
    try:
      (directory / LOCK).unlink()
    except FileNotFoundError:
      pass
  os.close(fd)
  if pid == os.getpid():
    _remove_empty(made)


def keep_directory(directory: pathlib.Path) -> None:
  """The directory whose lock this process holds is a run's now: releasing
  the lock leaves it, even if empty."""
  held = _HELD.get(pathlib.Path(directory))
  if held is not None:
    held[2].clear()


def _remove_empty(folders: list[pathlib.Path]) -> None:
  """Removes `folders` (deepest first) while they are empty."""
  for folder in folders:
    try:
      folder.rmdir()
    except OSError:
      break


def release_all() -> None:
  """Releases every run directory's lock this process holds (at exit)."""
  for directory in list(_HELD):
    release_lock(directory)


atexit.register(release_all)


def _tuples(value: Any) -> Any:
  """A setting read from JSON with its lists as tuples (within lists and
  dicts too), as the config's fields hold them."""
  if isinstance(value, list):
    return tuple(_tuples(v) for v in value)
  if isinstance(value, dict):
    return {k: _tuples(v) for k, v in value.items()}
  return value


def settings_record(config) -> dict[str, Any]:
  """A config's settings as JSON holds them (tuples as lists), as
  `run.json` and each checkpoint record them."""
  return json.loads(json.dumps(dataclasses.asdict(config), default=str))


def settings_hash(settings: dict[str, Any]) -> str:
  """The sha256 of `settings` (a `settings_record`) but those a resumed run
  may change (`RESUMABLE_CHANGES`)."""
  kept = {k: v for k, v in settings.items() if k not in RESUMABLE_CHANGES}
  text = json.dumps(kept, sort_keys=True, default=str)
  return hashlib.sha256(text.encode()).hexdigest()


def checkpoint_record(config) -> dict[str, Any]:
  """What a checkpoint records of the run's settings: them and their hash
  (`check_checkpoint_settings` reads them back)."""
  settings = settings_record(config)
  return dict(settings=settings, settings_sha256=settings_hash(settings))


class RunDir:
  """One run's directory (see the module's docstring).

  Attributes:
    path: the absolute path.
    resume: whether the run there is being continued.
  """

  def __init__(
    self,
    path,
    *,
    overwrite: bool = False,
    resume: bool = False,
    read_only: bool = False,
    lock: bool = True,
  ):
    """Takes the directory's lock (`lock`, unless `read_only`), then checks,
    writing nothing else, that `path` can take a new or resumed run
    (`read_only`: that it holds a run to read).

    A new directory is made to hold the lock; `release()` removes it again
    if nothing else was written into it.

    Args:
      path: the run's directory.
      overwrite: replace the run there (at `start`).
      resume: continue the run there.
      read_only: only read the run there (no lock).
      lock: take the lock: False in the processes of a multi-process run
        but process 0 (the one that writes the files).

    Raises:
      ValueError: if the path cannot be used (`check_writable`), holds a
        run and neither flag is set, has no run to resume or read, or both
        flags are set; `RunDirLocked` (a ValueError) if another process
        writes there, naming it.
    """
    if overwrite and resume:
      raise ValueError(
        'overwrite and resume exclude each other: resume '
        'continues the run that overwrite would remove.'
      )
    self.path = (
      pathlib.Path(path).expanduser().absolute()
      if read_only
      else check_writable(path)
    )
    self.resume, self._overwrite = resume, overwrite
    self._record: tuple[str, dict[str, Any]] | None = None
    self._locked = False
    self._outputs: set[str] | None = None  # The manifest's names, once read.
    if resume and not self.path.is_dir():
      self._check(resume, read_only, overwrite)  # Raises: nothing to lock.
    if lock and not read_only:
      note = acquire_lock(self.path)
      self._locked = True
      if note:
        print(f'note: {note}', file=sys.stderr, flush=True)
    try:
      self._check(resume, read_only, overwrite)
    except BaseException:
      self.release()
      raise

  def _check(self, resume: bool, read_only: bool, overwrite: bool) -> None:
    if (resume or read_only) and not (self.path / SETTINGS).is_file():
      raise ValueError(
        f'{"No run" if read_only else "Nothing to resume"} in '
        f'{self.path}: it has no {SETTINGS} (the record every '
        'run writes when it starts).'
      )
    if not (resume or read_only) and self.holds_run() and not overwrite:
      raise ValueError(
        f'output directory {self.path} already holds a run; resume it '
        '(--resume / resume=True), replace it (--overwrite / '
        'overwrite=True) or choose another directory.'
      )

  def release(self) -> None:
    """Releases the directory's lock (if this holds it) and removes the
    folders made for it if nothing was written into them."""
    if self._locked:
      release_lock(self.path)
      self._locked = False

  def holds_run(self) -> bool:
    return self.path.is_dir() and any(
      (self.path / name).exists() for name in (SETTINGS, METRICS, CHECKPOINTS)
    )

  def file(self, name: str) -> pathlib.Path:
    """The path of one of the run's files (e.g. METRICS, 'returns.png');
    by the lock's holder, one the run writes: recorded in its manifest
    first (`--overwrite` removes it with the run)."""
    if self._locked and name not in _RUN_FILES:
      self._record_output(name)
    return self.path / name

  def _manifest(self) -> set[str]:
    """The names the run's manifest records (none for a run of a version
    before it; names that are not plain file names are ignored)."""
    if self._outputs is None:
      try:
        names = json.loads((self.path / MANIFEST).read_text())['files']
      except (OSError, ValueError, KeyError, TypeError):
        names = []
      self._outputs = {
        n
        for n in names
        if isinstance(n, str)
        and n not in ('', '.', '..', LOCK)
        and '/' not in n
        and os.sep not in n
      }
    return self._outputs

  def _record_output(self, name: str) -> None:
    names = self._manifest()
    if name not in names:
      names.add(name)
      self._write(MANIFEST, json.dumps({'files': sorted(names)}) + '\n')

  def _remove_run(self) -> None:
    """Removes the files of the run here: the fixed ones, those of its
    manifest and their temporary files; nothing else."""
    for name in sorted({*_RUN_FILES, *self._manifest()}):
      for target in (self.path / name, self.path / (name + _TMP)):
        if target.is_dir() and not target.is_symlink():
          shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
          target.unlink()
    self._outputs = set()

  # -- The settings record. --------------------------------------------------

  def record(self) -> tuple[str, dict[str, Any]]:
    """(job, {field: value}): what the run was started as and with, read
    once (lists read back as tuples, also within a setting's dict, e.g.
    rule_sizes' embedding_size).

    Raises:
      ValueError: the record is unreadable.
    """
    if self._record is None:
      file = self.path / SETTINGS
      try:
        record = json.loads(file.read_text())
        job, values = record['job'], dict(record['settings'])
      except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f'Cannot read the run record {file}: {e}.') from None
      self._record = (job, {k: _tuples(v) for k, v in values.items()})
    return self._record

  def saved_settings(self, job: str) -> dict[str, Any]:
    """The settings of the run, which must be a `job` run."""
    recorded, values = self.record()
    if recorded != job:
      raise ValueError(f'{self.path} holds a {recorded} run, not a {job} run.')
    return values

  def check_same_settings(
    self,
    saved: dict[str, Any],
    given: dict[str, Any],
    changeable=RESUMABLE_CHANGES,
  ) -> None:
    """Raises ValueError naming each setting `given` that differs from the
    saved ones (but `changeable`), or that the record does not know."""
    unknown = sorted(set(given) - set(saved))
    if unknown:
      raise ValueError(
        f'{self.path / SETTINGS} has no settings {unknown} '
        '(written by another version?).'
      )
    differ = [
      f'{name}: saved {saved[name]!r}, given {value!r}'
      for name, value in given.items()
      if name not in changeable and saved[name] != value
    ]
    if differ:
      raise ValueError(
        'A resumed run keeps the settings it was started '
        'with; these differ: ' + '; '.join(differ) + '.'
      )

  def check_checkpoint_settings(
    self, extra: dict[str, Any], config, step: int
  ) -> None:
    """Raises `CheckpointMismatch` (a ValueError), naming each setting, if
    the settings of the resumed run (`config`: its `run.json` and the
    changes given) differ from those checkpoint `step` recorded
    (`checkpoint_record`; none in a checkpoint of an earlier version:
    nothing to check), but `RESUMABLE_CHANGES`."""
    saved = extra.get('settings')
    if not isinstance(saved, dict):
      return
    given = settings_record(config)
    if extra.get('settings_sha256') == settings_hash(given):
      return
    differ = [
      f'{name}: {SETTINGS} has {given[name]!r}, the checkpoint {saved[name]!r}'
      for name in sorted(saved.keys() & given.keys())
      if name not in RESUMABLE_CHANGES and saved[name] != given[name]
    ]
    if differ:
      raise checkpoints_lib.CheckpointMismatch(
        f'{self.path / SETTINGS} does not match checkpoint {step} of the '
        f'run: {"; ".join(differ)}. A resumed run keeps the settings it '
        f'was started with: restore them in {SETTINGS}, or start a new run.'
      )

  def start(self, job: str, config) -> None:
    """A new run: the previous run's files removed (overwrite: those
    `_remove_run` names), the directory made and the settings recorded (by
    one process alone)."""
    if self.holds_run() and self._overwrite:
      self._remove_run()
    self.path.mkdir(parents=True, exist_ok=True)
    keep_directory(self.path)  # The run's now, even if nothing follows.
    record = dict(
      job=job,
      settings={
        f.name: (list(v) if isinstance(v, tuple) else v)
        for f in dataclasses.fields(config)
        for v in (getattr(config, f.name),)
      },
    )
    self._write(SETTINGS, json.dumps(record, indent=2) + '\n')

  def write_summary(self, summary: dict[str, Any]) -> dict[str, Any]:
    """Writes `summary.json` (NaN as null); returns the JSON-safe summary."""
    summary = metrics_lib.json_safe(summary)
    self._write(SUMMARY, json.dumps(summary, indent=2, allow_nan=False) + '\n')
    return summary

  def _write(self, name: str, text: str) -> None:
    """Writes a file whole or not at all."""
    tmp = self.path / (name + '.tmp')
    tmp.write_text(text)
    tmp.replace(self.path / name)

  def rows(
    self, count: int, cut: bool, step: int | None = None
  ) -> list[dict[str, Any]]:
    """The first `count` rows of `metrics.csv`, each whole, the last of
    step `step - 1` (the checkpoint's `step`); with `cut` (one process),
    the file is cut to them (whole or not at all): the rows after a
    checkpoint leave it when the run continues from there, a row cut short
    among them too (said on stderr). Raises ValueError (`read_rows`)."""
    notes: list[str] = []
    rows = metrics_lib.read_rows(
      self.path / METRICS, count, cut=cut, step=step, notes=notes
    )
    for note in notes:
      print(f'note: {note}', file=sys.stderr, flush=True)
    return rows

  def writers(self, loggers: Sequence[str], config) -> list[Any]:
    """The writers of the run's rows: `metrics.csv` (continued) and each
    live logger's (`metrics.open_writers`; their folders are the run's)."""
    for logger in loggers:
      self.file(logger)  # 'tensorboard', 'wandb': recorded in the manifest.
    return metrics_lib.open_writers(
      self.path / METRICS,
      loggers,
      self.path,
      self.path.name,
      dataclasses.asdict(config),
    )

  def checkpoints_held(self) -> int:
    """`checkpoints_held` of this directory."""
    return checkpoints_held(self.path)

  def checkpoints(self, keep: int = 3) -> checkpoints_lib.Checkpointer:
    return checkpoints_lib.Checkpointer(self.path / CHECKPOINTS, keep)
