# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Release habits: one version (pyproject.toml's, read from the installed
metadata), a changelog section for it, and a pre-commit configuration that
runs the ruff of the lint extra."""

import importlib.metadata
import pathlib
import re
import tomllib

from packaging import specifiers
from packaging import version as version_lib

import disco_rl

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / 'pyproject.toml').read_text())


def test_the_version_is_the_installed_metadata():
  assert disco_rl.__version__ == importlib.metadata.version('disco_rl')
  assert disco_rl.__version__ == PYPROJECT['project']['version']


def test_a_source_tree_without_metadata_reads_pyproject(monkeypatch, tmp_path):
  def not_installed(name):
    raise importlib.metadata.PackageNotFoundError(name)

  monkeypatch.setattr(importlib.metadata, 'version', not_installed)
  assert disco_rl._version() == PYPROJECT['project']['version']  # pylint: disable=protected-access
  # Without pyproject.toml beside the package either.
  monkeypatch.setattr(disco_rl, '__file__', str(tmp_path / 'x/__init__.py'))
  assert disco_rl._version() == '0+unknown'  # pylint: disable=protected-access


def test_the_changelog_has_the_version_and_unreleased_work():
  text = (ROOT / 'CHANGELOG.md').read_text()
  sections = re.findall(r'^## \[([^\]]+)\]', text, re.M)
  assert sections[0] == 'Unreleased'
  assert PYPROJECT['project']['version'] in sections
  # Keep a Changelog's kinds of change, nothing else.
  kinds = set(re.findall(r'^### (.+)$', text, re.M))
  assert kinds <= {
    'Added',
    'Changed',
    'Deprecated',
    'Removed',
    'Fixed',
    'Security',
  }, kinds


def test_pre_commit_runs_the_ruff_of_the_lint_extra():
  config = (ROOT / '.pre-commit-config.yaml').read_text()
  pins = set(re.findall(r"'ruff==([\d.]+)'", config))
  assert len(pins) == 1, pins
  (pin,) = pins
  (lint,) = PYPROJECT['project']['optional-dependencies']['lint']
  # The extra's lowest ruff ('ruff>=0.17.6,<0.18'): the version the code
  # was formatted with.
  allowed = specifiers.SpecifierSet(lint.removeprefix('ruff'))
  lowest = [s.version for s in allowed if s.operator == '>=']
  assert lowest == [pin], (pin, lint)
  assert version_lib.Version(pin) in allowed
