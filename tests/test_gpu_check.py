# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""scripts/gpu_check.py at tiny sizes on the CPU, so that it cannot rot
between GPU runs; and the golden report mode it reads."""

import argparse
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import golden_cases
import numpy as np
import pytest

SCRIPT = (
  pathlib.Path(__file__).resolve().parent.parent / 'scripts' / ('gpu_check.py')
)


def _load_script():
  spec = importlib.util.spec_from_file_location('gpu_check', SCRIPT)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


gpu_check = _load_script()


def _run(args, env=None, timeout=900):
  return subprocess.run(
    [sys.executable, str(SCRIPT), *args],
    env=env,
    capture_output=True,
    text=True,
    check=False,
    timeout=timeout,
  )


def _run_tiny(tmp_path, golden_dir, disco_103_path, sections=()):
  """Runs the check at tiny sizes on the CPU (all sections, or `sections`);
  asserts every section that ran is ok. Returns (out dir, {section: its
  results})."""
  env = dict(
    os.environ,
    DISCO_RL_GOLDEN_DIR=str(golden_dir),
    DISCO_RL_WEIGHTS=str(disco_103_path),
    MPLBACKEND='Agg',
  )
  env.pop('XLA_FLAGS', None)
  out = tmp_path / 'check'
  chosen = ['--sections', *sections] if sections else []
  done = _run(
    ['--cpu', '--tiny', '--fast-compile', *chosen, '--out', str(out)], env
  )
  assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
  results = json.loads((out / 'results.json').read_text())
  ran = results['sections']
  assert list(ran) == [
    s.name for s in gpu_check.SECTIONS if not sections or s.name in sections
  ]
  for name, section in ran.items():
    assert section['status'] == 'ok', (name, section)
  table = (out / 'results.md').read_text()
  for section in gpu_check.SECTIONS:
    assert (f'## {section.title}' in table) == (section.name in ran)
  assert table in done.stdout  # Printed too.
  return out, ran


def _rows(sections, name):
  return {r['run']: r for r in sections[name]['rows']}


def _check_device(sections):
  device = sections['device']['info']
  assert device['backend'] == 'cpu' and device['device_count'] >= 1
  assert {'jax', 'dm-haiku', 'rlax', 'gymnax'} <= set(device['versions'])


def _check_golden(sections, out):
  # On a CPU float32 products are exact at every precision: every key of
  # both cases passes at both precisions, against both references.
  golden = sections['golden']['rows']
  assert {(r['precision'], r['case'], r['reference']) for r in golden} == {
    (p, c, r)
    for p in ('default', 'highest')
    for c in ('disco_init', 'policy_gradient')
    for r in ('current_jax', 'jax_0.6.2')
  }
  for row in golden:
    assert row['keys'] > 0 and row['keys_passed'] == row['keys'], row
    assert row['worst_tol_ratio'] <= 1.0
  for precision in ('default', 'highest'):
    counts = sections['golden']['info'][f'pytest_{precision}']
    assert counts['passed'] > 0 and counts['failed'] == 0
    # At least one case compared at each precision (not merely no failure).
    assert sections['golden']['info']['cases_compared'][precision] >= 1
    assert sections['golden']['info']['pytest_exit'][precision] == 0
    assert any(r['precision'] == precision and r['keys'] > 0 for r in golden), (
      precision
    )
  keys = [
    json.loads(x) for x in (out / 'golden_keys.jsonl').read_text().splitlines()
  ]
  assert sum(r['keys'] for r in golden) == len(keys)


def _check_runs(sections):
  runs = _rows(sections, 'runs')
  assert set(runs) == {'1 run (1x1)', '4 runs (2x2)'}
  assert 'runs' not in runs['1 run (1x1)']
  assert runs['4 runs (2x2)']['runs'] == 4
  assert runs['4 runs (2x2)']['all_runs_learner_steps_per_s'] == pytest.approx(
    4 * runs['4 runs (2x2)']['learner_steps_per_s'], rel=1e-2
  )


def test_the_driver_runs_chosen_sections_at_tiny_sizes_on_the_cpu(
  tmp_path, golden_dir, disco_103_path
):
  """The driver and its device section. The golden section (a pytest run
  of the golden tests at two precisions, what the GPU run decides the
  matmul precision from: 60 s of the default suite's 20 min on
  2026-12-03) and the loop sections (the runs section: 45 s more) are in
  the slow test below; the golden section's verdicts are tested on their
  own here (a failed, empty or partial run)."""
  out, sections = _run_tiny(tmp_path, golden_dir, disco_103_path, ('device',))
  _check_device(sections)
  assert (out / 'results.md').is_file()


@pytest.mark.slow
def test_every_section_runs_at_tiny_sizes_on_the_cpu(
  tmp_path, golden_dir, disco_103_path
):
  out, sections = _run_tiny(tmp_path, golden_dir, disco_103_path)
  _check_device(sections)
  _check_golden(sections, out)
  _check_runs(sections)

  evals = _rows(sections, 'eval')
  assert set(evals) == {'defaults', 'defaults, highest'}
  assert evals['defaults, highest']['matmul_precision'] == 'highest'
  for row in evals.values():
    assert row['learner_steps_per_s'] > 0
    assert row['env_steps_per_s'] == pytest.approx(
      row['learner_steps_per_s'] * row['envs'] * row['rollout_len'], rel=1e-3
    )
    assert row['peak_host_rss_mb'] > 0
  minatar = _rows(sections, 'minatar')
  assert set(minatar) == {'acting, 8 envs', 'training loop'}
  assert all(r['env_steps_per_s'] > 0 for r in minatar.values())
  meta = _rows(sections, 'meta')
  assert set(meta) == {'paper preset, 2 agents'}  # Tiny: the paper's alone.
  assert meta['paper preset, 2 agents']['inner_steps'] == 3
  assert all(r['meta_steps_per_s'] > 0 for r in meta.values())
  assert '| run | batch | envs |' in (out / 'results.md').read_text()


def test_a_spent_budget_skips_sections_and_still_writes_results(tmp_path):
  out = tmp_path / 'check'
  done = _run(['--cpu', '--tiny', '--budget-s', '1', '--out', str(out)])
  assert done.returncode == 1
  results = json.loads((out / 'results.json').read_text())
  assert [s['status'] for s in results['sections'].values()] == [
    'skipped: the total budget is spent'
  ] * len(gpu_check.SECTIONS)
  assert '## Device and versions' in (out / 'results.md').read_text()


def test_a_section_past_its_budget_is_stopped(tmp_path, monkeypatch):
  """The section's process is killed at its budget; the driver goes on."""
  monkeypatch.setattr(
    gpu_check,
    'SECTIONS',
    (
      gpu_check.Section('runs', 'Runs in one program', 0.1, 0.1),
      gpu_check.Section('device', 'Device and versions', 120, 120),
    ),
  )
  monkeypatch.setattr(gpu_check, 'MIN_SECTION_S', 0)
  out = tmp_path / 'check'
  code = gpu_check.main(['--cpu', '--tiny', '--out', str(out)])
  assert code == 1
  sections = json.loads((out / 'results.json').read_text())['sections']
  assert sections['runs']['status'] == 'timed out after 0.1 s'
  assert sections['runs']['error']  # The end of its log.
  assert sections['device']['status'] == 'ok'


