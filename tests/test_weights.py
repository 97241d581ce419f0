# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Tests for disco_rl.weights: every look-up route and every failure.

No test touches the network: downloads go to a local HTTP server on
127.0.0.1, and the download URL otherwise points at a closed local port.
"""

import contextlib
import functools
import hashlib
import http.server
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import chex
import golden_cases
import jax
import numpy as np
import platformdirs
import pytest

from disco_rl import agent as agent_lib
from disco_rl import weights
from disco_rl.update_rules import actor_critic
from disco_rl.update_rules import disco

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
NUM_MODULES = 21
NUM_ARRAYS = 42
NUM_PARAMETERS = 754_778
UNREACHABLE_URL = 'http://127.0.0.1:9/disco_103.npz'  # discard port: refused
# Saved before the autouse fixture below patches it.
# pylint: disable-next=protected-access
_ORIGINAL_CHECKOUT_DIR = weights._checkout_weights_dir


# ---------------------------------------------------------------------------
# Fixtures and helpers.


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
  """Empties every implicit location and makes downloads fail fast.

  Returns:
    (checkout_dir, cache_dir): the directories that stand for the source
    checkout's `weights/` and for the user cache in this test.
  """
  checkout = tmp_path / 'checkout' / 'weights'
  cache = tmp_path / 'cache'
  checkout.mkdir(parents=True)
  monkeypatch.delenv(weights.ENV_WEIGHTS, raising=False)
  monkeypatch.setenv(weights.ENV_CACHE_DIR, str(cache))
  monkeypatch.setenv(weights.ENV_URL, UNREACHABLE_URL)
  monkeypatch.setattr(weights, '_checkout_weights_dir', lambda: checkout)
  return checkout, cache


@pytest.fixture
def real_file(disco_103_path, tmp_path):
  """A private copy of the real weights under tmp_path (never the repo)."""
  copy = tmp_path / 'real' / weights.FILENAME
  copy.parent.mkdir()
  shutil.copyfile(disco_103_path, copy)
  return copy


def _save_flat(path, flat):
  with open(path, 'wb') as f:
    np.savez(f, **flat)
  return path


def _check_disco_103_tree(params, source):
  """`params` is the full Disco103 tree, equal to the arrays in `source`."""
  assert isinstance(params, dict)
  assert len(params) == NUM_MODULES
  assert all(set(leaves) == {'w', 'b'} for leaves in params.values())
  flat = weights.flatten_params(params)
  assert len(flat) == NUM_ARRAYS
  assert sum(v.size for v in flat.values()) == NUM_PARAMETERS
  with np.load(source, allow_pickle=False) as raw:
    assert sorted(raw.files) == sorted(flat)
    for key, value in flat.items():
      assert isinstance(value, np.ndarray)
      assert value.dtype == np.float32, key
      np.testing.assert_array_equal(value, raw[key])
  # The module path keeps its own '/': only the last one is split off.
  leaves = params['lstm/~/meta_lstm/~unroll/mlp_2/~/linear_0']
  assert leaves['w'].shape == (29, 16) and leaves['b'].shape == (16,)


@contextlib.contextmanager
def _serve(directory):
  """Serves `directory` over HTTP on 127.0.0.1; yields the base URL."""

  class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
      del args

  handler = functools.partial(QuietHandler, directory=str(directory))
  server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  try:
    yield f'http://127.0.0.1:{server.server_address[1]}'
  finally:
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def server_dir(real_file, tmp_path):
  """A served directory with a good copy and a corrupted copy."""
  served = tmp_path / 'served'
  served.mkdir()
  shutil.copyfile(real_file, served / 'good.npz')
  data = bytearray(real_file.read_bytes())
  data[len(data) // 2] ^= 0xFF
  (served / 'corrupt.npz').write_bytes(bytes(data))
  return served


def _leftovers(directory):
  """Files in `directory` other than a finished download."""
  return sorted(
    p.name
    for p in pathlib.Path(directory).glob('*')
    if p.name != weights.FILENAME
  )


def _run_cli(*args, env=None):
  return subprocess.run(
    [sys.executable, '-m', 'disco_rl.weights', *args],
    capture_output=True,
    text=True,
    timeout=300,
    env=env,
    check=False,
  )


# ---------------------------------------------------------------------------
# Loading, by every route.


@pytest.mark.weights
def test_sha256_of_real_file_matches_published(disco_103_path):
  assert weights.sha256_of(disco_103_path) == weights.DISCO_103_SHA256


@pytest.mark.weights
def test_sidecar_sha256_matches_published(disco_103_path):
  """The `.sha256` file published beside the weights names the same digest.

  Without one the test is skipped, visibly (and fails in CI, like every
  weights test that cannot run).
  """
  sidecar = disco_103_path.with_name(disco_103_path.name + '.sha256')
  if not sidecar.is_file():
    pytest.skip(f'no sidecar {sidecar} beside the weights')
  digest, *name = sidecar.read_text().split()
  assert digest == weights.DISCO_103_SHA256
  assert name in ([], [weights.FILENAME], [f'*{weights.FILENAME}'])


@pytest.mark.weights
def test_load_by_path_argument(real_file):
  params = weights.load_disco_103(real_file, download=False)
  _check_disco_103_tree(params, real_file)


@pytest.mark.weights
def test_path_argument_wins_over_env_var(real_file, tmp_path, monkeypatch):
  monkeypatch.setenv(weights.ENV_WEIGHTS, str(tmp_path / 'absent.npz'))
  params = weights.load_disco_103(str(real_file), download=False)
  assert len(params) == NUM_MODULES


@pytest.mark.weights
@pytest.mark.parametrize('route', ['env var', 'source checkout', 'cache'])
def test_load_without_a_path(real_file, isolated, monkeypatch, route):
  checkout, cache = isolated
  if route == 'env var':
    monkeypatch.setenv(weights.ENV_WEIGHTS, str(real_file))
    where = real_file
  else:
    where = (checkout if route == 'source checkout' else cache) / (
      weights.FILENAME
    )
    where.parent.mkdir(exist_ok=True)
    shutil.copyfile(real_file, where)
  assert weights.find_disco_103() == where
  _check_disco_103_tree(weights.load_disco_103(download=False), where)


def test_checkout_dir_is_weights_beside_package():
  assert _ORIGINAL_CHECKOUT_DIR() == REPO_ROOT / 'weights'


def test_cache_dir_resolution(tmp_path, monkeypatch):
  monkeypatch.setenv(weights.ENV_CACHE_DIR, str(tmp_path / 'mine'))
  assert weights.cache_dir() == tmp_path / 'mine'
  monkeypatch.delenv(weights.ENV_CACHE_DIR)
  assert weights.cache_dir() == platformdirs.user_cache_path(
    'disco_rl', appauthor=False
  )
  if not sys.platform.startswith('linux'):
    return
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'xdg'))
  assert weights.cache_dir() == tmp_path / 'xdg' / 'disco_rl'
  monkeypatch.delenv('XDG_CACHE_HOME')
  monkeypatch.setenv('HOME', str(tmp_path / 'home'))
  assert weights.cache_dir() == tmp_path / 'home' / '.cache' / 'disco_rl'


def test_look_up_order(tmp_path, isolated, monkeypatch):
  checkout, cache = isolated
  cache.mkdir()
  env_file = tmp_path / 'env.npz'
  for path in (env_file, checkout / weights.FILENAME, cache / weights.FILENAME):
    path.write_bytes(b'placeholder')
  monkeypatch.setenv(weights.ENV_WEIGHTS, str(env_file))
  assert weights.find_disco_103() == env_file
  monkeypatch.delenv(weights.ENV_WEIGHTS)
  assert weights.find_disco_103() == checkout / weights.FILENAME
  (checkout / weights.FILENAME).unlink()
  assert weights.find_disco_103() == cache / weights.FILENAME
  (cache / weights.FILENAME).unlink()
  assert weights.find_disco_103() is None


@pytest.mark.weights
def test_download_into_cache(server_dir, isolated, monkeypatch):
  _, cache = isolated
  with _serve(server_dir) as base:
    monkeypatch.setenv(weights.ENV_URL, f'{base}/good.npz')
    params = weights.load_disco_103()
  target = cache / weights.FILENAME
  assert target.is_file()
  assert weights.sha256_of(target) == weights.DISCO_103_SHA256
  assert not _leftovers(cache)
  _check_disco_103_tree(params, target)
  # Now cached: no server needed.
  monkeypatch.setenv(weights.ENV_URL, UNREACHABLE_URL)
  assert len(weights.load_disco_103(download=False)) == NUM_MODULES


@pytest.mark.weights
def test_fetch_to_dest(server_dir, tmp_path):
  with _serve(server_dir) as base:
    dest = weights.fetch_disco_103(
      tmp_path / 'out' / 'w.npz', url=f'{base}/good.npz'
    )
    assert dest == tmp_path / 'out' / 'w.npz'
    assert weights.sha256_of(dest) == weights.DISCO_103_SHA256
    # A directory as dest gets the standard file name.
    in_dir = weights.fetch_disco_103(tmp_path / 'out', url=f'{base}/good.npz')
  assert in_dir == tmp_path / 'out' / weights.FILENAME
  # Already present and verified: no download (the URL is unreachable).
  assert weights.fetch_disco_103(dest, url=UNREACHABLE_URL) == dest


# ---------------------------------------------------------------------------
# Failures.


def test_missing_path_argument_names_it(tmp_path):
  missing = tmp_path / 'nope' / 'disco_103.npz'
  with pytest.raises(FileNotFoundError, match=str(missing)):
    weights.load_disco_103(missing)


def test_missing_env_var_file_names_it(tmp_path, isolated, monkeypatch):
  checkout, _ = isolated
  (checkout / weights.FILENAME).write_bytes(b'would be found next')
  missing = tmp_path / 'gone.npz'
  monkeypatch.setenv(weights.ENV_WEIGHTS, str(missing))
  with pytest.raises(FileNotFoundError) as info:
    weights.load_disco_103()
  assert weights.ENV_WEIGHTS in str(info.value)
  assert str(missing) in str(info.value)


def test_nothing_found_lists_every_place(isolated):
  checkout, cache = isolated
  with pytest.raises(FileNotFoundError) as info:
    weights.load_disco_103(download=False)
  message = str(info.value)
  for expected in (
    weights.ENV_WEIGHTS,
    str(checkout / weights.FILENAME),
    str(cache / weights.FILENAME),
    'download=False',
    'python -m disco_rl.weights',
  ):
    assert expected in message


def test_failed_download_lists_every_place(isolated):
  checkout, cache = isolated
  with pytest.raises(FileNotFoundError) as info:
    weights.load_disco_103()
  message = str(info.value)
  for expected in (
    str(checkout / weights.FILENAME),
    str(cache / weights.FILENAME),
    UNREACHABLE_URL,
    'python -m disco_rl.weights',
    weights.ENV_WEIGHTS,
  ):
    assert expected in message
  assert not cache.exists() or not _leftovers(cache)


def test_offline_message_names_the_url_and_the_way_by_hand(isolated):
  _, cache = isolated
  with pytest.raises(weights.DownloadError) as info:
    weights.fetch_disco_103()
  message = str(info.value)
  for expected in (
    UNREACHABLE_URL,
    'Without network access',
    str(cache / weights.FILENAME),
    weights.ENV_WEIGHTS,
    f'python -m disco_rl.weights --verify {cache}',
    weights.DISCO_103_SHA256,
  ):
    assert expected in message
  assert isinstance(info.value, OSError)


@pytest.mark.weights
def test_download_404_is_file_not_found(server_dir, isolated, monkeypatch):
  _, cache = isolated
  with _serve(server_dir) as base:
    monkeypatch.setenv(weights.ENV_URL, f'{base}/missing.npz')
    with pytest.raises(FileNotFoundError, match='404'):
      weights.load_disco_103()
  assert not (cache / weights.FILENAME).exists()
  assert not _leftovers(cache)


@pytest.mark.weights
def test_download_sha256_mismatch(server_dir, isolated, monkeypatch):
  _, cache = isolated
  actual = hashlib.sha256((server_dir / 'corrupt.npz').read_bytes()).hexdigest()
  with _serve(server_dir) as base:
    monkeypatch.setenv(weights.ENV_URL, f'{base}/corrupt.npz')
    with pytest.raises(weights.ChecksumError) as info:
      weights.load_disco_103()
    with pytest.raises(ValueError, match=actual):
      weights.fetch_disco_103(cache / 'other.npz')
  assert weights.DISCO_103_SHA256 in str(info.value)
  assert actual in str(info.value)
  assert sorted(p.name for p in cache.iterdir()) == []  # Temp files deleted.


def test_not_an_npz(tmp_path):
  bad = tmp_path / 'random.npz'
  bad.write_bytes(np.random.default_rng(0).bytes(4096))
  with pytest.raises(ValueError, match='not a valid npz') as info:
    weights.load_disco_103(bad)
  assert str(bad) in str(info.value)
  assert 'python -m disco_rl.weights' in str(info.value)


def test_npy_is_not_an_npz(tmp_path):
  bad = tmp_path / 'array.npy'
  np.save(bad, np.zeros(3, np.float32))
  with pytest.raises(ValueError, match='single .npy array'):
    weights.load_disco_103(bad)


@pytest.mark.weights
def test_truncated_npz(real_file, tmp_path):
  data = real_file.read_bytes()
  bad = tmp_path / 'truncated.npz'
  bad.write_bytes(data[: len(data) // 2])
  with pytest.raises(ValueError, match='not a valid npz') as info:
    weights.load_disco_103(bad)
  assert str(bad) in str(info.value)


@pytest.mark.weights
def test_corrupt_member(server_dir):
  with pytest.raises(ValueError, match='not a valid npz'):
    weights.load_disco_103(server_dir / 'corrupt.npz')


def test_keys_must_be_module_w_or_b(tmp_path):
  for key in ('lstm/linear/kernel', 'w', '/w'):
    bad = _save_flat(
      tmp_path / 'keys.npz',
      {'lstm/linear/w': np.zeros((2, 2), np.float32), key: np.zeros(2)},
    )
    with pytest.raises(ValueError, match='MODULE/w or MODULE/b') as info:
      weights.load_disco_103(bad, check_architecture=False)
    assert repr(key) in str(info.value)


@pytest.mark.weights
def test_missing_parameter_is_named(real_file, tmp_path):
  flat = weights.flatten_params(
    weights.load_disco_103(real_file, check_architecture=False)
  )
  del flat['lstm/mlp_1/~/linear_1/b']
  bad = _save_flat(tmp_path / 'dropped.npz', flat)
  with pytest.raises(weights.ArchitectureError) as info:
    weights.load_disco_103(bad)
  assert "missing parameter 'lstm/mlp_1/~/linear_1/b'" in str(info.value)
  assert str(bad) in str(info.value)
  # Opting out of the check loads it anyway.
  params = weights.load_disco_103(bad, check_architecture=False)
  assert params['lstm/mlp_1/~/linear_1'].keys() == {'w'}


@pytest.mark.weights
def test_wrong_shape_is_named(real_file, tmp_path):
  flat = weights.flatten_params(
    weights.load_disco_103(real_file, check_architecture=False)
  )
  flat['lstm/linear/w'] = flat['lstm/linear/w'][:, :255]
  bad = _save_flat(tmp_path / 'reshaped.npz', flat)
  with pytest.raises(
    weights.ArchitectureError,
    match=r'does not match the Disco103 meta-network: parameter '
    r"'lstm/linear/w': shapes: \(128, 255\) != \(128, 256\) "
    r'\(given != expected\)',
  ):
    weights.load_disco_103(bad)


# A rule meta-trained here at LPG's prediction size, with small LSTMs.
_SMALL_RULE = dict(
  prediction_size=8, hidden_size=16, embedding_size=(8, 1), meta_hidden_size=8
)


@pytest.fixture(scope='module')
def small_rule_file(tmp_path_factory):
  """(path, params) of an npz of a fresh rule of `_SMALL_RULE`'s sizes, as
  export_rule writes a rule meta-trained here."""
  rule = disco.DiscoUpdateRule(
    **agent_lib.get_settings_disco(_SMALL_RULE).update_rule
  )
  params, _ = jax.jit(rule.init_params)(jax.random.PRNGKey(3))
  path = tmp_path_factory.mktemp('rule') / 'small_rule.npz'
  weights.save_params(params, path)
  return path, params


def test_load_rule_reads_the_sizes_from_the_file(small_rule_file, tmp_path):
  path, params = small_rule_file
  loaded = weights.load_rule(path)
  chex.assert_trees_all_equal(loaded, jax.device_get(params))
  assert disco.sizes_from_params(loaded) == disco.as_sizes(_SMALL_RULE)
  # The run's sizes, when given, must be the file's; either form works.
  weights.load_rule(path, _SMALL_RULE)
  weights.load_rule(path, disco.as_sizes(_SMALL_RULE))
  with pytest.raises(
    weights.ArchitectureError,
    match=r'small_rule.npz holds a meta-network of sizes '
    r'prediction_size=8,hidden_size=16,embedding_size=8x1,'
    r"meta_hidden_size=8, not the run's Disco103's\.",
  ):
    weights.load_rule(path, {})
  # A leaf of another shape than the sizes the file implies is named.
  flat = weights.flatten_params(jax.device_get(params))
  flat['lstm/linear/w'] = flat['lstm/linear/w'][:, :3]
  bad = _save_flat(tmp_path / 'reshaped.npz', flat)
  with pytest.raises(
    weights.ArchitectureError,
    match=r'reshaped.npz does not match the Disco meta-network of the '
    r'sizes it implies \(prediction_size=8,.*\): parameter '
    r"'lstm/linear/w': shapes: \(8, 3\) != \(8, 16\)",
  ):
    weights.load_rule(bad)
  # Not a Disco meta-network at all.
  other = _save_flat(tmp_path / 'other.npz', {'mlp/linear/b': np.zeros(3)})
  with pytest.raises(
    weights.ArchitectureError,
    match=r"other.npz: Not the parameters of a Disco meta-network named 'lstm'",
  ):
    weights.load_rule(other)
  with pytest.raises(FileNotFoundError, match='rule weights file not found'):
    weights.load_rule(tmp_path / 'absent.npz')


@pytest.mark.weights
def test_load_rule_of_disco_103_is_load_disco_103(real_file, tmp_path):
  chex.assert_trees_all_equal(
    weights.load_rule(real_file, {}),
    weights.load_disco_103(real_file, download=False),
  )
  flat = weights.flatten_params(
    weights.load_disco_103(real_file, check_architecture=False)
  )
  flat['lstm/linear/w'] = flat['lstm/linear/w'][:, :255]
  bad = _save_flat(tmp_path / 'reshaped.npz', flat)
  with pytest.raises(weights.ArchitectureError) as by_rule:
    weights.load_rule(bad)
  with pytest.raises(weights.ArchitectureError) as by_name:
    weights.load_disco_103(bad)
  assert str(by_rule.value) == str(by_name.value)


@pytest.mark.weights
def test_validate_params(disco_103_params):
  weights.validate_params(disco_103_params)
  weights.validate_params(disco_103_params, weights.expected_disco_103_shapes())
  # Works on jax arrays too.
  weights.validate_params(jax.tree.map(jax.numpy.asarray, disco_103_params))

  extra = {**disco_103_params, 'lstm/zzz': {'w': np.zeros(1, np.float32)}}
  with pytest.raises(
    weights.ArchitectureError, match=r"unexpected parameter 'lstm/zzz/w'"
  ):
    weights.validate_params(extra)

  # Only the first difference, in sorted order, is named.
  broken = {m: dict(leaves) for m, leaves in disco_103_params.items()}
  broken['lstm/linear_4']['w'] = np.zeros((16, 2), np.float32)
  del broken['lstm/linear_1']['b']
  with pytest.raises(
    weights.ArchitectureError, match=r"^missing parameter 'lstm/linear_1/b'"
  ):
    weights.validate_params(broken)

  as_f64 = {
    m: {k: v.astype(np.float64) for k, v in leaves.items()}
    for m, leaves in disco_103_params.items()
  }
  with pytest.raises(
    weights.ArchitectureError,
    match=r"^parameter '.*': types: float64 != float32",
  ):
    weights.validate_params(as_f64)

  with pytest.raises(TypeError, match='must map module names'):
    weights.validate_params([1, 2, 3])


@pytest.mark.weights
def test_save_params_round_trips(disco_103_params, tmp_path):
  path = tmp_path / 'saved.npz'
  weights.save_params(jax.tree.map(jax.numpy.asarray, disco_103_params), path)
  chex.assert_trees_all_equal(weights.load_disco_103(path), disco_103_params)


def test_flat_layout_round_trips_and_rejects_other_trees():
  params = {'a/~/linear': {'w': np.ones((2, 3)), 'b': np.zeros(3)}}
  flat = weights.flatten_params(params)
  assert sorted(flat) == ['a/~/linear/b', 'a/~/linear/w']
  chex.assert_trees_all_equal(weights.unflatten_params(flat), params)
  for bad in ([1, 2], {'a': np.ones(2)}):
    with pytest.raises(TypeError, match='must map module names'):
      weights.flatten_params(bad)


@pytest.mark.golden
def test_expected_shapes_match_golden_init(load_golden):
  spec = weights.expected_disco_103_shapes()
  case = load_golden('disco_init')
  recorded = case.under('params')
  derived = {
    f'{m}|{leaf}': s for m, leaves in spec.items() for leaf, s in leaves.items()
  }
  assert sorted(derived) == sorted(recorded)
  for key, value in recorded.items():
    assert tuple(derived[key].shape) == value.shape, key
    assert np.dtype(derived[key].dtype) == value.dtype, key


# ---------------------------------------------------------------------------
# Command line: `python -m disco_rl.weights` as a process once (the command
# the README gives); its other paths through its `main` in this process
# (the same function the module runs, without a process's 3 s start-up).


def _cli_env(**extra):
  env = dict(os.environ)
  env.pop(weights.ENV_WEIGHTS, None)
  env.update(extra)
  return env


@pytest.mark.weights
def test_cli_verify(real_file):
  result = _run_cli('--verify', str(real_file), env=_cli_env())
  assert result.returncode == 0, result.stderr
  assert weights.DISCO_103_SHA256 in result.stdout
  assert str(real_file) in result.stdout


@pytest.fixture
def run_main(monkeypatch, call_main):
  """`run_main(*args, **env)`: `weights.main(args)` in this process
  (`call_main`) with `env` set and $DISCO_RL_WEIGHTS unset, as `_cli_env`
  gives the process."""

  def run(*args, **env):
    monkeypatch.delenv(weights.ENV_WEIGHTS, raising=False)
    for name, value in env.items():
      monkeypatch.setenv(name, value)
    return call_main(weights.main, *args)

  return run


@pytest.mark.weights
def test_cli_verify_rejects_bad_files(server_dir, tmp_path, run_main):
  result = run_main('--verify', str(server_dir / 'corrupt.npz'))
  assert result.returncode == 1
  assert 'sha256 mismatch' in result.stderr
  assert weights.DISCO_103_SHA256 in result.stderr

  result = run_main('--verify', str(tmp_path / 'absent.npz'))
  assert result.returncode == 1
  assert 'absent.npz' in result.stderr


def test_cli_offline_says_how_to_put_the_file_in_place(tmp_path, run_main):
  cache = tmp_path / 'cache'
  result = run_main(
    DISCO_RL_WEIGHTS_URL=UNREACHABLE_URL, DISCO_RL_CACHE_DIR=str(cache)
  )
  assert result.returncode == 1
  (error,) = [
    line for line in result.stderr.splitlines() if line.startswith('error:')
  ]
  assert error.startswith(f'error: Downloading {UNREACHABLE_URL} failed')
  for expected in (
    'Without network access',
    str(cache / weights.FILENAME),
    'python -m disco_rl.weights --verify',
  ):
    assert expected in result.stderr
  assert not result.stdout


@pytest.mark.weights
def test_cli_fetch(server_dir, tmp_path, run_main):
  dest = tmp_path / 'fetched' / weights.FILENAME
  with _serve(server_dir) as base:
    result = run_main(
      '--dest',
      str(dest),
      DISCO_RL_WEIGHTS_URL=f'{base}/good.npz',
      DISCO_RL_CACHE_DIR=str(tmp_path / 'unused-cache'),
    )
    assert result.returncode == 0, result.stderr
    assert dest.is_file() and str(dest) in result.stdout

    result = run_main(
      '--dest',
      str(tmp_path / 'x.npz'),
      DISCO_RL_WEIGHTS_URL=f'{base}/corrupt.npz',
    )
  assert result.returncode == 1
  assert 'sha256 mismatch' in result.stderr
  assert not (tmp_path / 'x.npz').exists()


# ---------------------------------------------------------------------------
# CI policy (tests/conftest.py): golden and weights tests may not skip in CI.


_POLICY_TESTS = """
import pytest

