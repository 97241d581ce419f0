# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The gymnax/Craftax adapter: exact semantics, every discrete env, errors."""

import json
import urllib.error

import adapter_helpers
import dm_env
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tiny

from disco_rl import environments
from disco_rl.cli import eval as eval_cli
from disco_rl.environments import base
from disco_rl.environments import gymnax_env

pytestmark = pytest.mark.usefixtures('fast_compile')

_BATCH = 4
_STEPS = 60
LAST, MID, FIRST = (
  int(dm_env.StepType.LAST),
  int(dm_env.StepType.MID),
  int(dm_env.StepType.FIRST),
)


def _random_actions(num_actions, seed=0):
  return jax.random.randint(
    jax.random.PRNGKey(seed), (_STEPS, _BATCH), 0, num_actions, dtype=jnp.int32
  )


def _by_hand(gym_env, params, rng, actions):
  """gymnax driven directly, with the keys the adapter documents.

  Instance b: key_b = split(rng, B)[b]; reset with split(key_b)[1], keep
  split(key_b)[0]; each step: (next key, step key) = split(key).
  """

  def reset_one(key):
    carry, reset_key = jax.random.split(key)
    obs, state = gym_env.reset(reset_key, params)
    return carry, state, obs

  def step_one(key, state, action):
    carry, step_key = jax.random.split(key)
    obs, state, reward, terminated, truncated, _ = gym_env.step(
      step_key, state, action, params
    )
    return carry, state, (obs, reward, terminated, truncated)

  @jax.jit
  def run(rng, actions):
    keys, states, first_obs = jax.vmap(reset_one)(jax.random.split(rng, _BATCH))

    def step(carry, action):
      keys, states = carry
      keys, states, out = jax.vmap(step_one)(keys, states, action)
      return (keys, states), out

    _, outs = jax.lax.scan(step, (keys, states), actions)
    return first_obs, outs

  return run(rng, actions)


# (gymnax id, keyword arguments, the episode ends the rollout must show):
# short time limits so that episodes are truncated as well as terminated.
_EXACT_CASES = [
  ('CartPole-v1', dict(max_steps_in_episode=12), ('truncated',)),
  (
    'Breakout-MinAtar',
    dict(max_steps_in_episode=25),
    ('terminated', 'truncated'),
  ),
  ('Catch-bsuite', dict(rows=5, columns=4), ('terminated',)),
  ('DeepSea-bsuite', dict(size=6), ('terminated',)),
]


@pytest.mark.parametrize('env_id,kwargs,ends', _EXACT_CASES)
def test_adapter_matches_gymnax_stepped_by_hand(env_id, kwargs, ends):
  env = environments.get_environment(f'gymnax:{env_id}', _BATCH, kwargs)
  actions = _random_actions(env.single_action_spec().maximum + 1)
  rng = jax.random.PRNGKey(3)
  first, timesteps, infos = adapter_helpers.adapter_rollout(env, rng, actions)
  first_obs, (obs, reward, terminated, truncated) = _by_hand(
    env.env, env.env_params, rng, actions
  )

  np.testing.assert_array_equal(first.step_type, np.full(_BATCH, FIRST))
  np.testing.assert_array_equal(first.reward, np.zeros(_BATCH))
  # Observations: MinAtar's 0/1 channels as uint8, others float32; the
  # same values either way.
  stored = np.uint8 if env_id.endswith('-MinAtar') else np.float32
  assert first.observation.dtype == timesteps.observation.dtype == stored
  assert env.single_observation_spec()['observation'].dtype == stored
  np.testing.assert_array_equal(
    np.asarray(first.observation, np.float32), np.asarray(first_obs, np.float32)
  )
  # Every step: the auto-reset observation, the reward, LAST at every end.
  np.testing.assert_array_equal(
    np.asarray(timesteps.observation, np.float32), np.asarray(obs, np.float32)
  )
  np.testing.assert_array_equal(
    timesteps.reward, np.asarray(reward, np.float32)
  )
  assert timesteps.reward.dtype == np.float32
  np.testing.assert_array_equal(
    timesteps.step_type, np.where(terminated | truncated, LAST, MID)
  )
  # Termination: discount 0; truncation: the episode ends, discount 1.
  np.testing.assert_array_equal(infos.terminated, terminated)
  np.testing.assert_array_equal(infos.truncated, truncated)
  np.testing.assert_array_equal(infos.discount, np.where(terminated, 0.0, 1.0))
  seen = dict(
    terminated=np.sum(terminated), truncated=np.sum(truncated & ~terminated)
  )
  for end in ends:
    assert seen[end] > 0, f'no episode was {end} in {_STEPS} steps: {seen}'


