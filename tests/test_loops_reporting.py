# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.loops.reporting: metrics CSV, plots and memory probes."""

import numpy as np

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