@pytest.mark.weights
def test_marked():
  pytest.skip('no weights here')

def test_fixture(disco_103_path):
  pass

def test_plain_skip():
  pytest.skip('unrelated')
"""


@pytest.mark.parametrize('ci', ['true', '1', ''])
def test_ci_turns_golden_and_weights_skips_into_failures(
  pytester, monkeypatch, ci
):
  conftest = pathlib.Path(__file__).with_name('conftest.py')
  pytester.makeconftest(conftest.read_text())
  pytester.makepyfile(test_policy=_POLICY_TESTS)
  monkeypatch.setenv('CI', ci)
  monkeypatch.setenv(weights.ENV_WEIGHTS, str(pytester.path / 'absent.npz'))
  result = pytester.runpytest('-p', 'no:cacheprovider', '-rA')
  if ci:
    # The marked test fails in its call, the fixture test in its setup.
    result.assert_outcomes(failed=1, errors=1, skipped=1)
    result.stdout.fnmatch_lines(['*must run in CI*DISCO_RL_WEIGHTS*'])
  else:
    result.assert_outcomes(skipped=3)


@pytest.mark.golden
def test_starting_rule_params_load_or_draw_fresh(
  monkeypatch, disco_103_path, golden, golden_dir
):
  monkeypatch.setenv(weights.ENV_WEIGHTS, str(disco_103_path))
  rule = disco.DiscoUpdateRule(**agent_lib.get_settings_disco().update_rule)
  loaded = weights.starting_rule_params(rule, True)
  chex.assert_trees_all_equal(loaded, weights.load_disco_103(disco_103_path))
  # The rule's init_params, compiled as one program: the upstream's fresh
  # meta-network of the golden case's seed, at the golden tolerances (op
  # by op, the reference would compile a few hundred small programs).
  case = golden_cases.load_case(
    golden, golden_dir, golden_cases.CURRENT_JAX, 'disco_init'
  )
  fresh = weights.starting_rule_params(rule, False, seed=case.meta['seed'])
  case.check(fresh, 'params')
  chex.assert_trees_all_equal_shapes(fresh, loaded)
  assert not np.allclose(fresh['lstm/linear']['w'], loaded['lstm/linear']['w'])
  hand_written = actor_critic.ActorCritic(
    **agent_lib.get_settings_actor_critic().update_rule
  )
  chex.assert_trees_all_equal(  # Its placeholder ({'dummy': 0.0}).
    weights.starting_rule_params(hand_written, False),
    hand_written.init_params(jax.random.PRNGKey(0))[0],
  )
