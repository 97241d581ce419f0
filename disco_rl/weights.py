# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Finds, downloads, verifies and loads the Disco103 meta-network weights.

The weights are a single `disco_103.npz` archive published by the upstream
project. Its keys are `MODULE/w` and `MODULE/b`, where `MODULE` is a Haiku
module path that itself contains `/`, e.g.

    lstm/~/meta_lstm/~unroll/mlp_2/~/linear_0/w

`load_disco_103()` turns it into the nested Haiku tree

    {MODULE: {'w': np.ndarray, 'b': np.ndarray}}

that `DiscoUpdateRule` expects as its meta-parameters. Values are NumPy
float32 arrays on the host; JAX accepts them directly, or place them with
`jax.device_put` / `jax.device_put_replicated`.

Where the file is looked for, in order:

  1. the `path` argument of `load_disco_103`;
  2. the file named by `$DISCO_RL_WEIGHTS`;
  3. `weights/disco_103.npz` in a source checkout (next to the package);
  4. the user cache: `$DISCO_RL_CACHE_DIR`, else `$XDG_CACHE_HOME/disco_rl`,
     else `~/.cache/disco_rl`;
  5. a download from `DISCO_103_URL` (or `$DISCO_RL_WEIGHTS_URL`) into the
     cache, verified against `DISCO_103_SHA256` before it is kept.

From the command line:

    python -m disco_rl.weights                 # fetch into the cache, verify
    python -m disco_rl.weights --dest PATH     # fetch into PATH, verify
    python -m disco_rl.weights --verify PATH   # check sha256 and architecture
"""

import argparse
from collections.abc import Mapping
import functools
import hashlib
import http.client
import logging
import os
import pathlib
import sys
import tempfile
import urllib.request
import zipfile

import numpy as np

DISCO_103_SHA256 = (
    'dac840a15b81e8805326363458c33979626172618f620d9e6e170315388530aa'
)
DISCO_103_URL = (
    'https://raw.githubusercontent.com/google-deepmind/disco_rl/main/'
    'disco_rl/update_rules/weights/disco_103.npz'
)
FILENAME = 'disco_103.npz'

# Environment variables read by this module.
ENV_WEIGHTS = 'DISCO_RL_WEIGHTS'  # path of a weights file to use
ENV_CACHE_DIR = 'DISCO_RL_CACHE_DIR'  # directory replacing the user cache
ENV_URL = 'DISCO_RL_WEIGHTS_URL'  # URL replacing DISCO_103_URL

_LEAF_NAMES = ('w', 'b')
_DOWNLOAD_TIMEOUT_S = 60
_CHUNK_BYTES = 1 << 20
_HOW_TO_GET = (
    'To get the file, run `python -m disco_rl.weights` (downloads it into the '
    f'cache and verifies it), or set {ENV_WEIGHTS}=/path/to/{FILENAME}.'
)

Params = dict[str, dict[str, np.ndarray]]


class ChecksumError(ValueError):
  """A downloaded file's sha256 differs from the published one."""


class ArchitectureError(ValueError):
  """A parameter tree differs in names or shapes from the meta-network's."""


# ---------------------------------------------------------------------------
# Locations.


def _checkout_weights_dir() -> pathlib.Path:
  """`weights/` at the repository root when running from a source checkout."""
  return pathlib.Path(__file__).resolve().parent.parent / 'weights'


def cache_dir() -> pathlib.Path:
  """Directory where downloaded weights are kept."""
  override = os.environ.get(ENV_CACHE_DIR)
  if override:
    return pathlib.Path(override).expanduser()
  xdg = os.environ.get('XDG_CACHE_HOME')
  if xdg:
    return pathlib.Path(xdg).expanduser() / 'disco_rl'
  return pathlib.Path.home() / '.cache' / 'disco_rl'


def weights_url() -> str:
  """URL the weights are downloaded from ($DISCO_RL_WEIGHTS_URL overrides)."""
  return os.environ.get(ENV_URL) or DISCO_103_URL


def _env_weights_path() -> pathlib.Path | None:
  value = os.environ.get(ENV_WEIGHTS)
  return pathlib.Path(value).expanduser() if value else None


