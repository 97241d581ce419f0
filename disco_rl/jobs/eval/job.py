# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval job: an agent trained by a fixed rule (Disco103, a learned one,
or the actor-critic), as in the upstream eval notebook.

`make_eval(config) -> Job`, like purejaxrl's `make_train`: the setup is
made once, then the program's pieces follow in reading order, each run of
S seeds sharing one program. An iteration acts for one rollout in a few
environments, stores the trajectories in a FIFO replay buffer and, once
the buffer holds a learner batch, takes one learner step on a uniformly
sampled batch:

  init            the state of the S runs
  act             one rollout in a run's environments
  store           its episode statistics, the rollout into the buffer
  learn           a learner step on a sampled batch (once there is one)
  iteration       act, store, maybe learn

`compiled.program` runs `steps_per_call` iterations of every run in one
jit(shard_map(scan)). Environments stepped in Python (the dm_env Catch,
envpool's Atari; `environments.family(name).on_host`) differ in acting
alone, decided once in `eval_setup.make_setup`: `host_acting` steps them
between
compiled actor steps, with the same keys. Checks, rows, summary and outputs
are on the host (`eval_report`); `evaluate` and `rule` read a job's state.

Inside `shard_map` each device holds its share of the environments, of the
buffer and of the learner batch; gradients and the rule's statistics are
averaged across devices (the agent's `pmean` over `mesh.AXIS`), so the
replicated parameters stay identical. The S runs (seeds `seed`, `seed + 1`,
...) are `vmap`ped, as purejaxrl's `vmap(make_train(config))`; the seed
axis is sharded over the mesh's `mesh.SEED_AXIS` where the seeds divide the
devices. Run i computes what a run of `seed + i` alone computes (to float
rounding).
"""

from collections.abc import Callable, Sequence
import dataclasses
import functools
from typing import Any

import chex
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np

from disco_rl import actors
from disco_rl import environments
from disco_rl import plots
from disco_rl import replay
from disco_rl import rollout_checks
from disco_rl import types
from disco_rl.jobs import config as config_lib
from disco_rl.jobs.eval import host_acting
from disco_rl.jobs.eval import report as eval_report
from disco_rl.jobs.eval import setup as eval_setup
from disco_rl.runtime import compiled
from disco_rl.runtime import divergence
from disco_rl.runtime import host_loop as run_lib
from disco_rl.runtime import mesh as mesh_lib

AXIS, SEED = mesh_lib.AXIS, mesh_lib.SEED_AXIS
State = eval_setup.EvalState
# A program's outputs by name: [] per device, [S] per run, [N, S] per call.
Metrics = dict[str, chex.Array]


def iteration_keys(rng: chex.PRNGKey) -> tuple[chex.PRNGKey, ...]:
  """(the next iteration's key, the acting key, the learning key)."""
  rng, act_key, learn_key = jax.random.split(rng, 3)
  return rng, act_key, learn_key


def device_key(key: chex.PRNGKey) -> chex.PRNGKey:
  """A key of this device's own, from a replicated one (inside the mesh)."""
  return jax.random.fold_in(key, jax.lax.axis_index(AXIS))


def actor_keys(act_key: chex.PRNGKey, rollout_len: int) -> chex.PRNGKey:
  """[T, 2]: this device's key of each actor step of a rollout (as
  `actors.unroll_jittable_actor` splits it)."""
  return jax.random.split(device_key(act_key), rollout_len)


def make_eval(
  config: config_lib.EvalConfig,
  *,
  env: Any = None,
  rule_params: types.MetaParams | None = None,
  devices: Sequence[jax.Device] | None = None,
) -> run_lib.Job:
  """The eval job of `config` (see the module's docstring).

  Args:
    config: the run's settings.
    env: the Environment of `env='custom'` (see `eval_setup.make_setup`).
    rule_params: the rule's meta-parameters (default: for 'disco_103' the
      Disco103 weights, found by `disco_rl.weights` when the first state
      is made; a hand-written rule's own placeholder parameters).
    devices: the devices (default: the config's choice).
  """
  setup = eval_setup.make_setup(config, devices, env)
  agent, mesh = setup.agent, setup.mesh
  num_devices = setup.batch_devices

  def per_seed(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn(state, *args)` of one run mapped over the S runs (and over the
    leading axis of `args`); its outputs get [S]."""

    def mapped(state: State, *args: Any) -> tuple[State, Any]:
      return jax.vmap(
        fn,
        in_axes=(eval_setup.SEED_AXES,) + (0,) * len(args),
        out_axes=(eval_setup.SEED_AXES, 0),
      )(state, *args)

    return mapped

  # -- The initial state (under `jit`, outside `shard_map`). ---------------

  def init_runs(
    rngs: chex.Array,
    env_state: Any,
    timestep: types.EnvironmentTimestep,
    rule_params: types.MetaParams,
  ) -> State:
    """The S runs from [S, 2] keys, their environments' state and first
    timestep ([D, S, ...]) and the rule's parameters."""

    def one_run(
      rng: chex.PRNGKey, env_state: Any, timestep: types.EnvironmentTimestep
    ) -> State:
      learner_rng, actor_rng, loop_rng = jax.random.split(rng, 3)
      per_device = lambda x: jnp.broadcast_to(x, (num_devices,) + x.shape)
      return eval_setup.EvalState(
        learner_state=agent.initial_learner_state(learner_rng),
        actor_state=jax.tree.map(
          per_device, agent.initial_actor_state(actor_rng)
        ),
        env_state=env_state,
        timestep=timestep,
        acc_rewards=jnp.zeros(
          (num_devices, setup.envs_per_device), jnp.float32
        ),
        replay=jax.tree.map(
          per_device,
          replay.init(
            eval_setup.example_rollout(setup, mesh_lib.local_block(timestep)),
            setup.capacity_per_device,
          ),
        ),
        rule_params=rule_params,
        rng=loop_rng,
        step=jnp.zeros((), jnp.int32),
      )

    states = jax.vmap(
      one_run, in_axes=(0, 1, 1), out_axes=eval_setup.SEED_AXES
    )(rngs, env_state, timestep)
    return mesh_lib.map_per_device(  # [S, D, ...] -> [D, S, ...]
      lambda part: jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1), part),
      eval_setup.state_specs(),
      states,
    )

  # -- One iteration of one run, on one device's view. ---------------------

  def act(state: State, key: chex.PRNGKey) -> tuple[State, types.ActorRollout]:
    """One rollout of `rollout_len` steps in jittable environments."""
    rollout, actor_state, timestep, env_state = actors.unroll_jittable_actor(
      state.learner_state.params,
      state.actor_state,
      state.timestep,
      state.env_state,
      device_key(key),
      setup.env,
      config.rollout_len,
      agent.actor_step,
    )
    return dataclasses.replace(
      state, actor_state=actor_state, timestep=timestep, env_state=env_state
    ), rollout

  def store(state: State, rollout: types.ActorRollout) -> tuple[State, Metrics]:
    """Episode statistics of a [T, E] rollout, and the rollout buffered.

    With `debug_checks` the statistics hold the rollout's first bad entry
    (`rollout_checks.KEY`), raised on the host.
    """
    checks: Metrics = {}
    if config.debug_checks:
      fault = rollout_checks.find_fault(
        rollout.actions,
        rollout.rewards,
        agent.num_actions,
        state.step,
        logits_t=rollout.logits,
      )
      checks[rollout_checks.KEY] = rollout_checks.first_over_devices(
        fault, AXIS, rollout.rewards.shape[1]
      )
    acc_rewards, returns = actors.accumulate_rewards(
      state.acc_rewards, (rollout.rewards, rollout.discounts)
    )
    total, episodes = actors.episode_returns(returns, rollout.discounts)
    buffer = replay.add(
      state.replay, replay.keep_outputs(rollout, config.behaviour_outputs)
    )
    return dataclasses.replace(
      state, acc_rewards=acc_rewards, replay=buffer
    ), dict(
      return_sum=jax.lax.psum(total, AXIS),
      episodes=jax.lax.psum(episodes, AXIS),
      **checks,
    )

  def learn(
    state: State, key: chex.PRNGKey, learning_rate: chex.Array
  ) -> tuple[State, Metrics]:
    """One learner step on a sampled batch at the run's learning rate;
    scalar logs averaged."""
    sample_key, step_key = jax.random.split(device_key(key))
    batch = replay.sample(state.replay, sample_key, setup.batch_per_device)
    learner_state, _, logs = agent.learner_step(
      step_key,
      batch,
      state.learner_state,
      state.actor_state,
      state.rule_params,
      False,
      learning_rate=learning_rate,
    )
    scalars = jax.lax.pmean({k: logs[k] for k in setup.log_keys}, AXIS)
    scalars[divergence.KEY] = jax.lax.pmin(
      divergence.all_finite(learner_state.params), AXIS
    )
    return dataclasses.replace(state, learner_state=learner_state), scalars

  def maybe_learn(
    state: State, key: chex.PRNGKey, learning_rate: chex.Array
  ) -> tuple[State, Metrics]:
    """`learn` once each buffer holds a learner batch (else NaN logs).

    Every device's and run's buffer holds `min(C, (step + 1) * E)`
    trajectories after this iteration's rollout: the shared `step` decides,
    so all take the same branch.
    """
    stored = jnp.minimum(
      setup.capacity_per_device, (state.step + 1) * setup.envs_per_device
    )
    learn_now = stored >= setup.batch_per_device

    def skip(
      state: State, key: chex.PRNGKey, learning_rate: chex.Array
    ) -> tuple[State, Metrics]:
      del key, learning_rate
      nan = jnp.full((), jnp.nan, jnp.float32)
      return state, dict(
        {k: nan for k in setup.log_keys},
        **{divergence.KEY: jnp.ones((), jnp.float32)},
      )

    state, logs = jax.lax.cond(
      learn_now, learn, skip, state, key, learning_rate
    )
    return state, dict(logs, learned=learn_now.astype(jnp.float32))

  def iteration(
    state: State,
    learning_rate: chex.Array,
    rollout: types.ActorRollout | None = None,
  ) -> tuple[State, Metrics]:
    """Act (unless the host acted: `rollout`), store, maybe learn (at the
    run's [] `learning_rate`): one iteration of one run."""
    rng, act_key, learn_key = iteration_keys(state.rng)
    if rollout is None:
      state, rollout = act(state, act_key)
    state, stats = store(state, rollout)
    state, logs = maybe_learn(state, learn_key, learning_rate)
    return dataclasses.replace(state, rng=rng, step=state.step + 1), dict(
      stats, **logs
    )

  # The runs' learning rates [S]: an operand of the programs (split over the
  # seed groups like the runs), so a sweep of any rates is one program.
  rates = mesh_lib.place(
    np.asarray([run.learning_rate for run in config.runs], np.float32),
    mesh_lib.shardings(mesh, P(SEED)),
  )

  init_program = compiled.placed(
    init_runs,
    mesh_lib.shardings(mesh, eval_setup.state_specs()),
    config.matmul_precision,
  )

  def check(metrics: Metrics, first_step: int) -> None:
    eval_report.raise_first_problem(config, metrics, first_step)

  # -- Acting: compiled with the iteration, or stepped on the host. --------

  def compiled_acting() -> dict[str, Any]:
    """Every iteration of every run in one program: jit(shard_map(scan))."""

    def reset(rng: chex.PRNGKey) -> tuple[chex.PRNGKey, Any, Any]:
      # One run's environments, [D, ...].
      env_rng, rng = jax.random.split(rng)
      env_state, timestep = jax.vmap(setup.env.reset)(
        jax.random.split(env_rng, num_devices)
      )
      return rng, env_state, timestep

    # Every run's environments reset in one program (op by op, each
    # operation would be a program of its own: seconds of compiling).
    reset_runs = jax.jit(jax.vmap(reset, out_axes=(0, 1, 1)))

    def reset_and_init(rule_params: types.MetaParams) -> State:
      rngs, env_state, timestep = reset_runs(eval_setup.seed_keys(config))
      return init_program(rngs, env_state, timestep, rule_params)

    program = compiled.program(
      per_seed(iteration),
      length=config.steps_per_call,
      mesh=mesh,
      state_specs=eval_setup.state_specs(),
      operand_specs=(P(SEED),),
      output_specs=P(SEED),
      precision=config.matmul_precision,
    ).bind(rates)

    def step(state: State, count: int) -> tuple[State, Metrics]:
      state, metrics = program(state, count)
      check(metrics, int(mesh_lib.fetch(state.step)) - count)
      return state, metrics

    return dict(
      init=lambda: reset_and_init(eval_setup.rule_params(setup, rule_params)),
      state_shapes=lambda: jax.eval_shape(
        reset_and_init, eval_setup.rule_shapes(setup)
      ),
      step=step,
      program=program,
    )

  if setup.host_envs:
    acting = host_acting.make(
      setup,
      state_specs=eval_setup.state_specs(),
      seed_keys=eval_setup.seed_keys(config),
      iteration_keys=iteration_keys,
      actor_keys=lambda key: actor_keys(key, config.rollout_len),
      actor_step=agent.actor_step,
      learn_iteration=per_seed(iteration),
      rates=rates,
      init_program=init_program,
      rule_params=lambda: eval_setup.rule_params(setup, rule_params),
      rule_shapes=lambda: eval_setup.rule_shapes(setup),
      check=check,
    )
  else:
    acting = compiled_acting()
  rule_title = plots.rule_title(config.rule, rule_params is not None)
  return run_lib.Job(
    name='eval',
    config=config,
    setup=setup,
    rows=lambda metrics, first: eval_report.rows(
      config, setup.log_keys, metrics, first
    ),
    summary=functools.partial(eval_report.summary, setup),
    outputs=lambda state, rows, run_dir, lead: eval_report.outputs(
      config, rule_title, rows, run_dir, lead
    ),
    progress=lambda rows: dict(
      avg_return=f'{eval_report.recent_return(rows):.3f}'
    ),
    steps_per_call=config.steps_per_call,
    warmup=setup.warmup,
    description=eval_report.progress_title(config),
    **acting,
  )


def evaluate(
  job: run_lib.Job,
  state: eval_setup.EvalState,
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
  setup, config = job.setup, job.config
  if not 0 <= run < config.num_runs:
    raise ValueError(
      f'run must be in [0, num_runs={config.num_runs}), got {run}.'
    )
  if params is None:
    params = jax.tree.map(
      lambda x: x[run], mesh_lib.fetch(state.learner_state.params)
    )
  if env is None and config.env == config_lib.CUSTOM_ENV:
    env = setup.env
  elif env is None and setup.jittable_env is None:
    raise ValueError(
      f'evaluate needs a jittable environment; env={config.env!r} is '
      'stepped on the host: pass env= (a jittable Environment).'
    )
  elif env is None:
    env = environments.get_environment(
      setup.jittable_env, config.num_envs, dict(config.env_kwargs)
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


def rule(job: run_lib.Job, state: eval_setup.EvalState) -> types.MetaParams:
  """The rule's meta-parameters of an eval job's state, as NumPy arrays."""
  del job
  return mesh_lib.fetch(state.rule_params)
