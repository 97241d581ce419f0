# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A run's directory: every file in it, when it may be written, checkpoints.

A run directory holds `run.json` (the job and its settings), `metrics.csv`,
`summary.json`, plots (`*.png`), `checkpoints/` and, for meta-training, the
learned rule. `RunDir` owns all of it: the names, the checks (made once,
when it is made, before anything is created), the settings record and the
checkpoints. A directory that holds a run is never written over unless the
caller says so (`overwrite=True`: the previous run's files are removed
first, nothing else) or continues that run (`resume=True`).

Its checkpoints are `disco_rl.checkpoints.Checkpointer`s in
`checkpoints/`.
"""

from collections.abc import Sequence
import dataclasses
import json
import pathlib
import shutil
import tempfile
from typing import Any

from disco_rl import checkpoints as checkpoints_lib
from disco_rl import metrics as metrics_lib
from disco_rl.loops import config as config_lib
from disco_rl.loops import meta_config

SETTINGS = 'run.json'
METRICS = 'metrics.csv'
SUMMARY = 'summary.json'
CHECKPOINTS = 'checkpoints'
RULE = 'update_rule_params.npz'
# What a run writes (removed by overwrite=True; nothing else is touched).
_RUN_FILES = (SETTINGS, METRICS, SUMMARY, CHECKPOINTS, RULE)
_PLOTS = '*.png'
_SYSTEM_ROOTS = ('/proc', '/sys', '/dev')
# Settings a resumed run may change: they do not change its numbers.
RESUMABLE_CHANGES = ('num_steps',)


def check_writable(path) -> pathlib.Path:
  """The absolute path, if a directory can be created or written there.

  Raises:
    ValueError: naming the path if it is a file, lies under a system
      directory (/proc, /sys, /dev) or cannot be written.
  """
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


def _tuples(value: Any) -> Any:
  """A setting read from JSON with its lists as tuples (within lists and
  dicts too), as the config's fields hold them."""
  if isinstance(value, list):
    return tuple(_tuples(v) for v in value)
  if isinstance(value, dict):
    return {k: _tuples(v) for k, v in value.items()}
  return value


def upgrade_settings(
  cls: type[config_lib.EvalConfig] | type[meta_config.MetaTrainConfig],
  settings: dict[str, Any],
) -> dict[str, Any]:
  """The settings of a run's record (`run.json`) as fields of `cls` (an
  `EvalConfig` or a `MetaTrainConfig`) today.

  Version 0.1 records name Catch's board in fields `rows` and `columns`:
  the eval job's `env_kwargs`, or each meta-training Catch task's board.

  Raises:
    ValueError: naming settings `cls` does not know.
  """
  settings = dict(settings)
  board: dict[str, Any] = {
    k: settings.pop(k) for k in ('rows', 'columns') if k in settings
  }
  if (
    board
    and cls is config_lib.EvalConfig
    and settings.get('env') in ('catch', 'jittable_catch')
  ):
    settings['env_kwargs'] = {**board, **dict(settings.get('env_kwargs') or {})}
  elif board and cls is meta_config.MetaTrainConfig:
    tasks: list[str] = []
    for text in tuple(settings.get('tasks') or ('catch',)):
      task = meta_config.parse_task(text)
      if task.name in ('catch', 'jittable_catch'):
        merged: dict[str, Any] = {**board, **dict(task.settings)}
        task = dataclasses.replace(task, settings=tuple(merged.items()))
      tasks.append(task.spec())
    settings['tasks'] = tuple(tasks)
  for field in dataclasses.fields(cls):  # Fields added since: defaults.
    if field.name in settings:
      continue
    if field.default is not dataclasses.MISSING:
      settings[field.name] = field.default
    elif field.default_factory is not dataclasses.MISSING:
      settings[field.name] = field.default_factory()
    else:
      raise ValueError(
        f'The record lacks setting {field.name!r}, which has no default.'
      )
  unknown = sorted(set(settings) - {f.name for f in dataclasses.fields(cls)})
  if unknown:
    raise ValueError(
      f'The run record has settings {unknown} that '
      f'{cls.__name__} does not know (written by another '
      'version?).'
    )
  return settings


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
  ):
    """Checks, changing nothing, that `path` can take a new or resumed run
    (`read_only`: that it holds a run to read).

    Raises:
      ValueError: if the path cannot be used (`check_writable`), holds a
        run and neither flag is set, has no run to resume or read, or both
        flags are set.
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

  def holds_run(self) -> bool:
    return self.path.is_dir() and any(
      (self.path / name).exists() for name in (SETTINGS, METRICS, CHECKPOINTS)
    )

  def file(self, name: str) -> pathlib.Path:
    """The path of one of the run's files (e.g. METRICS, 'returns.png')."""
    return self.path / name

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

  def resumed_config(self, given, configs: dict[str, Any]):
    """The resumed run's config: its saved settings (upgraded), checked
    once against those `given` (a config, or a dict of some); `configs`:
    the config class of each job name."""
    if isinstance(given, dict):
      name = self.record()[0]
      if name not in configs:
        raise ValueError(
          f'{self.path} holds a {name!r} run, which this version cannot resume.'
        )
      cls, given = configs[name], dict(given)
    else:
      cls, given = type(given), dataclasses.asdict(given)
      names = [n for n, c in configs.items() if c is cls]
      if not names:
        raise TypeError(
          f'A {cls.__name__} is not the config of a job '
          f'({", ".join(c.__name__ for c in configs.values())}).'
        )
      name = names[0]
    saved = upgrade_settings(cls, self.saved_settings(name))
    self.check_same_settings(saved, given)
    return cls(**{**saved, **given})

  def start(self, job: str, config) -> None:
    """A new run: the previous run's files removed (overwrite), the
    directory made and the settings recorded (by one process alone)."""
    if self.holds_run() and self._overwrite:
      for name in _RUN_FILES:
        target = self.path / name
        if target.is_dir():
          shutil.rmtree(target)
        elif target.exists():
          target.unlink()
      for target in self.path.glob(_PLOTS):
        target.unlink()
    self.path.mkdir(parents=True, exist_ok=True)
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

  def rows(self, count: int, cut: bool) -> list[dict[str, Any]]:
    """The first `count` rows of `metrics.csv`; with `cut` (one process),
    the file is cut to them (whole or not at all): the rows after a
    checkpoint leave it when the run continues from there."""
    return metrics_lib.read_rows(self.path / METRICS, count, cut=cut)

  def writers(self, loggers: Sequence[str], config) -> list[Any]:
    """The writers of the run's rows: `metrics.csv` (continued) and each
    live logger's (`metrics.open_writers`)."""
    return metrics_lib.open_writers(
      self.path / METRICS,
      loggers,
      self.path,
      self.path.name,
      dataclasses.asdict(config),
    )

  def checkpoints(self, keep: int = 3) -> checkpoints_lib.Checkpointer:
    return checkpoints_lib.Checkpointer(self.path / CHECKPOINTS, keep)
