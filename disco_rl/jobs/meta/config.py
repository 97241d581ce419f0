# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The settings of a meta-training run, and its task suite.

`MetaTrainConfig` is `config.RunConfig` (the agent, run and device fields
both jobs share) with the population, the meta-objective and the agents'
lifetimes; it states the shared defaults it changes (`config.redefault`).
The suite is text, each task `NAME[key=value,...]` (`Task`, parsed here
once: `parse_task`, `parse_tasks`).
"""

import dataclasses
import functools
import math
from typing import Any

from disco_rl import environments
from disco_rl import meta_objective
from disco_rl.environments import base as base_env
from disco_rl.jobs import config as config_lib
from disco_rl.update_rules import disco

# How agents' lifetimes are chosen (`MetaTrainConfig.lifetime_sampling`).
LIFETIME_SAMPLING = ('fixed', 'log_uniform')

# MetaTrainConfig's fields of the meta-objective's regulariser weights.
META_LOSS_COSTS = (
  'meta_entropy_cost',
  'meta_prediction_entropy_cost',
  'meta_target_mean_cost',
  'meta_target_kl_cost',
  'meta_action_l2_cost',
)


@dataclasses.dataclass(frozen=True)
class MetaTrainConfig(config_lib.RunConfig):
  """Settings of a meta-training run (defaults: the upstream notebook)."""

  num_steps: int = config_lib.redefault('num_steps', 800)
  rollout_len: int = config_lib.redefault('rollout_len', 16)
  learning_rate: float = config_lib.redefault('learning_rate', 5e-4)
  model_lstm_size: int = config_lib.redefault('model_lstm_size', 256)
  model_head_hiddens: tuple[int, ...] = config_lib.redefault(
    'model_head_hiddens', (256,)
  )
  seed: int = config_lib.redefault('seed', 4)
  steps_per_call: int = config_lib.redefault('steps_per_call', 10)
  num_agents: int = config_lib.setting(2, 'population size')
  batch_size_per_device: int = config_lib.setting(
    32, 'environments per agent and device'
  )
  num_inner_steps: int = config_lib.setting(2, 'agent updates per meta-step')
  tasks: tuple[str, ...] = config_lib.setting(
    ('catch[rows=5,columns=5]',),
    'the task suite: environments the '
    'population is split over (contiguous groups of agents, each with its '
    'own network shape), each NAME[key=value,...], e.g. '
    'catch[rows=7,columns=5] gymnax:CartPole-v1 '
    'gymnax:DeepSea-bsuite[size=8]; unset settings take the '
    "environment's defaults; a task may name its net, e.g. "
    'gymnax:Breakout-MinAtar[net=conv]',
  )
  value_dense: tuple[int, ...] = config_lib.setting(
    (256, 256), 'value-function MLP hidden sizes'
  )
  meta_learning_rate: float = config_lib.setting(
    5e-4, 'Adam step size of the rule'
  )
  init: str = config_lib.setting(
    'random',
    "starting rule: 'random' (a fresh meta-network) or 'disco_103' (fine-tune)",
    choices=('random', 'disco_103'),
  )
  rule_seed: int = config_lib.setting(
    1,
    'seed of the fresh meta-network (init random; '
    'the upstream notebook uses 1)',
  )
  population: str = config_lib.setting(
    'auto',
    "how a device runs its agents: 'map' one after another (on "
    "CPUs no slower than vmap), 'vmap' vectorised (for accelerators); "
    "'auto': map on a CPU, vmap elsewhere",
    choices=('auto', 'map', 'vmap'),
  )
  meta_grad_norm: str = config_lib.setting(
    'average',
    "'average': one Adam on the agents' averaged meta-gradient "
    "(the upstream notebook); 'per_agent_adam': each agent's meta-gradient "
    'normalised by its own Adam, the updates averaged (the paper)',
    choices=('average', 'per_agent_adam'),
  )
  meta_grad_clip: float = config_lib.setting(
    0.0, "clip each agent's meta-gradient to this global norm (0: no clip)"
  )
  meta_grad_parts: bool = config_lib.setting(
    False,
    'also log, per head of the rule, the policy-gradient and the '
    "regularisers' parts of the meta-gradient: their norms, the agents' "
    'coherence and the share of significant parameters '
    '(docs/meta_training.md; a second backward pass per agent)',
  )
  remat: bool = config_lib.setting(
    False,
    'recompute the inner updates in the backward pass (memory flat '
    'in num_inner_steps, about a third more compute)',
  )
  max_unrolled_inner_steps: int = config_lib.setting(
    5,
    'unroll the inner updates into straight-line code when a meta-step '
    'has at most this many (CPU: 1.4-1.7x the speed, longer compiles); '
    'else a loop (0: always a loop)',
  )
  agent_lifetime: int = config_lib.setting(
    0,
    'agent updates after which an agent starts afresh, staggered over '
    'the population so that ages differ (0: agents live for the run); '
    'with lifetime_sampling log_uniform, the longest lifetime drawn',
  )
  lifetime_sampling: str = config_lib.setting(
    'fixed',
    "'fixed': every agent lives agent_lifetime updates; 'log_uniform' "
    "(GROOVE's all_vrandlife): each agent draws its lifetime at each "
    '(re)start, log-uniformly from min_agent_lifetime to agent_lifetime '
    "updates, from the run's keys (first lives staggered as with fixed)",
    choices=LIFETIME_SAMPLING,
  )
  min_agent_lifetime: int = config_lib.setting(
    0,
    'with lifetime_sampling log_uniform: the shortest lifetime drawn, in '
    "agent updates (GROOVE: a 25th of the longest); 0 with 'fixed'",
  )
  # The meta-objective's regularisers (`meta_objective.MetaLossWeights`;
  # the defaults are upstream's).
  meta_entropy_cost: float = config_lib.setting(
    meta_objective.MetaLossWeights.entropy,
    "meta-objective: weight of the validation policy's entropy bonus",
  )
  meta_prediction_entropy_cost: float = config_lib.setting(
    meta_objective.MetaLossWeights.prediction_entropy,
    "meta-objective: weight of the y and z predictions' entropy bonus",
  )
  meta_target_mean_cost: float = config_lib.setting(
    meta_objective.MetaLossWeights.target_mean,
    "meta-objective: weight of the targets' squared batch means",
  )
  meta_target_kl_cost: float = config_lib.setting(
    meta_objective.MetaLossWeights.target_kl,
    "meta-objective: weight of the KL from the target network's policy "
    'to the policy target',
  )
  meta_action_l2_cost: float = config_lib.setting(
    meta_objective.MetaLossWeights.action_l2,
    'meta-objective: weight of the mean square of the per-step scalar of '
    "policy target 'action' or 'action_pg' (LPG's L2 on its actor target, "
    '5e-3 in GROOVE); 0, the default, unless policy_target is one of them',
  )

  def _check(self) -> None:
    super()._check()
    self._at_least(1, 'num_agents', 'batch_size_per_device', 'num_inner_steps')
    self._at_least(
      0,
      'meta_grad_clip',
      'agent_lifetime',
      'min_agent_lifetime',
      'max_unrolled_inner_steps',
      *META_LOSS_COSTS,
    )
    self._sizes('value_dense')
    self._rates('meta_learning_rate')
    for name in ('meta_grad_clip',) + META_LOSS_COSTS:
      if not math.isfinite(getattr(self, name)):
        raise ValueError(
          f'{name} must be finite and >= 0, got {getattr(self, name)!r}.'
        )
    if (
      self.meta_action_l2_cost
      and self.policy_target not in disco.ACTION_TARGETS
    ):
      raise ValueError(
        f'meta_action_l2_cost={self.meta_action_l2_cost} penalises the '
        'scalar of policy_target '
        f'{" or ".join(map(repr, disco.ACTION_TARGETS))}; got '
        f'policy_target={self.policy_target!r}.'
      )
    if 0 < self.agent_lifetime < self.num_inner_steps:
      raise ValueError(
        f'agent_lifetime={self.agent_lifetime} is shorter than one '
        f'meta-step (num_inner_steps={self.num_inner_steps} updates).'
      )
    self._check_lifetime_sampling()
    if self.num_agents < len(self.suite):
      raise ValueError(
        f'num_agents={self.num_agents} is smaller than the '
        f'number of tasks ({len(self.suite)}): every task '
        'needs an agent.'
      )

  def _check_lifetime_sampling(self) -> None:
    low, high = self.min_agent_lifetime, self.agent_lifetime
    if self.lifetime_sampling == 'fixed':
      if low:
        raise ValueError(
          f'min_agent_lifetime={low} is the low end of lifetimes drawn '
          "per agent: it needs lifetime_sampling='log_uniform' (got "
          "'fixed', where every agent lives agent_lifetime updates)."
        )
      return
    if not high:
      raise ValueError(
        f'lifetime_sampling={self.lifetime_sampling!r} draws lifetimes up '
        'to agent_lifetime: set agent_lifetime > 0 (got 0).'
      )
    if not self.num_inner_steps <= low <= high:
      raise ValueError(
        f'min_agent_lifetime={low} must be at least one meta-step '
        f'(num_inner_steps={self.num_inner_steps} updates) and at most '
        f'agent_lifetime={high}.'
      )

  @property
  def sampled_lifetimes(self) -> bool:
    """Whether each agent draws its lifetime (else all live alike)."""
    return self.lifetime_sampling != 'fixed'

  @functools.cached_property
  def suite(self) -> tuple['Task', ...]:  # The tasks, parsed once.
    return parse_tasks(self.tasks)

  def meta_loss_weights(self) -> meta_objective.MetaLossWeights:
    """The meta-objective's regulariser weights of these fields."""
    return meta_objective.MetaLossWeights(
      entropy=self.meta_entropy_cost,
      prediction_entropy=self.meta_prediction_entropy_cost,
      target_mean=self.meta_target_mean_cost,
      target_kl=self.meta_target_kl_cost,
      action_l2=self.meta_action_l2_cost,
    )


