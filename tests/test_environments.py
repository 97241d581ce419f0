# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Tests of the Catch environments, their wrappers and the factory."""

import functools

import dm_env
from dm_env import specs
import golden_cases
import jax
import jax.numpy as jnp
from ml_collections import config_dict
import numpy as np
import pytest

from disco_rl import environments
from disco_rl import utils
from disco_rl.environments import base
from disco_rl.environments import catch
from disco_rl.environments import envpool_env
from disco_rl.environments import jittable_envs

_ENV_NAMES = ('catch', 'jittable_catch')


# Compiling is the slow part of these tests, so they share a few shapes: the
# golden one (8x8 board, batch 4) and a 3-row board, also with batch 4.
_BATCH = 4


def _settings(name, **kwargs):
  if name == 'catch':
    kwargs.setdefault('random_seed', 0)
  return config_dict.ConfigDict(kwargs)


def _random_actions(seed, shape):
  return np.random.RandomState(seed).randint(0, 3, size=shape).astype(np.int32)


@functools.cache
def _env_and_fns(name, rows, columns, jit):
  """The environment, its reset and its step (compiled if `jit`), cached."""
  env = environments.get_environment(
    name, _BATCH, _settings(name, rows=rows, columns=columns)
  )
  if jit:
    return env, jax.jit(env.reset), jax.jit(env.step)
  return env, env.reset, env.step


def _rollout(name, rows, columns, actions, rng_key=None, jit=False):
  """Resets, then steps with each row of `actions`; stacks timesteps on time.

  `jit` compiles reset and step (jittable Catch only); eager vmapped steps are
  slow, so tests that are not about eager mode use it.
  """
  _, reset, step = _env_and_fns(name, rows, columns, jit)
  return _run(reset, step, actions, rng_key)


def _run(reset, step, actions, rng_key=None):
  rng_key = jax.random.key(0) if rng_key is None else rng_key
  state, timestep = reset(rng_key)
  timesteps = [timestep]
  for action in actions:
    state, timestep = step(state, action)
    timesteps.append(timestep)
  return jax.tree.map(np.asarray, utils.tree_stack(timesteps))


def _positions(board):
  """(row, column) pairs of the ones of a [rows, columns(, 1)] board."""
  board = np.asarray(board).reshape(board.shape[:2])
  return [tuple(int(i) for i in p) for p in np.argwhere(board == 1.0)]


# ----------------------------------------------------------------------------
# Golden parity.


@pytest.mark.golden
@pytest.mark.parametrize(
  'reference', golden_cases.REFERENCES, ids=lambda r: r.name
)
@pytest.mark.parametrize(
  'name, prefix', [('jittable_catch', 'jittable'), ('catch', 'cpu')]
)
def test_matches_golden(golden, golden_dir, reference, name, prefix):
  case = golden_cases.load_case(golden, golden_dir, reference, 'envs')
  meta = case.meta
  actions = case.arrays['inputs|actions']
  assert actions.shape == (meta['steps'], meta['batch'])
  settings = config_dict.ConfigDict(
    dict(rows=meta['rows'], columns=meta['cols'])
  )
  if name == 'catch':
    settings.random_seed = meta['seed']
  env = environments.get_environment(name, meta['batch'], settings)

  # Eager, as the reference was recorded.
  got = _run(env.reset, env.step, actions, jax.random.PRNGKey(meta['seed']))

  for key in ('observation', 'step_type', 'reward'):
    want = case.arrays[f'{prefix}|{key}']
    assert got[key].dtype == want.dtype, key
  case.check(got, prefix, exact=True)


# ----------------------------------------------------------------------------
# Jittable Catch under transformations.


def test_jittable_jit_matches_eager():
  # Ten steps on an 8-row board: every stream finishes and restarts once.
  actions = _random_actions(1, (10, _BATCH))
  key = jax.random.key(7)
  eager = _rollout('jittable_catch', 8, 8, actions, key)
  jitted = _rollout('jittable_catch', 8, 8, actions, key, jit=True)
  assert (eager['step_type'] == dm_env.StepType.LAST).any(axis=0).all()
  jax.tree.map(np.testing.assert_array_equal, jitted, eager)