def _search_locations() -> list[tuple[str, pathlib.Path]]:
  """(description, path) of each implicit location, in look-up order."""
  return [
      ('source checkout', _checkout_weights_dir() / FILENAME),
      ('user cache', cache_dir() / FILENAME),
  ]


def find_disco_103() -> pathlib.Path | None:
  """Returns the first existing weights file, without downloading.

  Looks at `$DISCO_RL_WEIGHTS`, then the source checkout, then the cache.

  Returns:
    The path found, or None when no location holds the file.

  Raises:
    FileNotFoundError: `$DISCO_RL_WEIGHTS` is set to a path that does not
      exist (an explicit choice is never silently replaced by another file).
  """
  env_path = _env_weights_path()
  if env_path is not None:
    if not env_path.is_file():
      raise FileNotFoundError(
          f'{ENV_WEIGHTS} is set to {str(env_path)!r}, which is not a file.'
      )
    return env_path
  for _, candidate in _search_locations():
    if candidate.is_file():
      return candidate
  return None


# ---------------------------------------------------------------------------
# Download and verification.


def sha256_of(path: str | os.PathLike[str]) -> str:
  """Hex sha256 digest of a file's contents."""
  digest = hashlib.sha256()
  with open(path, 'rb') as f:
    for chunk in iter(lambda: f.read(_CHUNK_BYTES), b''):
      digest.update(chunk)
  return digest.hexdigest()


def _resolve_dest(dest: str | os.PathLike[str] | None) -> pathlib.Path:
  if dest is None:
    return cache_dir() / FILENAME
  dest = pathlib.Path(dest).expanduser()
  if dest.is_dir():
    return dest / FILENAME
  return dest


def fetch_disco_103(
    dest: str | os.PathLike[str] | None = None,
    *,
    url: str | None = None,
) -> pathlib.Path:
  """Downloads the weights and verifies their sha256.

  The file is written to a temporary file beside `dest` and moved into place
  only once its digest equals `DISCO_103_SHA256`, so `dest` never holds a
  partial or unverified download. If `dest` already holds the right file,
  nothing is downloaded; a different file there is replaced.

  Args:
    dest: file (or existing directory) to write; defaults to the user cache.
    url: where to download from; defaults to `weights_url()`.

  Returns:
    The path of the verified file.

  Raises:
    ChecksumError: the downloaded bytes have a different sha256 (nothing is
      kept).
    OSError, http.client.HTTPException: the download failed (HTTP errors
      such as 404 are `urllib.error.HTTPError`, an OSError).
  """
  dest = _resolve_dest(dest)
  if dest.is_file() and sha256_of(dest) == DISCO_103_SHA256:
    return dest
  url = url or weights_url()
  dest.parent.mkdir(parents=True, exist_ok=True)
  logging.info('Downloading %s to %s', url, dest)

  fd, tmp_name = tempfile.mkstemp(
      dir=dest.parent, prefix=f'.{dest.name}.', suffix='.part'
  )
  tmp = pathlib.Path(tmp_name)
  try:
    digest = hashlib.sha256()
    with os.fdopen(fd, 'wb') as out:
      with urllib.request.urlopen(url, timeout=_DOWNLOAD_TIMEOUT_S) as resp:
        for chunk in iter(lambda: resp.read(_CHUNK_BYTES), b''):
          digest.update(chunk)
          out.write(chunk)
    actual = digest.hexdigest()
    if actual != DISCO_103_SHA256:
      raise ChecksumError(
          f'sha256 mismatch for {url}: expected {DISCO_103_SHA256}, got '
          f'{actual}. The download was discarded.'
      )
    os.replace(tmp, dest)
  finally:
    tmp.unlink(missing_ok=True)
  return dest


# ---------------------------------------------------------------------------
# Reading and checking.


def _read_npz(path: pathlib.Path) -> dict[str, np.ndarray]:
  """Reads every array of an npz archive; ValueError if it is not one."""
  hint = 'Re-download it with `python -m disco_rl.weights`.'
  try:
    data = np.load(path, allow_pickle=False)
  except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
    raise ValueError(
        f'{path} is not a valid npz file; it may be truncated or corrupt. '
        f'{hint} (numpy: {type(e).__name__}: {e})'
    ) from e
  if not isinstance(data, Mapping):  # np.load returned a bare .npy array.
    raise ValueError(
        f'{path} is not a valid npz file: it holds a single .npy array, not '
        f'an archive of named arrays. {hint}'
    )
  try:
    with data:
      # Reading every member now surfaces truncation and CRC errors here.
      return {key: np.asarray(data[key]) for key in data.files}
  except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
    raise ValueError(
        f'{path} is not a valid npz file; a member could not be read, it may '
        f'be truncated or corrupt. {hint} (numpy: {type(e).__name__}: {e})'
    ) from e


