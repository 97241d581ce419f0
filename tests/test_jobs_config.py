# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.jobs.config: the settings, their checks, the agent settings
they make, their flags (disco_rl.cli.flags) and the task suite."""

import argparse
import dataclasses
import json

import numpy as np
import pytest

from disco_rl import agent as agent_lib
from disco_rl.cli import eval as eval_cli
from disco_rl.cli import flags
from disco_rl.jobs import config as config_lib
from disco_rl.jobs import records
from disco_rl.jobs.meta import config as meta_config
from disco_rl.jobs.meta import setup as meta_setup
from disco_rl.update_rules import disco

CONFIGS = (config_lib.EvalConfig, meta_config.MetaTrainConfig)


@pytest.mark.parametrize(
  'changes,fragment',
  [
    (dict(rule='sarsa'), "Unknown rule 'sarsa'; expected one of"),
    (dict(env='pong'), "Unknown env 'pong'"),
    (
      dict(batch_size=5, replay_ratio=2),
      'batch_size=5 must be a multiple of replay_ratio=2',
    ),
    (
      dict(buffer_capacity=8, batch_size=16, replay_ratio=2),
      'buffer_capacity=8 is smaller than batch_size=16',
    ),
    (dict(rollout_len=1), 'rollout_len must be >= 2, got 1'),
    (dict(num_steps=0), 'num_steps must be >= 1, got 0'),
    (dict(steps_per_call=0), 'steps_per_call must be >= 1, got 0'),
    (dict(rule_sizes=dict(prediction_size=0)), 'rule_sizes: '),
    (
      dict(rule_sizes=dict(prediction_sise=8)),
      r"rule_sizes: .*\['prediction_sise'\]",
    ),
    (dict(dense=(16, 0)), r'dense must be positive layer sizes, got \(16, 0\)'),
    (dict(num_devices=0), 'num_devices must be >= 1, got 0'),
    (dict(num_seeds=0), 'num_seeds must be >= 1, got 0'),
    (
      dict(learning_rate=float('nan')),
      'learning_rate must be a finite number > 0, got nan',
    ),
    (
      dict(learning_rate=-1.0),
      r'learning_rate must be a finite number > 0, got -1.0',
    ),
    (dict(learning_rate=0.0), 'learning_rate must be a finite number > 0'),
    (
      dict(learning_rate=float('inf')),
      'learning_rate must be a finite number > 0, got inf',
    ),
  ],
)
def test_bad_eval_settings(changes, fragment):
  with pytest.raises(ValueError, match=fragment):
    config_lib.EvalConfig(**changes)


@pytest.mark.parametrize(
  'changes,fragment',
  [
    (dict(num_agents=0), 'num_agents must be >= 1, got 0'),
    (dict(init='disco_104'), "Unknown init 'disco_104'"),
    (dict(rollout_len=1), 'rollout_len must be >= 2, got 1'),
    (dict(value_dense=()), r'value_dense must be positive layer sizes'),
    (dict(steps_per_call=-1), 'steps_per_call must be >= 1, got -1'),
    (
      dict(learning_rate=float('nan')),
      'learning_rate must be a finite number > 0, got nan',
    ),
    (
      dict(meta_learning_rate=-1e-3),
      'meta_learning_rate must be a finite number > 0, got -0.001',
    ),
    (dict(meta_grad_clip=float('nan')), 'meta_grad_clip must be'),
    (dict(meta_grad_clip=float('inf')), 'meta_grad_clip must be finite'),
  ],
)
def test_bad_meta_train_settings(changes, fragment):
  with pytest.raises(ValueError, match=fragment):
    meta_config.MetaTrainConfig(**changes)


def test_the_shared_fields_are_declared_once_with_each_jobs_defaults():
  shared = {f.name: f for f in dataclasses.fields(config_lib.RunConfig)}
  assert len(shared) == 19
  for config_cls in CONFIGS:
    fields = dataclasses.fields(config_cls)
    assert [f.name for f in fields[: len(shared)]] == list(shared)
    for field in fields[: len(shared)]:  # One declaration: type, help, flags.
      assert field.type == shared[field.name].type
      assert field.metadata == shared[field.name].metadata
  # The jobs' own defaults: the upstream notebooks'. Eval's are RunConfig's
  # (declared once); meta-training states the ones it changes.
  eval_config, meta = config_lib.EvalConfig(), meta_config.MetaTrainConfig()
  for name in shared:
    assert getattr(eval_config, name) == getattr(config_lib.RunConfig(), name)
  assert (
    eval_config.num_steps,
    eval_config.rollout_len,
    eval_config.learning_rate,
    eval_config.model_lstm_size,
    eval_config.seed,
    eval_config.env_kwargs,
  ) == (1000, 29, 1e-2, 128, 0, {})
  assert (
    meta.num_steps,
    meta.rollout_len,
    meta.learning_rate,
    meta.model_lstm_size,
    meta.seed,
    meta.tasks,
  ) == (800, 16, 5e-4, 256, 4, ('catch[rows=5,columns=5]',))


def test_a_config_is_checked_once_when_made(monkeypatch):
  calls = []
  check = config_lib.RunConfig._check  # pylint: disable=protected-access

  def counted(self):
    calls.append(type(self).__name__)
    return check(self)

  monkeypatch.setattr(config_lib.RunConfig, '_check', counted)
  config = meta_config.MetaTrainConfig(
    tasks=('catch', 'gymnax:CartPole-v1'), num_agents=2
  )
  assert calls == ['MetaTrainConfig']
  assert config.suite is config.suite  # Parsed once.


def _parser(config_cls):
  parser = argparse.ArgumentParser(exit_on_error=False)
  flags.add_flags(parser, config_cls)
  flags.add_board_flags(parser, config_cls)
  return parser


def _from_flags(config_cls, args):
  return config_cls(**flags.values_from_flags(config_cls, args)[0])


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
  assert _from_flags(config_cls, parser.parse_args([])) == config_cls()


def test_flags_round_trip_into_the_config():
  parser = _parser(config_lib.EvalConfig)
  args = parser.parse_args(
    [
      '--steps',
      '7',
      '--dense',
      '16,8',
      '--rule',
      'actor_critic',
      '--learning-rate',
      '0.5',
      '--num-devices',
      '2',
      '--model-head-hiddens',
      '4',
    ]
  )
  assert _from_flags(config_lib.EvalConfig, args) == (
    config_lib.EvalConfig(
      num_steps=7,
      dense=(16, 8),
      rule='actor_critic',
      learning_rate=0.5,
      num_devices=2,
      model_head_hiddens=(4,),
    )
  )


@pytest.mark.parametrize(
  'argv',
  [
    ['--dense', '16,x'],
    ['--dense', '0'],
    ['--rule', 'sarsa'],
    ['--steps', '1.5'],
    ['--matmul-precision', 'tf32'],
  ],
)
def test_bad_flag_values_are_argparse_errors(argv):
  with pytest.raises(argparse.ArgumentError):
    _parser(config_lib.EvalConfig).parse_args(argv)


@pytest.mark.parametrize(
  'value,expected',
  [
    ('(16,)', (16,)),
    ('16,8', (16, 8)),
    ([16, 8], (16, 8)),
    ((4,), (4,)),
    ('[32]', (32,)),
  ],
)
def test_layer_sizes_accepts_what_papermill_passes(value, expected):
  assert flags.layer_sizes(value) == expected


@pytest.mark.parametrize(
  'rule,name',
  [('disco_103', 'disco'), ('actor_critic', 'actor_critic'), ('ppo', 'ppo')],
)
def test_agent_settings_follow_the_arguments(rule, name):
  settings = agent_lib.make_settings(rule, 0.5, (7,), 9, (3,))
  assert settings.update_rule_name == name
  assert settings.learning_rate == 0.5
  net = settings.net_settings
  assert net.name == 'mlp'
  assert tuple(net.net_args['dense']) == (7,)
  assert net.net_args['model_kwargs']['lstm_size'] == 9
  assert tuple(net.net_args['model_kwargs']['head_mlp_hiddens']) == (3,)


def test_agent_settings_reject_an_unknown_rule():
  with pytest.raises(ValueError, match="Unknown rule 'sarsa'"):
    agent_lib.make_settings('sarsa', 0.1, (4,), 4, (4,))


# ----------------------------------------------------------------------------
# Environments beyond Catch, env_kwargs and the conv torso.


def test_env_net_and_env_kwargs_flags_reach_the_config():
  args = _parser(config_lib.EvalConfig).parse_args(
    [
      '--env',
      'gymnax:DeepSea-bsuite',
      '--env-kwargs',
      'size=10,deterministic=false,unscaled_move_cost=0.5,tag=abc',
      '--net',
      'conv',
      '--conv-channels',
      '16,32',
      '--conv-kernel',
      '5',
    ]
  )
  config = _from_flags(config_lib.EvalConfig, args)
  assert config == config_lib.EvalConfig(
    env='gymnax:DeepSea-bsuite',
    net='conv',
    conv_channels=(16, 32),
    conv_kernel=5,
    env_kwargs=dict(
      size=10, deterministic=False, unscaled_move_cost=0.5, tag='abc'
    ),
  )
  args = _parser(config_lib.EvalConfig).parse_args(
    ['--net', 'resnet', '--resnet-channels', '16,32', '--resnet-blocks', '1']
  )
  assert _from_flags(config_lib.EvalConfig, args) == (
    config_lib.EvalConfig(
      net='resnet', resnet_channels=(16, 32), resnet_blocks=1
    )
  )


def test_env_flag_takes_settings_in_brackets_as_tasks_and_studies_do():
  """`--env NAME[k=v]` is env NAME with those env_kwargs, merged with
  --env-kwargs; a setting both give differently is an error naming both;
  the Python API names the form it takes."""
  parse = lambda argv: _from_flags(
    config_lib.EvalConfig, _parser(config_lib.EvalConfig).parse_args(argv)
  )
  assert parse(
    ['--env', 'lpg:all[layout_seed=2]', '--env-kwargs', 'max_steps=9']
  ) == config_lib.EvalConfig(
    env='lpg:all', env_kwargs=dict(layout_seed=2, max_steps=9)
  )
  assert parse(
    ['--env', 'lpg:all[layout_seed=2]', '--env-kwargs', 'layout_seed=2']
  ) == config_lib.EvalConfig(env='lpg:all', env_kwargs=dict(layout_seed=2))
  with pytest.raises(ValueError, match='sets layout_seed=2, --env-kwargs sets'):
    parse(['--env', 'lpg:all[layout_seed=2]', '--env-kwargs', 'layout_seed=3'])
  with pytest.raises(ValueError, match='malformed environment'):
    parse(['--env', 'lpg:all[layout_seed=2'])
  with pytest.raises(
    ValueError, match=r"env='lpg:all', env_kwargs=\{'layout_seed': 2\}"
  ):
    config_lib.EvalConfig(env='lpg:all[layout_seed=2]')


@pytest.mark.parametrize(
  'argv', [['--env-kwargs', 'size'], ['--env-kwargs', '=3'], ['--net', 'vit']]
)
def test_bad_env_kwargs_and_net_flags_are_argparse_errors(argv):
  with pytest.raises(argparse.ArgumentError):
    _parser(config_lib.EvalConfig).parse_args(argv)


@pytest.mark.parametrize(
  'value,expected',
  [
    ('size=10', {'size': 10}),
    ("{'size': 10}", {'size': 10}),
    ({'rows': 5}, {'rows': 5}),
    ('', {}),
    (None, {}),
  ],
)
def test_env_kwargs_accepts_what_papermill_passes(value, expected):
  assert flags.env_kwargs(value) == expected


@pytest.mark.parametrize(
  'changes,fragment',
  [
    (
      dict(env='gymnax:Breakout'),
      r"Unknown env 'gymnax:Breakout'.*Close "
      r"matches: 'gymnax:Breakout-MinAtar'",
    ),
    (
      dict(env='breakout'),
      r"Unknown env 'breakout'; valid names are "
      r"'catch', 'jittable_catch', 'gymnax:<id>'",
    ),
    (
      dict(env='catch', env_kwargs=dict(random_seed=4)),
      "env_kwargs random_seed is set by seed for env='catch'",
    ),
    (
      dict(env='custom', env_kwargs=dict(size=3)),
      "env_kwargs must be empty for env='custom'",
    ),
    (dict(env_kwargs=[('size', 3)]), 'env_kwargs must be a dict'),
    (dict(conv_kernel=0), 'conv_kernel must be >= 1, got 0'),
    (dict(conv_channels=(16, 0)), 'conv_channels must be positive layer'),
    (dict(net='vit'), "Unknown net 'vit'"),
    (dict(resnet_blocks=-1), 'resnet_blocks must be >= 0, got -1'),
  ],
)
def test_bad_environment_and_network_settings(changes, fragment):
  with pytest.raises(ValueError, match=fragment):
    config_lib.EvalConfig(**changes)


@pytest.mark.parametrize('env', ['gymnax:CartPole-v1', 'custom', 'catch'])
def test_environment_names_pass_the_checks(env):
  config_lib.EvalConfig(env=env, num_seeds=2)  # Host ones too.


def test_agent_settings_build_the_conv_torso():
  settings = agent_lib.make_settings(
    'actor_critic',
    0.5,
    (7,),
    9,
    (3,),
    net='conv',
    conv_channels=(4, 8),
    conv_kernel=5,
  )
  net = settings.net_settings
  assert net.name == 'conv'
  assert tuple(net.net_args['conv_channels']) == (4, 8)
  assert net.net_args['conv_kernel'] == 5
  mlp = agent_lib.make_settings('actor_critic', 0.5, (7,), 9, (3,))
  assert 'conv_channels' not in mlp.net_settings.net_args
  with pytest.raises(ValueError, match="Unknown net 'vit'"):
    agent_lib.make_settings('actor_critic', 0.5, (7,), 9, (3,), net='vit')
  with pytest.raises(
    ValueError,
    match=(
      r"net='mlp' takes the torso settings \[\], got also "
      r"\['conv_kernel'\]"
    ),
  ):
    agent_lib.make_settings('actor_critic', 0.5, (7,), 9, (3,), conv_kernel=3)


def test_agent_settings_build_the_resnet_torso_from_the_config():
  config = config_lib.EvalConfig(
    net='resnet', resnet_channels=(8, 16), resnet_blocks=1
  )
  assert config.torso() == dict(resnet_channels=(8, 16), resnet_blocks=1)
  settings = config.agent_settings('disco_103')
  assert settings.learning_rate == config.learning_rate
  assert settings.net_settings.name == 'resnet'
  assert tuple(settings.net_settings.net_args['resnet_channels']) == (8, 16)
  assert settings.net_settings.net_args['resnet_blocks'] == 1
  with pytest.raises(ValueError, match='resnet_blocks must be >= 0, got -1'):
    config_lib.EvalConfig(net='resnet', resnet_blocks=-1)
  with pytest.raises(ValueError, match='resnet_channels must be positive'):
    config_lib.EvalConfig(net='resnet', resnet_channels=(8, 0))


@pytest.mark.parametrize(
  'config_cls, rate',
  [
    (config_lib.EvalConfig, 'learning_rate'),
    (meta_config.MetaTrainConfig, 'meta_learning_rate'),
  ],
)
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


# ----------------------------------------------------------------------------
# The meta-training task suite.


def test_parse_catch_and_gymnax_tasks():
  suite = meta_config.parse_tasks(
    [
      'catch',
      'jittable_catch[rows=7,columns=5]',
      'gymnax:DeepSea-bsuite[size=8]',
    ]
  )
  assert suite == (
    meta_config.Task('catch'),
    meta_config.Task('jittable_catch', (('rows', 7), ('columns', 5))),
    meta_config.Task('gymnax:DeepSea-bsuite', (('size', 8),)),
  )
  assert [t.spec() for t in suite] == [
    'catch',
    'jittable_catch[rows=7,columns=5]',
    'gymnax:DeepSea-bsuite[size=8]',
  ]
  for task in suite:  # The text is the task.
    assert meta_config.parse_task(task.spec()) == task
  # Catch like any family: its settings, else its defaults (8x8); a host
  # family's tasks act in its jittable twin.
  assert suite[0].env_name == 'jittable_catch'
  assert suite[0].make_env(1).single_observation_spec()[
    'observation'
  ].shape == (8, 8, 1)
  # A task may name its agents' network; the text keeps it.
  breakout = meta_config.parse_task('gymnax:Breakout-MinAtar[net=conv]')
  assert breakout == meta_config.Task('gymnax:Breakout-MinAtar', (), 'conv')
  assert meta_config.parse_task(breakout.spec()) == breakout
  assert breakout.eval_settings() == dict(
    env='gymnax:Breakout-MinAtar', env_kwargs={}, net='conv'
  )


@pytest.mark.parametrize(
  'text, fragment',
  [
    ('catch[rows]', "Task 'catch[rows]': malformed settings"),
    ('catch[rows=5', "Task 'catch[rows=5': malformed environment"),
    ('catch[net=cnn]', "Task 'catch[net=cnn]': unknown net 'cnn'"),
    ('gymnax:CartPol-v1', "Unknown task environment 'gymnax:CartPol-v1'"),
    ('pong', "Unknown task environment 'pong'"),
    (7, 'A task must be text such as catch[rows=7,columns=5]'),
  ],
)
def test_bad_task_names_the_task(text, fragment):
  with pytest.raises(ValueError, match=fragment.replace('[', r'\[')):
    meta_config.parse_task(text)


def test_a_bad_board_fails_when_its_environment_is_made():
  with pytest.raises(ValueError, match='rows must be an integer >= 2'):
    meta_config.parse_task('catch[rows=1]').make_env(1)


def test_bad_suites():
  with pytest.raises(
    ValueError,
    match=r"tasks \['catch'\] appear more "
    'than once',
  ):
    meta_config.parse_tasks(['catch', 'catch'])
  with pytest.raises(ValueError, match="got the text 'catch'"):
    meta_config.parse_tasks('catch')
  with pytest.raises(ValueError, match='tasks must name at least one'):
    meta_config.parse_tasks(())
  suite = ('catch', 'catch[rows=6]', 'gymnax:CartPole-v1')
  # A config checks itself when made, and again when replaced.
  with pytest.raises(
    ValueError,
    match=r'num_agents=2 is smaller than the '
    r'number of tasks \(3\)',
  ):
    meta_config.MetaTrainConfig(num_agents=2, tasks=suite)
  config = meta_config.MetaTrainConfig(num_agents=3, tasks=suite)
  with pytest.raises(ValueError, match="Unknown task environment 'cartpole'"):
    dataclasses.replace(config, tasks=('cartpole',))


def test_board_shorthands_write_the_catch_settings():
  """--rows/--columns: the board of the eval job's Catch, or of the
  meta-training tasks (the default one resized)."""
  parse = lambda cls, argv: _from_flags(cls, _parser(cls).parse_args(argv))
  assert parse(config_lib.EvalConfig, ['--rows', '6', '--columns', '5']) == (
    config_lib.EvalConfig(env_kwargs=dict(rows=6, columns=5))
  )
  assert parse(meta_config.MetaTrainConfig, ['--rows', '4']).tasks == (
    'catch[rows=4,columns=5]',
  )
  assert parse(
    meta_config.MetaTrainConfig,
    [
      '--tasks',
      'catch',
      'gymnax:CartPole-v1',
      '--num-agents',
      '2',
      '--columns',
      '3',
    ],
  ).tasks == ('catch[columns=3]', 'gymnax:CartPole-v1')
  with pytest.raises(ValueError, match='--rows 6 disagrees with rows=7'):
    parse(config_lib.EvalConfig, ['--rows', '6', '--env-kwargs', 'rows=7'])
  with pytest.raises(ValueError, match='set the board of Catch'):
    parse(config_lib.EvalConfig, ['--rows', '6', '--env', 'gymnax:CartPole-v1'])


def test_group_sizes_split_the_population_evenly():
  assert meta_setup.group_sizes(5, 2) == (3, 2)
  assert meta_setup.group_sizes(6, 3) == (2, 2, 2)
  assert meta_setup.group_sizes(2, 1) == (2,)
  assert list(meta_setup.group_starts((3, 2))) == [0, 3, 5]


@pytest.mark.parametrize(
  'record, expected',
  [
    (
      (
        config_lib.EvalConfig,
        dict(env='jittable_catch', rows=6, columns=5, env_kwargs={}),
      ),
      dict(env='jittable_catch', env_kwargs=dict(rows=6, columns=5)),
    ),
    (
      (
        config_lib.EvalConfig,
        dict(env='gymnax:CartPole-v1', rows=8, columns=8, env_kwargs={}),
      ),
      dict(env='gymnax:CartPole-v1', env_kwargs={}),
    ),
    (
      (meta_config.MetaTrainConfig, dict(rows=4, columns=3, tasks=())),
      dict(tasks=('catch[rows=4,columns=3]',)),
    ),
    (
      (
        meta_config.MetaTrainConfig,
        dict(
          rows=4,
          columns=3,
          tasks=('catch', 'catch[rows=7,columns=5]', 'gymnax:CartPole-v1'),
        ),
      ),
      dict(
        tasks=(
          'catch[rows=4,columns=3]',
          'catch[rows=7,columns=5]',
          'gymnax:CartPole-v1',
        )
      ),
    ),
  ],
)
def test_old_records_are_upgraded(record, expected):
  """Version 0.1 records name Catch's board in fields of their own."""
  upgraded = records.upgrade_settings(*record)
  assert {k: upgraded[k] for k in expected} == expected
  assert 'rows' not in upgraded and 'columns' not in upgraded
  # Fields added since take their defaults: the record makes a config.
  cls = record[0]
  cls(
    **(
      upgraded if cls is config_lib.EvalConfig else dict(upgraded, num_agents=3)
    )
  )