def test_jittable_vmap_matches_eager():
  env, _, _ = _env_and_fns('jittable_catch', 8, 8, False)
  keys = jax.random.split(jax.random.key(3), 2)
  num_steps = 9
  actions = _random_actions(4, (num_steps, len(keys), _BATCH))

  # Several independent batches at once, compiled, as a learner would use it.
  @jax.jit
  def vmapped_rollout(keys, actions):
    def body(states, action):
      states, timestep = jax.vmap(env.step)(states, action)
      return states, timestep

    states, first = jax.vmap(env.reset)(keys)
    _, rest = jax.lax.scan(body, states, actions)
    return jax.tree.map(lambda f, r: jnp.concatenate([f[None], r]), first, rest)

  vmapped = vmapped_rollout(keys, actions)
  for i in range(len(keys)):
    eager = _rollout('jittable_catch', 8, 8, actions[:, i], keys[i])
    jax.tree.map(
      lambda v, e, i=i: np.testing.assert_array_equal(v[:, i], e),
      vmapped,
      eager,
    )


def test_jittable_reset_accepts_legacy_and_typed_keys():
  _, reset, _ = _env_and_fns('jittable_catch', 8, 8, False)
  _, from_legacy = reset(jax.random.PRNGKey(5))
  _, from_typed = reset(jax.random.key(5))
  jax.tree.map(np.testing.assert_array_equal, from_legacy, from_typed)


# ----------------------------------------------------------------------------
# Hand-derived dynamics.


@pytest.mark.parametrize('name', _ENV_NAMES)
def test_still_paddle_catches_only_ball_above_it(name):
  # On a 3-row board the ball needs exactly two steps to reach the paddle
  # row, so episodes end at steps 2, 4, 6, ... With the paddle standing still
  # (action 1, in the centre column) the ball is caught iff it started in the
  # paddle's column. Each episode's start is visible on the observation that
  # opens it (the reset, or the previous episode's LAST step).
  rows, columns, episodes = 3, 3, 4
  stay = np.ones((2 * episodes, _BATCH), np.int32)
  out = _rollout(name, rows, columns, stay, jit=name == 'jittable_catch')
  centre = columns // 2

  step_types = out['step_type']
  want_first = dm_env.StepType.FIRST if name == 'catch' else dm_env.StepType.MID
  np.testing.assert_array_equal(step_types[0], want_first)
  np.testing.assert_array_equal(step_types[1::2], dm_env.StepType.MID)
  np.testing.assert_array_equal(step_types[2::2], dm_env.StepType.LAST)
  np.testing.assert_array_equal(out['reward'][1::2], 0.0)
  np.testing.assert_array_equal(out['reward'][0], 0.0)

  outcomes = set()
  for episode in range(episodes):
    opening = out['observation'][2 * episode]
    ball_x = np.empty(_BATCH, np.int64)
    for b, board in enumerate(opening):
      (ball_y, ball_x[b]), paddle = _positions(board)
      assert ball_y == 0 and paddle == (rows - 1, centre)
    want = np.where(ball_x == centre, 1.0, -1.0)
    np.testing.assert_array_equal(out['reward'][2 * episode + 2], want)
    outcomes.update(want.tolist())
  assert outcomes == {1.0, -1.0}  # Both cases were exercised.


@pytest.mark.parametrize('name', _ENV_NAMES)
def test_paddle_following_ball_always_catches(name):
  rows, columns, episodes = 3, 3, 3
  _, reset, step = _env_and_fns(name, rows, columns, name == 'jittable_catch')
  state, timestep = reset(jax.random.key(2))
  rewards = []
  for _ in range(episodes * (rows - 1)):
    boards = np.asarray(timestep['observation'])
    ball_x = np.array([_positions(b)[0][1] for b in boards])
    paddle_x = np.array([_positions(b)[-1][1] for b in boards])
    action = (np.sign(ball_x - paddle_x) + 1).astype(np.int32)
    state, timestep = step(state, action)
    rewards.append(np.asarray(timestep['reward']))
    last = np.asarray(timestep['step_type']) == dm_env.StepType.LAST
    np.testing.assert_array_equal(rewards[-1], np.where(last, 1.0, 0.0))
  # One episode ends every rows - 1 steps, each with a catch.
  np.testing.assert_array_equal(np.sum(rewards, axis=0), float(episodes))


