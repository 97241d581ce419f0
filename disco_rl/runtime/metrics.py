# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What a run records as it goes: the metrics rows, as a CSV and, when
asked, as live curves in TensorBoard or Weights & Biases; memory figures.

Every writer takes the rows of a call as they come (`write_rows`) and is
closed at the end (`close`). Its plots are drawn by `disco_rl.plots`;
`json_safe` makes figures strict JSON (summaries, reports).
"""

import collections
import csv
import importlib
import io
import math
import os
import pathlib
import resource
from typing import Any

import numpy as np
import pandas as pd


def json_safe(value):
  """NaN and infinities as None (JSON has no NaN), containers recursed."""
  if isinstance(value, dict):
    return {k: json_safe(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [json_safe(v) for v in value]
  if isinstance(value, (float, np.floating)):
    return float(value) if math.isfinite(value) else None
  if isinstance(value, np.integer):
    return int(value)
  return value


def resident_memory_mb() -> float:
  """This process's resident memory now (Linux; NaN elsewhere)."""
  try:
    with open('/proc/self/statm') as f:
      pages = int(f.read().split()[1])
    return pages * os.sysconf('SC_PAGE_SIZE') / 2**20
  except (OSError, ValueError, IndexError):
    return float('nan')


def peak_memory_mb() -> float:
  """The most resident memory this process has used so far."""
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class MetricsWriter:
  """Appends CSV rows as they come; the first row fixes the columns.

  With `append=True` an existing file is continued under its own header
  (a resumed run; see `read_rows`). A row with a key the header lacks (a
  run resumed by a version of the package that logs more) widens the
  header: the file is rewritten atomically with the new columns after the
  old ones, empty in the earlier rows, so that no metric is dropped. Each
  call's rows are written whole and flushed; `sync` puts them on the disk
  (before a checkpoint that counts them). A row cut short (a crash, a full
  disk) lacks its line break or fields, which `read_rows` detects.
  """

  def __init__(self, path, append: bool = False):
    self.path = pathlib.Path(path)
    self.path.parent.mkdir(parents=True, exist_ok=True)
    fieldnames = None
    if append and self.path.is_file() and self.path.stat().st_size:
      with open(self.path, 'rb') as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) != b'\n':
          raise ValueError(
            f'{self.path} ends in a row cut short (no line break at its '
            'end): rows appended would join it. Resume the run (which '
            'cuts the file back to its checkpoint) instead.'
          )
      with open(self.path, newline='') as f:
        fieldnames = next(csv.reader(f), None)
    self._file = open(self.path, 'a' if fieldnames else 'w', newline='')
    self._columns: frozenset[str] = frozenset()
    self._writer = None if fieldnames is None else self._dict_writer(fieldnames)
    self._failed = False

  def _dict_writer(self, fieldnames):
    self._columns = frozenset(fieldnames)
    return csv.DictWriter(self._file, fieldnames=list(fieldnames), restval='')

  def write(self, row: dict[str, float]) -> None:
    self.write_rows([row])

  def write_rows(self, rows) -> None:
    """Writes several rows and flushes once.

    Raises:
      OSError: the write failed (e.g. a full disk), naming the file.
    """
    try:
      for row in rows:
        if self._writer is None:
          self._writer = self._dict_writer(row)
          self._writer.writeheader()
        if not self._columns.issuperset(row):
          known = self._writer.fieldnames
          self._widen([*known, *(k for k in row if k not in self._columns)])
        self._writer.writerow(row)
      self._file.flush()
    except OSError as e:
      self._failed = True
      raise _write_error(self.path, e) from e

  def _widen(self, fieldnames: list[str]) -> None:
    """Rewrites the file under `fieldnames` (the old ones first), each
    earlier row's new fields empty; atomically (a reader sees the file
    whole, before or after), then appends to it again."""
    assert self._writer is not None
    self._file.flush()
    self._file.close()
    with open(self.path, newline='') as f:
      old_rows = list(csv.reader(f))[1:]
    tmp = self.path.with_name(self.path.name + '.tmp')
    try:
      with open(tmp, 'w', newline='') as dst:
        writer = csv.writer(dst)  # The DictWriter's dialect (excel).
        writer.writerow(fieldnames)
        pad = [''] * (len(fieldnames) - len(self._writer.fieldnames))
        writer.writerows(r + pad for r in old_rows)
        dst.flush()
        os.fsync(dst.fileno())
      os.replace(tmp, self.path)
    finally:
      tmp.unlink(missing_ok=True)
      self._file = open(self.path, 'a', newline='')
    self._writer = self._dict_writer(fieldnames)

  def sync(self) -> None:
    """Puts the rows written so far on the disk (fsync)."""
    try:
      self._file.flush()
      os.fsync(self._file.fileno())
    except OSError as e:
      self._failed = True
      raise _write_error(self.path, e) from e

  def close(self) -> None:
    """Closes the file (after a failed write, quietly: it is reported)."""
    try:
      self._file.close()
    except OSError as e:
      if not self._failed:
        raise _write_error(self.path, e) from e

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def _write_error(path: pathlib.Path, e: OSError) -> OSError:
  """An OSError of `e`'s number naming the file and what it did."""
  return OSError(e.errno, f'cannot write {path}: {e.strerror or e}')