def test_sections_whose_modules_are_missing_fail_naming_why(tmp_path):
  """The reported defect: without pytest the golden section said 'ok' with
  0 tests at both precisions. A missing module, in a section's process or
  in a subprocess it starts, now fails the section with a one-line reason
  that names it and the exit status."""
  missing = tmp_path / 'missing'
  missing.mkdir()
  for name in ('pytest', 'jax'):  # Found before the real ones: as absent.
    (missing / f'{name}.py').write_text(
      f'raise ModuleNotFoundError("No module named {name!r}", name={name!r})\n'
    )
  env = dict(os.environ, PYTHONPATH=str(missing))
  out = tmp_path / 'check'
  done = _run(
    ['--cpu', '--tiny', '--sections', 'device', 'golden', '--out', str(out)],
    env,
    timeout=300,
  )
  assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-4000:]
  sections = json.loads((out / 'results.json').read_text())['sections']
  assert sections['device']['status'] == (
    "failed (exit 1): ModuleNotFoundError: No module named 'jax'"
  )
  golden = sections['golden']['status']
  assert golden.startswith(
    'failed (exit 1): pytest at matmul precisions '
    "'default' and 'highest' exited 1: "
  ), golden
  assert "No module named 'pytest'" in golden and '\n' not in golden
  assert sections['golden']['info']['pytest_exit'] == dict(default=1, highest=1)
  table = (out / 'results.md').read_text()
  assert 'ok in' not in table
  assert "No module named 'pytest'" in table