def test_environments_and_eval_configs_of_tasks():
  catch, deep_sea = meta_config.parse_tasks(
    ['catch[rows=7,columns=5]', 'gymnax:DeepSea-bsuite[size=8]']
  )
  env = catch.make_env(3)
  assert env.batch_size == 3
  assert env.single_observation_spec()['observation'].shape == (7, 5, 1)
  env = deep_sea.make_env(2)
  assert env.single_observation_spec()['observation'].shape == (8, 8)
  assert catch.eval_settings() == dict(
    env='jittable_catch', env_kwargs=dict(rows=7, columns=5)
  )
  assert deep_sea.eval_settings() == dict(
    env='gymnax:DeepSea-bsuite', env_kwargs={'size': 8}
  )
  config_lib.EvalConfig(**deep_sea.eval_settings())  # Checked when made.


def test_rule_sizes_flag_writes_tuple_sizes_with_x():
  """`--rule-sizes` takes every size of `disco.MetaNetSizes`, a tuple as
  '8x1' (the form `MetaNetSizes.text()` writes)."""
  tiny = disco.MetaNetSizes(
    prediction_size=8,
    hidden_size=16,
    embedding_size=(8, 1),
    policy_channels=(8, 2),
    meta_embedding_size=(8,),
  )
  config = _from_flags(
    meta_config.MetaTrainConfig,
    _parser(meta_config.MetaTrainConfig).parse_args(
      ['--rule-sizes', tiny.text()]
    ),
  )
  assert disco.as_sizes(config.rule_sizes) == tiny
  assert tiny.text() == (
    'prediction_size=8,hidden_size=16,embedding_size=8x1,policy_channels=8x2,'
    'meta_embedding_size=8'
  )