def _unflatten(flat: Mapping[str, np.ndarray], source: str) -> Params:
  """{'MODULE/w': x} -> {'MODULE': {'w': x}}, splitting on the last '/'."""
  params = {}
  for key in sorted(flat):
    module, sep, leaf = key.rpartition('/')
    if not sep or not module or leaf not in _LEAF_NAMES:
      raise ValueError(
          f'{source}: key {key!r} is not of the form MODULE/w or MODULE/b.'
      )
    params.setdefault(module, {})[leaf] = flat[key]
  return params


def _flatten(tree: Mapping[str, Mapping[str, object]], what: str):
  """{'MODULE': {'w': x}} -> {'MODULE/w': x}."""
  if not isinstance(tree, Mapping):
    raise TypeError(f'{what} must be a mapping of modules, got {type(tree)}.')
  flat = {}
  for module, leaves in tree.items():
    if not isinstance(leaves, Mapping):
      raise TypeError(
          f'{what}: module {module!r} must map to a mapping of arrays, got '
          f'{type(leaves)}.'
      )
    for leaf, value in leaves.items():
      flat[f'{module}/{leaf}'] = value
  return flat


@functools.lru_cache(maxsize=1)
def expected_disco_103_shapes():
  """Parameter shapes of the Disco103 meta-network, from its definition.

  Traces (does not run) `DiscoUpdateRule.init_params` with the settings of
  `agent.get_settings_disco()`.

  Returns:
    `{MODULE: {'w': jax.ShapeDtypeStruct, 'b': jax.ShapeDtypeStruct}}`.
  """
  # Imported here: they are heavy, and only needed for the check.
  import jax  # pylint: disable=g-import-not-at-top
  from disco_rl import agent  # pylint: disable=g-import-not-at-top
  from disco_rl.update_rules import disco  # pylint: disable=g-import-not-at-top

  rule = disco.DiscoUpdateRule(**agent.get_settings_disco().update_rule)
  params, _ = jax.eval_shape(rule.init_params, jax.random.PRNGKey(0))
  return {module: dict(leaves) for module, leaves in params.items()}


def validate_params(params, expected=None) -> None:
  """Checks that `params` has the meta-network's parameter names and shapes.

  Args:
    params: `{MODULE: {'w': array, 'b': array}}`; leaves need `.shape` (and,
      where `expected` has one, `.dtype`).
    expected: tree of the same form with leaves that have `.shape` (e.g.
      `jax.ShapeDtypeStruct`); defaults to `expected_disco_103_shapes()`.

  Raises:
    ArchitectureError: naming the first differing parameter in sorted order:
      a missing one, an unexpected one, or one of another shape or dtype.
    TypeError: `params` is not a two-level mapping.
  """
  if expected is None:
    expected = expected_disco_103_shapes()
  got = _flatten(params, 'params')
  want = _flatten(expected, 'expected')
  for name in sorted(set(got) | set(want)):
    if name not in got:
      raise ArchitectureError(
          f'missing parameter {name!r} (expected shape '
          f'{tuple(want[name].shape)}).'
      )
    if name not in want:
      raise ArchitectureError(
          f'unexpected parameter {name!r} with shape '
          f'{tuple(np.shape(got[name]))}.'
      )
    got_shape = tuple(np.shape(got[name]))
    want_shape = tuple(want[name].shape)
    if got_shape != want_shape:
      raise ArchitectureError(
          f'parameter {name!r} has shape {got_shape}, expected {want_shape}.'
      )
    want_dtype = getattr(want[name], 'dtype', None)
    got_dtype = getattr(got[name], 'dtype', None)
    if want_dtype is not None and np.dtype(got_dtype) != np.dtype(want_dtype):
      raise ArchitectureError(
          f'parameter {name!r} has dtype {np.dtype(got_dtype)}, expected '
          f'{np.dtype(want_dtype)}.'
      )