@dataclasses.dataclass(frozen=True)
class Task:
  """One environment of the meta-training suite, e.g.
  'gymnax:DeepSea-bsuite[size=8]' or 'gymnax:Breakout-MinAtar[net=conv]'.

  Attributes:
    name: an environment name (a host family's tasks act in its jittable
      twin: 'catch' is the jittable Catch here).
    settings: its settings (unset ones: the family's defaults).
    net: the network of its agents; None: the config's `net`.
  """

  name: str
  settings: tuple[tuple[str, Any], ...] = ()
  net: str | None = None

  def spec(self) -> str:
    """The task as text (`parse_task(task.spec()) == task`)."""
    items = self.settings + ((('net', self.net),) if self.net else ())
    return environments.format_spec(self.name, items)

  @property
  def env_name(self) -> str:
    """The jittable environment the task's agents act in."""
    family = environments.family(self.name)
    return (
      family.jittable if family.on_host and family.jittable else (self.name)
    )

  def make_env(self, batch_size: int) -> base_env.Environment:
    """The task's jittable environment with `batch_size` instances."""
    return environments.get_environment(
      self.env_name, batch_size, dict(self.settings)
    )

  def eval_settings(self) -> dict[str, Any]:
    """The `EvalConfig` fields that train an agent on this task, e.g.
    `EvalConfig(**task.eval_settings(), num_steps=200)`."""
    net = dict(net=self.net) if self.net else {}
    return dict(env=self.env_name, env_kwargs=dict(self.settings), **net)


