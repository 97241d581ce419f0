# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What the loops leave behind: a metrics CSV, plots and memory figures."""

import csv
import os
import pathlib
import resource

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
  """Appends CSV rows as they come; the first row fixes the columns."""

  def __init__(self, path):
    self.path = pathlib.Path(path)
    self.path.parent.mkdir(parents=True, exist_ok=True)
    self._file = open(self.path, 'w', newline='')
    self._writer = None

  def write(self, row: dict[str, float]) -> None:
    self.write_rows([row])

  def write_rows(self, rows) -> None:
    """Writes several rows and flushes once."""
    for row in rows:
      if self._writer is None:
        self._writer = csv.DictWriter(self._file, fieldnames=list(row),
                                      extrasaction='ignore', restval='')
        self._writer.writeheader()
      self._writer.writerow(row)
    self._file.flush()

  def close(self) -> None:
    self._file.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()


def read_metrics(path) -> dict[str, np.ndarray]:
  """Columns of a metrics CSV as float arrays (empty cells are NaN)."""
  with open(path, newline='') as f:
    rows = list(csv.DictReader(f))
  if not rows:
    return {}
  return {key: np.array([float(r[key]) if r[key] != '' else np.nan
                         for r in rows]) for key in rows[0]}


def plot_curve(x, y, path, xlabel: str, ylabel: str, title: str,
               smooth: int = 0) -> pathlib.Path:
  """Saves a line plot as PNG, with a `smooth`-point moving average if > 0."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(7, 4))
  x, y = np.asarray(x), np.asarray(y, dtype=float)
  ax.plot(x, y, alpha=0.35 if smooth else 1.0, label=ylabel)
  if smooth and len(y) >= smooth:
    valid = np.where(np.isnan(y), 0.0, y)
    counts = np.convolve(~np.isnan(y), np.ones(smooth), 'valid')
    avg = np.convolve(valid, np.ones(smooth), 'valid') / np.maximum(counts, 1)
    ax.plot(x[smooth - 1:], avg, label=f'{ylabel} ({smooth}-step mean)')
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.set_title(title)
  ax.grid(alpha=0.3)
  ax.legend()
  fig.tight_layout()
  path = pathlib.Path(path)
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path
