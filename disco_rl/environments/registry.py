# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The environment families: what builds each name, and how it is stepped.

A family is one exact name ('catch', 'jittable_catch') or a prefix ending
in ':' ('gymnax:', 'envpool:') whose names are '<prefix><id>'. A family is
registered once, with the function that builds its environments:

  register('toy:', make_toy)                # jittable, any 'toy:<id>'
  register('catch', catch.make, on_host=True, jittable='jittable_catch',
           defaults=catch.get_config)

The built-in families are registered in `disco_rl.environments`.
"""

from collections.abc import Callable, Mapping, Sequence
import dataclasses
from typing import Any

from disco_rl.environments import base
from disco_rl.environments import packages

# make(name, batch_size, settings, seed) -> the batched environment.
MakeFn = Callable[[str, int, dict[str, Any], int], base.Environment]


@dataclasses.dataclass(frozen=True)
class Family:
  """One registered family of environments.

  Attributes:
    name: the exact name ('catch') or the prefix, ending in ':'
      ('gymnax:').
    make: `make(name, batch_size, settings, seed) -> base.Environment`
      builds the environment called `name` with `batch_size` instances;
      `settings` is a dict of its settings, `seed` seeds host-stepped
      environments (jittable ones take their keys in `reset`).
    on_host: stepped in Python on the host (NumPy arrays: the dm_env Catch,
      envpool) rather than compiled into the program.
    jittable: for a host family, the name of its jittable twin (which the
      loops may use instead, e.g. for evaluation), or None.
    names: for a prefix, returns the known full names ('gymnax:<id>'), for
      close matches and unknown-id errors; None: any id is accepted.
    package: (module, pip extra) of the optional package the family needs,
      e.g. ('jumanji', 'disco_rl[jumanji]'), or None.
    defaults: returns the settings `get_environment` uses when given none,
      or None (no settings).
    refuse: raises a ValueError saying why a name the family's package has
      cannot run here (e.g. gymnax's continuous-action ids, which `names`
      leaves out), or None.
  """

  name: str
  make: MakeFn
  on_host: bool = False
  jittable: str | None = None
  names: Callable[[], Sequence[str]] | None = None
  package: tuple[str, str] | None = None
  defaults: Callable[[], Mapping[str, Any]] | None = None
  refuse: Callable[[str], None] | None = None

  @property
  def is_prefix(self) -> bool:
    """Whether the family is a prefix ('gymnax:') rather than one name."""
    return self.name.endswith(':')

  def check(self, name: str, what: str = 'environment') -> None:
    """Raises unless this family knows `name` and its package is installed.

    Args:
      name: the environment's full name (of this family).
      what: the argument's name in messages (e.g. 'env').

    Raises:
      ValueError: an id that `names` does not list (with close matches).
      packages.MissingPackageError: the family's package is not installed.
    """
    if self.refuse is not None:
      self.refuse(name)
    if self.names is not None:
      known = list(self.names())
      if name not in known:
        raise packages.unknown_id_error(name, known, what)
    if self.package is not None:
      packages.import_optional(self.name, self.package)


# Name or prefix -> family, in the order of registration.
_FAMILIES: dict[str, Family] = {}


def _check_key(name_or_prefix: Any) -> None:
  """Raises unless `name_or_prefix` is 'name' or 'prefix:' (one ':')."""
  if (
    not isinstance(name_or_prefix, str)
    or not name_or_prefix.strip(':')
    or ':' in name_or_prefix[:-1]
    or name_or_prefix != name_or_prefix.strip()
  ):
    raise ValueError(
      'name_or_prefix must be an exact name without ":" (e.g. '
      "'jittable_catch') or a prefix ending in one \":\" (e.g. 'gymnax:'), "
      f'got {name_or_prefix!r}.'
    )


def register(
  name_or_prefix: str,
  make: MakeFn,
  *,
  on_host: bool = False,
  jittable: str | None = None,
  names: Callable[[], Sequence[str]] | None = None,
  package: tuple[str, str] | None = None,
  defaults: Callable[[], Mapping[str, Any]] | None = None,
  refuse: Callable[[str], None] | None = None,
  replace: bool = False,
) -> Family:
  """Registers a family of environments; see `Family` for the arguments.

  Args:
    name_or_prefix: an exact name ('jittable_catch') or a prefix ending in
      ':' ('gymnax:').
    make: `make(name, batch_size, settings, seed) -> base.Environment`.
    on_host: stepped in Python on the host rather than compiled.
    jittable: for a host family, the name of its jittable twin, or None.
    names: for a prefix, a function returning its known full names.
    package: (module, pip extra) of the optional package it needs.
    defaults: a function returning the settings `get_environment` uses
      when given none.
    refuse: a function raising a ValueError for a name it cannot run.
    replace: replace a family already registered under `name_or_prefix`
      (otherwise that is an error).

  Returns:
    The registered `Family`.

  Raises:
    ValueError: a malformed name or argument, or `name_or_prefix` already
      registered (without `replace`).
  """
  _check_key(name_or_prefix)
  is_prefix = name_or_prefix.endswith(':')
  if not callable(make):
    raise ValueError(
      f'make must be callable as make(name, batch_size, '
      f'settings, seed), got {make!r}.'
    )
  if jittable is not None and (not on_host or not isinstance(jittable, str)):
    raise ValueError(
      'jittable names the jittable twin (a str) of a family stepped on the '
      f'host (on_host=True); got jittable={jittable!r} with '
      f'on_host={on_host!r}.'
    )
  if names is not None and (not is_prefix or not callable(names)):
    raise ValueError(
      'names must be a function returning the full names of a prefix '
      f"family ('pkg:'); got names={names!r} for {name_or_prefix!r}."
    )
  if package is not None and (
    not isinstance(package, tuple)
    or len(package) != 2
    or not all(isinstance(p, str) for p in package)
  ):
    raise ValueError(
      'package must be (module, pip extra), e.g. '
      f"('jumanji', 'disco_rl[jumanji]'), got {package!r}."
    )
  if defaults is not None and not callable(defaults):
    raise ValueError(
      f'defaults must be a function returning the default '
      f'settings, got {defaults!r}.'
    )
  if refuse is not None and not callable(refuse):
    raise ValueError(
      f'refuse must be a function of a name that raises, got {refuse!r}.'
    )
  if name_or_prefix in _FAMILIES and not replace:
    raise ValueError(
      f'An environment family {name_or_prefix!r} is already registered '
      f'(make={_FAMILIES[name_or_prefix].make!r}); pass replace=True to '
      'replace it, or choose another name.'
    )
  family_ = Family(
    name=name_or_prefix,
    make=make,
    on_host=bool(on_host),
    jittable=jittable,
    names=names,
    package=package,
    defaults=defaults,
    refuse=refuse,
  )
  _FAMILIES[name_or_prefix] = family_
  return family_


def unregister(name_or_prefix: str) -> Family:
  """Removes a registered family and returns it.

  Raises:
    ValueError: `name_or_prefix` is not registered.
  """
  if name_or_prefix not in _FAMILIES:
    raise ValueError(
      f'No environment family {name_or_prefix!r} is registered; '
      f'registered: {", ".join(map(repr, _FAMILIES))}.'
    )
  return _FAMILIES.pop(name_or_prefix)


def families() -> tuple[Family, ...]:
  """Every registered family, in the order of registration."""
  return tuple(_FAMILIES.values())


def prefixes() -> tuple[str, ...]:
  """The registered prefixes ('gymnax:', ...), in the order of
  registration."""
  return tuple(f.name for f in _FAMILIES.values() if f.is_prefix)


def lookup(name: Any) -> Family | None:
  """The family of `name` ('catch', 'gymnax:Breakout-MinAtar'), or None."""
  if not isinstance(name, str):
    return None
  if ':' not in name:
    return _FAMILIES.get(name)
  prefix = name.split(':', 1)[0] + ':'
  return _FAMILIES.get(prefix)


def family(name: Any, what: str = 'environment') -> Family:
  """The family of environment `name`.

  Only the family is looked up: whether its id exists is `Family.check`.

  Args:
    name: e.g. 'catch', 'gymnax:Breakout-MinAtar'.
    what: the argument's name in messages (e.g. 'env').

  Raises:
    ValueError: no family has `name`, listing the families and the close
      matches.
  """
  found = lookup(name)
  if found is None:
    raise unknown_name(name, what)
  return found


def _known_names(family_: Family) -> list[str]:
  """The family's known full names; none where they cannot be listed."""
  if not family_.is_prefix:
    return [family_.name]
  if family_.names is None:
    return []
  try:
    return list(family_.names())
  except Exception:  # pylint: disable=broad-except
    # A missing package (or one that fails to import) only costs the hint.
    return []


def unknown_name(name: Any, what: str = 'environment') -> ValueError:
  """The error for a name no family has: the valid names and close matches.

  Lists the exact names (sorted), then each prefix as '<prefix><id>' with
  an example id where its names can be listed (their packages are
  imported) or the package to install where they cannot.
  """
  exact = sorted(f.name for f in _FAMILIES.values() if not f.is_prefix)
  candidates, valid = list(exact), [repr(n) for n in exact]
  for family_ in _FAMILIES.values():
    if not family_.is_prefix:
      continue
    known = _known_names(family_)
    candidates += known
    if known:
      note = f' (e.g. {known[0]!r})'
    elif family_.package is not None:
      note = f" (pip install '{family_.package[1]}')"
    else:
      note = ''
    valid.append(f"'{family_.name}<id>'{note}")
  matches = packages.close_matches(str(name), candidates)
  hint = f' Close matches: {", ".join(map(repr, matches))}.' if matches else ''
  listed = (
    ', '.join(valid[:-1]) + ' and ' + valid[-1]
    if len(valid) > 1
    else ''.join(valid)
  )
  return ValueError(f'Unknown {what} {name!r}; valid names are {listed}.{hint}')
