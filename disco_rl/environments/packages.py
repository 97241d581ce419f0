# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Optional packages behind environment families ('gymnax:<id>',
'craftax:<id>', 'jumanji:<id>', 'envpool:<Game>-v5'): importing them, and
the errors for a missing package or an unknown id.

Which family needs which package is said where the family is registered
(`registry.register(..., package=(package, extra))`).
"""

import contextlib
import difflib
import importlib
import sys
from typing import Any


class MissingPackageError(ImportError, ValueError):
  """An optional package an environment needs is not installed.

  Also a ValueError: to the command-line jobs it is bad input (one line).
  """


def import_optional(prefix: str, package: tuple[str, str]) -> Any:
  """The optional package behind the names of `prefix` ('gymnax:', ...).

  Args:
    prefix: the family's prefix, for the message (e.g. 'jumanji:').
    package: (module name, what `pip install` takes), e.g. ('jumanji',
      'disco_rl[jumanji]').

  Raises:
    MissingPackageError: naming the package and the pip extra that installs
      it.
  """
  module, extra = package
  try:
    with _matplotlib_magic_off():
      return importlib.import_module(module)
  except ImportError as e:
    raise MissingPackageError(
      f"Environments named '{prefix}<id>' need the {module!r} package, "
      f'which is not installed ({e}); install it with: pip install '
      f"'{extra}'."
    ) from e


@contextlib.contextmanager
def _matplotlib_magic_off():
  """Imports inside it leave a notebook's Matplotlib backend alone.

  jumanji 1.1 runs `%matplotlib ipympl` when imported in a notebook, which
  raises (a RuntimeError, not caught by jumanji) unless ipympl is
  installed, and would switch the notebook's backend if it were.
  """
  shell = None
  if 'IPython' in sys.modules:
    shell = sys.modules['IPython'].get_ipython()
  if shell is None:
    yield
    return
  run_line_magic = shell.run_line_magic

  def without_matplotlib(name, *args, **kwargs):
    if name == 'matplotlib':
      return None
    return run_line_magic(name, *args, **kwargs)

  shell.run_line_magic = without_matplotlib
  try:
    yield
  finally:
    shell.run_line_magic = run_line_magic


def close_matches(name: str, candidates: list[str]) -> list[str]:
  """Up to 5 candidates close to `name`, ignoring case and a 'pkg:' prefix."""

  def bare(n):
    return n.split(':', 1)[-1].lower()

  by_key: dict[str, str] = {}
  for candidate in candidates:
    by_key.setdefault(candidate.lower(), candidate)
    by_key.setdefault(bare(candidate), candidate)
  found = difflib.get_close_matches(bare(name), list(by_key), n=10, cutoff=0.5)
  return list(dict.fromkeys(by_key[k] for k in found))[:5]


def unknown_id_error(
  name: str, candidates: list[str], what: str = 'environment'
) -> ValueError:
  """The error for a 'pkg:<id>' name whose id `candidates` do not hold."""
  prefix = name.split(':', 1)[0] + ':'
  matches = close_matches(name, candidates)
  hint = f' Close matches: {", ".join(map(repr, matches))}.' if matches else ''
  return ValueError(
    f'Unknown {what} {name!r}: no {prefix}<id> of that id.{hint} '
    f'Known ids: {", ".join(c[len(prefix) :] for c in candidates)}.'
  )