@pytest.mark.parametrize(
  'game', ['Asterix', 'Freeway', 'Seaquest', 'SpaceInvaders']
)
@pytest.mark.slow  # ~30 s for four games; Breakout is in the exactness test.
def test_minatar_observations_are_stored_as_the_same_bytes(game):
  """gymnax gives MinAtar's 0/1 channels as float32; the adapter keeps them
  as uint8 of the same values (Breakout: the exactness test above)."""
  env = environments.get_environment(f'gymnax:{game}-MinAtar', _BATCH)
  actions = _random_actions(env.single_action_spec().maximum + 1)
  rng = jax.random.PRNGKey(5)
  first, timesteps, _ = adapter_helpers.adapter_rollout(env, rng, actions)
  first_obs, (obs, *_) = _by_hand(env.env, env.env_params, rng, actions)
  assert timesteps.observation.dtype == first.observation.dtype == np.uint8
  np.testing.assert_array_equal(
    np.asarray(first.observation, np.float32), first_obs
  )
  np.testing.assert_array_equal(
    np.asarray(timesteps.observation, np.float32), obs
  )


def test_step_info_of_the_five_value_api():
  """Craftax's API: `done` with info['discount'] tells the two ends apart."""
  done = jnp.array([True, True, False])
  info = dict(discount=jnp.array([0.0, 1.0, 1.0]))
  step_info = gymnax_env._step_info(  # pylint: disable=protected-access
    (None, None, None, done, info), 'env'
  )
  np.testing.assert_array_equal(step_info.terminated, [True, False, False])
  np.testing.assert_array_equal(step_info.truncated, [False, True, False])
  np.testing.assert_array_equal(step_info.discount, [0.0, 1.0, 1.0])
  with pytest.raises(ValueError, match='got 3 values'):
    gymnax_env._step_info((1, 2, 3), 'env')  # pylint: disable=protected-access


# ----------------------------------------------------------------------------
# Every environment gymnax registers.


def _is_continuous(env_id):
  env, params = gymnax.make(env_id)
  return not gymnax_env.is_discrete(env.action_space(params))


_NEEDS_DOWNLOAD = ('MNISTBandit-bsuite',)  # Downloads MNIST when built.
_IDS = [i for i in gymnax.registered_envs if i not in _NEEDS_DOWNLOAD]
_CONTINUOUS = [i for i in _IDS if _is_continuous(i)]
_DISCRETE = [i for i in gymnax.registered_envs if i not in _CONTINUOUS]


@pytest.mark.parametrize('env_id', _DISCRETE)
def test_every_discrete_gymnax_environment_resets_and_steps(env_id):
  try:
    env = environments.get_environment(f'gymnax:{env_id}', 2)
  except (urllib.error.URLError, OSError) as e:
    pytest.skip(f'{env_id} downloads its data when built: {e}')
  base.check_jittable_environment(env)
  spec = env.single_action_spec()
  assert spec.shape == () and spec.dtype == np.int32 and spec.minimum == 0
  obs_spec = env.single_observation_spec()

  @jax.jit
  def reset_and_step(rng):
    state, first = env.reset(rng)
    _, second = env.step(state, jnp.full((2,), spec.maximum, jnp.int32))
    return first, second

  for timestep in reset_and_step(jax.random.PRNGKey(0)):
    for leaf, leaf_spec in zip(
      jax.tree.leaves(timestep.observation),
      jax.tree.leaves(obs_spec),
      strict=True,
    ):
      assert leaf.shape == (2,) + leaf_spec.shape
      assert leaf.dtype == leaf_spec.dtype and len(leaf_spec.shape) >= 1
      assert leaf.dtype in (np.float32, np.uint8)
    assert timestep.step_type.shape == timestep.reward.shape == (2,)
    assert np.all(np.isfinite(timestep.reward))