def _section_args(tmp_path, section):
  return argparse.Namespace(
    section=section,
    result=str(tmp_path / f'{section}.json'),
    out=str(tmp_path),
    tiny=True,
    min_time_s=0.0,
    max_calls=1,
  )


def test_a_subprocess_that_exits_non_zero_fails_the_golden_section(
  tmp_path, monkeypatch
):
  """Its exit status and why, at each precision that failed; what was
  recorded is kept."""
  monkeypatch.setattr(
    gpu_check,
    'PYTEST',
    (
      sys.executable,
      '-c',
      'import sys; print("collected 0 items"); '
      'print("ImportError: cannot import name golden", file=sys.stderr); '
      'sys.exit(4)',
    ),
  )
  args = _section_args(tmp_path, 'golden')
  assert gpu_check.run_section(args) == 1
  result = json.loads(pathlib.Path(args.result).read_text())
  assert result['info']['failure'] == (
    "pytest at matmul precisions 'default' and 'highest' exited 4: "
    'ImportError: cannot import name golden'
  )
  assert [r['case'] for r in result['rows']] == ['(no comparison recorded)'] * 2
  assert result['info']['cases_compared'] == dict(default=0, highest=0)


def test_a_golden_run_that_compares_nothing_fails(tmp_path, monkeypatch):
  """pytest exits 0 but records no comparison (every test skipped): the
  section fails, saying so at each precision."""
  monkeypatch.setattr(gpu_check, 'PYTEST', (sys.executable, '-c', ''))
  args = _section_args(tmp_path, 'golden')
  assert gpu_check.run_section(args) == 1
  failure = json.loads(pathlib.Path(args.result).read_text())['info']['failure']
  assert failure == (
    "no case compared at matmul precision 'default' (0 passed, 0 "
    "skipped); no case compared at matmul precision 'highest' (0 passed, "
    '0 skipped)'
  )


def test_a_section_that_measures_nothing_or_raises_fails(tmp_path, monkeypatch):
  monkeypatch.setitem(gpu_check.SECTION_FNS, 'runs', lambda rec, args: None)
  args = _section_args(tmp_path, 'runs')
  assert gpu_check.run_section(args) == 1
  assert (
    json.loads(pathlib.Path(args.result).read_text())['info']['failure']
    == 'measured nothing: the section recorded no row'
  )

  def missing(rec, args):
    del rec, args
    raise ModuleNotFoundError("No module named 'gymnax'", name='gymnax')

  monkeypatch.setitem(gpu_check.SECTION_FNS, 'runs', missing)
  assert gpu_check.run_section(args) == 1
  assert (
    json.loads(pathlib.Path(args.result).read_text())['info']['failure']
    == "ModuleNotFoundError: No module named 'gymnax'"
  )


