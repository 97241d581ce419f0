# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.loops.tasks: the task suite's text, environments and groups."""

import dataclasses

import pytest

from disco_rl.loops import config as config_lib
from disco_rl.loops import tasks


def test_parse_catch_and_gymnax_tasks():
  suite = tasks.parse_tasks(['catch', 'jittable_catch[rows=7,columns=5]',
                             'gymnax:DeepSea-bsuite[size=8]'], rows=6,
                            columns=4)
  assert suite == (
      tasks.Task('catch', (('rows', 6), ('columns', 4))),
      tasks.Task('catch', (('rows', 7), ('columns', 5))),
      tasks.Task('gymnax:DeepSea-bsuite', (('size', 8),)))
  assert [t.spec() for t in suite] == [
      'catch[rows=6,columns=4]', 'catch[rows=7,columns=5]',
      'gymnax:DeepSea-bsuite[size=8]']
  for task in suite:  # The text is the task.
    assert tasks.parse_task(task.spec()) == task
  # A task may name its agents' network; the text keeps it.
  breakout = tasks.parse_task('gymnax:Breakout-MinAtar[net=conv]')
  assert breakout == tasks.Task('gymnax:Breakout-MinAtar', (), 'conv')
  assert tasks.parse_task(breakout.spec()) == breakout
  assert tasks.eval_settings(breakout) == dict(
      env='gymnax:Breakout-MinAtar', env_kwargs={}, net='conv')
  # No tasks: Catch on the config's board (the upstream notebook's).
  assert tasks.parse_tasks((), rows=5, columns=5) == (
      tasks.Task('catch', (('rows', 5), ('columns', 5))),)


@pytest.mark.parametrize('text, fragment', [
    ('catch[rows=1]', "task 'catch[rows=1]' rows must be an integer >= 2"),
    ('catch[size=3]', "Catch takes only rows and columns, got ['size']"),
    ('catch[rows]', "Malformed settings in task 'catch[rows]'"),
    ('catch[rows=5', "Malformed task 'catch[rows=5'"),
    ('gymnax:CartPol-v1', "Unknown task environment 'gymnax:CartPol-v1'"),
    ('pong', "Unknown task environment 'pong'"),
    (7, 'A task must be text such as catch[rows=7,columns=5]'),
])
def test_bad_task_names_the_task(text, fragment):
  with pytest.raises(ValueError, match=fragment.replace('[', r'\[')):
    tasks.parse_task(text)


def test_bad_suites():
  with pytest.raises(ValueError, match=r"tasks \['catch\[rows=5,columns=5\]'"
                     r'\] appear more than once'):
    tasks.parse_tasks(['catch', 'catch[rows=5,columns=5]'])
  with pytest.raises(ValueError, match="got the text 'catch'"):
    tasks.parse_tasks('catch')
  suite = ('catch', 'catch[rows=6]', 'gymnax:CartPole-v1')
  # A config checks itself when made, and again when replaced.
  with pytest.raises(ValueError, match=r'num_agents=2 is smaller than the '
                     r'number of tasks \(3\)'):
    config_lib.MetaTrainConfig(num_agents=2, tasks=suite)
  config = config_lib.MetaTrainConfig(num_agents=3, tasks=suite)
  with pytest.raises(ValueError, match="Unknown task environment 'cartpole'"):
    dataclasses.replace(config, tasks=('cartpole',))


def test_group_sizes_split_the_population_evenly():
  assert tasks.group_sizes(5, 2) == (3, 2)
  assert tasks.group_sizes(6, 3) == (2, 2, 2)
  assert tasks.group_sizes(2, 1) == (2,)
  assert list(tasks.group_starts((3, 2))) == [0, 3, 5]


def test_environments_and_eval_configs_of_tasks():
  catch, deep_sea = tasks.parse_tasks(['catch[rows=7,columns=5]',
                                       'gymnax:DeepSea-bsuite[size=8]'])
  env = tasks.make_env(catch, 3)
  assert env.batch_size == 3
  assert env.single_observation_spec()['observation'].shape == (7, 5, 1)
  env = tasks.make_env(deep_sea, 2)
  assert env.single_observation_spec()['observation'].shape == (8, 8)
  assert tasks.eval_settings(catch) == dict(env='jittable_catch', rows=7,
                                            columns=5)
  assert tasks.eval_settings(deep_sea) == dict(env='gymnax:DeepSea-bsuite',
                                               env_kwargs={'size': 8})
  config = config_lib.EvalConfig(**tasks.eval_settings(deep_sea))
  config_lib.check_eval_config(config)