@pytest.mark.parametrize('name', _ENV_NAMES)
def test_boards_show_ball_and_paddle(name):
  actions = _random_actions(9, (20, _BATCH))
  out = _rollout(name, 8, 8, actions, jit=name == 'jittable_catch')
  boards = out['observation']
  assert boards.dtype == np.float32
  assert set(np.unique(boards)) == {0.0, 1.0}
  # The ball never shares a cell with the paddle in a reported observation:
  # terminal steps already show the next episode.
  np.testing.assert_array_equal(
    boards.reshape(boards.shape[:2] + (-1,)).sum(-1), 2.0
  )
  # Exactly one cell of the bottom row (the paddle) is lit.
  np.testing.assert_array_equal(
    boards[:, :, -1].reshape(boards.shape[:2] + (-1,)).sum(-1), 1.0
  )


def test_dm_env_catch_terminal_board():
  # Below the self-resetting wrappers the terminal observation still shows
  # the ball's final cell: one lit cell if caught, two if missed.
  outcomes = set()
  for seed in range(8):
    game = catch.SingleStreamCatch(
      config_dict.ConfigDict(dict(rows=3, columns=3, random_seed=seed))
    )
    first = game.reset()
    assert first.first() and first.reward is None
    ball_x = _positions(first.observation)[0][1]
    timestep = game.step(1)
    assert timestep.mid() and timestep.reward == 0.0
    timestep = game.step(1)
    assert timestep.last()
    caught = ball_x == 1
    outcomes.add(caught)
    assert timestep.reward == (1.0 if caught else -1.0)
    assert timestep.observation.sum() == (1.0 if caught else 2.0)
    assert game.step(1).first()  # The step after LAST restarts.
  assert outcomes == {True, False}


def test_cpu_catch_seeds_each_stream():
  # Stream i is seeded with the i-th of `batch` int32 draws from random_seed.
  rows, columns, seed = 4, 7, 11
  env = catch.CatchEnvironment(
    _BATCH, _settings('catch', rows=rows, columns=columns, random_seed=seed)
  )
  _, timestep = env.reset(jax.random.key(0))
  stream_seeds = jax.random.randint(
    jax.random.key(seed), (_BATCH,), 0, np.iinfo(np.int32).max
  )
  for i, stream_seed in enumerate(np.asarray(stream_seeds)):
    rng = np.random.RandomState(int(stream_seed))
    rng.randint(columns)  # The draw made when the environment was built.
    ball = _positions(timestep['observation'][i])[0]
    assert ball == (0, rng.randint(columns))


def test_cpu_catch_accepts_jax_actions():
  env = environments.get_environment('catch', _BATCH)
  env.reset(jax.random.key(0))
  _, timestep = env.step(None, jnp.array([0, 1, 2, 1], jnp.int32))
  paddles = [_positions(b)[-1] for b in timestep['observation']]
  assert paddles == [(7, 3), (7, 4), (7, 5), (7, 4)]
  assert timestep['step_type'].dtype == np.int32
  assert timestep['reward'].dtype == np.float32


# ----------------------------------------------------------------------------
# Specs.


def test_jittable_specs():
  env = jittable_envs.CatchJittableEnvironment(
    5, config_dict.ConfigDict(dict(rows=6, columns=7))
  )
  assert env.batch_size == 5
  assert env.single_observation_spec() == {
    'observation': specs.Array(shape=(6, 7, 1), dtype=np.float32)
  }
  assert env.single_action_spec() == specs.BoundedArray((), np.int32, 0, 2)
  assert env.batched_observation_spec() == {
    'observation': specs.Array(shape=(5, 6, 7, 1), dtype=np.float32)
  }
  batched_action = env.batched_action_spec()
  assert batched_action.shape == (5,) and batched_action.dtype == np.int32
  np.testing.assert_array_equal(batched_action.minimum, 0)
  np.testing.assert_array_equal(batched_action.maximum, 2)


