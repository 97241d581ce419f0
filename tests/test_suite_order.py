# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The suite's own scheduling (tests/conftest.py): under `make test`'s
`-n 2 --dist loadgroup`, tests that share a module-scoped fixture (an
`xdist_group` marker, or a file of SHARED_FIXTURE_FILES) run on one worker,
one after another, so the fixture is built once."""

import json
import os
import pathlib

import pytest

TESTS_DIR = pathlib.Path(__file__).resolve().parent

_TESTS = """
import json
import os
import time

import pytest

LOG = {log!r}


def _log(**entry):
  with open(LOG, 'a') as f:
    f.write(json.dumps(dict(entry, worker=os.environ['PYTEST_XDIST_WORKER']))
            + '\\n')


@pytest.fixture(scope='module')
def built():
  _log(event='built')


shared = pytest.mark.xdist_group('shared')


@shared
def test_first_reader(built):
  _log(event='first_reader')


@pytest.mark.parametrize('i', range(6))
def test_alone(i):
  time.sleep(0.2)


@shared
def test_second_reader(built):
  _log(event='second_reader')
"""


# Slow (moved to `make test-slow` 2026-12-04 for the 8-minute default run; a
# check of the test harness's scheduling, not of the package)
@pytest.mark.slow
def test_a_group_runs_on_one_worker_and_builds_its_fixture_once(
  pytester, monkeypatch
):
  log = pytester.path / 'log.jsonl'
  pytester.makeconftest((TESTS_DIR / 'conftest.py').read_text())
  pytester.makepyfile(test_grouped=_TESTS.format(log=str(log)))
  # The conftest imports smoke_env (tests/) in every test's fixture.
  monkeypatch.setenv(
    'PYTHONPATH',
    os.pathsep.join([str(TESTS_DIR), os.environ.get('PYTHONPATH', '')]),
  )
  result = pytester.runpytest_subprocess(
    '-n',
    '2',
    '--dist',
    'loadgroup',
    '--no-loadscope-reorder',
    '-p',
    'no:cacheprovider',
  )
  result.assert_outcomes(passed=8)
  entries = [json.loads(line) for line in log.read_text().splitlines()]
  assert [e['event'] for e in entries] == [
    'built',
    'first_reader',
    'second_reader',
  ], entries
  assert len({e['worker'] for e in entries}) == 1, entries
