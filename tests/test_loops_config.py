# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.loops.config: settings checks, agent settings and flags."""

import argparse
import dataclasses

import pytest

from disco_rl.loops import config as config_lib
from disco_rl.loops import flags

CONFIGS = (config_lib.EvalConfig, config_lib.MetaTrainConfig)


@pytest.mark.parametrize('changes,fragment', [
    (dict(rule='ppo'), "Unknown rule 'ppo'; expected one of"),
    (dict(env='pong'), "Unknown env 'pong'"),
    (dict(batch_size=5, replay_ratio=2),
     'batch_size=5 must be a multiple of replay_ratio=2'),
    (dict(buffer_capacity=8, batch_size=16, replay_ratio=2),
     'buffer_capacity=8 is smaller than batch_size=16'),
    (dict(rollout_len=1), 'rollout_len must be >= 2, got 1'),
    (dict(num_steps=0), 'num_steps must be >= 1, got 0'),
    (dict(steps_per_call=0), 'steps_per_call must be >= 1, got 0'),
    (dict(rows=0), 'rows must be >= 2, got 0'),
    (dict(columns=1), 'columns must be >= 2, got 1'),
    (dict(dense=(16, 0)), r'dense must be positive layer sizes, got \(16, 0\)'),
    (dict(num_devices=0), 'num_devices must be >= 1, got 0'),
    (dict(num_seeds=0), 'num_seeds must be >= 1, got 0'),
    (dict(env='catch', num_seeds=2),
     "num_seeds=2 needs a jittable environment: env='catch' is stepped on "
     "the host one run at a time \\(use 'jittable_catch'"),
    (dict(learning_rate=float('nan')),
     'learning_rate must be a finite number > 0, got nan'),
    (dict(learning_rate=-1.0),
     r'learning_rate must be a finite number > 0, got -1.0'),
    (dict(learning_rate=0.0), 'learning_rate must be a finite number > 0'),
    (dict(learning_rate=float('inf')),
     'learning_rate must be a finite number > 0, got inf'),
])
def test_bad_eval_settings(changes, fragment):
  with pytest.raises(ValueError, match=fragment):
    config_lib.check_eval_config(config_lib.EvalConfig(**changes))


@pytest.mark.parametrize('changes,fragment', [
    (dict(num_agents=0), 'num_agents must be >= 1, got 0'),
    (dict(init='disco_104'), "Unknown init 'disco_104'"),
    (dict(rollout_len=1), 'rollout_len must be >= 2, got 1'),
    (dict(value_dense=()), r'value_dense must be positive layer sizes'),
    (dict(steps_per_call=-1), 'steps_per_call must be >= 1, got -1'),
    (dict(learning_rate=float('nan')),
     'learning_rate must be a finite number > 0, got nan'),
    (dict(meta_learning_rate=-1e-3),
     'meta_learning_rate must be a finite number > 0, got -0.001'),
    (dict(meta_grad_clip=float('nan')), 'meta_grad_clip must be'),
    (dict(meta_grad_clip=float('inf')), 'meta_grad_clip must be finite'),
])
def test_bad_meta_train_settings(changes, fragment):
  with pytest.raises(ValueError, match=fragment):
    config_lib.check_meta_train_config(config_lib.MetaTrainConfig(**changes))


@pytest.mark.parametrize('config_cls', CONFIGS)
def test_defaults_pass_their_checks(config_cls):
  check = (config_lib.check_eval_config if config_cls is config_lib.EvalConfig
           else config_lib.check_meta_train_config)
  check(config_cls())


def _parser(config_cls):
  parser = argparse.ArgumentParser(exit_on_error=False)
  flags.add_flags(parser, config_cls)
  return parser


@pytest.mark.parametrize('config_cls', CONFIGS)
def test_every_field_has_a_flag_with_help_and_default(config_cls):
  parser = _parser(config_cls)
  by_dest = {a.dest: a for a in parser._actions}  # pylint: disable=protected-access
  for field in dataclasses.fields(config_cls):
    if field.metadata.get('flags') == ():
      assert field.name not in by_dest
      continue
    action = by_dest[field.name]
    assert f'--{field.name.replace("_", "-")}' in action.option_strings
    assert action.help and 'default:' in action.help, field.name
  # No flags: the defaults.
  assert flags.from_flags(config_cls,
                               parser.parse_args([])) == config_cls()


def test_flags_round_trip_into_the_config():
  parser = _parser(config_lib.EvalConfig)
  args = parser.parse_args(['--steps', '7', '--dense', '16,8', '--rule',
                            'actor_critic', '--learning-rate', '0.5',
                            '--num-devices', '2', '--model-head-hiddens',
                            '4'])
  assert flags.from_flags(config_lib.EvalConfig, args) == (
      config_lib.EvalConfig(num_steps=7, dense=(16, 8), rule='actor_critic',
                            learning_rate=0.5, num_devices=2,
                            model_head_hiddens=(4,)))