def test_the_reason_is_the_line_that_says_why():
  assert gpu_check.reason_from_log(
    'Traceback (most recent call last):\n  File "x.py"\n'
    "ModuleNotFoundError: No module named 'jax'\n"
  ) == ("ModuleNotFoundError: No module named 'jax'")
  assert gpu_check.reason_from_log(
    '/usr/bin/python3: No module named pytest\n'
  ) == ('/usr/bin/python3: No module named pytest')
  assert gpu_check.reason_from_log('1 failed, 2 passed in 3.0s\n\n') == (
    '1 failed, 2 passed in 3.0s'
  )
  assert gpu_check.reason_from_log('') == 'no output'
  assert gpu_check.one_line('a\n  b ' + 'c' * 400, 20) == 'a b ' + 'c' * 13 + (
    '...'
  )


def test_an_output_folder_with_results_is_refused(tmp_path):
  (tmp_path / 'results.json').write_text('{}')
  done = _run(['--cpu', '--tiny', '--sections', 'runs', '--out', str(tmp_path)])
  assert done.returncode != 0
  assert 'results.json exists: choose an empty --out' in done.stderr


@pytest.mark.golden
def test_report_mode_records_every_key_and_flags_the_bad_one(
  tmp_path, monkeypatch, golden, golden_dir
):
  checked = golden_cases.load_case(
    golden, golden_dir, golden_cases.CURRENT_JAX, 'policy_gradient'
  )
  prefix = 'out|True'
  tree = {k: np.array(v) for k, v in checked.under(prefix).items()}
  assert len(tree) == 3
  bad, good, missing = sorted(tree)
  tree[bad] = tree[bad] + 1.0  # Past atol=2e-4 everywhere.
  del tree[missing]
  report = tmp_path / 'report.jsonl'
  monkeypatch.setenv(golden_cases.REPORT_ENV, str(report))
  checked.check(tree, prefix)  # Records; does not raise.
  lines = {
    x['key']: x for x in map(json.loads, report.read_text().splitlines())
  }
  assert set(lines) == {f'{prefix}|{k}' for k in checked.under(prefix)}
  assert not lines[f'{prefix}|{bad}']['passed']
  assert lines[f'{prefix}|{bad}']['max_abs_err'] == pytest.approx(1.0)
  assert lines[f'{prefix}|{bad}']['tol_ratio'] > 1
  assert lines[f'{prefix}|{good}']['passed']
  assert lines[f'{prefix}|{good}']['tol_ratio'] == 0.0
  assert not lines[f'{prefix}|{missing}']['passed']
  assert lines[f'{prefix}|{missing}']['problem'].startswith('missing')
  monkeypatch.delenv(golden_cases.REPORT_ENV)
  with pytest.raises(AssertionError, match=bad):
    checked.check(tree, prefix)


def test_golden_summary_takes_the_worst_of_each_case():
  lines = [
    dict(
      case='a',
      reference='r',
      key='k1',
      passed=True,
      tol_ratio=0.5,
      leaf_rel_err=1e-3,
      max_abs_err=1e-4,
    ),
    dict(
      case='a',
      reference='r',
      key='k2',
      passed=False,
      tol_ratio=3.0,
      leaf_rel_err=2e-2,
      max_abs_err=1e-2,
    ),
    dict(case='a', reference='r', key='k3', passed=True),  # Integers.
    dict(
      case='b',
      reference='r',
      key='k1',
      passed=True,
      tol_ratio=0.1,
      leaf_rel_err=0.0,
      max_abs_err=0.0,
    ),
  ]
  assert gpu_check.golden_summary(lines) == [
    dict(
      case='a',
      reference='r',
      keys=3,
      keys_passed=2,
      worst_tol_ratio=3.0,
      worst_leaf_rel_err=2e-2,
      worst_max_abs_err=1e-2,
      failing_keys=['k2'],
    ),
    dict(
      case='b',
      reference='r',
      keys=1,
      keys_passed=1,
      worst_tol_ratio=0.1,
      worst_leaf_rel_err=0.0,
      worst_max_abs_err=0.0,
      failing_keys=[],
    ),
  ]