def parse_task(text: Any) -> Task:
  """A `Task` from its text, NAME or NAME[key=value,...].

  Raises:
    ValueError: naming the task: malformed text, an unknown environment or
      network.
  """
  if not isinstance(text, str):
    raise ValueError(
      f'A task must be text such as catch[rows=7,columns=5] '
      f'or gymnax:CartPole-v1, got {text!r}.'
    )
  try:
    name, settings = environments.parse_spec(text)
  except ValueError as e:
    raise ValueError(f'Task {text!r}: {e}') from None
  net = settings.pop('net', None)
  if net is not None and net not in config_lib.NETS:
    raise ValueError(
      f'Task {text!r}: unknown net {net!r}; expected one of {config_lib.NETS}.'
    )
  environments.check_name(name, 'task environment')
  return Task(name, tuple(settings.items()), net)


def parse_tasks(texts: Any) -> tuple[Task, ...]:
  """The suite: the tasks of `texts` (at least one)."""
  if isinstance(texts, str):
    raise ValueError(
      f'tasks must be a sequence of task texts, got the text '
      f'{texts!r} (write ({texts!r},) for one task).'
    )
  tasks = tuple(parse_task(t) for t in tuple(texts))
  if not tasks:
    raise ValueError(
      'tasks must name at least one environment, e.g. '
      "('catch[rows=5,columns=5]',)."
    )
  repeated = sorted({t.spec() for t in tasks if tasks.count(t) > 1})
  if repeated:
    raise ValueError(
      f'tasks {repeated} appear more than once: give the '
      'task more agents with num_agents instead.'
    )
  return tasks