@pytest.mark.parametrize('argv', [['--dense', '16,x'], ['--dense', '0'],
                                  ['--rule', 'ppo'], ['--steps', '1.5'],
                                  ['--matmul-precision', 'tf32']])
def test_bad_flag_values_are_argparse_errors(argv):
  with pytest.raises(argparse.ArgumentError):
    _parser(config_lib.EvalConfig).parse_args(argv)


@pytest.mark.parametrize('text,expected', [
    ('agent_lifetime=200', ('agent_lifetime', 200)),
    ('learning_rate=1e-3', ('learning_rate', 1e-3)),
    ('dense=128,64', ('dense', (128, 64))),
    ('remat=true', ('remat', True)), ('remat=False', ('remat', False)),
    ('tasks=catch gymnax:CartPole-v1', ('tasks',
                                        ('catch', 'gymnax:CartPole-v1'))),
    ('num_devices=none', ('num_devices', None)),
    ('meta_grad_norm=per_agent_adam', ('meta_grad_norm', 'per_agent_adam'))])
def test_field_value_types_the_value_as_the_field(text, expected):
  assert flags.field_value(config_lib.MetaTrainConfig, text) == expected


@pytest.mark.parametrize('text,fragment', [
    ('lifetime=3', "NAME a MetaTrainConfig field, got 'lifetime=3' (fields: "
     'agent_lifetime,'),
    ('agent_lifetime', "got 'agent_lifetime'"),
    ('agent_lifetime=1.5', "agent_lifetime expects an integer, got '1.5'"),
    ('remat=yes', "remat expects true or false, got 'yes'"),
    ('dense=a', "dense expects comma-separated sizes such as 128,128, got "
     "'a'")])
def test_field_value_names_the_field_and_the_bad_value(text, fragment):
  with pytest.raises(argparse.ArgumentTypeError) as error:
    flags.field_value(config_lib.MetaTrainConfig, text)
  assert fragment in str(error.value)


@pytest.mark.parametrize('value,expected', [
    ('(16,)', (16,)), ('16,8', (16, 8)), ([16, 8], (16, 8)), ((4,), (4,)),
    ('[32]', (32,))])
def test_layer_sizes_accepts_what_papermill_passes(value, expected):
  assert flags.layer_sizes(value) == expected


@pytest.mark.parametrize('rule,name', [('disco_103', 'disco'),
                                       ('actor_critic', 'actor_critic')])
def test_agent_settings_follow_the_arguments(rule, name):
  settings = config_lib.agent_settings(rule, 0.5, (7,), 9, (3,))
  assert settings.update_rule_name == name
  assert settings.learning_rate == 0.5
  net = settings.net_settings
  assert net.name == 'mlp'
  assert tuple(net.net_args['dense']) == (7,)
  assert net.net_args['model_kwargs']['lstm_size'] == 9
  assert tuple(net.net_args['model_kwargs']['head_mlp_hiddens']) == (3,)


def test_agent_settings_reject_an_unknown_rule():
  with pytest.raises(ValueError, match="Unknown rule 'ppo'"):
    config_lib.agent_settings('ppo', 0.1, (4,), 4, (4,))


# ----------------------------------------------------------------------------
# Environments beyond Catch, env_kwargs and the conv torso.


def test_env_net_and_env_kwargs_flags_reach_the_config():
  args = _parser(config_lib.EvalConfig).parse_args([
      '--env', 'gymnax:DeepSea-bsuite', '--env-kwargs',
      'size=10,deterministic=false,unscaled_move_cost=0.5,tag=abc',
      '--net', 'conv', '--conv-channels', '16,32', '--conv-kernel', '5'])
  config = flags.from_flags(config_lib.EvalConfig, args)
  assert config == config_lib.EvalConfig(
      env='gymnax:DeepSea-bsuite', net='conv', conv_channels=(16, 32),
      conv_kernel=5, env_kwargs=dict(size=10, deterministic=False,
                                     unscaled_move_cost=0.5, tag='abc'))
  config_lib.check_eval_config(config)
  args = _parser(config_lib.EvalConfig).parse_args([
      '--net', 'resnet', '--resnet-channels', '16,32', '--resnet-blocks',
      '1'])
  assert flags.from_flags(config_lib.EvalConfig, args) == (
      config_lib.EvalConfig(net='resnet', resnet_channels=(16, 32),
                            resnet_blocks=1))


@pytest.mark.parametrize('argv', [['--env-kwargs', 'size'],
                                  ['--env-kwargs', '=3'],
                                  ['--net', 'vit']])
def test_bad_env_kwargs_and_net_flags_are_argparse_errors(argv):
  with pytest.raises(argparse.ArgumentError):
    _parser(config_lib.EvalConfig).parse_args(argv)


@pytest.mark.parametrize('value,expected', [
    ('size=10', {'size': 10}), ("{'size': 10}", {'size': 10}),
    ({'rows': 5}, {'rows': 5}), ('', {}), (None, {})])
