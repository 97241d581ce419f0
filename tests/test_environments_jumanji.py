# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The Jumanji adapter: exact semantics against Jumanji stepped by hand,
training from the CLI, and bad input."""

import json

import adapter_helpers
import dm_env
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tiny

from disco_rl import environments
from disco_rl.cli import eval as eval_cli
from disco_rl.environments import jumanji_env

jumanji = pytest.importorskip(
  'jumanji', reason="jumanji is not installed: pip install 'disco_rl[jumanji]'"
)

pytestmark = pytest.mark.usefixtures('fast_compile')

_BATCH = 4
_STEPS = 50
LAST, MID, FIRST = (
  int(dm_env.StepType.LAST),
  int(dm_env.StepType.MID),
  int(dm_env.StepType.FIRST),
)
# No download: Jumanji's two toy levels.
_SOKOBAN = dict(generator='toy', time_limit=12)


def _by_hand(raw_env, rng, actions):
  """The unwrapped Jumanji environment, restarted by hand as documented:
  instance b resets with split(rng, B)[b]; where a step ends an episode,
  the instance resets with split(state.key)[0] and shows that observation,
  with the ending step's reward and discount."""

  def step_one(state, action):
    state, timestep = raw_env.step(state, action)
    reset_state, reset_timestep = raw_env.reset(jax.random.split(state.key)[0])
    last = timestep.last()
    state = jax.tree.map(lambda a, b: jnp.where(last, a, b), reset_state, state)
    obs = jax.tree.map(
      lambda a, b: jnp.where(last, a, b),
      reset_timestep.observation,
      timestep.observation,
    )
    return state, (obs, timestep.reward, timestep.discount, last)

  @jax.jit
  def run(rng, actions):
    states, first = jax.vmap(raw_env.reset)(jax.random.split(rng, _BATCH))

    def step(states, action):
      return jax.vmap(step_one)(states, action)

    _, outs = jax.lax.scan(step, states, actions)
    return first.observation, outs

  return run(rng, actions)


@pytest.mark.parametrize(
  'env_id,kwargs',
  [
    ('Sokoban-v0', _SOKOBAN),
    ('Snake-v1', dict(time_limit=20)),
    ('Maze-v0', dict(time_limit=10)),
  ],
)
def test_adapter_matches_jumanji_stepped_by_hand(env_id, kwargs):
  env = environments.get_environment(f'jumanji:{env_id}', _BATCH, kwargs)
  num_actions = env.single_action_spec().maximum + 1
  actions = jax.random.randint(
    jax.random.PRNGKey(1), (_STEPS, _BATCH), 0, num_actions, dtype=jnp.int32
  )
  rng = jax.random.PRNGKey(3)
  first, timesteps, infos = adapter_helpers.adapter_rollout(env, rng, actions)
  if 'generator' in kwargs:  # The toy levels, as the adapter builds them.
    from jumanji.environments.routing.sokoban import generator  # pylint: disable=g-import-not-at-top

    kwargs = dict(kwargs, generator=generator.ToyGenerator())
  raw = jumanji.make(env_id, **kwargs)
  first_obs, (obs, reward, discount, last) = _by_hand(raw, rng, actions)

  def by_name(observation):
    return jumanji_env.observation_dict(observation)

  np.testing.assert_array_equal(first.step_type, np.full(_BATCH, FIRST))
  np.testing.assert_array_equal(first.reward, np.zeros(_BATCH))
  expected_first = jax.vmap(by_name)(first_obs)
  expected = jax.vmap(jax.vmap(by_name))(obs)
  assert set(timesteps.observation) == set(expected)
  for key, value in timesteps.observation.items():
    spec = env.single_observation_spec()[key]
    assert value.dtype == spec.dtype and value.shape[2:] == spec.shape
    np.testing.assert_array_equal(first.observation[key], expected_first[key])
    np.testing.assert_array_equal(value, expected[key])
  np.testing.assert_array_equal(timesteps.reward, reward)
  np.testing.assert_array_equal(timesteps.step_type, np.where(last, LAST, MID))
  np.testing.assert_array_equal(
    infos.discount, np.where(last & (discount == 0), 0.0, 1.0)
  )
  np.testing.assert_array_equal(infos.terminated, last & (discount == 0))
  assert last.any(), f'no episode ended in {_STEPS} steps'


def test_observations_keep_bytes_and_name_their_fields():
  env = environments.get_environment('jumanji:Sokoban-v0', 2, _SOKOBAN)
  spec = env.single_observation_spec()
  assert spec['grid'].shape == (10, 10, 2) and spec['grid'].dtype == np.uint8
  assert spec['step_count'].shape == (1,)
  assert spec['step_count'].dtype == np.float32
  assert env.single_action_spec().maximum == 3
  maze = environments.get_environment('jumanji:Maze-v0', 2)
  assert {'agent_position/row', 'walls', 'action_mask'} <= set(
    maze.single_observation_spec()
  )