# Training compiles the Disco103 learner step once per environment: three
# kinds (classic control, bsuite, MinAtar through the CLI test below) in the
# default run, every discrete environment in the slow one.
# DeepSea in the slow target since 2026-12-04 (the 8-minute default run).
_TRAINED_BY_DEFAULT = ('CartPole-v1',)


@pytest.mark.parametrize(
  'env_id',
  [
    i if i in _TRAINED_BY_DEFAULT else pytest.param(i, marks=pytest.mark.slow)
    for i in _DISCRETE
    if i not in _NEEDS_DOWNLOAD
  ],
)
@pytest.mark.weights
def test_every_discrete_gymnax_environment_trains_with_disco_103(
  env_id, disco_103_path, monkeypatch
):
  """Two learner steps of the eval job (MLP or, for images, conv torso)."""
  from disco_rl.jobs import trainer as trainer_lib  # pylint: disable=g-import-not-at-top

  env = environments.get_environment(f'gymnax:{env_id}', 1)
  obs_shape = jax.tree.leaves(env.single_observation_spec())[0].shape
  config = tiny.eval_config(
    **tiny.SMALL,
    env=f'gymnax:{env_id}',
    rule='disco_103',
    net='conv' if len(obs_shape) == 3 else 'mlp',
    conv_channels=(4,),
    steps_per_call=2,
    num_steps=2,
  )
  monkeypatch.setenv('DISCO_RL_WEIGHTS', str(disco_103_path))  # The job's.
  run = trainer_lib.Trainer(config, progress=False)
  before = jax.device_get(run.state.learner_state.params)
  summary = run.fit()
  assert summary['steps'] == 2
  after = jax.device_get(run.state.learner_state.params)
  assert all(np.isfinite(x).all() for x in jax.tree.leaves(after))
  moved = [
    np.abs(a - b).max()
    for a, b in zip(
      jax.tree.leaves(after), jax.tree.leaves(before), strict=True
    )
  ]
  assert max(moved) > 0, 'the learner steps left the parameters unchanged'


def test_debug_checks_run_with_a_batched_while_loop_in_the_step():
  """Asterix's step has a batched while-loop, which checkify refuses; the
  loops' checks are plain program outputs, so they stay on and run."""
  import warnings  # pylint: disable=g-import-not-at-top

  from disco_rl.jobs.eval import job as eval_lib  # pylint: disable=g-import-not-at-top

  config = tiny.eval_config(
    **tiny.SMALL,
    env='gymnax:Asterix-MinAtar',
    net='conv',
    conv_channels=(4,),
    steps_per_call=2,
  )
  with warnings.catch_warnings():
    warnings.simplefilter('error')  # No warning about the checks.
    job = eval_lib.make_eval(config)
    _, metrics = job.step(job.init(), config.steps_per_call)  # Traced here.
  assert job.setup.config.debug_checks
  assert 'rollout_fault' not in metrics
  assert metrics['learned'].tolist() == [[0.0], [1.0]]  # [K, S]
  assert np.isfinite(metrics['total_loss'][1, 0])


@pytest.mark.parametrize('env_id', _CONTINUOUS)
def test_continuous_action_spaces_are_refused(env_id):
  with pytest.raises(
    ValueError,
    match=(rf"'gymnax:{env_id}': expected a discrete action space .*got Box"),
  ):
    environments.get_environment(f'gymnax:{env_id}', 2)