@pytest.mark.parametrize(
  'config_cls', [config_lib.EvalConfig, meta_config.MetaTrainConfig]
)
@pytest.mark.parametrize('name', sorted(disco.NAMED_SIZES))
def test_rule_sizes_flag_takes_a_named_size(config_cls, name):
  config = _from_flags(
    config_cls, _parser(config_cls).parse_args(['--rule-sizes', name])
  )
  assert disco.as_sizes(config.rule_sizes) == disco.NAMED_SIZES[name]


def test_a_rule_sizes_flag_of_an_unknown_name_is_one_error_line(
  tmp_path, capsys
):
  # argparse's refusal: its usage, then one `error:` line, status 2.
  with pytest.raises(SystemExit) as refused:
    eval_cli.main(
      ['--rule-sizes', 'huge', '--steps', '1', '--no-progress', '--out',
       str(tmp_path / 'out')]
    )  # fmt: skip
  assert refused.value.code == 2
  lines = capsys.readouterr().err.splitlines()
  assert [line for line in lines if 'error:' in line] == [lines[-1]]
  assert lines[-1].endswith(
    'error: argument --rule-sizes: expected a named size (disco_103, lpg, '
    'small, tiny) or name=value pairs such as prediction_size=8,'
    "embedding_size=8x1, got 'huge'"
  )
  assert not (tmp_path / 'out').exists()


