# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.loops.reporting: metrics CSV, plots and memory probes."""

import numpy as np
import pytest

from disco_rl.loops import reporting


def test_metrics_round_trip_and_plot(tmp_path):
  with reporting.MetricsWriter(tmp_path / 'm.csv') as writer:
    writer.write(dict(step=0, avg_return=0.0))
    writer.write_rows([dict(step=s, avg_return=float('nan') if s == 3 else
                            s / 10) for s in range(1, 30)])
  metrics = reporting.read_metrics(tmp_path / 'm.csv')
  np.testing.assert_array_equal(metrics['step'], np.arange(30))
  assert np.isnan(metrics['avg_return'][3])
  np.testing.assert_allclose(metrics['avg_return'][4:], np.arange(4, 30) / 10)
  png = reporting.plot_curve(metrics['step'], metrics['avg_return'],
                             tmp_path / 'c.png', 'step', 'avg_return', 't',
                             smooth=5)
  data = png.read_bytes()
  assert data[:8] == b'\x89PNG\r\n\x1a\n' and len(data) > 5000


def test_resident_memory_follows_an_allocation():
  before = reporting.resident_memory_mb()
  block = np.ones(64 * 2**20, np.uint8)  # 64 MB, touched.
  after = reporting.resident_memory_mb()
  assert after - before > 50, (before, after)
  assert reporting.peak_memory_mb() >= after - 1
  del block


def test_keep_rows_then_append_continues_the_file(tmp_path):
  path = tmp_path / 'm.csv'
  with reporting.MetricsWriter(path) as writer:
    writer.write_rows([dict(step=i, value=i / 3, missing=float('nan'))
                       for i in range(5)])
  kept = reporting.keep_rows(path, 3)
  assert [r['step'] for r in kept] == [0, 1, 2]
  assert kept[1]['value'] == 1 / 3  # Floats survive the CSV exactly.
  # The header and the kept rows are the file's own bytes.
  lines = path.read_text().splitlines()
  assert len(lines) == 4 and lines[0] == 'step,value,missing'
  with reporting.MetricsWriter(path, append=True) as writer:
    writer.write_rows([dict(step=3, value=1.0, missing=2.0)])
  table = reporting.read_table(path)
  assert list(table['step']) == [0, 1, 2, 3]
  assert np.isnan(table['missing'][:3]).all() and table['missing'][3] == 2.0
  with pytest.raises(ValueError, match='has 4 metrics rows; the checkpoint '
                     'needs 9'):
    reporting.keep_rows(path, 9)
  assert reporting.keep_rows(tmp_path / 'absent.csv', 0) == []


def test_append_to_a_missing_or_empty_file_writes_a_header(tmp_path):
  path = tmp_path / 'm.csv'
  path.write_text('')
  with reporting.MetricsWriter(path, append=True) as writer:
    writer.write(dict(a=1))
  assert path.read_text().splitlines() == ['a', '1']
  assert reporting.read_metrics(tmp_path / 'm.csv')['a'].tolist() == [1.0]


def test_smoothed_skips_nan():
  y = [np.nan, 1.0, 3.0, np.nan, 5.0]
  np.testing.assert_allclose(reporting.smoothed(y, 2),
                             [np.nan, 1.0, 2.0, 3.0, 5.0])
