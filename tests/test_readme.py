# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The Python examples of the README and of docs/*.md run as written."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The front page, then the documentation pages in sorted order.
PAGES = [ROOT / 'README.md'] + sorted((ROOT / 'docs').glob('*.md'))


def python_blocks() -> list[tuple[str, str]]:
  """(id, code) of every ```python block: 'docs/runs.md:2' is that page's 2nd."""
  blocks = []
  for page in PAGES:
    name = page.relative_to(ROOT).as_posix()
    found = re.findall(r'```python\n(.*?)```', page.read_text(), re.S)
    blocks += [(f'{name}:{i}', code) for i, code in enumerate(found, 1)]
  return blocks


BLOCKS = python_blocks()


def test_readme_has_the_examples():
  codes = [code for _, code in BLOCKS]
  assert any('jax.jit(agent.learner_step' in b for b in codes)
  assert any('Trainer(' in b and 'resume=True' in b for b in codes)


def test_relative_links_resolve():
  """Every relative link of the pages names a file that exists."""
  bad = []
  for page in PAGES:
    text = re.sub(r'```.*?```', '', page.read_text(), flags=re.S)
    for target in re.findall(r'\]\(([^)\s]+)\)', text):
      if re.match(r'[a-z]+:', target) or target.startswith('#'):
        continue
      path = target.split('#', 1)[0]
      if not (page.parent / path).exists():
        bad.append(f'{page.relative_to(ROOT)}: {target}')
  assert not bad, bad


@pytest.mark.weights
@pytest.mark.parametrize('block_id, code', BLOCKS,
                         ids=[block_id for block_id, _ in BLOCKS])
def test_readme_example_runs(block_id, code, tmp_path, monkeypatch, capsys,
                             fast_compile):
  """Each block runs in a fresh namespace, in a temporary directory."""
  del fast_compile
  monkeypatch.chdir(tmp_path)
  if 'range(1000 // 20)' in code:  # The job example: a short run suffices.
    assert 'EvalConfig(steps_per_call=20,' in code, block_id
    code = code.replace('range(1000 // 20)', 'range(2)').replace(
        'job.step(state, 20)', 'job.step(state, 2)').replace(
        'EvalConfig(steps_per_call=20,',
        'EvalConfig(steps_per_call=2, dense=(16,), model_lstm_size=8, '
        'model_head_hiddens=(8,),')
  if 'num_seeds=4' in code:  # The seeds are what the text says.
    code += ('\nassert metrics["episodes"].shape == (2, 4)'
             '\nassert jax.tree.leaves(params)[0].shape[0] == 4')
  namespace = {'__name__': '__readme__'}
  exec(compile(code, f'{block_id} (python block)', 'exec'), namespace)  # pylint: disable=exec-used
  if 'Trainer(' in code:
    summary = namespace['summary']
    assert summary['steps'] == 40 and summary['interrupted'] is None
    rows = (tmp_path / 'runs/readme_example/metrics.csv').read_text()
    assert len(rows.splitlines()) == 1 + 40 + 3  # header, steps, warm-up
    assert 'avg_return' in capsys.readouterr().out
