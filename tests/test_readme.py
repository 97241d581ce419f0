# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The README's Python examples run as written."""

import pathlib
import re

import pytest

README = pathlib.Path(__file__).resolve().parent.parent / 'README.md'


def python_blocks() -> list[str]:
  return re.findall(r'```python\n(.*?)```', README.read_text(), re.S)


def test_readme_has_the_examples():
  blocks = python_blocks()
  assert any('jax.jit(agent.learner_step' in b for b in blocks)
  assert any('Trainer(' in b and 'resume=True' in b for b in blocks)


@pytest.mark.weights
@pytest.mark.parametrize('index', range(len(python_blocks())))
def test_readme_example_runs(index, tmp_path, monkeypatch, capsys,
                             fast_compile):
  """Each block runs in a fresh namespace, in a temporary directory."""
  del fast_compile
  monkeypatch.chdir(tmp_path)
  code = python_blocks()[index]
  if 'range(1000 // 20)' in code:  # The loop example: a short run suffices.
    code = code.replace('range(1000 // 20)', 'range(2)').replace(
        'EvalConfig(steps_per_call=20)',
        'EvalConfig(steps_per_call=2, dense=(16,), model_lstm_size=8, '
        'model_head_hiddens=(8,))')
  namespace = {'__name__': '__readme__'}
  exec(compile(code, f'README.md block {index}', 'exec'), namespace)  # pylint: disable=exec-used
  if 'Trainer(' in code:
    summary = namespace['summary']
    assert summary['steps'] == 40 and summary['interrupted'] is None
    rows = (tmp_path / 'runs/readme_example/metrics.csv').read_text()
    assert len(rows.splitlines()) == 1 + 40 + 3  # header, steps, warm-up
    assert 'avg_return' in capsys.readouterr().out