def read_table(path) -> pd.DataFrame:
  """A metrics CSV as a pandas DataFrame (empty cells are NaN)."""
  import pandas as pd  # pylint: disable=g-import-not-at-top

  try:
    return pd.read_csv(path)
  except pd.errors.EmptyDataError:
    return pd.DataFrame()


def read_metrics(path) -> dict[str, np.ndarray]:
  """Columns of a metrics CSV as float arrays (empty cells are NaN)."""
  table = read_table(path)
  return {key: table[key].to_numpy(dtype=float) for key in table.columns}


class RowsError(ValueError):
  """A metrics file does not hold a checkpoint's rows whole."""


def _fields(line: str) -> list[str]:
  return next(csv.reader([line]), [])


def read_rows(
  path,
  count: int,
  cut: bool = False,
  step: int | None = None,
  notes: list[str] | None = None,
) -> list[dict[str, float]]:
  """The first `count` rows of a metrics CSV; with `cut`, the file is also
  cut to them (atomically: a reader sees it whole, before or after).

  A resumed run continues from its checkpoint: the rows written after it
  are dropped so that none is duplicated, a row cut short among them too
  (a crash or a full disk while it was written; said in `notes`). The rows
  kept must be whole: each ends in a line break and has every field of the
  header; with `step` (the checkpoint's), the last is of step `step - 1`.

  Raises:
    RowsError: (a ValueError) naming the file and the line, if it has
      fewer than `count` rows, one of them is not whole, or the last is of
      another step.
  """
  path = pathlib.Path(path)
  lines: list[str] = []
  if path.is_file():
    with open(path, newline='') as f:
      lines = f.readlines()
  body = lines[1:]
  if len(body) < count:
    raise RowsError(
      f'{path} has {len(body)} metrics rows; the checkpoint needs {count}.'
    )
  if not lines:
    return []
  body = _whole_rows(path, lines, count, notes if cut else None)
  table = _numeric_rows(path, lines[0], body, count, step)
  header_whole = lines[0].endswith('\n')  # Else no row follows it.
  if cut and (len(lines) > count + 1 or not header_whole):
    tmp = path.with_name(path.name + '.tmp')
    with open(tmp, 'w', newline='') as dst:  # Header, rows as written.
      dst.writelines(lines[: count + 1] if header_whole else [])
      dst.flush()
      os.fsync(dst.fileno())
    tmp.replace(path)
  return table.to_dict('records')


def _whole_rows(
  path: pathlib.Path, lines: list[str], count: int, notes: list[str] | None
) -> list[str]:
  """The rows of `lines` (a header and rows) up to the first that is not
  whole, which must come after the first `count` (said in `notes`)."""
  body, width = lines[1:], len(_fields(lines[0]))
  for i, line in enumerate(body):
    if line.endswith('\n') and len(_fields(line)) == width:
      continue
    what = (
      'cut short (no line break at its end)'
      if not line.endswith('\n')
      else f'short: {len(_fields(line))} fields, the header has {width}'
    )
    if i < count:
      raise RowsError(
        f'{path} line {i + 2} is not a whole metrics row ({what}); the '
        f'checkpoint needs its first {count} rows whole. The file was '
        'damaged or edited: restore it, or start the run again '
        '(--overwrite).'
      )
    if notes is not None:
      notes.append(
        f'{path} line {i + 2} was {what} (a crash or a full disk while it '
        "was written); it followed the checkpoint's rows and is dropped "
        'with the rows after them (they come again).'
      )
    return body[:i]  # What pandas reads: the whole rows before it.
  return body


def _numeric_rows(
  path: pathlib.Path,
  header: str,
  body: list[str],
  count: int,
  step: int | None,
) -> pd.DataFrame:
  """The first `count` rows as a table, every field a number (or empty),
  the last of step `step - 1` (when `step` is given)."""
  table = pd.DataFrame()
  if count:
    table = pd.read_csv(io.StringIO(''.join([header, *body]))).iloc[:count]
  for column in table.columns:
    values = pd.to_numeric(table[column], errors='coerce')
    bad = values.isna() & table[column].notna()
    if bad.any():
      i = int(bad.to_numpy().argmax())
      raise RowsError(
        f'{path} line {i + 2}, column {column!r}: {table[column].iloc[i]!r} '
        'is not a number; the checkpoint needs its first '
        f'{count} rows whole. The file was damaged or edited: restore it, '
        'or start the run again (--overwrite).'
      )
  if step is not None and count:
    last = table['step'].iloc[-1] if 'step' in table else None
    if last is None or int(last) != step - 1:
      raise RowsError(
        f'{path} row {count} (line {count + 1}) is of step {last}, but the '
        f'checkpoint of step {step} follows step {step - 1}: the rows and '
        'the checkpoint disagree (edited?); restore them, or start the run '
        'again (--overwrite).'
      )
  return table


