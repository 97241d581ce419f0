# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A run's output directory: what is in it, and when it may be written.

A run directory holds `run.json` (the job and its settings), `metrics.csv`,
plots, `checkpoints/` and, for meta-training, the learned rule. A directory
that already holds a run is never written over unless the caller says so
(`overwrite=True`: the previous run's files are removed first) or continues
that run (`resume=True`). Every check happens before anything is created.
"""

import dataclasses
import json
import pathlib
import shutil
import tempfile
from typing import Any

SETTINGS = 'run.json'
METRICS = 'metrics.csv'
CHECKPOINTS = 'checkpoints'
# What a run writes (removed by overwrite=True; nothing else is touched).
_RUN_FILES = (SETTINGS, METRICS, CHECKPOINTS, 'update_rule_params.npz')
_RUN_GLOBS = ('*.png',)
_SYSTEM_ROOTS = ('/proc', '/sys', '/dev')


def holds_run(path: pathlib.Path) -> bool:
  """Whether `path` holds the files of a run."""
  return path.is_dir() and any((path / name).exists() for name in
                               (SETTINGS, METRICS, CHECKPOINTS))


def _nearest_existing(path: pathlib.Path) -> pathlib.Path:
  while not path.exists():
    path = path.parent
  return path


def check_writable(path) -> pathlib.Path:
  """The absolute path, if a directory can be created or written there.

  Raises:
    ValueError: naming the path if it is a file, lies under a system
      directory (/proc, /sys, /dev) or cannot be written.
  """
  path = pathlib.Path(path).expanduser().absolute()
  if any(path == pathlib.Path(root) or pathlib.Path(root) in path.parents
         for root in _SYSTEM_ROOTS):
    raise ValueError(f'output directory {path} is inside a system directory '
                     f'({", ".join(_SYSTEM_ROOTS)}); expected a directory '
                     'for run files.')
  if path.exists() and not path.is_dir():
    raise ValueError(f'output directory {path} is a file; expected a '
                     'directory (or a path that does not exist yet).')
  existing = _nearest_existing(path)
  if not existing.is_dir():
    raise ValueError(f'output directory {path} cannot be created: '
                     f'{existing} is a file.')
  try:  # Root passes os.access everywhere: write a probe file instead.
    with tempfile.TemporaryFile(dir=existing):
      pass
  except OSError as e:
    raise ValueError(f'output directory {path} cannot be written: '
                     f'{existing}: {e.strerror or e}.') from None
  return path


def check(path, *, overwrite: bool = False, resume: bool = False
          ) -> pathlib.Path:
  """Checks, changing nothing, that `path` can take a new or resumed run.

  Args:
    path: the output directory.
    overwrite: a run already there may be replaced.
    resume: the run there is to be continued (it must exist).

  Returns:
    The absolute path.

  Raises:
    ValueError: if the path cannot be used (see `check_writable`), holds a
      run and neither flag is set, has no run to resume, or both flags are.
  """
  if overwrite and resume:
    raise ValueError('overwrite and resume exclude each other: resume '
                     'continues the run that overwrite would remove.')
  path = check_writable(path)
  if resume:
    if not (path / SETTINGS).is_file():
      raise ValueError(f'Nothing to resume in {path}: it has no {SETTINGS} '
                       '(the record every run writes when it starts).')
  elif holds_run(path) and not overwrite:
    raise ValueError(
        f'output directory {path} already holds a run; resume it '
        '(--resume / resume=True), replace it (--overwrite / '
        'overwrite=True) or choose another directory.')
  return path


def prepare(path, *, overwrite: bool = False, resume: bool = False
            ) -> pathlib.Path:
  """`check`s `path`, then creates it (a new run) after removing the files of
  the run there (overwrite: only its run files; other files stay).

  Returns:
    The absolute path, created.

  Raises:
    ValueError: as `check`.
  """
  path = check(path, overwrite=overwrite, resume=resume)
  if resume:
    return path
  if holds_run(path):
    for name in _RUN_FILES:
      target = path / name
      if target.is_dir():
        shutil.rmtree(target)
      elif target.exists():
        target.unlink()
    for pattern in _RUN_GLOBS:
      for target in path.glob(pattern):
        target.unlink()
  path.mkdir(parents=True, exist_ok=True)
  return path


def _plain(value: Any) -> Any:
  if isinstance(value, tuple):
    return list(value)
  return value


def write_settings(path: pathlib.Path, job: str, config) -> None:
  """Records the job's name and settings (`run.json`), atomically."""
  record = dict(job=job, settings={
      f.name: _plain(getattr(config, f.name))
      for f in dataclasses.fields(config)})
  tmp = path / (SETTINGS + '.tmp')
  tmp.write_text(json.dumps(record, indent=2) + '\n')
  tmp.replace(path / SETTINGS)


def read_settings(path: pathlib.Path, job: str, config_cls):
  """The settings `write_settings` recorded, as a `config_cls`.

  Raises:
    ValueError: if the run there is another job or the record is unreadable.
  """
  file = path / SETTINGS
  try:
    record = json.loads(file.read_text())
    recorded_job, values = record['job'], dict(record['settings'])
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise ValueError(f'Cannot read the run record {file}: {e}.') from None
  if recorded_job != job:
    raise ValueError(f'{path} holds a {recorded_job} run, not a {job} run.')
  fields = {f.name for f in dataclasses.fields(config_cls)}
  unknown = sorted(set(values) - fields)
  if unknown:
    raise ValueError(f'{file} has settings {unknown} that {config_cls.__name__}'
                     ' does not know (written by another version?).')
  values = {k: tuple(v) if isinstance(v, list) else v
            for k, v in values.items()}
  return config_cls(**values)
