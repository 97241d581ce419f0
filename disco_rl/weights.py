# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Finds, downloads (pooch), verifies and loads the Disco103 weights.

`load_disco_103()` returns `{MODULE: {'w': np.ndarray, 'b': np.ndarray}}`
(the npz keys are `MODULE/w`, `MODULE/b`; `MODULE` contains `/` itself) and
looks, in order, at: its `path`; `$DISCO_RL_WEIGHTS`; `weights/disco_103.npz`
of a source checkout; the user cache (`$DISCO_RL_CACHE_DIR`, else the
platform's, e.g. `~/.cache/disco_rl`); a download from `DISCO_103_URL` (or
`$DISCO_RL_WEIGHTS_URL`) into the cache, kept only if its sha256 is right.

    python -m disco_rl.weights [--dest PATH]   # fetch (into the cache), verify
    python -m disco_rl.weights --verify PATH   # check sha256 and architecture
"""

import argparse
from collections.abc import Mapping
import functools
import os
import pathlib
import sys
from typing import Any
import zipfile

import chex
import jax
import numpy as np
import platformdirs
import pooch

from disco_rl import agent
from disco_rl.update_rules import disco

DISCO_103_SHA256 = (
  'dac840a15b81e8805326363458c33979626172618f620d9e6e170315388530aa'
)
DISCO_103_URL = (
  'https://raw.githubusercontent.com/google-deepmind/disco_rl/'
  'main/disco_rl/update_rules/weights/disco_103.npz'
)
FILENAME = 'disco_103.npz'
ENV_WEIGHTS = 'DISCO_RL_WEIGHTS'  # path of a weights file to use
ENV_CACHE_DIR = 'DISCO_RL_CACHE_DIR'  # directory replacing the user cache
ENV_URL = 'DISCO_RL_WEIGHTS_URL'  # URL replacing DISCO_103_URL

Params = dict[str, dict[str, np.ndarray]]


class ChecksumError(ValueError):
  """A downloaded file's sha256 differs from the published one."""


class ArchitectureError(ValueError):
  """A parameter tree differs in names or shapes from the meta-network's."""


class DownloadError(OSError):
  """The weights could not be downloaded (the message says what to do)."""


def _checkout_weights_dir() -> pathlib.Path:
  """`weights/` at the repository root when running from a source checkout."""
  return pathlib.Path(__file__).resolve().parent.parent / 'weights'


def cache_dir() -> pathlib.Path:
  """Directory where downloaded weights are kept."""
  override = os.environ.get(ENV_CACHE_DIR)
  if override:
    return pathlib.Path(override).expanduser()
  return platformdirs.user_cache_path('disco_rl', appauthor=False)


def _places() -> dict[str, pathlib.Path]:
  return {
    'source checkout': _checkout_weights_dir() / FILENAME,
    'user cache': cache_dir() / FILENAME,
  }


def find_disco_103() -> pathlib.Path | None:
  """The first existing file of $DISCO_RL_WEIGHTS, checkout, cache (or None);
  FileNotFoundError if $DISCO_RL_WEIGHTS names a missing file."""
  if os.environ.get(ENV_WEIGHTS):
    path = pathlib.Path(os.environ[ENV_WEIGHTS]).expanduser()
    if not path.is_file():
      raise FileNotFoundError(
        f'{ENV_WEIGHTS} is set to {str(path)!r}, which is not a file.'
      )
    return path
  return next((p for p in _places().values() if p.is_file()), None)


def sha256_of(path: str | os.PathLike[str]) -> str:
  return pooch.file_hash(str(path), alg='sha256')


