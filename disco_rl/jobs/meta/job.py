# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Meta-training: a population of agents over a task suite trains one rule.

`make_meta_train(config) -> Job`, the eval job's shape: the setup is made
once (`setup.make_setup`, one `setup.make_member` per task), the steps are
module functions of it (`steps`: each agent's rollouts and meta-gradient,
every task group's, the meta-step that updates the rule and renews the
agents past their lifetime), and the program runs `steps_per_call`
meta-steps in one jit(shard_map(scan)). The population's initial state is
`setup.init_population`; the host checks each call's logs
(`checked_step`); rows, summary and outputs are on the host
(`meta_report`); `train_fresh_agent` and `rule` read a job's state.

One meta-step, for every agent: act for `num_inner_steps` training
rollouts and one validation rollout, then differentiate the meta-objective
through the agent's inner updates (`meta_objective.calculate_meta_gradient`;
unrolled into straight-line code when there are at most
`max_unrolled_inner_steps` of them, a loop otherwise); the meta-gradients
of all agents and devices drive the rule's optimiser. The population is
split over the tasks (`config.suite`): one group of agents per environment,
each with the network its environment calls for; the rule is shared.

The rule, its optimiser and the agents are replicated; each device acts in
its own environments (device 0 in those the upstream notebook would use, so
on one device a run repeats the upstream's).
"""

from collections.abc import Sequence
import functools
import os
from typing import Any

import jax

from disco_rl import rollout_checks
from disco_rl import types
from disco_rl import weights
from disco_rl.jobs import config as config_lib
from disco_rl.jobs.eval import job as eval_lib
from disco_rl.jobs.meta import config as meta_config
from disco_rl.jobs.meta import report as meta_report
from disco_rl.jobs.meta import setup as meta_setup
from disco_rl.jobs.meta import steps
from disco_rl.runtime import compiled
from disco_rl.runtime import divergence
from disco_rl.runtime import host_loop
from disco_rl.runtime import job as job_lib
from disco_rl.runtime import mesh as mesh_lib
from disco_rl.runtime import run_dir as run_dir_lib
from disco_rl.update_rules import disco

State = steps.State
MetaJob = job_lib.Job[steps.Setup, State]


def make_meta_train(
  config: meta_config.MetaTrainConfig,
  *,
  rule_params: types.MetaParams | None = None,
  devices: Sequence[jax.Device] | None = None,
) -> MetaJob:
  """The meta-training job of `config` (see the module's docstring).

  Args:
    config: the run's settings.
    rule_params: the rule to start from (default per `config.init`:
      Disco103's weights, found by `disco_rl.weights` when the first state
      is made, or a fresh meta-network drawn with `PRNGKey(rule_seed)`).
    devices: the devices (default: `config.num_devices`, or all).
  """
  setup = meta_setup.make_setup(config, devices)
  init_program = compiled.placed(
    functools.partial(meta_setup.init_population, setup),
    mesh_lib.shardings(setup.mesh, setup.state_specs),
    config.matmul_precision,
  )
  program = compiled.program(
    functools.partial(steps.meta_step, setup),
    length=config.steps_per_call,
    mesh=setup.mesh,
    state_specs=setup.state_specs,
    precision=config.matmul_precision,
  )
  return job_lib.Job(
    name='meta_train',
    setup=setup,
    init=lambda: init_program(setup.seed_key, setup.rule_params(rule_params)),
    state_shapes=lambda: jax.eval_shape(
      init_program, setup.seed_key, setup.rule_shapes
    ),
    step=functools.partial(checked_step, program),
    program=program,
    steps_per_call=config.steps_per_call,
    report=meta_report.make(setup),
  )


def checked_step(
  program: compiled.Program, state: State, count: int
) -> tuple[State, job_lib.Metrics]:
  """`count` meta-steps of `program`; raises for the first problem: a
  training rollout that failed the debug checks (`RolloutError`) or a
  meta-step whose losses or parameters are not finite (`DivergedError`);
  the error carries the logs of the meta-steps before it
  (`divergence.good_steps`)."""
  state, logs = program(state, count)
  faults = logs.pop(rollout_checks.KEY, None)
  finite = ('meta_loss', 'meta_grad_norm', 'agent_total_loss')
  fault = rollout_checks.first_index(faults)
  diverged = divergence.first_diverged(logs, finite, until=fault)
  good = min([count] + [i for i in (fault, diverged) if i is not None])
  with divergence.keep_good(logs, good):
    divergence.raise_if_diverged(
      logs,
      finite,
      int(mesh_lib.fetch(state.step)) - count,
      'meta-step',
      "the rule's or the agents' parameters",
      hint='Try a smaller meta_learning_rate or learning_rate '
      '(--meta-learning-rate, --learning-rate).',
      until=fault,
    )
    rollout_checks.raise_if_faulty(faults, 'training rollout of agent {source}')
  return state, logs


def train_fresh_agent(
  job: MetaJob,
  state: State,
  *,
  params: types.MetaParams | None = None,
  env: config_lib.EvalConfig | None = None,
  progress: bool = False,
) -> dict[str, Any]:
  """A fresh agent trained by a meta-training job's rule: the eval job's
  summary (nothing is written).

  Args:
    job: the meta-training job (`make_meta_train`; a Trainer's `job`).
    state: its state.
    params: the rule (default: the state's).
    env: an `EvalConfig` with rule 'disco_103' and the rule's sizes
      (default: `fresh_agent_config`).
    progress: show the eval run's progress bar.

  Raises:
    ValueError: `env` is not such an `EvalConfig`, or its `rule_sizes`
      are not those of `params`.
  """
  if params is None:
    params = rule(job, state)
  sizes = disco.sizes_from_params(params)
  if env is None:
    env = fresh_agent_config(job, params)
  if not isinstance(env, config_lib.EvalConfig) or env.rule != 'disco_103':
    raise ValueError(
      'env must be an EvalConfig with rule disco_103 (a '
      f'meta-learned rule), got {env!r}.'
    )
  if disco.as_sizes(env.rule_sizes) != sizes:
    raise ValueError(
      f'env.rule_sizes ({disco.as_sizes(env.rule_sizes).text()}) differ '
      f"from the sizes of the rule's parameters ({sizes.text()}): give "
      f'env rule_sizes={sizes.changes()!r}.'
    )
  eval_job = eval_lib.make_eval(env, rule_params=params)
  rows: job_lib.Rows = []
  outcome = host_loop.run(
    eval_job,
    eval_job.init(),
    env.num_steps + eval_job.warmup,
    rows,
    progress=progress,
  )
  return eval_job.report.summary(outcome.state, rows, outcome.timing)


def fresh_agent_config(
  job: MetaJob, params: weights.Params
) -> config_lib.EvalConfig:
  """`train_fresh_agent`'s default: 200 learner steps of a fresh agent like the
  job's own (its network, rollouts, learning rate and matmul precision:
  `agent_fields`) trained by the rule `params` (its sizes read from them)
  on the job's first task."""
  return config_lib.EvalConfig(
    **{
      **job.setup.config.agent_fields(),
      **job.setup.tasks[0].eval_settings(),
      'num_steps': 200,
      'rule_sizes': disco.sizes_from_params(params).changes(),
    }
  )


def rule(job: MetaJob, state: State) -> weights.Params:
  """The rule's meta-parameters of a meta-training job's state, as NumPy
  arrays ({module: {name: array}}, the layout of `disco_103.npz`)."""
  del job
  return mesh_lib.fetch(state.update_rule_params)


def read_rule(
  output_dir: str | os.PathLike[str], step: int | None = None
) -> tuple[weights.Params, int]:
  """A meta-training run's rule at one of its checkpoints, read only:
  nothing in `output_dir` changes.

    params, step = read_rule('runs/meta_train', step=750)

  Returns:
    The rule's meta-parameters as NumPy arrays, {module: {name: array}} (the
    layout of `disco_103.npz`), and the checkpoint's meta-step.

  Raises:
    ValueError: `output_dir` holds no run, or an eval run.
    FileNotFoundError: the run has no checkpoint `step` (the message lists
      the ones it has) or none at all.
  """
  run_dir = run_dir_lib.RunDir(output_dir, read_only=True)
  run_dir.saved_settings('meta_train')  # Raises for an eval run or none.
  if not run_dir.file(run_dir_lib.CHECKPOINTS).is_dir():
    raise FileNotFoundError(
      f'No checkpoint in {run_dir.path}: the run has '
      f'no {run_dir_lib.CHECKPOINTS}/ directory.'
    )
  # Only the rule, as saved (replicated over the run's devices, so whatever
  # devices or processes the run had): no job built, nothing traced.
  checkpoints = run_dir.checkpoints()
  try:
    step = checkpoints.resolve_step(step)
    state = checkpoints.read(step)
  finally:
    checkpoints.close()
  return state['update_rule_params'], step
