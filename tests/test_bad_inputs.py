# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Mistakes a user can make get a clear error at the call."""

import re

from dm_env import specs
import jax
from jax.experimental import checkify
import jax.numpy as jnp
import numpy as np
import pytest

from disco_rl import agent as agent_lib
from disco_rl import types
from disco_rl import utils
from disco_rl.environments import jittable_envs
from disco_rl.networks import nets
from disco_rl.update_rules import base
from disco_rl.update_rules import disco


def _env():
  return jittable_envs.CatchJittableEnvironment(
    batch_size=2, env_settings=jittable_envs.get_config_catch()
  )


def _make(settings=None, action_spec=None):
  env = _env()
  return agent_lib.Agent(
    single_observation_spec=env.single_observation_spec(),
    single_action_spec=action_spec or env.single_action_spec(),
    agent_settings=settings or agent_lib.get_settings_actor_critic(),
    batch_axis_name=None,
  )


# ----------------------------------------------------------------------------
# Settings and names.


def test_unknown_update_rule_name():
  settings = agent_lib.get_settings_actor_critic()
  settings.update_rule_name = 'discoo'
  with pytest.raises(ValueError, match=r"update_rule_name 'discoo'.*'disco'"):
    _make(settings)


def test_unknown_top_level_settings_key():
  settings = agent_lib.get_settings_actor_critic()
  settings.learning_rat = 0.1
  with pytest.raises(
    ValueError, match=r"agent_settings key\(s\) \['learning_rat'\]"
  ):
    _make(settings)


def test_missing_settings_key():
  settings = agent_lib.get_settings_actor_critic()
  del settings['max_abs_update']
  with pytest.raises(ValueError, match=r"lacks \['max_abs_update'\]"):
    _make(settings)


def test_unknown_update_rule_argument():
  settings = agent_lib.get_settings_actor_critic()
  settings.update_rule.num_binz = 3
  with pytest.raises(
    ValueError, match=r"update_rule \(actor_critic\) key\(s\) \['num_binz'\]"
  ):
    _make(settings)


def test_unknown_network_name_and_argument():
  settings = agent_lib.get_settings_actor_critic()
  settings.net_settings.name = 'transformer'
  with pytest.raises(ValueError, match=r"network name 'transformer'.*'mlp'"):
    _make(settings)
  settings = agent_lib.get_settings_actor_critic()
  settings.net_settings.net_args.hidden = (3,)
  with pytest.raises(
    ValueError, match=r"net_args \(mlp\) key\(s\) \['hidden'\]"
  ):
    _make(settings)
  with pytest.raises(ValueError, match="Unknown network name 'cnn'"):
    nets.get_network(
      'cnn', out_spec={}, action_spec=None, dense=(1,), head_w_init_std=None
    )


def test_unknown_meta_network_name_and_argument():
  rule_settings = agent_lib.get_settings_disco().update_rule
  rule_settings.net.name = 'gru'
  with pytest.raises(ValueError, match="meta-network name 'gru'"):
    disco.DiscoUpdateRule(**rule_settings)
  rule_settings = agent_lib.get_settings_disco().update_rule
  rule_settings.net.hiden_size = 3
  with pytest.raises(ValueError, match=r"\['hiden_size'\]"):
    disco.DiscoUpdateRule(**rule_settings)


def test_unknown_input_transform():
  rule_settings = agent_lib.get_settings_disco().update_rule
  option = disco.get_input_option()
  option.base = (
    types.TransformConfig(source='rewards', transforms=('sign_logg',)),
  )
  rule_settings.net.input_option = option
  rule = disco.DiscoUpdateRule(**rule_settings)
  with pytest.raises(KeyError, match=r"transform 'sign_logg'.*'sign_log'"):
    rule.init_params(jax.random.PRNGKey(0))


def test_unknown_input_source():
  rule_settings = agent_lib.get_settings_disco().update_rule
  option = disco.get_input_option()
  option.base = (
    types.TransformConfig(source='agent_out/logitz', transforms=('identity',)),
  )
  rule_settings.net.input_option = option
  rule = disco.DiscoUpdateRule(**rule_settings)
  with pytest.raises(KeyError, match=r"'agent_out/logitz'.*no entry 'logitz'"):
    rule.init_params(jax.random.PRNGKey(0))


