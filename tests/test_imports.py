# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The package's import graph: no cycle, no project import inside a function.

Read from the source (every `import` and `from ... import` statement, at
any depth), so an import hidden in a function to break a cycle is found too.
"""

import ast
import collections
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / 'disco_rl'


def _modules() -> dict[str, pathlib.Path]:
  modules = {}
  for path in PACKAGE.rglob('*.py'):
    parts = path.relative_to(PACKAGE.parent).with_suffix('').parts
    if parts[-1] == '__init__':
      parts = parts[:-1]
    modules['.'.join(parts)] = path
  return modules


def _imports(
  name: str, source: str, is_package: bool, modules
) -> list[tuple[str, bool]]:
  """(imported project module, inside a function) for each import."""
  tree = ast.parse(source)
  package = name if is_package else name.rpartition('.')[0]
  in_function = set()
  for node in ast.walk(tree):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
      in_function.update(
        id(n)
        for n in ast.walk(node)
        if isinstance(n, (ast.Import, ast.ImportFrom))
      )
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      targets = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ''
      if node.level:
        anchor = package.split('.')[: len(package.split('.')) - node.level + 1]
        base = '.'.join(anchor + ([node.module] if node.module else []))
      targets = [
        f'{base}.{a.name}' if f'{base}.{a.name}' in modules else base
        for a in node.names
      ]
    else:
      continue
    for target in targets:
      if target in modules and target != name:
        found.append((target, id(node) in in_function))
  return found


def _graph():
  modules = _modules()
  edges = collections.defaultdict(set)
  inside = []
  for name, path in modules.items():
    for target, in_function in _imports(
      name, path.read_text(), path.name == '__init__.py', modules
    ):
      edges[name].add(target)
      if in_function:
        inside.append(f'{name} -> {target}')
  return modules, edges, inside


def _cycles(nodes, edges) -> list[list[str]]:
  """The strongly connected components of more than one module (Tarjan)."""
  index, low, stack, on_stack, found = {}, {}, [], set(), []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in sorted(edges.get(v, ())):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on_stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      component = []
      while True:
        w = stack.pop()
        on_stack.discard(w)
        component.append(w)
        if w == v:
          break
      if len(component) > 1:
        found.append(sorted(component))

  for v in sorted(nodes):
    if v not in index:
      visit(v)
  return found


def test_the_graph_is_read():
  modules, edges, _ = _graph()
  assert 'disco_rl.jobs.trainer' in modules
  assert 'disco_rl.jobs.eval.job' in edges['disco_rl.jobs.trainer']


def test_the_commands_are_on_top():
  """disco_rl.cli (the commands) imports the package; nothing outside it
  imports a command."""
  modules, edges, _ = _graph()
  assert 'disco_rl.cli.common' in edges['disco_rl.cli.eval']
  assert 'disco_rl.jobs.trainer' in edges['disco_rl.cli.common']
  assert {
    f'{name} -> {target}'
    for name in modules
    if not name.startswith('disco_rl.cli')
    for target in edges[name]
    if target.startswith('disco_rl.cli')
  } == set()


def test_the_runtime_imports_no_job():
  """disco_rl.runtime runs any job and knows none: none of its modules
  imports disco_rl.jobs, the commands or the studies."""
  modules, edges, _ = _graph()
  assert 'disco_rl.runtime.host_loop' in modules
  above = ('disco_rl.jobs', 'disco_rl.cli', 'disco_rl.studies')
  assert {
    f'{name} -> {target}'
    for name in modules
    if name.startswith('disco_rl.runtime')
    for target in edges[name]
    if target.startswith(above)
  } == set()


def test_no_import_cycle():
  modules, edges, _ = _graph()
  assert _cycles(modules, edges) == []


def test_no_two_folders_import_each_other():
  """The folders (and the package's top-level modules) form no cycle
  either: no arrow runs back up (e.g. networks -> update_rules ->
  networks, as the upstream's input_transforms had it)."""
  modules, edges, _ = _graph()

  def part(name: str) -> str:
    parts = name.split('.')
    return '.'.join(parts[:2])  # disco_rl.<folder> or disco_rl.<module>

  folders = collections.defaultdict(set)
  for name in modules:
    for target in edges[name]:
      if part(target) != part(name):
        folders[part(name)].add(part(target))
  assert 'disco_rl.networks' in folders['disco_rl.update_rules']
  assert _cycles({part(n) for n in modules}, folders) == []


def test_no_project_import_inside_a_function():
  _, _, inside = _graph()
  assert inside == []


def test_a_cycle_and_a_hidden_import_would_be_found():
  edges = {'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}
  assert _cycles(['a', 'b', 'c', 'd'], edges) == [['a', 'b', 'c']]
  modules = {
    'disco_rl.x': None,
    'disco_rl.y': None,
    'disco_rl.p': None,
    'disco_rl.p.z': None,
  }
  source = 'from disco_rl import y\ndef f():\n  from disco_rl.p import z\n'
  assert _imports('disco_rl.x', source, False, modules) == [
    ('disco_rl.y', False),
    ('disco_rl.p.z', True),
  ]
  # Relative imports resolve against the package.
  assert _imports('disco_rl.p', 'from . import z\n', True, modules) == [
    ('disco_rl.p.z', False)
  ]