@pytest.mark.parametrize('name', _ENV_NAMES)
def test_specs_describe_outputs(name):
  env, reset, step = _env_and_fns(name, 8, 8, name == 'jittable_catch')
  state, timestep = reset(jax.random.key(0))
  action = np.full((_BATCH,), 2, np.int32)
  env.batched_action_spec().validate(action)
  _, after_step = step(state, action)
  for ts in (timestep, after_step):
    obs = np.asarray(ts['observation'])
    obs_spec = env.batched_observation_spec()
    if name == 'jittable_catch':
      # The spec is a dict, the timestep carries the bare board.
      obs_spec = obs_spec['observation']
    obs_spec.validate(obs)
    assert np.asarray(ts['step_type']).shape == (_BATCH,)
    assert np.asarray(ts['reward']).shape == (_BATCH,)


def test_cpu_specs():
  env = catch.CatchEnvironment(
    _BATCH, config_dict.ConfigDict(dict(rows=4, columns=9, random_seed=2))
  )
  assert env.batch_size == _BATCH
  assert env.single_observation_spec() == specs.Array(
    shape=(4, 9), dtype=np.float32, name='board'
  )
  assert env.single_action_spec() == specs.BoundedArray((), np.int32, 0, 2)
  assert env.batched_observation_spec() == specs.Array(
    shape=(_BATCH, 4, 9), dtype=np.float32, name='board'
  )
  batched_action = env.batched_action_spec()
  assert batched_action.shape == (_BATCH,)
  assert batched_action.dtype == np.int32


def test_default_configs():
  assert catch.get_config().to_dict() == dict(rows=8, columns=8, random_seed=1)
  assert jittable_envs.get_config_catch().to_dict() == dict(rows=8, columns=8)
  for name in _ENV_NAMES:
    env = environments.get_environment(name, _BATCH)
    assert env.batched_action_spec().shape == (_BATCH,)
    board_shape = env.batched_observation_spec()
    if name == 'jittable_catch':
      board_shape = board_shape['observation']
    assert board_shape.shape[:3] == (_BATCH, 8, 8)


# ----------------------------------------------------------------------------
# Bad inputs.


def test_unknown_environment_name():
  with pytest.raises(ValueError, match=r"'pong'.*'catch'.*'jittable_catch'"):
    environments.get_environment('pong', 2)


_ENV_CLASSES = {
  'catch': catch.CatchEnvironment,
  'jittable_catch': jittable_envs.CatchJittableEnvironment,
}


@pytest.mark.parametrize('name', _ENV_NAMES)
@pytest.mark.parametrize('batch_size', [0, -3])
def test_bad_batch_size(name, batch_size):
  settings = _settings(name, rows=5, columns=5)
  with pytest.raises(ValueError, match=rf'batch_size.*{batch_size}'):
    environments.get_environment(name, batch_size, settings)
  with pytest.raises(ValueError, match=rf'batch_size.*{batch_size}'):
    _ENV_CLASSES[name](batch_size, settings)


@pytest.mark.parametrize('name', _ENV_NAMES)
def test_unknown_setting(name):
  settings = _settings(name, rows=5, colums=5)
  with pytest.raises(ValueError, match=r"'colums'.*accepted.*'columns'"):
    environments.get_environment(name, 2, settings)
  with pytest.raises(ValueError, match=r"'colums'.*accepted.*'columns'"):
    _ENV_CLASSES[name](2, settings)


def test_cpu_catch_missing_setting():
  with pytest.raises(ValueError, match=r"'random_seed'"):
    catch.CatchEnvironment(2, config_dict.ConfigDict(dict(rows=5, columns=5)))


@pytest.mark.parametrize('name', _ENV_NAMES)
def test_settings_of_the_wrong_type(name):
  with pytest.raises(
    TypeError,
    match=r'env_settings must be an ml_collections ConfigDict '
    r'or a mapping, got list',
  ):
    _ENV_CLASSES[name](2, [('rows', 5)])


def test_package_settings_of_the_wrong_type():
  with pytest.raises(
    TypeError,
    match=r'gymnax:CartPole-v1 env_settings must '
    r'be .* got str',
  ):
    environments.get_environment('gymnax:CartPole-v1', 2, 'rows=5')


def test_discrete_action_spec_is_what_the_checks_accept():
  from disco_rl.environments import base  # pylint: disable=g-import-not-at-top

  spec = base.discrete_action_spec(4)
  assert spec == specs.BoundedArray((), np.int32, 0, 3, name='action')
  base.check_action_spec(spec)
  with pytest.raises(ValueError, match='num_actions must be >= 1, got 0'):
    base.discrete_action_spec(0)