def test_env_kwargs_accepts_what_papermill_passes(value, expected):
  assert flags.env_kwargs(value) == expected


@pytest.mark.parametrize('changes,fragment', [
    (dict(env='gymnax:Breakout'), r"Unknown env 'gymnax:Breakout'.*Close "
     r"matches: 'gymnax:Breakout-MinAtar'"),
    (dict(env='breakout'), r"Unknown env 'breakout'; valid names are "
     r"'catch', 'jittable_catch', 'gymnax:<id>'"),
    (dict(env_kwargs=dict(rows=4)), r"env_kwargs \['rows'\] are set by "
     r'EvalConfig fields'),
    (dict(env='custom', env_kwargs=dict(size=3)),
     "env_kwargs must be empty for env='custom'"),
    (dict(env_kwargs=[('size', 3)]), 'env_kwargs must be a dict'),
    (dict(conv_kernel=0), 'conv_kernel must be >= 1, got 0'),
    (dict(conv_channels=(16, 0)), 'conv_channels must be positive layer'),
    (dict(net='vit'), "Unknown net 'vit'"),
    (dict(resnet_blocks=-1), 'resnet_blocks must be >= 0, got -1'),
])
def test_bad_environment_and_network_settings(changes, fragment):
  with pytest.raises(ValueError, match=fragment):
    config_lib.check_eval_config(config_lib.EvalConfig(**changes))


@pytest.mark.parametrize('env', ['gymnax:CartPole-v1', 'custom', 'catch'])
def test_environment_names_pass_the_checks(env):
  config_lib.check_eval_config(config_lib.EvalConfig(env=env))


def test_agent_settings_build_the_conv_torso():
  settings = config_lib.agent_settings('actor_critic', 0.5, (7,), 9, (3,),
                                       net='conv', conv_channels=(4, 8),
                                       conv_kernel=5)
  net = settings.net_settings
  assert net.name == 'conv'
  assert tuple(net.net_args['conv_channels']) == (4, 8)
  assert net.net_args['conv_kernel'] == 5
  mlp = config_lib.agent_settings('actor_critic', 0.5, (7,), 9, (3,))
  assert 'conv_channels' not in mlp.net_settings.net_args
  with pytest.raises(ValueError, match="Unknown net 'vit'"):
    config_lib.agent_settings('actor_critic', 0.5, (7,), 9, (3,), net='vit')
  with pytest.raises(ValueError, match=(
      r"net='mlp' takes the torso settings \[\], got also "
      r"\['conv_kernel'\]")):
    config_lib.agent_settings('actor_critic', 0.5, (7,), 9, (3,),
                              conv_kernel=3)


def test_agent_settings_build_the_resnet_torso_from_the_config():
  config = config_lib.EvalConfig(net='resnet', resnet_channels=(8, 16),
                                 resnet_blocks=1)
  assert config_lib.torso_args(config) == dict(resnet_channels=(8, 16),
                                               resnet_blocks=1)
  settings = config_lib.agent_settings('disco_103', 0.5, (7,), 9, (3,),
                                       net='resnet',
                                       **config_lib.torso_args(config))
  assert settings.net_settings.name == 'resnet'
  assert tuple(settings.net_settings.net_args['resnet_channels']) == (8, 16)
  assert settings.net_settings.net_args['resnet_blocks'] == 1
  with pytest.raises(ValueError, match='resnet_blocks must be >= 0, got -1'):
    config_lib.EvalConfig(net='resnet', resnet_blocks=-1)
  with pytest.raises(ValueError, match='resnet_channels must be positive'):
    config_lib.EvalConfig(net='resnet', resnet_channels=(8, 0))


def test_env_kwargs_survive_the_run_record(tmp_path):
  from disco_rl.loops import run_dir  # pylint: disable=g-import-not-at-top
  config = config_lib.EvalConfig(env='gymnax:DeepSea-bsuite', net='conv',
                                 env_kwargs=dict(size=10, deterministic=False))
  run_dir.write_settings(tmp_path, 'eval', config)
  assert run_dir.read_settings(tmp_path, 'eval',
                               config_lib.EvalConfig) == config


@pytest.mark.parametrize('config_cls, rate', [
    (config_lib.EvalConfig, 'learning_rate'),
    (config_lib.MetaTrainConfig, 'meta_learning_rate')])
def test_configs_check_themselves_when_made_and_are_frozen(config_cls, rate):
  """Nothing downstream checks a config again, so none can be bad."""
  message = f'{rate} must be a finite number > 0, got '
  with pytest.raises(ValueError, match=message + 'nan'):
    config_cls(**{rate: float('nan')})
  config = config_cls()
  with pytest.raises(dataclasses.FrozenInstanceError):
    setattr(config, rate, -1.0)
  with pytest.raises(ValueError, match=message + '-1.0'):
    dataclasses.replace(config, **{rate: -1.0})