@pytest.mark.parametrize(
  'spec,fragment',
  [
    (specs.BoundedArray((), np.float32, 0.0, 2.0), 'float32'),
    (specs.BoundedArray((2,), np.int32, 0, 2), r'shape \(2,\)'),
    (specs.Array((), np.int32), 'Array'),
  ],
)
def test_action_spec_must_be_scalar_int32(spec, fragment):
  with pytest.raises(ValueError, match=f'single_action_spec.*{fragment}'):
    _make(action_spec=spec)


def test_settings_of_the_wrong_type():
  env = _env()
  with pytest.raises(TypeError, match='agent_settings must be'):
    agent_lib.Agent(
      single_observation_spec=env.single_observation_spec(),
      single_action_spec=env.single_action_spec(),
      agent_settings=['disco'],
      batch_axis_name=None,
    )


# ----------------------------------------------------------------------------
# Rollouts.


def _rollout(t=5, b=2, num_actions=3, **overrides):
  fields = dict(
    observations=jnp.zeros((t, b, 8, 8, 1)),
    actions=jnp.zeros((t, b), jnp.int32),
    rewards=jnp.zeros((t, b)),
    discounts=jnp.ones((t, b), bool),
    agent_outs={
      'logits': jnp.zeros((t, b, num_actions)),
      'v': jnp.zeros((t, b, 601)),
    },
    states={},
    logits=jnp.zeros((t, b, num_actions)),
  )
  fields.update(overrides)
  return types.ActorRollout(**fields)


@pytest.fixture(scope='module')
def ac_agent():
  agent = _make()
  return agent, agent.initial_learner_state(jax.random.PRNGKey(0))


@pytest.mark.parametrize(
  'field,value,fragment',
  [
    (
      'actions',
      jnp.zeros((4, 2), jnp.int32),
      r'rollout.actions has shape \(4, 2\)',
    ),
    (
      'discounts',
      jnp.ones((5, 3), bool),
      r'rollout.discounts has shape \(5, 3\)',
    ),
    (
      'observations',
      jnp.zeros((5, 1, 8, 8, 1)),
      r'rollout.observations.*\(5, 1, 8, 8, 1\)',
    ),
    ('logits', jnp.zeros((6, 2, 3)), r'rollout.logits has shape \(6, 2, 3\)'),
    (
      'rewards',
      jnp.zeros((5,)),
      r'rollout.rewards must be \[T, B\], got shape \(5,\)',
    ),
  ],
)
def test_rollout_with_inconsistent_axes(ac_agent, field, value, fragment):
  agent, state = ac_agent
  rollout = _rollout(**{field: value})
  with pytest.raises(ValueError, match=fragment):
    agent.learner_step(jax.random.PRNGKey(0), rollout, state, {}, {}, False)


def test_rollout_agent_out_with_wrong_batch(ac_agent):
  agent, state = ac_agent
  rollout = _rollout(
    agent_outs={'logits': jnp.zeros((5, 3, 3)), 'v': jnp.zeros((5, 2, 601))}
  )
  with pytest.raises(
    ValueError, match=r"agent_outs\['logits'\] has shape \(5, 3, 3\)"
  ):
    agent.learner_step(jax.random.PRNGKey(0), rollout, state, {}, {}, False)


def test_rollout_of_one_step(ac_agent):
  agent, state = ac_agent
  with pytest.raises(ValueError, match='at least 2 time steps'):
    agent.learner_step(
      jax.random.PRNGKey(0), _rollout(t=1), state, {}, {}, False
    )


def test_rollout_of_the_wrong_type(ac_agent):
  agent, state = ac_agent
  with pytest.raises(TypeError, match='rollout must be a types.ActorRollout'):
    agent.learner_step(
      jax.random.PRNGKey(0), {'rewards': 1}, state, {}, {}, False
    )