def test_a_truncated_episode_ends_with_discount_one():
  """Jumanji's `truncation` (a time limit that is not terminal): LAST,
  discount 1; `termination`: LAST, discount 0. A two-state stand-in."""
  import chex  # pylint: disable=g-import-not-at-top
  from jumanji import specs as jspecs  # pylint: disable=g-import-not-at-top
  from jumanji import types as jtypes  # pylint: disable=g-import-not-at-top

  @chex.dataclass
  class State:
    key: chex.PRNGKey
    t: chex.Array

  class Corridor(jumanji.Environment):
    """Action 1 at t = 2 terminates; t = 3 truncates."""

    def reset(self, key):
      state = State(key=key, t=jnp.zeros((), jnp.int32))
      return state, jtypes.restart(observation=state.t[None] * 1.0)

    def step(self, state, action):
      t = state.t + 1
      state = State(key=state.key, t=t)
      obs = t[None] * 1.0
      return state, jax.lax.cond(
        (t == 2) & (action == 1),
        lambda: jtypes.termination(jnp.float32(1.0), obs),
        lambda: jax.lax.cond(
          t == 3,
          lambda: jtypes.truncation(jnp.float32(0.5), obs),
          lambda: jtypes.transition(jnp.float32(0.0), obs),
        ),
      )

    @property
    def observation_spec(self):
      return jspecs.Array((1,), jnp.float32, 'observation')

    @property
    def action_spec(self):
      return jspecs.DiscreteArray(2, name='action')

  env = jumanji_env.JumanjiEnvironment(Corridor(), 2)
  state, _ = env.reset(jax.random.PRNGKey(0))
  infos, steps = [], []
  for _ in range(3):
    state, timestep, info = env.step_with_info(state, jnp.array([1, 0]))
    infos.append(info)
    steps.append(timestep)
  assert steps[1].step_type.tolist() == [LAST, MID]
  assert infos[1].discount.tolist() == [0.0, 1.0]
  assert infos[1].terminated.tolist() == [True, False]
  assert steps[2].step_type.tolist() == [MID, LAST]
  assert infos[2].truncated.tolist() == [False, True]
  assert infos[2].discount.tolist() == [1.0, 1.0]
  np.testing.assert_array_equal(steps[2].reward, [0.0, 0.5])
  # The ended episodes start again: their observations are t = 0.
  np.testing.assert_array_equal(
    steps[1].observation['observation'][:, 0], [0.0, 2.0]
  )


# ----------------------------------------------------------------------------
# Training from the command line.


@pytest.mark.parametrize(
  'env,net,extra',
  [
    (
      'jumanji:Sokoban-v0',
      'conv',
      ['--env-kwargs', 'generator=toy,time_limit=12', '--conv-channels', '4'],
    ),
    # Slow: a second program; the default run trains Sokoban.
    pytest.param('jumanji:Game2048-v1', 'mlp', [], marks=pytest.mark.slow),
  ],
)
def test_eval_cli_trains_on_jumanji(env, net, extra, tmp_path, capsys):
  out = tmp_path / 'run'
  status = eval_cli.main(
    [
      *tiny.eval_flags(
        **tiny.SMALL, env=env, net=net, num_steps=3, steps_per_call=3
      ),
      '--out',
      str(out),
    ]
    + extra
  )
  assert status == 0, capsys.readouterr().err
  summary = json.loads((out / 'summary.json').read_text())
  assert summary['steps'] == 3
  import pandas as pd  # pylint: disable=g-import-not-at-top

  metrics = pd.read_csv(out / 'metrics.csv')
  # The buffer holds a batch after the first rollout: two learner steps.
  assert metrics['learned'].sum() >= 2
  learned = metrics[metrics['learned'] > 0]
  assert np.isfinite(learned['total_loss']).all()
  assert (learned['global_update_norm'] > 0).all()


def test_an_image_network_takes_the_other_fields_beside_the_image():
  from disco_rl import agent as agent_lib  # pylint: disable=g-import-not-at-top

  env = environments.get_environment('jumanji:Sokoban-v0', 2, _SOKOBAN)
  settings = agent_lib.make_settings(
    'actor_critic', 1e-3, (8,), 4, (4,), net='conv', conv_channels=(3,)
  )
  agent = agent_lib.Agent(
    single_observation_spec=env.single_observation_spec(),
    single_action_spec=env.single_action_spec(),
    agent_settings=settings,
    batch_axis_name=None,
  )
  params = jax.eval_shape(
    agent.initial_learner_state, jax.random.PRNGKey(0)
  ).params
  # 10 x 10 x 3 conv features and the step count.
  assert params['conv_net/~_embedding_pass/torso/~/linear_0']['w'].shape == (
    301,
    8,
  )


