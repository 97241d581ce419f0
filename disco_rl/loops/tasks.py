# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The task suite of meta-training: which environments the population acts in.

A task is a jittable environment and its settings, written as text so that a
flag or a config holds it:

  'catch'                          Catch on the config's rows x columns
  'catch[rows=7,columns=5]'        Catch on another board
  'gymnax:CartPole-v1'             any discrete gymnax/Craftax environment
  'gymnax:DeepSea-bsuite[size=8]'  with constructor / EnvParams settings
  'gymnax:Breakout-MinAtar[net=conv]'  its agents with another network
                                   than the config's `net`

The population's agents are split over the tasks in contiguous groups, as
evenly as possible (`group_sizes`); the agents of one group share an
environment and hence an agent network shape, stacked on a leading axis.
"""

import dataclasses
import re
from typing import Any

import numpy as np

from disco_rl import environments
from disco_rl.environments import base as base_env
from disco_rl.loops import flags
from disco_rl.networks import nets

# 'catch' means the jittable Catch here: meta-training acts on the device.
CATCH_NAMES = environments.CATCH_NAMES
_CATCH_KEYS = ('rows', 'columns')
_SPEC = re.compile(r'^([^\[\]\s]+)(?:\[([^\[\]]*)\])?$')


@dataclasses.dataclass(frozen=True)
class Task:
  """One environment of the suite.

  Attributes:
    name: an environment name ('catch', 'gymnax:<id>', 'craftax:<id>').
    settings: its settings (Catch: rows, columns; gymnax: constructor
      arguments or `EnvParams` fields).
    net: the network of its agents ('mlp', 'conv', 'resnet'); None: the
      config's `net`.
  """

  name: str
  settings: tuple[tuple[str, Any], ...] = ()
  net: str | None = None

  @property
  def is_catch(self) -> bool:
    return self.name in CATCH_NAMES

  def spec(self) -> str:
    """The task as text (`parse_task(task.spec()) == task`)."""
    items = self.settings + ((('net', self.net),) if self.net else ())
    if not items:
      return self.name
    return '%s[%s]' % (self.name, ','.join(f'{k}={v}' for k, v in items))


def parse_task(text: Any, rows: int = 5, columns: int = 5) -> Task:
  """A `Task` from its text; Catch without a board gets `rows` x `columns`.

  Raises:
    ValueError: naming the task, for malformed text, an unknown environment
      name, a host-only environment or Catch settings other than rows and
      columns.
  """
  if not isinstance(text, str):
    raise ValueError(f'A task must be text such as catch[rows=7,columns=5] '
                     f'or gymnax:CartPole-v1, got {text!r}.')
  match = _SPEC.match(text.strip())
  if not match:
    raise ValueError(f'Malformed task {text!r}; expected NAME or '
                     'NAME[key=value,...], e.g. catch[rows=7,columns=5] or '
                     'gymnax:DeepSea-bsuite[size=8].')
  name, settings_text = match.groups()
  try:
    settings = flags.parse_kwargs(settings_text or '')
  except Exception as e:  # argparse.ArgumentTypeError: say which task.
    raise ValueError(f'Malformed settings in task {text!r}: {e}.') from None
  net = settings.pop('net', None)
  if net is not None and net not in nets.NETWORKS:
    raise ValueError(f'Task {text!r}: unknown net {net!r}; expected one of '
                     f'{tuple(nets.NETWORKS)}.')
  if name in CATCH_NAMES:
    unknown = sorted(set(settings) - set(_CATCH_KEYS))
    if unknown:
      raise ValueError(f'Task {text!r}: Catch takes only rows and columns, '
                       f'got {unknown}.')
    settings = dict(rows=settings.get('rows', rows),
                    columns=settings.get('columns', columns))
    base_env.check_board(settings['rows'], settings['columns'],
                         f'task {text!r}')
    return Task('catch', tuple(settings.items()), net)
  environments.check_name(name, 'task environment')
  return Task(name, tuple(settings.items()), net)


def parse_tasks(texts, rows: int = 5, columns: int = 5) -> tuple[Task, ...]:
  """The suite of a config: its tasks, or Catch rows x columns if none."""
  if isinstance(texts, str):
    raise ValueError(f'tasks must be a sequence of task texts, got the text '
                     f'{texts!r} (write ({texts!r},) for one task).')
  texts = tuple(texts) or ('catch',)
  tasks = tuple(parse_task(t, rows, columns) for t in texts)
  repeated = sorted({t.spec() for t in tasks if tasks.count(t) > 1})
  if repeated:
    raise ValueError(f'tasks {repeated} appear more than once: give the '
                     'task more agents with num_agents instead.')
  return tasks


def make_env(task: Task, batch_size: int) -> base_env.Environment:
  """The task's jittable environment with `batch_size` instances."""
  name = 'jittable_catch' if task.is_catch else task.name
  return environments.get_environment(name, batch_size, dict(task.settings))


def eval_settings(task: Task) -> dict[str, Any]:
  """The `EvalConfig` fields that train an agent on `task` (its environment
  and settings, and its network if it names one), e.g.
  `EvalConfig(**eval_settings(task), num_steps=200)`."""
  net = dict(net=task.net) if task.net else {}
  if task.is_catch:
    settings = dict(task.settings)
    return dict(env='jittable_catch', rows=settings['rows'],
                columns=settings['columns'], **net)
  return dict(env=task.name, env_kwargs=dict(task.settings), **net)


def group_sizes(num_agents: int, num_tasks: int) -> tuple[int, ...]:
  """Agents per task: `num_agents` split as evenly as possible, first first.

  Raises:
    ValueError: if some task would get no agent.
  """
  if num_agents < num_tasks:
    raise ValueError(f'num_agents={num_agents} is smaller than the number of '
                     f'tasks ({num_tasks}): every task needs an agent.')
  share, extra = divmod(num_agents, num_tasks)
  return tuple(share + (g < extra) for g in range(num_tasks))


def group_starts(sizes) -> np.ndarray:
  """[G + 1] offsets of the groups in the population (0, ..., N)."""
  return np.concatenate([[0], np.cumsum(sizes)]).astype(int)