@pytest.mark.parametrize(
  'overrides, fragment',
  [
    (
      dict(observations=jnp.zeros((5, 2, 8, 7, 1))),
      r'rollout.observations must have shape \[T, B, \*\(8, 8, 1\)\].*got '
      r'\(5, 2, 8, 7, 1\)',
    ),
    (
      dict(observations=(jnp.zeros((5, 2, 8, 8, 1)),) * 2),
      r'rollout.observations must hold 1 array\(s\).*got 2',
    ),
    (
      dict(rewards=jnp.zeros((5, 2), jnp.int32)),
      'rollout.rewards must have a floating dtype, got int32',
    ),
    (
      dict(discounts=jnp.ones((5, 2), jnp.int32)),
      r'rollout.discounts must have a floating \(or bool\) dtype, got int32',
    ),
    (
      dict(actions=jnp.zeros((5, 2), jnp.float32)),
      'rollout.actions must have an integer dtype .*, got float32',
    ),
  ],
)
def test_rollout_of_the_wrong_shape_or_dtype(ac_agent, overrides, fragment):
  agent, state = ac_agent
  with pytest.raises(ValueError, match=fragment):
    agent.learner_step(
      jax.random.PRNGKey(0), _rollout(**overrides), state, {}, {}, False
    )


def test_actor_step_names_the_observation_shape(ac_agent):
  agent, state = ac_agent
  timestep = types.EnvironmentTimestep(
    observation=jnp.zeros((2, 8, 8)),
    step_type=jnp.zeros((2,), jnp.int32),
    reward=jnp.zeros((2,)),
  )
  with pytest.raises(
    ValueError,
    match=r'timestep.observation must have shape '
    r'\[B, \*\(8, 8, 1\)\].*got \(2, 8, 8\)',
  ):
    agent.actor_step(
      state.params,
      jax.random.PRNGKey(0),
      timestep,
      agent.initial_actor_state(jax.random.PRNGKey(0)),
    )


def _debug_agent():
  env = _env()
  return agent_lib.Agent(
    single_observation_spec=env.single_observation_spec(),
    single_action_spec=env.single_action_spec(),
    agent_settings=agent_lib.get_settings_actor_critic(),
    batch_axis_name=None,
    debug_checks=True,
  )


BAD_VALUES = [
  (
    'actions',
    lambda r: r.replace(actions=r.actions.at[3, 1].set(3)),
    r'rollout.actions\[t=3, b=1\] = 3 is outside \[0, 3\)',
  ),
  (
    'negative action',
    lambda r: r.replace(actions=r.actions.at[0, 0].set(-1)),
    r'rollout.actions\[t=0, b=0\] = -1 is outside \[0, 3\)',
  ),
  (
    'rewards',
    lambda r: r.replace(rewards=r.rewards.at[2, 1].set(jnp.nan)),
    r'rollout.rewards\[t=2, b=1\] = nan is not finite',
  ),
  (
    'inf reward',
    lambda r: r.replace(rewards=r.rewards.at[4, 0].set(jnp.inf)),
    r'rollout.rewards\[t=4, b=0\] = inf is not finite',
  ),
]


@pytest.mark.parametrize('name, corrupt, fragment', BAD_VALUES)
def test_debug_checks_name_the_field_step_and_batch_index(
  name, corrupt, fragment
):
  """Eagerly, and jitted under checkify (as a user's jitted step would)."""
  del name
  agent = _debug_agent()
  state = agent.initial_learner_state(jax.random.PRNGKey(0))
  rollout = corrupt(_rollout())
  step = lambda r: agent.learner_step(
    jax.random.PRNGKey(0), r, state, {}, {}, False
  )
  with pytest.raises(checkify.JaxRuntimeError, match=fragment):
    step(rollout)
  checked = jax.jit(checkify.checkify(step, errors=checkify.user_checks))
  error, _ = checked(rollout)
  assert re.search(fragment, error.get()), error.get()
  error, (new_state, _, _) = checked(_rollout())
  assert error.get() is None
  assert _all_finite(new_state.params)