def test_discrete_observation_spaces_are_one_hot():
  env = environments.get_environment('gymnax:FrozenLake-misc', 2)
  assert env.single_observation_spec()['observation'].shape == (16,)
  _, timestep = env.reset(jax.random.PRNGKey(0))
  np.testing.assert_array_equal(timestep.observation.sum(-1), [1.0, 1.0])


# ----------------------------------------------------------------------------
# Names, settings and bad input.


def test_env_kwargs_reach_the_constructor_and_the_params():
  env = environments.get_environment(
    'gymnax:DeepSea-bsuite', 2, dict(size=5, unscaled_move_cost=0.5)
  )
  assert env.single_observation_spec()['observation'].shape == (5, 5)
  assert env.env_params.max_steps_in_episode == 5  # The size's default.
  assert env.env_params.unscaled_move_cost == 0.5
  env = environments.get_environment(
    'gymnax:CartPole-v1', 2, dict(max_steps_in_episode=7)
  )
  assert env.env_params.max_steps_in_episode == 7


def test_unknown_env_kwargs_are_named_with_the_accepted_ones():
  with pytest.raises(
    ValueError,
    match=(
      r"env_kwargs \['sise'\] are not settings of gymnax:DeepSea-bsuite: "
      r"expected constructor arguments .*'size'.* or EnvParams fields "
      r".*'max_steps_in_episode'.*Did you mean \['size'\]"
    ),
  ):
    environments.get_environment('gymnax:DeepSea-bsuite', 2, dict(sise=5))


@pytest.mark.parametrize(
  'name,match',
  [
    (
      'gymnax:Breakout',
      r"Unknown environment 'gymnax:Breakout': no "
      r"gymnax:<id> .*Close matches: 'gymnax:Breakout-MinAtar'",
    ),
    (
      'breakout-minatar',
      r"Unknown environment 'breakout-minatar'; valid "
      r"names are 'catch', 'jittable_catch', 'gymnax:<id>'.*Close matches: "
      r"'gymnax:Breakout-MinAtar'",
    ),
    ('gymnax:cartpole-v1', r"Close matches: 'gymnax:CartPole-v1'"),
    (
      'craftax:Craftax-Classic',
      r'no craftax:<id> .*Close matches: '
      r"'craftax:Craftax-Classic-",
    ),
  ],
)
def test_unknown_names_list_close_matches(name, match):
  with pytest.raises(ValueError, match=match):
    environments.get_environment(name, 2)
  with pytest.raises(ValueError, match=match.replace('environment', 'env')):
    environments.check_name(name, 'env')


def test_a_missing_optional_package_names_its_extra(hide_package):
  hide_package('craftax')
  for call in (
    lambda: environments.get_environment(
      'craftax:Craftax-Classic-Symbolic-v1', 2
    ),
    lambda: environments.check_name('craftax:Craftax-Symbolic-v1'),
  ):
    with pytest.raises(
      ImportError,
      match=(
        r"need the 'craftax' package, which is not installed .*pip install "
        r"'disco_rl\[craftax\]'"
      ),
    ) as caught:
      call()
    # A ValueError too: the command-line jobs print it as bad input.
    assert isinstance(caught.value, ValueError)


def test_craftax_classic_symbolic_resets_and_steps():
  pytest.importorskip(
    'craftax',
    reason="craftax is not installed: pip install 'disco_rl[craftax]'",
  )
  env = environments.get_environment('craftax:Craftax-Classic-Symbolic-v1', 2)
  assert env.single_observation_spec()['observation'].shape == (1345,)
  assert env.single_action_spec().maximum == 16

  @jax.jit
  def reset_and_step(rng):
    state, _ = env.reset(rng)
    _, timestep, info = env.step_with_info(state, jnp.zeros(2, jnp.int32))
    return timestep, info

  timestep, info = reset_and_step(jax.random.PRNGKey(0))
  assert timestep.observation.shape == (2, 1345)
  assert timestep.observation.dtype == np.float32
  np.testing.assert_array_equal(timestep.step_type, [MID, MID])
  np.testing.assert_array_equal(info.discount, [1.0, 1.0])