def fetch_disco_103(
  dest: str | os.PathLike[str] | None = None, *, url: str | None = None
) -> pathlib.Path:
  """Downloads the weights to `dest` (file or existing directory; default: the
  cache) unless it holds them already; keeps them only if the sha256 is right.

  Raises:
    ChecksumError: the download had another sha256 (nothing is kept).
    DownloadError: the download failed; says how to put the file in place.
  """
  dest = pathlib.Path(dest).expanduser() if dest else cache_dir() / FILENAME
  dest = dest / FILENAME if dest.is_dir() else dest
  url = url or os.environ.get(ENV_URL) or DISCO_103_URL
  try:
    return pathlib.Path(
      pooch.retrieve(
        url,
        known_hash=f'sha256:{DISCO_103_SHA256}',
        fname=dest.name,
        path=dest.parent,
        progressbar=False,
      )
    )
  except ValueError as e:  # pooch: the hash differs; the file is deleted.
    raise ChecksumError(f'sha256 mismatch for {url}: {e}') from e
  except OSError as e:  # requests' errors are OSErrors.
    raise DownloadError(
      f'Downloading {url} failed ({e}). Without network access, download '
      f'that URL on a machine that has it, copy the file to {dest} (or set '
      f'{ENV_WEIGHTS} to its path) and check it with `python -m '
      f'disco_rl.weights --verify {dest}` (sha256 {DISCO_103_SHA256}).'
    ) from e


def flatten_params(params: Params) -> dict[str, np.ndarray]:
  """{'MODULE': {'w': x}} -> {'MODULE/w': x}, the layout of disco_103.npz."""
  if not isinstance(params, Mapping) or not all(
    isinstance(v, Mapping) for v in params.values()
  ):
    raise TypeError(
      'params must map module names to dicts of arrays, got '
      f'{type(params).__name__}.'
    )
  return {
    f'{module}/{name}': value
    for module, leaves in params.items()
    for name, value in leaves.items()
  }


def unflatten_params(flat, source: str = 'params') -> Params:
  """{'MODULE/w': x} -> {'MODULE': {'w': x}}, splitting at the last '/'."""
  params: Params = {}
  for key in sorted(flat):
    module, _, leaf = key.rpartition('/')
    if not module or leaf not in ('w', 'b'):
      raise ValueError(
        f'{source}: key {key!r} is not of the form MODULE/w or MODULE/b.'
      )
    params.setdefault(module, {})[leaf] = flat[key]
  return params


def save_params(params: Params, path: str | os.PathLike[str]) -> None:
  """Writes meta-parameters in the disco_103.npz layout."""
  # Values typed Any: mypy matches `**arrays` against savez's keyword
  # `allow_pickle: bool` too.
  arrays: dict[str, Any] = {
    k: np.asarray(v) for k, v in flatten_params(params).items()
  }
  np.savez(path, **arrays)


def _read_npz(path: pathlib.Path) -> dict[str, np.ndarray]:
  try:
    data = np.load(path, allow_pickle=False)
    if isinstance(data, np.ndarray):
      raise ValueError(
        'it holds a single .npy array, not an archive of named arrays'
      )
    with data:  # Reading every member surfaces truncation and CRC errors.
      return {key: data[key] for key in data.files}
  except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
    raise ValueError(
      f'{path} is not a valid npz file ({e}); it may be '
      'truncated or corrupt. Re-download it with `python -m '
      'disco_rl.weights`.'
    ) from e


@functools.lru_cache(maxsize=8)
def expected_shapes(
  sizes: disco.MetaNetSizes | None = None, action_head: bool = False
):
  """`{MODULE: {'w': jax.ShapeDtypeStruct, ...}}` of the Disco meta-network
  of `sizes` (default: Disco103's), with the action head of policy target
  'action' if `action_head`, traced without running it."""
  settings = agent.get_settings_disco(
    sizes, 'action' if action_head else 'absolute'
  ).update_rule
  rule = disco.DiscoUpdateRule(**settings)
  params, _ = jax.eval_shape(rule.init_params, jax.random.PRNGKey(0))
  return {module: dict(leaves) for module, leaves in params.items()}


def expected_disco_103_shapes():
  """The shapes of the Disco103 meta-network (`expected_shapes()`)."""
  return expected_shapes()


