# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.runtime.metrics: the metrics rows as a CSV and as live curves
(TensorBoard, Weights & Biases), memory probes; and disco_rl.plots."""

import mmap

from live_curves import tensorboard_curves
from live_curves import wandb_history
import numpy as np
import pytest
import tiny

from disco_rl import plots
from disco_rl.jobs import config as config_lib
from disco_rl.jobs import trainer as trainer_lib
from disco_rl.runtime import metrics as metrics_lib


def test_metrics_round_trip_and_plot(tmp_path):
  with metrics_lib.MetricsWriter(tmp_path / 'm.csv') as writer:
    writer.write(dict(step=0, avg_return=0.0))
    writer.write_rows(
      [
        dict(step=s, avg_return=float('nan') if s == 3 else s / 10)
        for s in range(1, 30)
      ]
    )
  metrics = metrics_lib.read_metrics(tmp_path / 'm.csv')
  np.testing.assert_array_equal(metrics['step'], np.arange(30))
  assert np.isnan(metrics['avg_return'][3])
  np.testing.assert_allclose(metrics['avg_return'][4:], np.arange(4, 30) / 10)
  png = plots.plot_curve(
    metrics['step'],
    metrics['avg_return'],
    tmp_path / 'c.png',
    'step',
    'avg_return',
    't',
    smooth=5,
  )
  data = png.read_bytes()
  assert data[:8] == b'\x89PNG\r\n\x1a\n' and len(data) > 5000


def test_resident_memory_follows_an_allocation():
  """A fresh mapping of 64 MB, every page touched (an array from malloc
  may reuse pages an earlier test freed but the process kept resident)."""
  before = metrics_lib.resident_memory_mb()
  with mmap.mmap(-1, 64 * 2**20) as block:
    for i in range(0, len(block), mmap.PAGESIZE):
      block[i] = 1
    after = metrics_lib.resident_memory_mb()
  assert after - before > 50, (before, after)
  assert metrics_lib.peak_memory_mb() >= after - 1


def test_read_rows_cut_then_append_continues_the_file(tmp_path):
  path = tmp_path / 'm.csv'
  with metrics_lib.MetricsWriter(path) as writer:
    writer.write_rows(
      [dict(step=i, value=i / 3, missing=float('nan')) for i in range(5)]
    )
  before = path.read_bytes()
  assert len(metrics_lib.read_rows(path, 3)) == 3  # Reading alone: no cut.
  assert path.read_bytes() == before
  kept = metrics_lib.read_rows(path, 3, cut=True)
  assert [r['step'] for r in kept] == [0, 1, 2]
  assert kept[1]['value'] == 1 / 3  # Floats survive the CSV exactly.
  # The header and the kept rows are the file's own bytes.
  lines = path.read_text().splitlines()
  assert len(lines) == 4 and lines[0] == 'step,value,missing'
  with metrics_lib.MetricsWriter(path, append=True) as writer:
    writer.write_rows([dict(step=3, value=1.0, missing=2.0)])
  table = metrics_lib.read_table(path)
  assert list(table['step']) == [0, 1, 2, 3]
  assert np.isnan(table['missing'][:3]).all() and table['missing'][3] == 2.0
  with pytest.raises(
    ValueError, match='has 4 metrics rows; the checkpoint needs 9'
  ):
    metrics_lib.read_rows(path, 9, cut=True)
  assert metrics_lib.read_rows(tmp_path / 'absent.csv', 0) == []


def test_a_kept_row_that_is_not_numbers_is_named(tmp_path):
  """A field edited to text among the rows a checkpoint keeps: an error
  naming the file, the line and the column (before, resume went on and
  failed later in a comparison of text and numbers, naming nothing)."""
  path = tmp_path / 'm.csv'
  path.write_text('step,value,missing\n0,1.5,\n1,x,\n2,2.5,\n')
  with pytest.raises(
    metrics_lib.RowsError,
    match=f"{path} line 3, column 'value': 'x' is not a number",
  ):
    metrics_lib.read_rows(path, 3, step=3)
  assert len(metrics_lib.read_rows(path, 1, step=1)) == 1  # Before it: fine.


def test_a_row_with_new_keys_widens_the_header_keeping_every_row(tmp_path):
  """A run resumed by a package that logs more (before, the new keys were
  dropped without a word): the new columns follow the old ones, empty in
  the earlier rows, and every value written is read back."""
  path = tmp_path / 'm.csv'
  with metrics_lib.MetricsWriter(path) as writer:
    writer.write_rows([dict(step=0, a=0.5), dict(step=1, a=1 / 3)])
  with metrics_lib.MetricsWriter(path, append=True) as writer:
    writer.write_rows([dict(step=2, a=2.0, b=7.0), dict(step=3, b=8.0, c=9.0)])
    writer.write(dict(step=4, a=4.0))
  lines = path.read_text().splitlines()
  assert lines[0] == 'step,a,b,c'
  assert lines[1:3] == ['0,0.5,,', f'1,{1 / 3!r},,']
  table = metrics_lib.read_table(path)
  assert list(table['step']) == [0, 1, 2, 3, 4]
  np.testing.assert_array_equal(table['a'], [0.5, 1 / 3, 2.0, np.nan, 4.0])
  np.testing.assert_array_equal(table['b'], [np.nan] * 2 + [7.0, 8.0, np.nan])
  np.testing.assert_array_equal(table['c'], [np.nan] * 3 + [9.0, np.nan])
  # The widened rows are whole for a resume that keeps them.
  kept = metrics_lib.read_rows(path, 4, cut=True, step=4)
  assert kept[3]['c'] == 9.0 and np.isnan(kept[0]['b'])
  assert not path.with_name('m.csv.tmp').exists()


def test_append_to_a_missing_or_empty_file_writes_a_header(tmp_path):
  path = tmp_path / 'm.csv'
  path.write_text('')
  with metrics_lib.MetricsWriter(path, append=True) as writer:
    writer.write(dict(a=1))
  assert path.read_text().splitlines() == ['a', '1']
  assert metrics_lib.read_metrics(tmp_path / 'm.csv')['a'].tolist() == [1.0]


def test_smoothed_skips_nan():
  y = [np.nan, 1.0, 3.0, np.nan, 5.0]
  np.testing.assert_allclose(plots.smoothed(y, 2), [np.nan, 1.0, 2.0, 3.0, 5.0])


# ----------------------------------------------------------------------------
# Live curves.


def test_the_live_curves_hold_the_rows_of_the_csv(tmp_path, fast_compile):
  """A Trainer run of two seeds writes every number of every row to
  TensorBoard and W&B, a curve per seed, as the CSV has them."""
  del fast_compile
  config = tiny.eval_config(
    **tiny.SMALL_AGENT,
    num_devices=1,
    steps_per_call=2,
    num_steps=3,
    num_seeds=2,
    seed=3,
  )
  run = trainer_lib.Trainer(
    config, tmp_path / 'run', progress=False, loggers=('tensorboard', 'wandb')
  )
  run.fit()
  rows = metrics_lib.read_table(tmp_path / 'run/metrics.csv')
  board = tensorboard_curves(tmp_path / 'run/tensorboard')
  history = wandb_history(tmp_path / 'run')
  assert sorted(history) == list(range(4))
  for row in rows.to_dict('records'):
    step, seed = int(row['step']), int(row['seed'])
    for key in ('avg_return', 'episodes', 'total_loss', 'env_steps'):
      value, tag = row[key], f'{key}/seed_{seed}'
      if np.isfinite(value):
        np.testing.assert_allclose(board[tag][step], value, rtol=1e-6)
        np.testing.assert_allclose(history[step][tag], value, rtol=1e-6)
      else:  # NaN (no episode ended, no learner step yet): not on the board.
        assert step not in board.get(tag, {})


def test_loggers_are_checked_before_anything_is_built(tmp_path, hide_package):
  config = config_lib.EvalConfig()
  with pytest.raises(
    ValueError,
    match=r"Unknown logger 'csv'; expected one "
    r"of \('tensorboard', 'wandb'\)",
  ):
    trainer_lib.Trainer(config, tmp_path / 'a', loggers=('csv',))
  with pytest.raises(
    ValueError,
    match=r"loggers \['tensorboard'\] write "
    "into the run's directory: pass output_dir",
  ):
    trainer_lib.Trainer(config, loggers=('tensorboard',))
  hide_package('wandb')
  with pytest.raises(
    metrics_lib.MissingLoggerError,
    match=(
      r"--log wandb needs the 'wandb' package, which is not installed .*"
      r"pip install 'disco_rl\[wandb\]'"
    ),
  ):
    trainer_lib.Trainer(config, tmp_path / 'b', loggers=('wandb',))
  assert not (tmp_path / 'a').exists() and not (tmp_path / 'b').exists()