@pytest.mark.slow  # ~30 s; the default run steps the same adapter (Symbolic).
def test_craftax_classic_pixels_match_craftax_stepped_by_hand():
  """The adapter's pixels, rewards and episode ends are Craftax's own,
  with the keys the adapter documents (as for gymnax, five-value API)."""
  pytest.importorskip(
    'craftax',
    reason="craftax is not installed: pip install 'disco_rl[craftax]'",
  )
  env = environments.get_environment(
    'craftax:Craftax-Classic-Pixels-v1', _BATCH
  )
  actions = _random_actions(env.single_action_spec().maximum + 1)[:20]
  rng = jax.random.PRNGKey(4)
  first, timesteps, _ = adapter_helpers.adapter_rollout(env, rng, actions)
  raw, params = env.env, env.env_params

  @jax.jit
  def by_hand(rng, actions):
    def reset_one(key):
      carry, reset_key = jax.random.split(key)
      obs, state = raw.reset(reset_key, params)
      return carry, state, obs

    def step_one(key, state, action):
      carry, step_key = jax.random.split(key)
      obs, state, reward, done, _ = raw.step(step_key, state, action, params)
      return carry, state, (obs, reward, done)

    keys, states, first_obs = jax.vmap(reset_one)(jax.random.split(rng, _BATCH))

    def step(carry, action):
      keys, states, out = jax.vmap(step_one)(*carry, action)
      return (keys, states), out

    return first_obs, jax.lax.scan(step, (keys, states), actions)[1]

  first_obs, (obs, reward, done) = by_hand(rng, actions)
  assert timesteps.observation.shape == (20, _BATCH, 63, 63, 3)
  np.testing.assert_array_equal(first.observation, first_obs)
  np.testing.assert_array_equal(timesteps.observation, obs)
  np.testing.assert_array_equal(timesteps.reward, reward)
  np.testing.assert_array_equal(timesteps.step_type, np.where(done, LAST, MID))


@pytest.mark.slow
def test_craftax_classic_pixels_train_with_the_resnet_from_the_cli(
  tmp_path, capsys
):
  """Craftax-Classic from pixels ([63, 63, 3] floats in [0, 1]) with the
  residual torso: two learner steps from the command line. (Slow: the
  pixel renderer compiles for most of a minute; the default run steps the
  same adapter on Craftax-Classic-Symbolic and trains the resnet from the
  command line on Atari, test_environments_envpool.py.)"""
  pytest.importorskip(
    'craftax',
    reason="craftax is not installed: pip install 'disco_rl[craftax]'",
  )
  env = environments.get_environment('craftax:Craftax-Classic-Pixels-v1', 2)
  spec = env.single_observation_spec()['observation']
  assert spec.shape == (63, 63, 3) and spec.dtype == np.float32
  out = tmp_path / 'run'
  status = eval_cli.main(
    [
      *tiny.eval_flags(
        **tiny.SMALL,
        env='craftax:Craftax-Classic-Pixels-v1',
        net='resnet',
        resnet_channels=(4, 4),
        resnet_blocks=1,
        num_steps=3,
        steps_per_call=3,
      ),
      '--out',
      str(out),
    ]
  )
  assert status == 0, capsys.readouterr().err
  import pandas as pd  # pylint: disable=g-import-not-at-top

  metrics = pd.read_csv(out / 'metrics.csv')
  learned = metrics[metrics['learned'] > 0]
  assert len(learned) >= 2 and (learned['global_update_norm'] > 0).all()
  assert np.isfinite(learned['total_loss']).all()


# ----------------------------------------------------------------------------
# From the command line: a MinAtar game with the conv torso.