def validate_params(params, expected=None) -> None:
  """Checks `params` against `expected` (default: the meta-network's shapes).

  Raises:
    ArchitectureError: naming the first missing or unexpected parameter in
      sorted order, else one of another shape or dtype.
    TypeError: `params` is not a two-level mapping.
  """
  got = flatten_params(params)
  want = flatten_params(
    expected_disco_103_shapes() if expected is None else expected
  )
  for name in sorted(got.keys() ^ want.keys()):
    if name in want:
      raise ArchitectureError(
        f'missing parameter {name!r} (expected shape '
        f'{tuple(want[name].shape)}).'
      )
    raise ArchitectureError(
      f'unexpected parameter {name!r} with shape {tuple(np.shape(got[name]))}.'
    )
  try:
    chex.assert_trees_all_equal_shapes_and_dtypes(got, want)
  except AssertionError as e:  # "... Trees 0 and 1 differ in leaves 'X': ..."
    detail = str(e).split(' failed:', 1)[-1].strip().rstrip('.')
    raise ArchitectureError(
      detail.replace('Trees 0 and 1 differ in leaves', 'parameter')
      + ' (given != expected).'
    ) from None


def check_finite(params, source: str) -> None:
  """Raises ValueError, naming `source` and the first parameter (sorted)
  that holds NaN or infinite values, and how many."""
  for name, value in sorted(flatten_params(params).items()):
    array = np.asarray(value)
    if not np.issubdtype(array.dtype, np.inexact) or np.isfinite(array).all():
      continue
    nan, inf = int(np.isnan(array).sum()), int(np.isinf(array).sum())
    raise ValueError(
      f'{source}: parameter {name!r} holds non-finite values ({nan} NaN, '
      f'{inf} infinite, of {array.size}): the file holds a rule that '
      'diverged, or is damaged; use another rule file.'
    )


def load_disco_103(
  path: str | os.PathLike[str] | None = None,
  *,
  download: bool = True,
  check_architecture: bool = True,
) -> Params:
  """The Disco103 meta-parameters (21 modules, 754,778 float32 parameters).

  Args:
    path: the file to load (must exist); else looked up as described above.
    download: download into the cache when no location holds the file.
    check_architecture: check names, shapes and dtypes (`validate_params`).

  Raises:
    FileNotFoundError: `path` or `$DISCO_RL_WEIGHTS` names a missing file, or
      none was found or downloaded (the message lists every place looked at).
    ChecksumError: a download had the wrong sha256.
    ValueError: not an npz archive of MODULE/w, MODULE/b keys; a
      parameter holds NaN or infinite values (`check_finite`).
    ArchitectureError: the parameters differ from the meta-network's.
  """
  if path is not None:
    path = pathlib.Path(path).expanduser()
    if not path.is_file():
      raise FileNotFoundError(f'Disco103 weights file not found: {str(path)!r}')
  path = path or find_disco_103()
  if path is None:
    looked = [f'${ENV_WEIGHTS}: not set'] + [
      f'{what}: {place}' for what, place in _places().items()
    ]
    try:
      if not download:
        raise DownloadError('disabled (download=False)')
      path = fetch_disco_103()
    except DownloadError as e:
      raise FileNotFoundError(
        f'Could not find the Disco103 weights ({FILENAME}). Looked in:\n'
        + ''.join(f'  - {line}\n' for line in looked)
        + f'  - download: {e}\nTo get the file, run `python -m '
        'disco_rl.weights` (downloads it into the cache and verifies it), '
        f'or set {ENV_WEIGHTS}=/path/to/{FILENAME}.'
      ) from e
  params = unflatten_params(_read_npz(path), str(path))
  if check_architecture:
    try:
      validate_params(params)
    except ArchitectureError as e:
      raise ArchitectureError(
        f'{path} does not match the Disco103 meta-network: {e}'
      ) from None
  check_finite(params, str(path))
  return params