# ----------------------------------------------------------------------------
# Settings of the wrong type or out of range (issue 71): refused when made,
# naming the field, the expected and the received value.


@pytest.mark.parametrize(
  'config_cls, changes, fragment',
  [
    # A string where a count is due (failed in a comparison naming nothing).
    (
      config_lib.EvalConfig,
      dict(batch_size='8'),
      r"batch_size must be an integer, got '8' \(str\)",
    ),
    # One size where a tuple is due.
    (
      config_lib.EvalConfig,
      dict(dense=16),
      r'dense must be a tuple of integers, got 16 \(int\)',
    ),
    # Only the Trainer failed on these, after compiling.
    (
      config_lib.EvalConfig,
      dict(seed='0'),
      r"seed must be an integer, got '0' \(str\)",
    ),
    (
      config_lib.EvalConfig,
      dict(num_steps=2.5),
      r'num_steps must be an integer, got 2.5 \(float\)',
    ),
    # Was reported as 4.0 environments.
    (
      config_lib.EvalConfig,
      dict(batch_size=8.0),
      r'batch_size must be an integer, got 8.0 \(float\)',
    ),
    # Was taken as True.
    (
      config_lib.EvalConfig,
      dict(debug_checks='no'),
      r"debug_checks must be True or False, got 'no' \(str\)",
    ),
    (
      config_lib.EvalConfig,
      dict(learning_rates=(1e-3, '1e-2')),
      r"learning_rates must be a tuple of numbers, got \(0.001, '1e-2'\)",
    ),
    (
      meta_config.MetaTrainConfig,
      dict(num_inner_steps='2'),
      r"num_inner_steps must be an integer, got '2' \(str\)",
    ),
    (
      meta_config.MetaTrainConfig,
      dict(remat='no'),
      r"remat must be True or False, got 'no' \(str\)",
    ),
    (
      meta_config.MetaTrainConfig,
      dict(tasks='catch'),
      r"tasks must be a tuple of texts, got 'catch' \(str\) \(write "
      r"\('catch',\) for one\)",
    ),
  ],
)
def test_a_setting_of_the_wrong_type_is_refused_naming_the_field(
  config_cls, changes, fragment
):
  with pytest.raises(ValueError, match=fragment):
    config_cls(**changes)


