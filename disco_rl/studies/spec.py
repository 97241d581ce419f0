# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A study as data: rules compared on environments, stage by stage.

A `Study` is a base config (`EvalConfig` fields), named `Rule`s and
`Stage`s. A stage is a grid of environments x rules; each cell of it is
one eval program holding the cell's runs, its seeds x learning rates
(`EvalConfig.seeds`, `.learning_rates`). A stage gives each rule its rates
in one of two ways: a list (`rates`, e.g. a sweep on tuning environments),
or the rate a `RatePick` chose for it on an earlier stage (never on the
stage's own environments):

  study = Study(
      name='catch_demo',
      base=dict(batch_size=16, replay_ratio=4, buffer_capacity=64),
      rules=(Rule('actor_critic'), Rule('ppo')),
      stages=(
          Stage('tune', envs=('catch[rows=5,columns=5]',), seeds=(0, 1),
                rates=(1e-3, 1e-2), num_steps=300),
          Stage('held_out', envs=('catch[rows=8,columns=8]',),
                seeds=(0, 1, 2), rates=RatePick('tune'), num_steps=300),
      ))

`disco_rl.studies.run.run_study(study, out)` runs it cell by cell and
writes its tidy results; `disco_rl.studies.report` reports each stage.
Environments are written as everywhere else, `NAME[key=value,...]`
(`environments.parse_spec`).
"""

from collections.abc import Mapping
import dataclasses
import math
import re
from typing import Any

from disco_rl import environments
from disco_rl.jobs import config as config_lib

# Settings a study sets itself for every cell (the rest come from `base`,
# the stage and the rule).
CELL_FIELDS = (
  'env',
  'env_kwargs',
  'rule',
  'seeds',
  'learning_rates',
  'num_steps',
  'seed',
  'num_seeds',
  'learning_rate',
)
_NAME = re.compile(r'^[A-Za-z0-9_.-]+$')


def _check_name(value: Any, what: str) -> str:
  if not isinstance(value, str) or not _NAME.match(value):
    raise ValueError(
      f'{what} must be a name of letters, digits, _ . -, got {value!r}.'
    )
  return value


def _check_settings(settings: Mapping[str, Any], what: str) -> None:
  """Raises ValueError naming a key that is not an `EvalConfig` field or
  that the study sets itself."""
  fields = {f.name for f in dataclasses.fields(config_lib.EvalConfig)}
  unknown = sorted(set(settings) - fields)
  if unknown:
    raise ValueError(f'{what}: {unknown} are not EvalConfig fields.')
  owned = sorted(set(settings) & set(CELL_FIELDS))
  if owned:
    raise ValueError(
      f"{what}: {owned} are set by the study (the stage's "
      'envs, seeds, rates and num_steps; the rule).'
    )


@dataclasses.dataclass(frozen=True)
class Rule:
  """One rule of a study.

  Attributes:
    rule: the eval job's rule ('disco_103', 'actor_critic', 'ppo', ...).
    name: the rule's name in the study's results (default: `rule`), e.g.
      'learned' for a meta-trained rule run as 'disco_103' with `weights`.
    weights: an npz of the rule's parameters (a meta-trained rule), as
      `--weights`; relative paths are from the study's spec file.
    settings: `EvalConfig` fields of this rule's cells only (e.g.
      `rule_sizes` of a small learned rule).
  """

  rule: str
  name: str = ''
  weights: str | None = None
  settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  def __post_init__(self) -> None:
    if self.rule not in config_lib.RULES:
      raise ValueError(
        f'Unknown rule {self.rule!r}; expected one of {config_lib.RULES}.'
      )
    object.__setattr__(
      self, 'name', _check_name(self.name or self.rule, 'Rule.name')
    )
    if self.weights is not None and self.rule != 'disco_103':
      raise ValueError(
        f'Rule {self.name!r}: weights are a meta-learned '
        f"rule's parameters (rule 'disco_103'), got rule "
        f'{self.rule!r}.'
      )
    _check_settings(self.settings, f'Rule {self.name!r} settings')


@dataclasses.dataclass(frozen=True)
class RatePick:
  """The procedure that chooses each rule's learning rate, stated once.

  On the cells of `stage` (its environments, all its seeds): each run's
  final return is normalised from random play (0) to the best mean over
  that environment's (rule, rate) cells (1); a (rule, rate) scores the mean
  of its normalised runs over the stage's environments; each rule gets its
  highest-scoring rate (`disco_rl.studies.run.pick_rates`).

  Attributes:
    stage: the name of an earlier stage of the study.
  """

  stage: str


@dataclasses.dataclass(frozen=True)
class Stage:
  """One grid of a study: every environment x every rule, each cell one
  program of `seeds` x its learning rates.

  Attributes:
    name: the stage's name (its folder, its rows' `stage`).
    envs: environments, each `NAME[key=value,...]`.
    seeds: the runs' seeds.
    rates: each rule's learning rates: a sequence (the same for every
      rule), a mapping {rule name: rates}, or a `RatePick` of an earlier
      stage (one rate per rule).
    num_steps: learner steps per run (the budget).
    rules: the names of the study's rules run here (default: all).
    settings: `EvalConfig` fields of this stage's cells.
  """

  name: str
  envs: tuple[str, ...]
  seeds: tuple[int, ...]
  rates: Any
  num_steps: int
  rules: tuple[str, ...] = ()
  settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  def __post_init__(self) -> None:
    _check_name(self.name, 'Stage.name')
    what = f'Stage {self.name!r}'
    if isinstance(self.envs, str) or not self.envs:
      raise ValueError(
        f'{what}: envs must be a non-empty sequence of '
        f'environments, got {self.envs!r}.'
      )
    for env in self.envs:
      name, _ = environments.parse_spec(env)
      environments.check_name(name, f'{what} env')
    if not self.seeds or len(set(self.seeds)) != len(self.seeds):
      raise ValueError(
        f'{what}: seeds must be distinct integers, got {self.seeds!r}.'
      )
    if self.num_steps < 1:
      raise ValueError(f'{what}: num_steps must be >= 1, got {self.num_steps}.')
    if not isinstance(self.rates, (RatePick, Mapping)):
      _check_rates(self.rates, f'{what} rates')
    elif isinstance(self.rates, Mapping):
      for rule, rates in self.rates.items():
        _check_rates(rates, f'{what} rates of {rule!r}')
    _check_settings(self.settings, f'{what} settings')


def _check_rates(rates: Any, what: str) -> tuple[float, ...]:
  rates = tuple(rates) if not isinstance(rates, (str, float, int)) else ()
  if not rates or not all(
    isinstance(r, (int, float)) and math.isfinite(r) and r > 0 for r in rates
  ):
    raise ValueError(
      f'{what} must be finite learning rates > 0, got {rates!r}.'
    )
  return tuple(float(r) for r in rates)


@dataclasses.dataclass(frozen=True)
class Study:
  """A study: its rules, stages and reporting choices.

  Attributes:
    name: the study's name (its results' `study`).
    rules: the rules compared.
    stages: in the order they run.
    base: `EvalConfig` fields of every cell.
    references: {environment: reference return} for normalised scores
      (e.g. gymnax's PPO returns on MinAtar); an environment without one
      is normalised to the best mean of the stage's rules there.
    baseline: the rule the report compares the others with.
    tiny: `EvalConfig` fields that shrink every cell to test size, and
      `num_steps` (`--tiny`).
  """

  name: str
  rules: tuple[Rule, ...]
  stages: tuple[Stage, ...]
  base: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  references: Mapping[str, float] = dataclasses.field(default_factory=dict)
  baseline: str | None = None
  tiny: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  def __post_init__(self) -> None:
    _check_name(self.name, 'Study.name')
    names = [r.name for r in self.rules]
    if not names or len(set(names)) != len(names):
      raise ValueError(
        f'Study {self.name!r}: rules must have distinct names, got {names}.'
      )
    stages = [s.name for s in self.stages]
    if not stages or len(set(stages)) != len(stages):
      raise ValueError(
        f'Study {self.name!r}: stages must have distinct names, got {stages}.'
      )
    _check_settings(self.base, f'Study {self.name!r} base')
    _check_settings(
      {k: v for k, v in self.tiny.items() if k != 'num_steps'},
      f'Study {self.name!r} tiny',
    )
    if self.baseline is not None and self.baseline not in names:
      raise ValueError(
        f'Study {self.name!r}: baseline {self.baseline!r} '
        f'is not one of its rules {names}.'
      )
    for i, stage in enumerate(self.stages):
      for rule in stage.rules:
        if rule not in names:
          raise ValueError(
            f'Stage {stage.name!r}: unknown rule {rule!r}; '
            f'the study has {names}.'
          )
      if isinstance(stage.rates, Mapping):
        missing = sorted(set(self.stage_rules(stage)) - set(stage.rates))
        if missing:
          raise ValueError(
            f'Stage {stage.name!r}: no rates for rules {missing}.'
          )
      if isinstance(stage.rates, RatePick):
        earlier = stages[:i]
        if stage.rates.stage not in earlier:
          raise ValueError(
            f'Stage {stage.name!r}: RatePick from '
            f'{stage.rates.stage!r}, which is not an earlier '
            f'stage ({earlier}).'
          )
        tuned = self.stage(stage.rates.stage)
        shared = sorted(set(tuned.envs) & set(stage.envs))
        if shared:
          raise ValueError(
            f'Stage {stage.name!r}: its rates are chosen on '
            f'{tuned.name!r}, which shares environments '
            f'{shared} with it; choose rates on others.'
          )

  def stage(self, name: str) -> Stage:
    for stage in self.stages:
      if stage.name == name:
        return stage
    raise ValueError(
      f'Study {self.name!r} has no stage {name!r}; it has '
      f'{[s.name for s in self.stages]}.'
    )

  def rule(self, name: str) -> Rule:
    for rule in self.rules:
      if rule.name == name:
        return rule
    raise ValueError(f'Study {self.name!r} has no rule {name!r}.')

  def stage_rules(self, stage: Stage) -> tuple[str, ...]:
    """The names of the rules a stage runs."""
    return tuple(stage.rules) or tuple(r.name for r in self.rules)

  def shrunk(self) -> 'Study':
    """The study at test size (`tiny`): every cell's settings and budget
    replaced, the grid unchanged."""
    tiny = dict(self.tiny)
    steps = tiny.pop('num_steps', None)
    stages = tuple(
      dataclasses.replace(
        s, num_steps=steps or s.num_steps, settings={**s.settings, **tiny}
      )
      for s in self.stages
    )
    return dataclasses.replace(self, stages=stages)