# ----------------------------------------------------------------------------
# Bad input.


@pytest.mark.parametrize(
  'name,kwargs,match',
  [
    (
      'jumanji:Sokoban',
      {},
      r"Unknown environment 'jumanji:Sokoban': no "
      r"jumanji:<id> of that id. Close matches: 'jumanji:Sokoban-v0'",
    ),
    (
      'jumanji:Tetris-v0',
      {},
      r"'jumanji:Tetris-v0': expected one discrete "
      r'action \(a Jumanji DiscreteArray\), got MultiDiscreteArray',
    ),
    (
      'jumanji:Sokoban-v0',
      dict(time=3),
      r"env_kwargs \['time'\] are not "
      r'settings of jumanji:Sokoban-v0: expected constructor arguments '
      r"\['generator', 'reward_fn', 'time_limit', 'viewer'\]",
    ),
    (
      'jumanji:Sokoban-v0',
      dict(generator='easy'),
      r'env_kwargs '
      r"generator='easy' is not a Sokoban generator; expected one of "
      r"\('toy', 'simple', 'unfiltered-train'",
    ),
  ],
)
def test_bad_names_and_settings_are_named(name, kwargs, match):
  with pytest.raises(ValueError, match=match):
    environments.get_environment(name, 2, kwargs)


def test_check_name_knows_jumanji_ids():
  environments.check_name('jumanji:Sokoban-v0')
  with pytest.raises(ValueError, match=r"Close matches: 'jumanji:Snake-v1'"):
    environments.check_name('jumanji:Snake-v2', 'env')


def test_levels_that_cannot_be_downloaded_say_what_to_do(monkeypatch):
  from jumanji.environments.routing.sokoban import generator  # pylint: disable=g-import-not-at-top

  def offline(*args, **kwargs):
    raise OSError('Name or service not known')

  monkeypatch.setattr(generator, 'HuggingFaceDeepMindGenerator', offline)
  with pytest.raises(
    jumanji_env.DownloadError,
    match=(
      r"Sokoban levels 'unfiltered-train' could not be downloaded from "
      r'huggingface.co/InstaDeepAI/boxoban-levels \(OSError: Name or '
      r'service not known\); with no network, use env_kwargs '
      r'generator=toy'
    ),
  ) as caught:
    environments.get_environment('jumanji:Sokoban-v0', 2)
  assert isinstance(caught.value, ValueError)  # One line from the CLIs.


def test_a_missing_jumanji_names_its_extra(hide_package, tmp_path, capsys):
  hide_package('jumanji')
  with pytest.raises(
    ImportError,
    match=(
      r"need the 'jumanji' package, which is not installed .*pip install "
      r"'disco_rl\[jumanji\]'"
    ),
  ):
    environments.get_environment('jumanji:Sokoban-v0', 2)
  status = eval_cli.main(
    ['--env', 'jumanji:Sokoban-v0', '--out', str(tmp_path / 'run')]
  )
  err = capsys.readouterr().err
  assert status == 2
  assert err.startswith('error: ') and len(err.strip().splitlines()) == 1
  assert "pip install 'disco_rl[jumanji]'" in err


def test_importing_jumanji_in_a_notebook_leaves_matplotlib_alone(monkeypatch):
  """jumanji 1.1 runs `%matplotlib ipympl` on import in a notebook (which
  raises without ipympl); the package's import skips that magic only."""
  import sys  # pylint: disable=g-import-not-at-top
  import types as pytypes  # pylint: disable=g-import-not-at-top

  from disco_rl.environments import packages  # pylint: disable=g-import-not-at-top

  calls = []

  class Shell:
    def run_line_magic(self, name, line):
      calls.append((name, line))
      if name == 'matplotlib':
        raise RuntimeError(f"'{line}' is not a recognised backend name")

  shell = Shell()
  monkeypatch.setitem(
    sys.modules, 'IPython', pytypes.SimpleNamespace(get_ipython=lambda: shell)
  )
  with packages._matplotlib_magic_off():  # pylint: disable=protected-access
    assert shell.run_line_magic('matplotlib', 'ipympl') is None
    shell.run_line_magic('time', 'x')
  assert calls == [('time', 'x')]
  with pytest.raises(RuntimeError, match='ipympl'):  # Restored after.
    shell.run_line_magic('matplotlib', 'ipympl')