# ----------------------------------------------------------------------------
# The registry of environment families.


class _Toy(base.VmappedEnvironment):
  """A counter: each episode lasts `length` steps; the reward is the action.

  The observation is {'count': float32 [1]}, the steps taken so far.
  """

  def __init__(self, batch_size, length=3):
    self.batch_size = base.check_batch_size(batch_size)
    self._length = length
    self._single_observation_spec = {
      'count': specs.Array((1,), np.float32, name='count')
    }
    self._single_action_spec = base.discrete_action_spec(2)

  def _observe(self, count):
    return {'count': count.astype(jnp.float32)[None]}

  def _reset_one(self, key):
    del key
    return jnp.int32(0), base.restart(self._observe(jnp.int32(0)))

  def _step_one(self, count, action):
    count = count + 1
    done = count >= self._length
    count = jnp.where(done, 0, count)
    timestep, info = base.transition(self._observe(count), action, done, False)
    return count, timestep, info


def _make_toy(name, batch_size, settings, seed):
  del name, seed
  return _Toy(batch_size, **settings)


@pytest.fixture
def toy():
  family = environments.register('toy:', _make_toy)
  yield family
  environments.unregister('toy:')


def test_a_registered_family_builds_by_name(toy):
  assert environments.family('toy:x') is toy
  assert not toy.on_host and toy.jittable is None and toy.is_prefix
  assert 'toy:' in environments.PREFIXES
  environments.check_name('toy:Anything')

  env = environments.get_environment('toy:Anything', 4)
  assert isinstance(env, _Toy) and not env.on_host
  base.check_jittable_environment(env)
  state, first = jax.jit(env.reset)(jax.random.key(0))
  np.testing.assert_array_equal(first.step_type, dm_env.StepType.FIRST)
  np.testing.assert_array_equal(first.reward, 0.0)
  step = jax.jit(env.step_with_info)
  actions = jnp.array([0, 1, 1, 0], jnp.int32)
  step_types = []
  for _ in range(3):
    state, timestep, info = step(state, actions)
    step_types.append(int(timestep.step_type[0]))
  assert step_types == [dm_env.StepType.MID] * 2 + [dm_env.StepType.LAST]
  np.testing.assert_array_equal(timestep.reward, [0.0, 1.0, 1.0, 0.0])
  np.testing.assert_array_equal(info.terminated, True)
  np.testing.assert_array_equal(info.truncated, False)
  np.testing.assert_array_equal(info.discount, 0.0)
  # Restarted: the LAST step shows the next episode's first count.
  np.testing.assert_array_equal(timestep.observation['count'], 0.0)

  # Settings go to `make`.
  env = environments.get_environment('toy:Anything', 2, {'length': 5})
  assert env._length == 5  # pylint: disable=protected-access


def test_a_registered_family_is_listed_for_unknown_names(toy):
  del toy
  with pytest.raises(
    ValueError,
    match=(
      r"Unknown environment 'tyo:x'; valid names are 'catch', "
      r"'jittable_catch', 'gymnax:<id>'.* and 'toy:<id>'\."
    ),
  ):
    environments.get_environment('tyo:x', 2)
  with pytest.raises(ValueError, match=r"Unknown env 'tyo:x'.*'toy:<id>'"):
    environments.check_name('tyo:x', 'env')
  with pytest.raises(ValueError, match=r"Unknown environment 'tyo:x'"):
    environments.family('tyo:x')


def test_a_family_with_names_knows_its_ids(toy):
  del toy  # Registered again below, with names; removed after the test.
  names = lambda: ['toy:Small', 'toy:Large']
  environments.register('toy:', _make_toy, names=names, replace=True)
  environments.check_name('toy:Small')
  assert isinstance(environments.get_environment('toy:Large', 2), _Toy)
  match = (
    r"Unknown environment 'toy:Smal': no toy:<id> of that id\. "
    r"Close matches: 'toy:Small'\. Known ids: Small, Large\."
  )
  with pytest.raises(ValueError, match=match):
    environments.get_environment('toy:Smal', 2)
  with pytest.raises(ValueError, match=match.replace('environment', 'env')):
    environments.check_name('toy:Smal', 'env')
  # A name no family has: close matches among every family's names.
  with pytest.raises(
    ValueError,
    match=(r"'toy:<id>' \(e\.g\. 'toy:Small'\)\. Close matches: .*'toy:Small'"),
  ):
    environments.family('small')