# ----------------------------------------------------------------------------
# Live curves: the same rows, as they come, for TensorBoard and W&B.

LOGGERS = ('tensorboard', 'wandb')
_EXTRAS = {
  'tensorboard': ('tensorboardX', 'disco_rl[tensorboard]'),
  'wandb': ('wandb', 'disco_rl[wandb]'),
}


class MissingLoggerError(ImportError, ValueError):
  """A logger's optional package is not installed (to the commands: bad
  input, one line)."""


def _import(logger: str):
  package, extra = _EXTRAS[logger]
  try:
    return importlib.import_module(package)
  except ImportError as e:
    raise MissingLoggerError(
      f'--log {logger} needs the {package!r} package, which is not '
      f"installed ({e}); install it with: pip install '{extra}'."
    ) from e


def _curves(rows) -> dict[int, dict[str, float]]:
  """{step: {curve: value}}: every number of the rows but the step; a run
  of several seeds gives a curve per seed ('avg_return/seed_3')."""
  steps: dict[int, dict[str, float]] = collections.defaultdict(dict)
  for row in rows:
    suffix = f'/seed_{int(row["seed"])}' if 'seed' in row else ''
    for key, value in row.items():
      if key not in ('step', 'seed') and isinstance(value, (int, float)):
        steps[int(row['step'])][key + suffix] = float(value)
  return steps


class TensorBoardWriter:
  """Event files in `directory` (`tensorboard --logdir DIR` shows them)."""

  def __init__(self, directory):
    self._writer = _import('tensorboard').SummaryWriter(logdir=str(directory))

  def write_rows(self, rows) -> None:
    for step, curves in _curves(rows).items():
      for tag, value in curves.items():
        if math.isfinite(value):
          self._writer.add_scalar(tag, value, global_step=step)
    self._writer.flush()

  def close(self) -> None:
    self._writer.close()


class WandbWriter:
  """A Weights & Biases run in `directory`, offline unless `$WANDB_MODE`
  says otherwise (`wandb sync DIR/wandb/offline-run-*` uploads it)."""

  def __init__(self, directory, name: str, config: dict[str, Any]):
    wandb = _import('wandb')
    pathlib.Path(directory).mkdir(parents=True, exist_ok=True)
    self._run = wandb.init(
      dir=str(directory),
      name=name,
      config=config,
      project=os.environ.get('WANDB_PROJECT', 'disco_rl'),
      mode=os.environ.get('WANDB_MODE', 'offline'),
      settings=wandb.Settings(silent=True, console='off'),
    )

  def write_rows(self, rows) -> None:
    for step, curves in _curves(rows).items():
      self._run.log(curves, step=step)

  def close(self) -> None:
    self._run.finish()


def check_loggers(loggers) -> tuple[str, ...]:
  """The loggers, each known and its package installed (imported now).

  Raises:
    ValueError: an unknown logger; `MissingLoggerError` (a ValueError) when
      a logger's package is not installed, naming the extra to install.
  """
  loggers = tuple(loggers)
  for logger in loggers:
    if logger not in LOGGERS:
      raise ValueError(f'Unknown logger {logger!r}; expected one of {LOGGERS}.')
    _import(logger)
  return loggers


def open_writers(
  csv_path, loggers, directory: pathlib.Path, name: str, config: dict[str, Any]
) -> list[Any]:
  """The writers of a run's rows: the metrics CSV (continued if it exists)
  and a live writer per logger (`make_writer`); each has `write_rows` and
  `close`."""
  return [MetricsWriter(csv_path, append=True)] + [
    make_writer(logger, directory, name, config) for logger in loggers
  ]


def make_writer(
  logger: str, directory: pathlib.Path, name: str, config: dict[str, Any]
):
  """The live writer `logger` ('tensorboard' or 'wandb') of a run whose
  files are in `directory`.

  Raises:
    ValueError: an unknown logger; `MissingLoggerError` when its package
      is not installed, naming the extra that installs it.
  """
  if logger == 'tensorboard':
    return TensorBoardWriter(directory / 'tensorboard')
  if logger == 'wandb':
    return WandbWriter(directory, name, config)
  raise ValueError(f'Unknown logger {logger!r}; expected one of {LOGGERS}.')
