# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The documentation shows the package as it is. For README.md and every
page under docs/ (not docs/results/, the committed outputs):

- every Python block (```python or ```py) runs, in a fresh namespace and a
  temporary directory, with the weights the tests read; blocks that train
  run at tiny sizes through the visible tables below (SUBSTITUTIONS, BEFORE,
  AFTER). A block the tests do not run says why on the page, in the
  paragraph right above it: "(not run by the tests: REASON)" or
  `<!-- not run: REASON -->`.
- every `disco_rl.…` name in inline code or a code block (and every name a
  `from disco_rl… import` line imports) resolves: the longest prefix that is
  a module is imported, the rest are its attributes.
- every `--flag` of a documented command line (a ```bash block's
  `python -m disco_rl.…` or `make TARGET ARGS='…'` line, or inline code
  starting so) is an option of that command's own argparse parser.

The last tests run each checker on small made-up pages with an error of its
kind, and see it found.
"""

import argparse
import dataclasses
import importlib
import importlib.util
import inspect
import json
import pathlib
import re
import shlex
import textwrap
import types
from unittest import mock

import pytest

from disco_rl import environments
from disco_rl.cli import main as cli_main

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The front page, then the documentation pages in sorted order.
PAGES = [ROOT / 'README.md'] + sorted(
  page
  for page in (ROOT / 'docs').rglob('*.md')
  if 'results' not in page.relative_to(ROOT / 'docs').parts
)

# ---------------------------------------------------------------------------
# Reading a page.

FENCE = re.compile(r'^ *```(\w*)[^\n]*\n(.*?)^ *``` *$', re.S | re.M)
PYTHON = ('python', 'py', 'python3')
SHELL = ('bash', 'sh', 'shell', 'console')
# The reason a Python block is not run, in the paragraph right above it.
NOT_RUN = re.compile(
  r'<!--\s*not\s+run:\s*(.+?)\s*-->|\(not\s+run\s+by\s+the\s+tests:\s*([^)]+)\)',
  re.S | re.I,
)


@dataclasses.dataclass(frozen=True)
class Block:
  """A fenced code block of a page."""

  id: str  # 'docs/api.md:2': the page's 2nd Python block ('' for others).
  lang: str
  code: str
  not_run: str | None  # The reason given above a Python block, if any.


def blocks(text: str, name: str = 'page.md') -> list[Block]:
  """The fenced code blocks of a page's `text`, in order."""
  found, count = [], 0
  for match in FENCE.finditer(text):
    lang, code = match.group(1).lower(), textwrap.dedent(match.group(2))
    block_id, reason = '', None
    if lang in PYTHON:
      count += 1
      block_id = f'{name}:{count}'
      above = text[: match.start()].rstrip().rsplit('\n\n', 1)[-1]
      marker = NOT_RUN.search(above)
      if marker:
        reason = ' '.join((marker.group(1) or marker.group(2)).split())
    found.append(Block(block_id, lang, code, reason))
  return found


def prose(text: str) -> str:
  """`text` without its fenced code blocks."""
  return FENCE.sub('', text)


def inline_code(text: str) -> list[str]:
  """The inline code spans of `text`'s prose (one may span lines, not
  paragraphs), each on one line."""
  spans = re.findall(r'`((?:[^`\n]|\n(?!\n))+)`', prose(text))
  return [' '.join(span.split()) for span in spans]


def page_name(page: pathlib.Path) -> str:
  return page.relative_to(ROOT).as_posix()


# ---------------------------------------------------------------------------
# 1. The Python blocks run.

# What the tests change in a block before running it, (old, new) pairs:
# blocks that train run at tiny sizes. Each `old` must be in the block, so
# a block edited on its page fails here rather than run at full size.
_TINY_AGENT = 'dense=(8,), model_lstm_size=4, model_head_hiddens=(4,)'
SUBSTITUTIONS = {
  # The job example: 2 calls of 2 iterations instead of 50 of 20.
  'docs/api.md:2': (
    ('range(1000 // 20)', 'range(2)'),
    ('job.step(state, 20)', 'job.step(state, 2)'),
    (
      'EvalConfig(steps_per_call=20,',
      'EvalConfig(steps_per_call=2, dense=(16,), model_lstm_size=8, '
      'model_head_hiddens=(8,),',
    ),
  ),
  # The corridor: 3 learner steps at tests/test_custom_env.py's sizes (its
  # program, which the session's compilation cache then holds).
  'docs/environments.md:1': (
    ('num_steps=300,', 'num_steps=3, buffer_capacity=8, steps_per_call=2,'),
    (
      'batch_size=16, replay_ratio=4, rollout_len=16',
      f'batch_size=4, replay_ratio=2, rollout_len=4, {_TINY_AGENT}',
    ),
  ),
}
# Code run in a block's namespace before it: what it takes from the page
# around it (`block_module(ID, NAME)`: that block as a module NAME).
BEFORE = {
  # The `register` line, for the toy family of the block above it.
  'docs/environments.md:3': (
    'from disco_rl.environments import register\n'
    "toy_env = block_module('docs/environments.md:2', 'toy_env')\n"
  ),
}
# Code run after a block, in its namespace: what the page says it does.
AFTER = {
  'README.md:1': (
    "assert summary['steps'] == 40 and summary['interrupted'] is None\n"
    "rows = open('runs/readme_example/metrics.csv').read().splitlines()\n"
    'assert len(rows) == 1 + 40 + 3  # header, steps, warm-up\n'
  ),
  # The seeds are what the text says.
  'docs/api.md:2': (
    "assert metrics['episodes'].shape == (2, 4)\n"
    'assert jax.tree.leaves(params)[0].shape[0] == 4\n'
  ),
  'docs/environments.md:1': (
    "assert summary['steps'] == 3 and summary['interrupted'] is None\n"
  ),
  # 'toy:<id>' now builds the Toy environment: the reward is the action.
  # (The test unregisters the families a block registers.)
  'docs/environments.md:3': (
    'import jax\n'
    'import numpy as np\n'
    'from disco_rl import environments\n'
    "env = environments.get_environment('toy:a', 2, {'length': 2})\n"
    'state, _ = env.reset(jax.random.PRNGKey(0))\n'
    '_, timestep = env.step(state, np.array([1, 0], np.int32))\n'
    'np.testing.assert_array_equal(timestep.reward, [1.0, 0.0])\n'
  ),
}


def python_blocks(pages=PAGES) -> list[Block]:
  """Every Python block of `pages`."""
  return [
    block
    for page in pages
    for block in blocks(page.read_text(), page_name(page))
    if block.lang in PYTHON
  ]


BLOCKS = python_blocks()
BLOCKS_BY_ID = {block.id: block for block in BLOCKS}


def substituted(block: Block, substitutions=SUBSTITUTIONS) -> str:
  """The code the tests run for `block`, its substitutions made.

  Raises:
    ValueError: a substitution whose text is not in the block.
  """
  code = block.code
  for old, new in substitutions.get(block.id, ()):
    if old not in code:
      raise ValueError(f'{block.id}: the tests replace {old!r}, not found')
    code = code.replace(old, new)
  return code


def block_module(block_id: str, name: str) -> types.ModuleType:
  """The Python block `block_id` run as a module called `name`."""
  module = types.ModuleType(name)
  code = BLOCKS_BY_ID[block_id].code
  exec(compile(code, f'{block_id} (python block)', 'exec'), vars(module))  # pylint: disable=exec-used
  return module


def run_block(block: Block, substitutions=SUBSTITUTIONS) -> dict:
  """Runs `block` (substituted, with its BEFORE and AFTER code) in a fresh
  namespace; returns the namespace. The block's errors propagate."""
  namespace = {'__name__': '__docs__', 'block_module': block_module}
  parts = (
    ('before', BEFORE.get(block.id, '')),
    ('python block', substituted(block, substitutions)),
    ('after', AFTER.get(block.id, '')),
  )
  for what, code in parts:
    exec(compile(code, f'{block.id} ({what})', 'exec'), namespace)  # pylint: disable=exec-used
  return namespace


RUN = [block for block in BLOCKS if block.not_run is None]


@pytest.mark.weights
@pytest.mark.parametrize('block', RUN, ids=[block.id for block in RUN])
def test_python_block_runs(block, tmp_path, monkeypatch, disco_103_path):
  """Each block runs in a temporary directory (with the weights the tests
  read, found by `disco_rl.weights` through $DISCO_RL_WEIGHTS)."""
  del disco_103_path  # Skips the test (or fails it in CI) without them.
  monkeypatch.chdir(tmp_path)
  registered = {family.name for family in environments.families()}
  try:
    run_block(block)
  finally:  # The environment families the block registered.
    for family in environments.families():
      if family.name not in registered:
        environments.unregister(family.name)


def test_python_blocks_not_run_say_why():
  for block in BLOCKS:
    if block.not_run is not None:
      assert len(block.not_run.split()) >= 3, (block.id, block.not_run)


def test_the_tables_name_blocks_that_exist():
  for table in (SUBSTITUTIONS, BEFORE, AFTER):
    assert set(table) <= set(BLOCKS_BY_ID), set(table) - set(BLOCKS_BY_ID)
  for block_id in SUBSTITUTIONS:
    substituted(BLOCKS_BY_ID[block_id])  # Every `old` is in its block.


def test_the_examples_are_there():
  codes = [block.code for block in BLOCKS]
  assert any('jax.jit(agent.learner_step' in code for code in codes)
  assert any('Trainer(' in code and 'resume=True' in code for code in codes)


# ---------------------------------------------------------------------------
# 2. The `disco_rl.…` names resolve.

NAME = re.compile(r'\bdisco_rl(?:\.[A-Za-z_]\w*)+')
FROM_IMPORT = re.compile(
  r'^\s*from\s+(disco_rl(?:\.\w+)*)\s+import\s+\(?([\w\s,]+)\)?', re.M
)


def code_names(code: str) -> set[str]:
  """The `disco_rl.…` names of Python code, and those its `from disco_rl…
  import` lines import."""
  names = set(NAME.findall(code))
  for module, imported in FROM_IMPORT.findall(code):
    names.update(
      f'{module}.{item.split()[0]}'
      for item in imported.split(',')
      if item.split()
    )
  return names


def mentioned_names(text: str) -> list[str]:
  """The `disco_rl.…` names of a page: in inline code, code blocks and
  mkdocstrings' `::: NAME` lines, and those `from disco_rl… import` lines
  import (sorted, once each)."""
  spans = inline_code(text) + re.findall(r'^::: *(\S+)', text, re.M)
  names = {name for part in spans for name in NAME.findall(part)}
  for block in blocks(text):
    names |= code_names(block.code)
  return sorted(names)


def resolve(name: str):
  """The object `name` names: its longest prefix that is a module,
  imported, then the rest as attributes.

  Raises:
    ImportError, AttributeError: `name` names nothing.
  """
  parts = name.split('.')
  module = importlib.import_module(parts[0])
  size = 1
  for size_ in range(2, len(parts) + 1):
    prefix = '.'.join(parts[:size_])
    try:
      module = importlib.import_module(prefix)
    except ModuleNotFoundError as e:
      if e.name != prefix:  # The module exists; what it imports does not.
        raise
      break
    size = size_
  obj = module
  for attribute in parts[size:]:
    obj = getattr(obj, attribute)
  return obj


def unresolved_names(names: list[str]) -> list[str]:
  """The `names` that do not resolve, each with why."""
  bad = []
  for name in names:
    try:
      resolve(name)
    except (ImportError, AttributeError) as e:
      bad.append(f'{name} ({type(e).__name__}: {e})')
  return bad


def unresolved(text: str) -> list[str]:
  """The names of `mentioned_names(text)` that do not resolve, each with
  why."""
  return unresolved_names(mentioned_names(text))


@pytest.mark.parametrize('page', PAGES, ids=[page_name(p) for p in PAGES])
def test_every_disco_rl_name_resolves(page):
  assert not unresolved(page.read_text())


NOTEBOOKS = sorted((ROOT / 'colabs').glob('*.ipynb'))


def notebook_names(notebook_json: str) -> list[str]:
  """The `disco_rl.…` names of a notebook: its code cells' (`code_names`)
  and, as a page's, its markdown cells' (sorted, once each)."""
  names: set[str] = set()
  for cell in json.loads(notebook_json)['cells']:
    text = ''.join(cell['source'])
    if cell['cell_type'] == 'code':
      names |= code_names(text)
    elif cell['cell_type'] == 'markdown':
      names.update(mentioned_names(text))
  return sorted(names)


@pytest.mark.parametrize('notebook', NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_every_disco_rl_name_of_a_notebook_resolves(notebook):
  """Also in cells the default suite does not run (the meta notebook's
  paper section, skipped there, named a function removed in d4077f4)."""
  names = notebook_names(notebook.read_text())
  assert (
    'disco_rl.weights.load_disco_103' in names or 'disco_rl.Trainer' in names
  )
  assert not unresolved_names(names)


def test_a_name_of_a_notebook_that_does_not_resolve_is_found():
  notebook = json.dumps(
    dict(
      cells=[
        dict(
          cell_type='code',
          source=['x = disco_rl.jobs.config.meta_train_preset(\n'],
        ),
        dict(
          cell_type='code', source=['from disco_rl.jobs import trainer, gone\n']
        ),
        dict(cell_type='markdown', source=['Call `disco_rl.Trainer.fit`.']),
      ]
    )
  )
  names = notebook_names(notebook)
  assert names == [
    'disco_rl.Trainer.fit',
    'disco_rl.jobs',
    'disco_rl.jobs.config.meta_train_preset',
    'disco_rl.jobs.gone',
    'disco_rl.jobs.trainer',
  ]
  assert [n.split(' ')[0] for n in unresolved_names(names)] == [
    'disco_rl.jobs.config.meta_train_preset',
    'disco_rl.jobs.gone',
  ]


def test_the_pages_name_the_package():
  names = {n for page in PAGES for n in mentioned_names(page.read_text())}
  assert {
    'disco_rl.Trainer',
    'disco_rl.runtime.distributed.initialize',
  } <= names


# ---------------------------------------------------------------------------
# 3. The flags of documented command lines exist.

# Commands whose parser must build; another `disco_rl.…` command whose
# module does not exist (yet) is skipped (its name still has to resolve).
REQUIRED_COMMANDS = (
  'disco_rl.cli.eval',
  'disco_rl.cli.meta_train',
  'disco_rl.cli.export_rule',
  'disco_rl.cli.probe_rule',
  'disco_rl.cli.study',
)


def subcommand_module(subcommand: str) -> str | None:
  """The module of `disco-rl SUBCOMMAND` (None: no such subcommand)."""
  found = cli_main.COMMANDS.get(subcommand)
  return None if found is None else f'disco_rl.cli.{found[0]}'


def make_targets(makefile: pathlib.Path = ROOT / 'Makefile') -> dict:
  """{target: module} of the Makefile's targets that run a command with
  the user's `$(ARGS)` (`make eval ARGS='...'`): `$(VENV)/bin/disco-rl
  SUBCOMMAND $(ARGS)` or `$(VPY) -m MODULE $(ARGS)`."""
  recipe = re.compile(
    r'^([\w-]+):[^\n]*\n\t(?:\$\(VPY\) -m (\S+)|\$\(VENV\)/bin/disco-rl '
    r'(\S+)) \$\(ARGS\)',
    re.M,
  )
  return {
    target: module or subcommand_module(subcommand) or f'disco-rl {subcommand}'
    for target, module, subcommand in recipe.findall(makefile.read_text())
  }


def command_lines(text: str) -> list[str]:
  """The command lines of a page: each line of its shell blocks (`\\`
  continuations joined) and its inline code that is a command."""
  lines = []
  for block in blocks(text):
    if block.lang in SHELL:
      lines += block.code.replace('\\\n', ' ').splitlines()
  for span in inline_code(text):
    if re.match(
      r'(python3? -m disco_rl\.|disco-rl |make [\w-]+ .*\bARGS=)', span
    ):
      lines.append(span)
  return [line.strip() for line in lines if line.strip()]


def documented_flags(line: str, targets=None) -> tuple[str, list[str]] | None:
  """(module, its `--flags`) of a command line that runs a `disco_rl.…`
  command (`disco-rl SUBCOMMAND`, `python -m` or a make target); None for
  other lines. An unknown subcommand's module is 'disco-rl SUBCOMMAND'."""
  targets = make_targets() if targets is None else targets
  try:
    words = shlex.split(line, comments=True)
  except ValueError:  # An unclosed quote: part of a loop's body, say.
    return None
  while words and re.match(r'\w+=', words[0]):  # VAR=value python ...
    words.pop(0)
  if len(words) >= 2 and re.search(r'(^|/)disco-rl$', words[0]):
    if words[1].startswith('-'):  # The console script's own: --help.
      module, args = 'disco_rl.cli.main', words[1:]
    else:
      module = subcommand_module(words[1]) or f'disco-rl {words[1]}'
      args = words[2:]
  elif (
    len(words) >= 3 and re.search(r'python3?$', words[0]) and words[1] == '-m'
  ):
    module, args = words[2], words[3:]
  elif len(words) >= 2 and words[0] == 'make' and words[1] in targets:
    module = targets[words[1]]
    given = [w[len('ARGS=') :] for w in words[2:] if w.startswith('ARGS=')]
    args = shlex.split(given[0]) if given else []
  else:
    return None
  if not module.startswith(('disco_rl.', 'disco-rl ')):
    return None
  flags = [arg.split('=', 1)[0] for arg in args if arg.startswith('--')]
  return module, [flag for flag in flags if flag != '--']


class _Parsed(Exception):
  """Raised in place of parsing: the command's parser was caught."""


def command_parser(module_name: str) -> argparse.ArgumentParser:
  """The parser of `python -m MODULE`: its module's `make_parser()`, or
  the parser its `main(argv)` builds (caught when it parses, before
  anything runs)."""
  module = importlib.import_module(module_name)
  make_parser = getattr(module, 'make_parser', None)
  if make_parser is not None and not any(
    p.default is p.empty
    for p in inspect.signature(make_parser).parameters.values()
  ):
    return make_parser()
  caught = []

  def parse(self, *args, **kwargs):
    del args, kwargs
    caught.append(self)
    raise _Parsed()

  with (
    mock.patch.object(argparse.ArgumentParser, 'parse_args', parse),
    mock.patch.object(argparse.ArgumentParser, 'parse_known_args', parse),
  ):
    try:
      module.main([])
    except _Parsed:
      pass
  if not caught:
    raise ValueError(f'{module_name}.main([]) parsed no arguments')
  return caught[0]


def unknown_flags(
  text: str, targets=None, required=REQUIRED_COMMANDS
) -> list[str]:
  """The flags of `command_lines(text)` that their command does not
  have, each as 'MODULE: --flag', and the unknown subcommands of
  `disco-rl` ('disco-rl SUBCOMMAND: no such subcommand'); `required`: the
  commands that must import."""
  bad, parsers = [], {}
  for line in command_lines(text):
    found = documented_flags(line, targets)
    if found is None:
      continue
    module, flags = found
    if module.startswith('disco-rl '):
      bad.append(f'{module}: no such subcommand')
      continue
    if module not in parsers:
      try:
        parsers[module] = command_parser(module)
      except ModuleNotFoundError as e:
        if module in required or e.name != module:
          raise
        parsers[module] = None  # Not a command (yet): skipped.
    parser = parsers[module]
    if parser is None:
      continue
    options = parser._option_string_actions  # pylint: disable=protected-access
    bad += [f'{module}: {flag}' for flag in flags if flag not in options]
  return bad


@pytest.mark.parametrize('page', PAGES, ids=[page_name(p) for p in PAGES])
def test_every_documented_flag_exists(page):
  assert not unknown_flags(page.read_text())


def test_the_commands_are_read():
  """The pages' command lines are seen: the required commands' flags are
  checked, and the make targets are read from the Makefile."""
  assert make_targets()['eval'] == 'disco_rl.cli.eval'
  assert make_targets()['meta-train'] == 'disco_rl.cli.meta_train'
  modules = {
    found[0]
    for page in PAGES
    for line in command_lines(page.read_text())
    if (found := documented_flags(line))
  }
  assert set(REQUIRED_COMMANDS) <= modules


# ---------------------------------------------------------------------------
# Each checker finds an error of its kind.

_BAD_PAGE = """# A page

Call `disco_rl.loops.devices.initialize_distributed` (gone), or
`disco_rl.Trainer.fit`, `disco_rl.no_such_name`,
`disco_rl.runtime.host_loop.run`.

```python
from disco_rl.jobs import config, no_such_module
import disco_rl
disco_rl.no_such_name
```

```bash
disco-rl eval --steps 3 --no-such-flag 1 \\
    --seed 0   # --not-a-flag: a comment
make meta-train ARGS='--stepz 3 --out runs/x'
python -m disco_rl.cli.not_a_command --anything
python -m disco_rl.cli.study spec.py --out runs/s --tinyy
disco-rl evaluate --steps 3
disco-rl --help
disco-rl --version
```

And `disco-rl export-rule runs/meta --stepp 750`.

(not run by
the tests: it needs a GPU and a day; a reason
may break across lines)

```py
print('not run')
```

<!-- not run: a fragment -->
```python
also_not_run
```
"""


def test_a_name_that_does_not_resolve_is_found():
  found = unresolved(_BAD_PAGE)
  assert [name.split(' ')[0] for name in found] == [
    'disco_rl.cli.not_a_command',
    'disco_rl.jobs.no_such_module',
    'disco_rl.loops.devices.initialize_distributed',
    'disco_rl.no_such_name',
  ]
  assert 'disco_rl.Trainer.fit' in mentioned_names(_BAD_PAGE)


def test_a_flag_that_does_not_exist_is_found():
  assert unknown_flags(_BAD_PAGE) == [
    'disco_rl.cli.eval: --no-such-flag',
    'disco_rl.cli.meta_train: --stepz',
    'disco_rl.cli.study: --tinyy',
    'disco-rl evaluate: no such subcommand',
    'disco_rl.cli.main: --version',
    'disco_rl.cli.export_rule: --stepp',
  ]


def test_a_required_command_that_does_not_import_fails():
  line = '`python -m disco_rl.cli.nope --x`'
  assert not unknown_flags(line)  # Skipped: not a command (yet).
  with pytest.raises(ModuleNotFoundError):
    unknown_flags(line, required=('disco_rl.cli.nope',))


def test_a_broken_snippet_fails_and_a_reason_is_read():
  found = [b for b in blocks(_BAD_PAGE) if b.lang in PYTHON]
  assert [(b.id, b.not_run) for b in found] == [
    ('page.md:1', None),
    ('page.md:2', 'it needs a GPU and a day; a reason may break across lines'),
    ('page.md:3', 'a fragment'),
  ]
  with pytest.raises(ImportError, match='no_such_module'):
    run_block(found[0])
  broken = Block(
    'page.md:9', 'python', 'import disco_rl\ndisco_rl.nope\n', None
  )
  with pytest.raises(AttributeError, match='nope'):
    run_block(broken)
  # A substitution whose text the block no longer has.
  with pytest.raises(ValueError, match='not found'):
    substituted(broken, {'page.md:9': (('num_steps=300', 'num_steps=3'),)})


def test_the_site_keeps_the_repository_links(tmp_path):
  """scripts/docs_hooks.py (`make docs`): a page's links, written from its
  place in the repository, become the site's; one to a file that does not
  exist is a warning (a failure of the strict build)."""
  pytest.importorskip('mkdocs')  # The docs extra.
  spec = importlib.util.spec_from_file_location(
    'docs_hooks', ROOT / 'scripts' / 'docs_hooks.py'
  )
  hooks = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(hooks)
  readme = (
    '[runs](docs/runs.md#resuming) [script](scripts/docs_hooks.py) '
    '![plot](docs/results/plateau/plateau.png) [up](CHANGELOG.md)\n'
    '```\n[in code](nowhere.md)\n```\n'
  )
  assert hooks.rewrite_links(readme, 'index.md', ROOT / 'docs') == (
    '[runs](runs.md#resuming) script '
    '![plot](results/plateau/plateau.png) [up](changelog.md)\n'
    '```\n[in code](nowhere.md)\n```\n'
  )
  page = '[home](../../README.md#quickstart) [api](../api.md)'
  assert hooks.rewrite_links(page, 'studies/x.md', ROOT / 'docs') == (
    '[home](../index.md#quickstart) [api](../api.md)'
  )
  with mock.patch.object(hooks.log, 'warning') as warning:
    hooks.rewrite_links('[gone](gone.md)', 'api.md', ROOT / 'docs')
  warning.assert_called_once()