@pytest.mark.parametrize(
  'config_cls, changes, fragment',
  [
    (config_lib.EvalConfig, dict(seed=-1), 'seed must be from 0 to 4294967295'),
    # Overflowed in jax.random.PRNGKey (a traceback).
    (
      config_lib.EvalConfig,
      dict(seed=99999999999999999999),
      r'seed must be from 0 to 4294967295 \(jax.random.PRNGKey keeps 32 '
      r'bits of a seed\), got 99999999999999999999',
    ),
    # 2**32 is seed 0's key again.
    (
      config_lib.EvalConfig,
      dict(seed=2**32 - 1, num_seeds=2),
      r'seed \+ num_seeds - 1 must be from 0 to 4294967295 .*, got 4294967296',
    ),
    (
      config_lib.EvalConfig,
      dict(seeds=(0, 2**32)),
      r'seeds must be from 0 to 4294967295',
    ),
    (
      meta_config.MetaTrainConfig,
      dict(seed=-1),
      'seed must be from 0 to 4294967295',
    ),
    (
      meta_config.MetaTrainConfig,
      dict(rule_seed=2**40),
      'rule_seed must be from 0 to 4294967295',
    ),
  ],
)
def test_a_seed_outside_the_key_range_is_refused(config_cls, changes, fragment):
  with pytest.raises(ValueError, match=fragment):
    config_cls(**changes)


