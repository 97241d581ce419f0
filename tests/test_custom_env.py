# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A user's own environment: trained with Disco103, checked when it is built."""

import dm_env
from dm_env import specs
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tiny

import disco_rl
from disco_rl import types
from disco_rl.environments import base
from disco_rl.examples import custom_env
from disco_rl.jobs.eval import job as eval_lib

pytestmark = pytest.mark.usefixtures('fast_compile')

_TINY = tiny.eval_settings(
  **tiny.SMALL, rule=None, steps_per_call=2, num_devices=1
)


def test_corridor_follows_the_interface():
  env = custom_env.Corridor(batch_size=3, length=5, max_steps=3)
  base.check_jittable_environment(env)
  state, timestep = env.reset(jax.random.PRNGKey(0))
  np.testing.assert_array_equal(timestep.observation.argmax(-1), [2, 2, 2])
  # Right, right: the right end (+1, LAST) and the next episode's start.
  state, timestep = env.step(state, jnp.array([1, 1, 0]))
  state, timestep = env.step(state, jnp.array([1, 0, 0]))
  np.testing.assert_array_equal(timestep.reward, [1.0, 0.0, 0.0])
  np.testing.assert_array_equal(
    timestep.step_type,
    [dm_env.StepType.LAST, dm_env.StepType.MID, dm_env.StepType.LAST],
  )
  np.testing.assert_array_equal(timestep.observation.argmax(-1), [2, 2, 2])
  # The time limit ends the episode too.
  _, timestep = env.step(state, jnp.array([0, 1, 1]))
  assert timestep.step_type[1] == dm_env.StepType.LAST


def test_the_example_trains_with_disco_103_through_the_trainer(
  tmp_path, disco_103_params
):
  summary = custom_env.train(
    3, tmp_path / 'run', rule_params=disco_103_params, **_TINY
  )
  assert summary['steps'] == 3 and summary['interrupted'] is None
  assert summary['final_avg_return'] is not None  # Episodes ended.
  settings = (tmp_path / 'run' / 'run.json').read_text()
  assert '"env": "custom"' in settings


def test_the_job_runs_the_environment_without_a_trainer():
  """`make_eval(config, env=...)` by hand: steps, then the policy evaluated
  in the custom environment (the job's own, by default)."""
  config = disco_rl.EvalConfig(env='custom', rule='actor_critic', **_TINY)
  job = disco_rl.make_eval(config, env=custom_env.Corridor)
  assert isinstance(job.setup.env, custom_env.Corridor)
  assert job.setup.env.batch_size == job.setup.envs_per_device == 2
  state, metrics = job.step(job.init(), config.steps_per_call)
  assert metrics['learned'].shape == (2, 1)  # [K, S]
  # 6 rollouts of 4 steps: longer than an episode can last (20 steps).
  result = eval_lib.evaluate(job, state, num_rollouts=6)
  assert result['episodes'] >= 2
  assert 0.0 <= result['avg_return'] <= 1.0  # +1 at the right end, else 0.


# ----------------------------------------------------------------------------
# Mistakes a user can make, refused when the Trainer is built.


class _WrongObservationShape(custom_env.Corridor):
  def single_observation_spec(self):
    return {'observation': specs.Array((self.length + 1,), np.float32)}


class _VectorActions(custom_env.Corridor):
  def single_action_spec(self):
    return specs.BoundedArray((2,), np.int32, minimum=0, maximum=1)


class _FloatActions(custom_env.Corridor):
  def single_action_spec(self):
    return specs.BoundedArray((), np.float32, minimum=-1.0, maximum=1.0)


class _IntegerRewards(custom_env.Corridor):
  def step(self, state, actions):
    state, timestep = super().step(state, actions)
    return state, timestep.replace(reward=timestep.reward.astype(jnp.int32))


class _StepChangesTheState(custom_env.Corridor):
  def step(self, state, actions):
    state, timestep = super().step(state, actions)
    return state.position, timestep