def _not_found_message(looked: list[str], download_note: str) -> str:
  places = '\n'.join(f'  - {line}' for line in looked)
  return (
      f'Could not find the Disco103 weights ({FILENAME}). Looked in:\n'
      f'{places}\n  - download: {download_note}\n{_HOW_TO_GET}'
  )


def _locate(download: bool) -> pathlib.Path:
  """Runs the implicit look-up (steps 2-5 of the module docstring)."""
  found = find_disco_103()
  if found is not None:
    return found
  looked = [f'${ENV_WEIGHTS}: not set']
  looked += [f'{what}: {path}' for what, path in _search_locations()]
  if not download:
    raise FileNotFoundError(
        _not_found_message(looked, 'disabled (download=False)')
    )
  url = weights_url()
  try:
    return fetch_disco_103(url=url)
  except ChecksumError:
    raise
  except (OSError, ValueError, http.client.HTTPException) as e:
    raise FileNotFoundError(
        _not_found_message(looked, f'from {url} failed: {e}')
    ) from e


def load_disco_103(
    path: str | os.PathLike[str] | None = None,
    *,
    download: bool = True,
    check_architecture: bool = True,
) -> Params:
  """Loads the Disco103 meta-parameters as a nested Haiku tree.

  Args:
    path: weights file to load. When given it must exist; otherwise the file
      is looked up as described in the module docstring.
    download: whether to download the file into the cache when no location
      holds it.
    check_architecture: whether to check the names and shapes against the
      meta-network (`validate_params`).

  Returns:
    `{MODULE: {'w': w, 'b': b}}` with NumPy arrays (float32 for Disco103):
    21 modules, 754,778 parameters in all.

  Raises:
    FileNotFoundError: `path` or `$DISCO_RL_WEIGHTS` names a missing file, or
      no location holds the file and it could not be downloaded (the message
      lists every place looked at).
    ChecksumError: a download had the wrong sha256.
    ValueError: the file is not a valid npz archive, or its keys are not of
      the form MODULE/w, MODULE/b.
    ArchitectureError: the parameters differ from the meta-network's.
  """
  if path is not None:
    path = pathlib.Path(path).expanduser()
    if not path.is_file():
      raise FileNotFoundError(f'Disco103 weights file not found: {str(path)!r}')
  else:
    path = _locate(download)

  params = _unflatten(_read_npz(path), str(path))
  if check_architecture:
    try:
      validate_params(params)
    except ArchitectureError as e:
      raise ArchitectureError(
          f'{path} does not match the Disco103 meta-network: {e}'
      ) from None
  return params


# ---------------------------------------------------------------------------
# Command line.


def _verify(path: pathlib.Path) -> str:
  """Checks sha256 and architecture; returns the digest."""
  if not path.is_file():
    raise FileNotFoundError(f'no such file: {str(path)!r}')
  actual = sha256_of(path)
  if actual != DISCO_103_SHA256:
    raise ChecksumError(
        f'sha256 mismatch for {path}: expected {DISCO_103_SHA256}, got '
        f'{actual}.'
    )
  load_disco_103(path, check_architecture=True)
  return actual


def main(argv: list[str] | None = None) -> int:
  """Entry point of `python -m disco_rl.weights`; returns the exit code."""
  parser = argparse.ArgumentParser(
      prog='python -m disco_rl.weights',
      description=(
          'Download the Disco103 weights into the cache (or --dest) and '
          'verify their sha256 and parameter shapes.'
      ),
  )
  group = parser.add_mutually_exclusive_group()
  group.add_argument(
      '--dest', type=pathlib.Path, default=None,
      help=f'file or directory to write (default: {cache_dir() / FILENAME})',
  )
  group.add_argument(
      '--verify', type=pathlib.Path, default=None, metavar='PATH',
      help='only check an existing file (sha256 and architecture)',
  )
  args = parser.parse_args(argv)
  try:
    if args.verify is not None:
      path = args.verify
      digest = _verify(path)
    else:
      path = fetch_disco_103(args.dest)
      digest = _verify(path)
  except (OSError, ValueError, ImportError, http.client.HTTPException) as e:
    print(f'error: {e}', file=sys.stderr)
    return 1
  print(f'{path}\nsha256 {digest} OK')
  return 0


if __name__ == '__main__':
  sys.exit(main())
