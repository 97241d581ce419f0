# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The `disco-rl` console script (disco_rl.cli.main), run as users type it:
the installed script in a process of its own, on the paths that run
nothing (help, refused command lines). The commands' runs through it are
in test_examples.py (eval, meta-train, export-rule) and
test_studies_run.py (study); probe-rule's runs call its `main` in
test_jobs_meta_probe.py."""

import os
import subprocess
import sys

import pytest
from smoke_env import disco_rl_command

from disco_rl.cli import main as main_lib

TIMEOUT_S = 300
SUBCOMMANDS = ('eval', 'meta-train', 'study', 'export-rule', 'probe-rule')


def _run(command: list[str]) -> subprocess.CompletedProcess:
  """`command` in a process of its own (JAX on the CPU), output captured."""
  return subprocess.run(
    command,
    env=dict(os.environ, JAX_PLATFORMS='cpu'),
    capture_output=True,
    text=True,
    timeout=TIMEOUT_S,
  )


def _error_line(result, prog: str) -> str:
  """The one `error:` line of a refused command line (argparse's usage
  above it, exit status 2), after `PROG: error: `."""
  assert result.returncode == 2, result.stderr[-2000:]
  assert not result.stdout and 'Traceback' not in result.stderr
  lines = result.stderr.splitlines()
  assert lines[0].startswith(f'usage: {prog} '), lines[0]
  assert [line for line in lines if 'error:' in line] == [lines[-1]]
  assert lines[-1].startswith(f'{prog}: error: '), lines[-1]
  return lines[-1][len(f'{prog}: error: ') :]


def test_help_lists_the_subcommands():
  assert tuple(main_lib.COMMANDS) == SUBCOMMANDS
  result = _run(disco_rl_command('--help'))
  assert result.returncode == 0, result.stderr
  assert result.stdout.startswith('usage: disco-rl [-h] SUBCOMMAND [ARGS...]')
  for name in SUBCOMMANDS:
    assert f'\n  {name} ' in result.stdout, result.stdout


@pytest.mark.parametrize(
  'args, error',
  [
    ([], 'the following arguments are required: SUBCOMMAND'),
    (['evaluate', '--steps', '3'], "invalid choice: 'evaluate'"),
  ],
)
def test_no_or_an_unknown_subcommand_is_one_error_line(args, error):
  assert error in _error_line(_run(disco_rl_command(*args)), 'disco-rl')


@pytest.mark.parametrize('subcommand', SUBCOMMANDS)
def test_each_subcommand_names_itself_and_refuses_a_bad_flag(subcommand):
  """The subcommand's own parser, its usage as typed (`disco-rl
  meta-train ...`): a flag it lacks is one `error:` line and exit 2."""
  # The positional arguments and required flags, so that the flag is
  # what is refused.
  needed = {
    'study': ['spec.py', '--out', 'out'],
    'export-rule': ['run', '--out', 'rule.npz'],
  }.get(subcommand, [])
  result = _run(disco_rl_command(subcommand, *needed, '--no-such-flag'))
  assert _error_line(result, f'disco-rl {subcommand}') == (
    'unrecognized arguments: --no-such-flag'
  )


def test_python_m_runs_a_command_named_so():
  """`python -m disco_rl.cli.eval` runs the same command, named so."""
  result = _run([sys.executable, '-m', 'disco_rl.cli.eval', '--help'])
  assert result.returncode == 0, result.stderr[-2000:]
  assert result.stdout.startswith('usage: python -m disco_rl.cli.eval ')