class _NotJittable(custom_env.Corridor):
  def step(self, state, actions):
    if int(actions[0]) == 1:  # Python control flow on a traced value.
      actions = actions * 0
    return super().step(state, actions)


class _RawTuple(custom_env.Corridor):
  def reset(self, rng_key):
    state, timestep = super().reset(rng_key)
    return state, (timestep.observation, timestep.reward)


@pytest.mark.parametrize(
  'env_class,match',
  [
    (
      _WrongObservationShape,
      r'env.reset\(rng\).observation: expected shape \(2, 8\) and dtype '
      r'float32 .*got shape \(2, 7\)',
    ),
    (
      _VectorActions,
      r'env.single_action_spec\(\): expected a scalar int32 '
      r'dm_env.specs.BoundedArray .*got BoundedArray of shape \(2,\)',
    ),
    (
      _FloatActions,
      r'env.single_action_spec\(\): expected a scalar int32 '
      r'.*dtype float32',
    ),
    (
      _IntegerRewards,
      r'env.step\(state, actions\).reward: expected shape '
      r'\(2,\) with a floating dtype, got shape \(2,\) and dtype int32',
    ),
    (
      _StepChangesTheState,
      r'env.step\(state, actions\) must return a state '
      r'of the same structure, shapes and dtypes as env.reset\(rng\)',
    ),
    (_NotJittable, r'env.step\(state, actions\) cannot be traced by JAX'),
    (
      _RawTuple,
      r'env.reset\(rng\) must return \(state, '
      r'types.EnvironmentTimestep\), got a tuple',
    ),
  ],
)
def test_a_wrong_environment_is_refused_at_construction(env_class, match):
  config = disco_rl.EvalConfig(env='custom', rule='actor_critic', **_TINY)
  with pytest.raises(ValueError, match=match):
    disco_rl.Trainer(config, None, env=env_class(batch_size=2))
  with pytest.raises(ValueError, match=match):  # Also as a factory.
    disco_rl.Trainer(config, None, env=env_class)


def test_the_environment_must_hold_one_devices_share():
  config = disco_rl.EvalConfig(env='custom', rule='actor_critic', **_TINY)
  with pytest.raises(
    ValueError,
    match=(
      r'env.batch_size must be the environments per device, batch_size // '
      r'replay_ratio // devices = 4 // 2 // 1 = 2, got 3'
    ),
  ):
    disco_rl.Trainer(config, None, env=custom_env.Corridor(batch_size=3))


@pytest.mark.parametrize(
  'env_name,env',
  [('custom', None), ('jittable_catch', custom_env.Corridor(batch_size=2))],
)
def test_an_environment_object_goes_with_env_custom(env_name, env):
  config = disco_rl.EvalConfig(env=env_name, rule='actor_critic', **_TINY)
  with pytest.raises(ValueError, match="goes with env='custom'"):
    disco_rl.Trainer(config, None, env=env)


def test_not_an_environment():
  with pytest.raises(
    TypeError,
    match=('env must be a disco_rl.environments.base.Environment, got dict'),
  ):
    base.check_jittable_environment({})


def test_timesteps_name_what_differs_from_the_specs():
  spec = {'observation': specs.Array((3,), np.float32)}
  good = types.EnvironmentTimestep(
    observation=jnp.zeros((2, 3)),
    step_type=jnp.zeros((2,), jnp.int32),
    reward=jnp.zeros((2,)),
  )
  base.check_timestep(good, spec, 2, 'f()')
  with pytest.raises(ValueError, match=r'f\(\).observation: expected 1 '):
    base.check_timestep(
      good.replace(observation=(jnp.zeros((2, 3)),) * 2), spec, 2, 'f()'
    )
  with pytest.raises(
    ValueError,
    match=r'f\(\).step_type: expected shape '
    r'\(2,\) with an integer dtype, got shape \(2, 1\)',
  ):
    base.check_timestep(
      good.replace(step_type=jnp.zeros((2, 1), jnp.int32)), spec, 2, 'f()'
    )