def load_rule(
  path: str | os.PathLike[str],
  sizes: disco.MetaNetSizes | Mapping[str, Any] | None = None,
) -> Params:
  """A Disco rule's parameters from an npz file: Disco103's or a rule
  meta-trained here (`export_rule`), of any meta-network sizes.

  The file's sizes are read from its parameters (`disco.sizes_from_params`)
  and every parameter is checked against the meta-network of those sizes.

  Args:
    path: the npz file (must exist; nothing is looked up or downloaded).
    sizes: the sizes the caller's run has; None: any.

  Raises:
    FileNotFoundError: no file at `path`.
    ValueError: not an npz archive of MODULE/w, MODULE/b keys; a
      parameter holds NaN or infinite values (`check_finite`).
    ArchitectureError: not a Disco meta-network's parameters, parameters
      inconsistent with the sizes they imply, or sizes other than `sizes`
      (the message names both).
  """
  path = pathlib.Path(path).expanduser()
  if not path.is_file():
    raise FileNotFoundError(f'rule weights file not found: {str(path)!r}')
  params = unflatten_params(_read_npz(path), str(path))
  try:
    found = disco.sizes_from_params(params)
  except ValueError as e:
    raise ArchitectureError(f'{path}: {e}') from None
  try:
    validate_params(
      params, expected_shapes(found, disco.has_action_head(params))
    )
  except ArchitectureError as e:
    what = (
      'the Disco103 meta-network'
      if not found.changes()
      else f'the Disco meta-network of the sizes it implies ({found.text()})'
    )
    raise ArchitectureError(f'{path} does not match {what}: {e}') from None
  if sizes is not None and disco.as_sizes(sizes) != found:
    raise ArchitectureError(
      f'{path} holds a meta-network of sizes {found.text()}, not '
      f"the run's {disco.as_sizes(sizes).text()}."
    )
  check_finite(params, str(path))
  return params


def starting_rule_params(
  update_rule, load_disco_103_weights: bool, seed: int = 0
):
  """The parameters a run starts its rule from (the one place that decides).

  Args:
    update_rule: the run's rule (an `update_rules` object).
    load_disco_103_weights: the Disco103 weights (found, checked and loaded
      now, so that a bad file fails at once); else the rule's own
      `init_params(PRNGKey(seed))`: a fresh meta-network for the Disco rule
      (meta-training from scratch, or a stand-in for a run about to be
      restored from a checkpoint), the placeholder parameters of a
      hand-written rule.
    seed: the seed of the fresh parameters.
  """
  if load_disco_103_weights:
    return load_disco_103()
  # Compiled as one program: run op by op, the meta-network's initialisers
  # would compile a few hundred small programs (seconds on a CPU).
  params, _ = jax.jit(update_rule.init_params)(jax.random.PRNGKey(seed))
  return params


def main(argv: list[str] | None = None) -> int:
  """`python -m disco_rl.weights`; returns the exit code."""
  parser = argparse.ArgumentParser(
    prog='python -m disco_rl.weights',
    description='Download the Disco103 weights into the cache (or --dest) '
    'and verify their sha256 and parameter shapes.',
  )
  group = parser.add_mutually_exclusive_group()
  group.add_argument(
    '--dest',
    type=pathlib.Path,
    help=f'file or directory to write (default: {cache_dir() / FILENAME})',
  )
  group.add_argument(
    '--verify',
    type=pathlib.Path,
    metavar='PATH',
    help='only check an existing file (sha256, architecture)',
  )
  args = parser.parse_args(argv)
  try:
    path = args.verify or fetch_disco_103(args.dest)
    if not path.is_file():
      raise FileNotFoundError(f'no such file: {str(path)!r}')
    digest = sha256_of(path)
    if digest != DISCO_103_SHA256:
      raise ChecksumError(
        f'sha256 mismatch for {path}: expected '
        f'{DISCO_103_SHA256}, got {digest}.'
      )
    load_disco_103(path)
  except (OSError, ValueError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 1
  print(f'{path}\nsha256 {digest} OK')
  return 0


if __name__ == '__main__':
  sys.exit(main())