def test_numpy_scalars_and_lists_are_kept_as_python_values():
  """What the checks accept is kept as run.json writes it."""
  config = config_lib.EvalConfig(
    seed=np.int64(3),
    learning_rate=np.float32(0.5),
    dense=[8, np.int32(4)],
    debug_checks=np.bool_(False),
  )
  assert type(config.seed) is int and type(config.learning_rate) is float
  assert config.dense == (8, 4) and type(config.dense[1]) is int
  assert config.debug_checks is False
  json.dumps(dataclasses.asdict(config))


@pytest.mark.parametrize(
  'args, fragment',
  [
    (
      ['--seed', '99999999999999999999'],
      'seed must be from 0 to 4294967295',
    ),
    # As --seeds -1 is.
    (['--seed', '-1'], 'seed must be from 0 to 4294967295 (jax'),
    (['--seeds', '-1'], 'seeds must be from 0 to 4294967295'),
  ],
)
def test_a_seed_flag_out_of_range_is_one_error_line(
  args, fragment, tmp_path, capsys
):
  status = eval_cli.main(
    [*args, '--steps', '1', '--no-progress', '--out', str(tmp_path / 'out')]
  )
  err = capsys.readouterr().err
  assert status == 2
  assert err.startswith('error: ') and err.count('\n') == 1, err
  assert fragment in err
  assert not (tmp_path / 'out').exists()