def test_registering_a_name_twice_is_an_error(toy):
  with pytest.raises(
    ValueError,
    match=(
      r"An environment family 'toy:' is already registered .*pass "
      r'replace=True'
    ),
  ):
    environments.register('toy:', _make_toy)
  with pytest.raises(ValueError, match=r"family 'catch' is already"):
    environments.register('catch', _make_toy)
  # replace=True replaces it (the fixture removes the replacement).
  again = environments.register('toy:', _make_toy, replace=True)
  assert environments.family('toy:x') is again and again is not toy


@pytest.mark.parametrize(
  'kwargs, match',
  [
    (
      dict(name_or_prefix='to:y:'),
      r'name_or_prefix must be an exact name '
      r".* or a prefix ending in one \":\" .*got 'to:y:'",
    ),
    (dict(name_or_prefix=':'), r"got ':'"),
    (dict(name_or_prefix='toy:', make=None), r'make must be callable'),
    (
      dict(name_or_prefix='toy:', jittable='toy_jit'),
      r'jittable names the '
      r"jittable twin .* got jittable='toy_jit' with on_host=False",
    ),
    (
      dict(name_or_prefix='toy', names=list),
      r'names must be a function .* '
      r"of a prefix family .*for 'toy'",
    ),
    (
      dict(name_or_prefix='toy:', package='toy'),
      r'package must be \(module,'
      r" pip extra\).*got 'toy'",
    ),
  ],
)
def test_bad_registrations_are_named(kwargs, match):
  kwargs = dict(kwargs)
  kwargs.setdefault('make', _make_toy)
  with pytest.raises(ValueError, match=match):
    environments.register(
      kwargs.pop('name_or_prefix'), kwargs.pop('make'), **kwargs
    )
  assert environments.registry.lookup('toy:x') is None


def test_unregistering_an_unknown_family_is_an_error():
  with pytest.raises(
    ValueError,
    match=r"No environment family 'toy:' is "
    r"registered; registered: 'catch', 'jittable_catch'",
  ):
    environments.unregister('toy:')


def test_the_built_in_families():
  host_catch = environments.family('catch')
  assert host_catch.on_host and host_catch.jittable == 'jittable_catch'
  jittable = environments.family(host_catch.jittable)
  assert not jittable.on_host and jittable.jittable is None
  atari = environments.family('envpool:Breakout-v5')
  assert atari.on_host and atari.jittable is None
  assert atari.package == ('envpool', 'disco_rl[atari]')
  assert not environments.family('gymnax:Breakout-MinAtar').on_host
  assert not environments.family('jumanji:Sokoban-v0').on_host
  assert environments.PREFIXES == (
    'gymnax:',
    'craftax:',
    'jumanji:',
    'envpool:',
    'lpg:',
  )
  # The environments say the same as their families.
  assert environments.get_environment('catch', 2).on_host
  assert not environments.get_environment('jittable_catch', 2).on_host
  assert envpool_env.EnvpoolEnvironment.on_host
  assert not base.Environment.on_host


def test_host_families_take_random_seed_as_the_seed():
  seeds = []

  def make(name, batch_size, settings, seed):
    seeds.append((name, settings, seed))
    return catch.make(name, batch_size, settings, seed)

  environments.register('toy_host', make, on_host=True)
  try:
    environments.get_environment(
      'toy_host', 2, dict(rows=3, columns=3, random_seed=5)
    )
    environments.get_environment('toy_host', 2, dict(rows=3, columns=3))
  finally:
    environments.unregister('toy_host')
  assert seeds == [
    ('toy_host', dict(rows=3, columns=3), 5),
    ('toy_host', dict(rows=3, columns=3), 0),
  ]
  # The host Catch: the same boards as the class with that random_seed.
  by_name = environments.get_environment(
    'catch', 2, dict(rows=4, columns=7, random_seed=3)
  )
  by_class = catch.CatchEnvironment(2, dict(rows=4, columns=7, random_seed=3))
  jax.tree.map(
    np.testing.assert_array_equal,
    by_name.reset(None)[1],
    by_class.reset(None)[1],
  )
