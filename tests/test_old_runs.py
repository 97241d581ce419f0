# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Run directories and committed settings written by earlier versions still
resume and load.

tests/data/runs_v0_1/ holds runs written by version 0.1 (commit e019efb,
before Catch's board left the configs' fields): an eval run stopped at 4
of its learner steps with a checkpoint (`eval`), and a meta-training run's
record and metrics (`meta`; its checkpoint, 12 MB of Disco103-sized rule
and optimiser state, is not committed). docs/results/ holds the records of
the studies' runs.
"""

import json
import pathlib
import shutil

import pytest

from disco_rl.cli import eval as eval_command
from disco_rl.jobs import records
from disco_rl.jobs import trainer as trainer_lib
from disco_rl.jobs.meta import config as meta_config
from disco_rl.runtime import metrics as metrics_lib
from disco_rl.runtime import run_dir as run_dir_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
OLD = pathlib.Path(__file__).resolve().parent / 'data' / 'runs_v0_1'


def test_an_old_eval_run_resumes_from_its_checkpoint(tmp_path):
  """Its record names the board in `rows`/`columns`: resumed as Catch 6x5
  through `env_kwargs`, with the checkpoint's state and rows."""
  run = tmp_path / 'eval'
  shutil.copytree(OLD / 'eval', run)
  before = metrics_lib.read_table(run / 'metrics.csv')
  trainer = trainer_lib.Trainer.resume(run, dict(num_steps=6), progress=False)
  assert trainer.config.env_kwargs == dict(rows=6, columns=5)
  assert trainer.step == len(before)  # The rows the checkpoint counts.
  summary = trainer.fit()
  trainer.close()
  assert summary['completed'] and summary['steps'] == 6
  after = metrics_lib.read_table(run / 'metrics.csv')
  assert len(after) == len(before) + 2
  assert list(after['step']) == list(range(len(after)))


def test_an_old_eval_run_resumes_from_the_command_line(tmp_path, capsys):
  run = tmp_path / 'eval'
  shutil.copytree(OLD / 'eval', run)
  assert (
    eval_command.main(['--resume', str(run), '--steps', '5', '--no-progress'])
    == 0
  )
  assert json.loads((run / 'summary.json').read_text())['steps'] == 5
  assert 'final average return' in capsys.readouterr().out


def test_an_old_meta_training_record_loads():
  record = run_dir_lib.RunDir(OLD / 'meta', read_only=True)
  saved = record.saved_settings('meta_train')
  assert (saved['rows'], saved['columns'], saved['tasks']) == (4, 3, ())
  config = meta_config.MetaTrainConfig(
    **records.upgrade_settings(meta_config.MetaTrainConfig, saved)
  )
  assert config.tasks == ('catch[rows=4,columns=3]',)
  assert config.suite[0].make_env(2).single_observation_spec()[
    'observation'
  ].shape == (4, 3, 1)


@pytest.mark.parametrize(
  'path',
  sorted(
    str(p.relative_to(ROOT)) for p in (ROOT / 'docs/results').rglob('run.json')
  ),
)
def test_every_committed_record_loads(path):
  job, saved = run_dir_lib.RunDir((ROOT / path).parent, read_only=True).record()
  cls = trainer_lib.CONFIGS[job]
  config = cls(**records.upgrade_settings(cls, saved))
  assert config.num_steps == saved['num_steps']
