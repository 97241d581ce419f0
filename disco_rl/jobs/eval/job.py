# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval job: an agent trained by a fixed rule (Disco103, a learned one,
or the actor-critic), as in the upstream eval notebook.

`make_eval(config) -> Job`, like purejaxrl's `make_train`: the setup is
made once (`setup.make_setup`), the steps are module functions of it
(`steps`: act, store, learn, the iteration), and the program runs
`steps_per_call` iterations of every run in one jit(shard_map(scan)), or
acts on the host between compiled calls (`acting`). An iteration acts for
one rollout in a few environments, stores the trajectories in a FIFO
replay buffer and, once the buffer holds a learner batch, takes one
learner step on a uniformly sampled batch. Checks, rows, summary and
outputs are on the host (`report`); `evaluate` and `rule` read a job's
state.

Inside `shard_map` each device holds its share of the environments, of the
buffer and of the learner batch; gradients and the rule's statistics are
averaged across devices (the agent's `pmean` over `mesh.AXIS`), so the
replicated parameters stay identical. The S runs (seeds `seed`, `seed + 1`,
...) are `vmap`ped, as purejaxrl's `vmap(make_train(config))`; the seed
axis is sharded over the mesh's `mesh.SEED_AXIS` where the seeds divide the
devices. Run i computes what a run of `seed + i` alone computes (to float
rounding).
"""

from collections.abc import Sequence
import functools
from typing import Any

import jax

from disco_rl import actors
from disco_rl import environments
from disco_rl import plots
from disco_rl import types
from disco_rl.jobs import config as config_lib
from disco_rl.jobs.eval import acting as acting_lib
from disco_rl.jobs.eval import report
from disco_rl.jobs.eval import setup as setup_lib
from disco_rl.jobs.eval import steps
from disco_rl.runtime import job as job_lib
from disco_rl.runtime import mesh as mesh_lib

State = setup_lib.EvalState
EvalJob = job_lib.Job[setup_lib.EvalSetup, State]


def make_eval(
  config: config_lib.EvalConfig,
  *,
  env: Any = None,
  rule_params: types.MetaParams | None = None,
  devices: Sequence[jax.Device] | None = None,
) -> EvalJob:
  """The eval job of `config` (see the module's docstring).

  Args:
    config: the run's settings.
    env: the Environment of `env='custom'` (see `setup.make_setup`).
    rule_params: the rule's meta-parameters (default: for 'disco_103' the
      Disco103 weights, found by `disco_rl.weights` when the first state
      is made; a hand-written rule's own placeholder parameters).
    devices: the devices (default: the config's choice).
  """
  setup = setup_lib.make_setup(config, devices, env)
  iterate = steps.per_seed(functools.partial(steps.iteration, setup))
  make_acting = acting_lib.on_host if setup.host_envs else acting_lib.compiled
  acting = make_acting(setup, iterate, acting_lib.init_program(setup))
  return job_lib.Job(
    name='eval',
    setup=setup,
    init=lambda: acting.init(setup.rule_params(rule_params)),
    state_shapes=lambda: acting.state_shapes(setup.rule_shapes),
    step=acting.step,
    program=acting.program,
    steps_per_call=config.steps_per_call,
    report=report.make(
      setup, plots.rule_title(config.rule, rule_params is not None)
    ),
    warmup=setup.warmup,
    host_state=acting.host_state,
  )


def evaluate(
  job: EvalJob,
  state: State,
  *,
  params: Any = None,
  env: Any = None,
  num_rollouts: int = 20,
  seed: int = 0,
  run: int = 0,
) -> dict[str, float]:
  """An eval job's policy acting without learning
  (`actors.evaluate_policy`): {'avg_return', 'episodes'}.

  Args:
    job: the eval job (`make_eval`; a Trainer's `job`).
    state: its state (its parameters are the default).
    params: the network's parameters (default: run `run`'s current ones).
    env: a jittable `Environment` whose observations fit the agent
      (default: the run's own; for a host one its jittable twin).
    num_rollouts: rollouts of `rollout_len` steps.
    seed: the acting key's seed.
    run: which of the program's runs (`config.runs`; 0: the first).
  """
  setup = job.setup
  config = setup.config
  if not 0 <= run < config.num_runs:
    raise ValueError(
      f'run must be in [0, num_runs={config.num_runs}), got {run}.'
    )
  if params is None:
    params = jax.tree.map(
      lambda x: x[run], mesh_lib.fetch(state.learner_state.params)
    )
  jittable = setup.jittable_env
  if env is None and config.env == config_lib.CUSTOM_ENV:
    env = setup.env
  elif env is None and jittable is None:
    raise ValueError(
      f'evaluate needs a jittable environment; env={config.env!r} is '
      'stepped on the host: pass env= (a jittable Environment).'
    )
  elif env is None and jittable is not None:
    env = environments.get_environment(
      jittable, config.num_envs, dict(config.env_kwargs)
    )
  return actors.evaluate_policy(
    setup.agent,
    params,
    env,
    jax.random.PRNGKey(seed),
    num_rollouts,
    config.rollout_len,
    config.matmul_precision,
  )


def rule(job: EvalJob, state: State) -> types.MetaParams:
  """The rule's meta-parameters of an eval job's state, as NumPy arrays."""
  del job
  return mesh_lib.fetch(state.rule_params)
