# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A meta-training run built from its config: devices, tasks, agents, rule.

Every decision about a meta-training run is made here, once: the devices,
the task suite and how the population is split over it, one
`meta_objective.MetaTrainAgent` per task (network, value function,
environment), the rule's optimiser, how a device runs its agents, and the
starting rule. The result, a `MetaSetup`, is what the pure functions of
`meta_program` read.
"""

import dataclasses

import jax

from disco_rl import meta_objective
from disco_rl import types
from disco_rl import weights
from disco_rl.loops import config as config_lib
from disco_rl.loops import devices as devices_lib
from disco_rl.loops import meta_optimizer
from disco_rl.loops import tasks as tasks_lib
from disco_rl.networks import nets


@dataclasses.dataclass(frozen=True)
class MetaSetup:
  """What a meta-training run's program reads (static: not traced).

  Attributes:
    config: the run's settings.
    devices: the devices of the mesh.
    mesh: the one-axis device mesh (`devices.AXIS`).
    tasks: the suite (`tasks.Task`), one group of agents each.
    group_sizes: the number of agents of each task.
    members: one `meta_objective.MetaTrainAgent` per task (its agent
      network, value function and environment).
    meta_opt: the rule's optimiser (optax, on the agents' stacked
      meta-gradients [N, ...]).
    population: how a device runs its agents: 'map' or 'vmap'.
  """

  config: config_lib.MetaTrainConfig
  devices: tuple[jax.Device, ...]
  mesh: jax.sharding.Mesh
  tasks: tuple[tasks_lib.Task, ...]
  group_sizes: tuple[int, ...]
  members: tuple[meta_objective.MetaTrainAgent, ...]
  meta_opt: object
  population: str

  @property
  def member(self) -> meta_objective.MetaTrainAgent:
    """The first task's agent (its update rule is the population's)."""
    return self.members[0]

  @property
  def num_devices(self) -> int:
    return len(self.devices)

  @property
  def groups(self) -> list[tuple[meta_objective.MetaTrainAgent, int, int]]:
    """(member, first agent, agent count) of each task group."""
    starts = tasks_lib.group_starts(self.group_sizes)
    return [(m, int(starts[g]), self.group_sizes[g])
            for g, m in enumerate(self.members)]


def make_setup(config: config_lib.MetaTrainConfig, devices=None) -> MetaSetup:
  """Builds the run's devices, tasks and agents from `config`.

  Args:
    config: the run's settings.
    devices: the devices to use (default: `config.num_devices`, or all).
  """
  if not isinstance(config, config_lib.MetaTrainConfig):
    raise TypeError('config must be a MetaTrainConfig, got '
                    f'{type(config).__name__}.')
  devices = tuple(devices if devices is not None else
                  devices_lib.pick_devices({}, config.num_devices))
  tasks = tuple(tasks_lib.parse_tasks(config.tasks, config.rows,
                                      config.columns))
  members = []
  for task in tasks:
    env = tasks_lib.make_env(task, config.batch_size_per_device)
    net = task_net(config, task)
    nets.check_observation_spec(
        net, env.single_observation_spec(),
        f'task {task.spec()!r} (its single_observation_spec())')
    members.append(meta_objective.MetaTrainAgent(
        batch_size_per_device=config.batch_size_per_device,
        agent_settings=agent_settings(config, net),
        value_fn_config=value_fn_config(config),
        axis_name=devices_lib.AXIS, env=env))
  members = tuple(members)
  population = config.population
  if population == 'auto':
    population = 'map' if devices[0].platform == 'cpu' else 'vmap'
  return MetaSetup(
      config=config, devices=devices, mesh=devices_lib.make_mesh(devices),
      tasks=tasks,
      group_sizes=tuple(tasks_lib.group_sizes(config.num_agents, len(tasks))),
      members=members,
      meta_opt=meta_optimizer.make(
          config.meta_grad_norm, config.meta_learning_rate,
          config.meta_grad_clip, config.num_agents),
      population=population)


def task_net(config: config_lib.MetaTrainConfig, task: tasks_lib.Task) -> str:
  """The network of the agents of `task`: the task's own, else the
  config's `net`."""
  return task.net or config.net


def agent_settings(config: config_lib.MetaTrainConfig, net: str = 'mlp'):
  """The agent settings of a task group: the Disco agent with network `net`
  ('mlp', 'conv' or 'resnet', its torso from the config)."""
  return config_lib.agent_settings('disco_103', config.learning_rate,
                                   config.dense, config.model_lstm_size,
                                   config.model_head_hiddens, net=net,
                                   **config_lib.torso_args(config, net))


def value_fn_config(config: config_lib.MetaTrainConfig) -> types.ValueFnConfig:
  """The meta-objective's value function with the configured sizes."""
  default = meta_objective.default_value_fn_config()
  return default.replace(net_args=dict(default.net_args,
                                       dense=tuple(config.value_dense)))


def unrolls_inner_steps(config: config_lib.MetaTrainConfig) -> bool:
  """Whether a meta-step runs its inner updates unrolled (else a loop)."""
  return config.num_inner_steps <= config.max_unrolled_inner_steps


def initial_rule_params(setup: MetaSetup, update_rule_params=None,
                        load: bool = True) -> types.MetaParams:
  """The given parameters, else those `config.init` names (with
  `load=False` a fresh meta-network stands in for Disco103's weights: a run
  about to be restored)."""
  if update_rule_params is not None:
    return update_rule_params
  config = setup.config
  return weights.starting_rule_params(
      setup.member.agent.update_rule, config.init == 'disco_103' and load,
      config.rule_seed)
