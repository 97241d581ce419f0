# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What a run records as it goes: the metrics CSV, and memory figures.

Its plots are drawn by `disco_rl.plots`.
"""

import csv
import os
import pathlib
import resource
from typing import Any

import numpy as np


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
  (a resumed run; see `keep_rows`).
  """

  def __init__(self, path, append: bool = False):
    self.path = pathlib.Path(path)
    self.path.parent.mkdir(parents=True, exist_ok=True)
    fieldnames = None
    if append and self.path.is_file() and self.path.stat().st_size:
      with open(self.path, newline='') as f:
        fieldnames = next(csv.reader(f), None)
    self._file = open(self.path, 'a' if fieldnames else 'w', newline='')
    self._writer = None if fieldnames is None else self._dict_writer(
        fieldnames)

  def _dict_writer(self, fieldnames):
    return csv.DictWriter(self._file, fieldnames=list(fieldnames),
                          extrasaction='ignore', restval='')

  def write(self, row: dict[str, float]) -> None:
    self.write_rows([row])

  def write_rows(self, rows) -> None:
    """Writes several rows and flushes once."""
    for row in rows:
      if self._writer is None:
        self._writer = self._dict_writer(row)
        self._writer.writeheader()
      self._writer.writerow(row)
    self._file.flush()

  def close(self) -> None:
    self._file.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def read_table(path) -> 'pandas.DataFrame':
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


def keep_rows(path, count: int) -> list[dict[str, float]]:
  """Cuts a metrics CSV to its first `count` rows (atomically); returns them.

  A resumed run continues from its checkpoint: the rows written after it
  are dropped so that none is duplicated.

  Raises:
    ValueError: if the file has fewer than `count` rows.
  """
  path = pathlib.Path(path)
  table = read_table(path) if path.is_file() else None
  have = 0 if table is None else len(table)
  if have < count:
    raise ValueError(f'{path} has {have} metrics rows; the checkpoint needs '
                     f'{count}.')
  if table is None:
    return []
  table = table.iloc[:count]
  if have > count:
    tmp = path.with_name(path.name + '.tmp')
    with open(path, newline='') as src, open(tmp, 'w', newline='') as dst:
      for i, line in enumerate(src):  # Header and rows kept as written.
        if i > count:
          break
        dst.write(line)
    tmp.replace(path)
  return table.to_dict('records')