def _all_finite(tree):
  return all(np.isfinite(x).all() for x in jax.tree.leaves(tree))


def test_without_debug_checks_bad_values_pass_silently(ac_agent):
  """Why the jobs turn the checks on: NaN rewards reach the parameters."""
  agent, state = ac_agent
  rollout = _rollout(rewards=jnp.full((5, 2), jnp.nan))
  new_state, _, _ = jax.jit(agent.learner_step, static_argnums=5)(
    jax.random.PRNGKey(0), rollout, state, {}, {}, False
  )
  assert not _all_finite(new_state.params)


def _rule_inputs(
  t=3, b=2, a=3, outputs=('logits', 'y', 'z', 'aux_pi', 'q'), **overrides
):
  shapes = {
    'logits': (a,),
    'y': (600,),
    'z': (a, 600),
    'aux_pi': (a, a),
    'q': (a, 601),
  }
  agent_out = {k: jnp.zeros((t + 1, b) + shapes[k]) for k in outputs}
  fields = dict(
    observations=jnp.zeros((t + 1, b, 4)),
    actions=jnp.zeros((t + 1, b), jnp.int32),
    rewards=jnp.zeros((t, b)),
    is_terminal=jnp.zeros((t, b), bool),
    agent_out=agent_out,
    behaviour_agent_out=agent_out,
  )
  fields.update(overrides)
  return types.UpdateRuleInputs(**fields)


def test_disco_rule_names_missing_agent_outputs():
  rule = disco.DiscoUpdateRule(**agent_lib.get_settings_disco().update_rule)
  inputs = _rule_inputs(outputs=('logits', 'y'))
  with pytest.raises(
    ValueError, match=r"agent outputs \['z', 'aux_pi', 'q'\] are missing"
  ):
    rule.agent_loss(inputs, {}, {}, backprop=False)


def test_disco_rule_checks_time_axes():
  rule = disco.DiscoUpdateRule(**agent_lib.get_settings_disco().update_rule)
  inputs = _rule_inputs(actions=jnp.zeros((3, 2), jnp.int32))
  with pytest.raises(
    ValueError,
    match=r'rollout.actions must have leading axes '
    r'\[T\+1, B\]=\(4, 2\).*\(3, 2\)',
  ):
    rule.agent_loss(inputs, {}, {}, backprop=False)
  inputs = _rule_inputs(is_terminal=jnp.zeros((2, 2), bool))
  with pytest.raises(ValueError, match=r'is_terminal.*\(3, 2\), got \(2, 2\)'):
    base.check_update_rule_inputs(inputs)


def test_disco_rule_names_missing_hyper_params(disco_103_params):
  rule = disco.DiscoUpdateRule(**agent_lib.get_settings_disco().update_rule)
  with pytest.raises(ValueError, match=r"hyper_params lacks \['pi_cost'"):
    rule.unroll_meta_net(
      disco_103_params, {}, {}, {}, _rule_inputs(), {}, None, None
    )


def test_devices_batch_must_divide():
  devices = jax.devices()[:1] * 1
  with pytest.raises(ValueError, match='scalar'):
    utils.shard_across_devices({'x': np.float32(1.0)}, devices)
  with pytest.raises(
    ValueError, match=r'batch_size=5 does not divide across 2 devices'
  ):
    utils.check_divisible(5, 2, 'batch_size')


@pytest.mark.parametrize('name', ['catch', 'jittable_catch'])
@pytest.mark.parametrize(
  'rows, columns, bad',
  [
    (1, 8, 'rows must be an integer >= 2 .*got 1'),
    (8, 0, 'columns must be an integer >= 2 .*got 0'),
    (2.5, 8, 'rows must be an integer >= 2 .*got 2.5'),
  ],
)
def test_impossible_boards(name, rows, columns, bad):
  from disco_rl.environments import get_environment  # pylint: disable=g-import-not-at-top

  settings = {'rows': rows, 'columns': columns}
  if name == 'catch':
    settings['random_seed'] = 0
  with pytest.raises(ValueError, match='Catch ' + bad):
    get_environment(name, batch_size=2, env_settings=settings)