@pytest.mark.parametrize(
  'net,torso',
  [
    ('conv', ['--conv-channels', '4']),
    # Slow: the default run trains the resnet on Atari and Craftax pixels.
    pytest.param(
      'resnet',
      ['--resnet-channels', '4,4', '--resnet-blocks', '1'],
      marks=pytest.mark.slow,
    ),
  ],
)
def test_eval_cli_trains_on_minatar_with_an_image_torso(
  net, torso, tmp_path, capsys
):
  out = tmp_path / 'run'
  status = eval_cli.main(
    [
      *tiny.eval_flags(
        **tiny.SMALL,
        env='gymnax:Breakout-MinAtar',
        net=net,
        env_kwargs='max_steps_in_episode=6',
        num_steps=3,
        steps_per_call=2,
      ),
      '--out',
      str(out),
    ]
    + torso
  )
  assert status == 0, capsys.readouterr().err
  settings = json.loads((out / 'run.json').read_text())['settings']
  assert settings['env'] == 'gymnax:Breakout-MinAtar'
  assert settings['env_kwargs'] == {'max_steps_in_episode': 6}
  assert settings['net'] == net
  summary = json.loads((out / 'summary.json').read_text())
  assert summary['steps'] == 3
  assert summary['final_avg_return'] is not None  # Episodes of 6 steps end.
  # observations [4, 10, 10, 4] uint8, actions, rewards, discounts, logits
  # (stored once).
  assert summary['replay_bytes_per_trajectory'] == (
    4 * 400 + 4 * 4 + 4 * 4 + 4 * 1 + 4 * 3 * 4
  )


def test_eval_cli_reports_a_bad_env_in_one_line(tmp_path, capsys):
  status = eval_cli.main(
    ['--env', 'gymnax:Breakout', '--out', str(tmp_path / 'run')]
  )
  assert status == 2
  err = capsys.readouterr().err.strip()
  assert err.startswith("error: Unknown env 'gymnax:Breakout'")
  assert "'gymnax:Breakout-MinAtar'" in err and '\n' not in err
  assert not (tmp_path / 'run').exists()


# ----------------------------------------------------------------------------
# Settings checked against the environment's own (issue 71).


@pytest.mark.parametrize(
  'env_id, settings, fragment',
  [
    # Trained on one-step episodes without a word.
    (
      'CartPole-v1',
      dict(max_steps_in_episode=-5),
      r'gymnax:CartPole-v1 setting max_steps_in_episode must be an integer '
      r'>= 1 \(default 500\), got -5',
    ),
    (
      'CartPole-v1',
      dict(max_steps_in_episode=2.5),
      'max_steps_in_episode must be an integer >= 1',
    ),
    ('CartPole-v1', dict(gravity='9.8'), 'gravity must be a finite number'),
    ('CartPole-v1', dict(gravity=float('nan')), 'got nan'),
    (
      'DeepSea-bsuite',
      dict(deterministic='no'),
      r"deterministic must be True or False \(default True\), got 'no'",
    ),
    # A constructor argument: was a traceback from inside gymnax.
    ('DeepSea-bsuite', dict(size=-1), r'size must be an integer >= 1'),
  ],
)
def test_an_environment_setting_of_the_wrong_type_or_range_is_refused(
  env_id, settings, fragment
):
  with pytest.raises(ValueError, match=fragment):
    environments.get_environment(f'gymnax:{env_id}', 2, settings)


def test_settings_of_the_right_type_and_range_pass():
  env = environments.get_environment(
    'gymnax:CartPole-v1', 2, dict(max_steps_in_episode=7, gravity=9)
  )
  assert env.env_params.max_steps_in_episode == 7


def test_the_continuous_action_ids_are_gymnax_s():
  assert sorted(gymnax_env.CONTINUOUS_ACTION_IDS) == sorted(_CONTINUOUS)


def test_an_unknown_id_lists_no_continuous_action_id_as_known():
  with pytest.raises(ValueError, match='Known ids') as raised:
    environments.check_name('gymnax:CartPol-v1', 'env')
  assert 'CartPole-v1' in str(raised.value)
  for env_id in _CONTINUOUS:
    assert env_id not in str(raised.value)
  # Named, it says what is expected (as when it is built).
  with pytest.raises(ValueError, match='expected a discrete action space'):
    environments.check_name('gymnax:Pendulum-v1', 'env')
