# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""scripts/checkpoint_returns.py: the stated procedure that picks a rule
from a run's checkpoints, and its refusals."""

import pathlib

import pandas as pd
import pytest

SCRIPTS = pathlib.Path(__file__).resolve().parent.parent / 'scripts'


@pytest.fixture(name='script')
def _script(monkeypatch):
  monkeypatch.syspath_prepend(str(SCRIPTS))
  import checkpoint_returns  # pylint: disable=g-import-not-at-top

  return checkpoint_returns


def test_pick_ranks_meta_steps_by_their_mean_score_over_the_given_envs(
  script,
):
  """(final - random) / (actor_critic - random), averaged over the named
  environments only; a meta-step missing one of them is left out; another
  arm's rows do not count."""
  rows = [
    ('A', 100, 'e1', 1.0),  # (1 - 0) / (2 - 0) = 0.5
    ('A', 100, 'e2', 3.0),  # (3 - 1) / (11 - 1) = 0.2: mean 0.35
    ('A', 200, 'e1', 2.0),  # 1.0
    ('A', 200, 'e2', 0.0),  # -0.1: mean 0.45
    ('A', 300, 'e1', 9.0),  # e2 not measured: left out
    ('A', 100, 'test', 99.0),  # not a selection environment
    ('B', 200, 'e1', 50.0),
    ('B', 200, 'e2', 50.0),
  ]
  table = pd.DataFrame(rows, columns=['arm', 'meta_step', 'env', 'final'])
  baselines = pd.DataFrame(
    {'random': [0.0, 1.0, 0.0], 'actor_critic': [2.0, 11.0, 1.0]},
    index=['e1', 'e2', 'test'],
  )
  ranking = script.pick(table, 'A', ['e1', 'e2'], baselines)
  assert list(ranking.index) == [200, 100]
  assert list(ranking) == pytest.approx([0.45, 0.35])


def test_a_directory_without_a_run_is_refused(script, tmp_path, capsys):
  with pytest.raises(SystemExit) as stopped:
    script.main([str(tmp_path), '--steps', '1', '--csv', str(tmp_path / 'x')])
  assert stopped.value.code == 2
  assert f'no meta-training run in {tmp_path}' in capsys.readouterr().err
  (tmp_path / 'run.json').write_text('{}')
  with pytest.raises(SystemExit) as stopped:
    script.main(
      [str(tmp_path), '--steps', '1', '--csv', str(tmp_path / 'x'), '--pick']
    )
  assert stopped.value.code == 2
  assert '--pick needs --baselines' in capsys.readouterr().err
