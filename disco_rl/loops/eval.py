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
alone, decided once in `make_setup`: `host_acting` steps them between
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

import dataclasses
import functools
from typing import Any

import chex
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np

from disco_rl import actors
from disco_rl import agent as agent_lib
from disco_rl import environments
from disco_rl.environments import base as base_env
from disco_rl.loops import compiled
from disco_rl.loops import config as config_lib
from disco_rl.loops import divergence
from disco_rl.loops import eval_report
from disco_rl.loops import host_acting
from disco_rl.loops import mesh as mesh_lib
from disco_rl.loops import replay
from disco_rl.loops import run as run_lib
from disco_rl.networks import nets
from disco_rl import plots
from disco_rl import rollout_checks
from disco_rl import types
from disco_rl import weights

AXIS, SEED = mesh_lib.AXIS, mesh_lib.SEED_AXIS
PER_DEVICE = P(AXIS, SEED)  # [D, S, ...]: a row per device, the seeds split.


@chex.dataclass
class EvalState:
  """What an iteration carries to the next, for S runs.

  Replicated over a seed group's devices: `learner_state` [S, ...], `rng`
  [S, 2], `rule_params` and `step` [] (the runs go in step). Per device (a
  leading device axis D, sharded over the mesh's batch axis): `actor_state`
  [D, S, ...], `env_state` [D, S, ...], `timestep` [D, S, E, ...],
  `acc_rewards` [D, S, E] and `replay` [D, S, C, ...], with E environments
  and C buffer slots per device and run.

  Attributes:
    learner_state: the agent's parameters, optimiser and rule state.
    actor_state: the network's acting state.
    env_state: the jittable environments' state (None for host ones).
    timestep: the environments' current timestep.
    acc_rewards: each environment's return so far in its current episode.
    replay: the replay buffer.
    rule_params: the rule's meta-parameters (the same for every run).
    rng: the key the next iteration splits.
    step: [] int32, iterations done.
  """

  learner_state: agent_lib.LearnerState
  actor_state: types.HaikuState
  env_state: Any
  timestep: types.EnvironmentTimestep
  acc_rewards: chex.Array
  replay: replay.ReplayState
  rule_params: types.MetaParams
  rng: chex.PRNGKey
  step: chex.Array


def state_specs() -> EvalState:
  """The `PartitionSpec` of each part of an `EvalState` (a tree prefix)."""
  return EvalState(learner_state=P(SEED), actor_state=PER_DEVICE,
                   env_state=PER_DEVICE, timestep=PER_DEVICE,
                   acc_rewards=PER_DEVICE, replay=PER_DEVICE,
                   rule_params=P(), rng=P(SEED), step=P())


# The seed axis of each part once the device axis is gone (a `vmap` prefix).
_SEED_AXES = EvalState(learner_state=0, actor_state=0, env_state=0,
                       timestep=0, acc_rewards=0, replay=0, rule_params=None,
                       rng=0, step=None)


@dataclasses.dataclass(frozen=True)
class EvalSetup:
  """What an eval run is built from (static: not traced).

  Attributes:
    config: the run's settings.
    devices: the devices of the mesh.
    mesh: the [seed groups, batch devices] mesh (`SEED`, `AXIS`).
    env: the environment: jittable, `envs_per_device` instances; or
      stepped on the host (`host_envs[0]`).
    host_envs: environments stepped on the host, one per run with all
      `config.num_envs` instances (seeded `seed + i`); empty when acting is
      compiled. Decided here, once.
    jittable_env: the name of a jittable environment of the same game, for
      `evaluate` (None: there is none).
    agent: the agent, learning under the mesh's batch axis.
    envs_per_device: environments per device and run (E).
    batch_per_device: learner batch per device and run.
    capacity_per_device: replay slots per device and run (C).
    log_keys: the learner scalars recorded per step.
  """

  config: config_lib.EvalConfig
  devices: tuple[jax.Device, ...]
  mesh: jax.sharding.Mesh
  env: base_env.Environment
  host_envs: tuple[base_env.Environment, ...]
  jittable_env: str | None
  agent: agent_lib.Agent
  envs_per_device: int
  batch_per_device: int
  capacity_per_device: int
  log_keys: tuple[str, ...]

  @property
  def num_devices(self) -> int:
    return len(self.devices)

  @property
  def batch_devices(self) -> int:
    """D: the devices each run's environments, batch and buffer split over."""
    return self.mesh.shape[AXIS]

  @property
  def warmup(self) -> int:
    """Iterations that only act: until each buffer holds a learner batch."""
    return -(-self.batch_per_device // self.envs_per_device) - 1


def log_keys(rule: str) -> tuple[str, ...]:
  """The learner scalars the eval job records per step, for a rule."""
  common = ('total_loss', 'global_gradient_norm', 'global_update_norm',
            'entropy')
  if rule == 'disco_103':
    return common + ('pi_loss', 'q_loss', 'aux_kl_loss', 'pi_hat_entropy')
  return common + ('pg_advs', 'avg_value')


def make_setup(config: config_lib.EvalConfig, devices=None,
               env=None) -> EvalSetup:
  """The run's devices, mesh, environment and agent, from `config`.

  Args:
    config: the run's settings.
    devices: the devices (default: the most the environments, the batch
      and the buffer divide into, up to `config.num_devices`).
    env: with `config.env == 'custom'`, a jittable `Environment` of one
      device's share of the environments, or a function of that number
      that builds one; checked now (`base.check_jittable_environment`).

  Raises:
    ValueError: a custom environment that is missing, given without
      env='custom', of the wrong size; a host environment in several
      processes; observations that do not fit `config.net`.
  """
  if (env is not None) != (config.env == config_lib.CUSTOM_ENV):
    raise ValueError(
        "An Environment object goes with env='custom' and env='custom' "
        "needs one: pass both EvalConfig(env='custom', ...) and env= "
        f'(got env={config.env!r} and an env object: {env is not None}).')
  shares = {'number of environments (batch_size // replay_ratio)':
                config.num_envs, 'batch_size': config.batch_size,
            'buffer_capacity': config.buffer_capacity}
  if devices is None:
    devices = mesh_lib.pick_devices(shares, config.num_devices,
                                    config.num_seeds)
  mesh_lib.check_shares(shares, len(devices), config.num_seeds)
  mesh = mesh_lib.make_mesh(devices, mesh_lib.seed_shards(config.num_seeds,
                                                          len(devices)))
  num = mesh.shape[AXIS]
  per_device, host_envs, jittable_env = config.num_envs // num, (), None
  if env is not None:
    if callable(env) and not isinstance(env, base_env.Environment):
      env = env(per_device)  # A factory of batch_size.
    base_env.check_jittable_environment(env)
    if env.batch_size != per_device:
      raise ValueError(
          'env.batch_size must be the environments per device, batch_size '
          f'// replay_ratio // devices = {config.batch_size} // '
          f'{config.replay_ratio} // {num} = {per_device}, got '
          f'{env.batch_size}.')
  elif environments.family(config.env).on_host:
    # Host or compiled acting: the one place that decides.
    if jax.process_count() > 1:
      raise ValueError(f'env={config.env!r} is stepped on the host, in one '
                       f'process; got {jax.process_count()} processes.')
    host_envs = tuple(
        environments.get_environment(config.env, config.num_envs, dict(
            config.env_settings(), random_seed=config.seed + i))
        for i in range(config.num_seeds))
    env, jittable_env = host_envs[0], environments.family(
        config.env).jittable
  else:
    env = environments.get_environment(config.env, per_device,
                                       config.env_settings())
    jittable_env = config.env
  nets.check_observation_spec(
      config.net, env.single_observation_spec(),
      f'env {config.env!r} (its single_observation_spec())')
  agent = agent_lib.Agent(
      single_observation_spec=env.single_observation_spec(),
      single_action_spec=env.single_action_spec(),
      agent_settings=config.agent_settings(config.rule,
                                           precision=config.precision),
      batch_axis_name=AXIS)
  return EvalSetup(config=config, devices=tuple(devices), mesh=mesh, env=env,
                   host_envs=host_envs, jittable_env=jittable_env,
                   agent=agent, envs_per_device=per_device,
                   batch_per_device=config.batch_size // num,
                   capacity_per_device=config.buffer_capacity // num,
                   log_keys=log_keys(config.rule))


def seed_keys(config: config_lib.EvalConfig) -> chex.PRNGKey:
  """[S, 2]: the key of each run, `PRNGKey(config.seed + i)`."""
  return jnp.stack([jax.random.PRNGKey(config.seed + i)
                    for i in range(config.num_seeds)])


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


def make_eval(config: config_lib.EvalConfig, *, env=None, rule_params=None,
              devices=None) -> run_lib.Job:
  """The eval job of `config` (see the module's docstring).

  Args:
    config: the run's settings.
    env: the Environment of `env='custom'` (see `make_setup`).
    rule_params: the rule's meta-parameters (default: for 'disco_103' the
      Disco103 weights, found by `disco_rl.weights` when the first state
      is made; a hand-written rule's own placeholder parameters).
    devices: the devices (default: the config's choice).
  """
  setup = make_setup(config, devices, env)
  agent, mesh, rule = setup.agent, setup.mesh, setup.agent.update_rule
  num_devices = setup.batch_devices

  def per_seed(fn):
    """`fn(state, *args)` of one run mapped over the S runs (and over the
    leading axis of `args`); its outputs get [S]."""
    def mapped(state, *args):
      return jax.vmap(fn, in_axes=(_SEED_AXES,) + (0,) * len(args),
                      out_axes=(_SEED_AXES, 0))(state, *args)
    return mapped

  # -- The initial state (under `jit`, outside `shard_map`). ---------------

  def init_runs(rngs, env_state, timestep, rule_params):
    """The S runs from [S, 2] keys, their environments' state and first
    timestep ([D, S, ...]) and the rule's parameters."""
    def one_run(rng, env_state, timestep):
      learner_rng, actor_rng, loop_rng = jax.random.split(rng, 3)
      per_device = lambda x: jnp.broadcast_to(x, (num_devices,) + x.shape)
      return EvalState(
          learner_state=agent.initial_learner_state(learner_rng),
          actor_state=jax.tree.map(per_device,
                                   agent.initial_actor_state(actor_rng)),
          env_state=env_state, timestep=timestep,
          acc_rewards=jnp.zeros((num_devices, setup.envs_per_device),
                                jnp.float32),
          replay=jax.tree.map(per_device, replay.init(
              example_rollout(mesh_lib.local_block(timestep)),
              setup.capacity_per_device)),
          rule_params=rule_params, rng=loop_rng,
          step=jnp.zeros((), jnp.int32))

    states = jax.vmap(one_run, in_axes=(0, 1, 1), out_axes=_SEED_AXES)(
        rngs, env_state, timestep)
    return mesh_lib.map_per_device(  # [S, D, ...] -> [D, S, ...]
        lambda part: jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1), part),
        state_specs(), states)

  def example_rollout(timestep):
    """Zeros shaped like one device's [T, E, ...] stored rollout."""
    key = jax.random.PRNGKey(0)
    params = jax.eval_shape(agent.initial_learner_state, key).params
    actor_state = jax.eval_shape(agent.initial_actor_state, key)
    recorded, _ = jax.eval_shape(agent.actor_step, params, key, timestep,
                                 actor_state)
    rollout = replay.keep_outputs(types.ActorRollout.from_timestep(recorded),
                                  config.behaviour_outputs)
    return jax.tree.map(
        lambda s: jnp.zeros((config.rollout_len,) + s.shape, s.dtype),
        rollout)

  # -- One iteration of one run, on one device's view. ---------------------

  def act(state: EvalState, key):
    """One rollout of `rollout_len` steps in jittable environments."""
    rollout, actor_state, timestep, env_state = actors.unroll_jittable_actor(
        state.learner_state.params, state.actor_state, state.timestep,
        state.env_state, device_key(key), setup.env, config.rollout_len,
        agent.actor_step)
    return state.replace(actor_state=actor_state, timestep=timestep,
                         env_state=env_state), rollout

  def store(state: EvalState, rollout: types.ActorRollout):
    """Episode statistics of a [T, E] rollout, and the rollout buffered.

    With `debug_checks` the statistics hold the rollout's first bad entry
    (`rollout_checks.KEY`), raised on the host.
    """
    checks = {}
    if config.debug_checks:
      fault = rollout_checks.find_fault(rollout.actions, rollout.rewards,
                                        agent.num_actions, state.step,
                                        logits_t=rollout.logits)
      checks[rollout_checks.KEY] = rollout_checks.first_over_devices(
          fault, AXIS, rollout.rewards.shape[1])
    acc_rewards, returns = actors.accumulate_rewards(
        state.acc_rewards, (rollout.rewards, rollout.discounts))
    total, episodes = actors.episode_returns(returns, rollout.discounts)
    buffer = replay.add(state.replay, replay.keep_outputs(
        rollout, config.behaviour_outputs))
    return state.replace(acc_rewards=acc_rewards, replay=buffer), dict(
        return_sum=jax.lax.psum(total, AXIS),
        episodes=jax.lax.psum(episodes, AXIS), **checks)

  def learn(state: EvalState, key):
    """One learner step on a sampled batch; scalar logs averaged."""
    sample_key, step_key = jax.random.split(device_key(key))
    batch = replay.sample(state.replay, sample_key, setup.batch_per_device)
    learner_state, _, logs = agent.learner_step(
        step_key, batch, state.learner_state, state.actor_state,
        state.rule_params, False)
    scalars = jax.lax.pmean({k: logs[k] for k in setup.log_keys}, AXIS)
    scalars[divergence.KEY] = jax.lax.pmin(
        divergence.all_finite(learner_state.params), AXIS)
    return state.replace(learner_state=learner_state), scalars

  def maybe_learn(state: EvalState, key):
    """`learn` once each buffer holds a learner batch (else NaN logs).

    Every device's and run's buffer holds `min(C, (step + 1) * E)`
    trajectories after this iteration's rollout: the shared `step` decides,
    so all take the same branch.
    """
    stored = jnp.minimum(setup.capacity_per_device,
                         (state.step + 1) * setup.envs_per_device)
    learn_now = stored >= setup.batch_per_device

    def skip(state, key):
      del key
      nan = jnp.full((), jnp.nan, jnp.float32)
      return state, dict({k: nan for k in setup.log_keys},
                         **{divergence.KEY: jnp.ones((), jnp.float32)})

    state, logs = jax.lax.cond(learn_now, learn, skip, state, key)
    return state, dict(logs, learned=learn_now.astype(jnp.float32))

  def iteration(state: EvalState, rollout=None):
    """Act (unless the host acted: `rollout`), store, maybe learn: one
    iteration of one run."""
    rng, act_key, learn_key = iteration_keys(state.rng)
    if rollout is None:
      state, rollout = act(state, act_key)
    state, stats = store(state, rollout)
    state, logs = maybe_learn(state, learn_key)
    return state.replace(rng=rng, step=state.step + 1), dict(stats, **logs)

  def default_rule_params():
    params = rule_params
    if params is None:
      params = weights.starting_rule_params(rule, config.rule == 'disco_103')
    return mesh_lib.place(params, mesh_lib.replicated(mesh))

  def rule_shapes():
    return jax.eval_shape(rule.init_params, jax.random.PRNGKey(0))[0]

  init_program = compiled.placed(
      init_runs, mesh_lib.shardings(mesh, state_specs()),
      config.matmul_precision)

  def check(metrics, first_step):
    eval_report.raise_first_problem(config, metrics, first_step)

  # -- Acting: compiled with the iteration, or stepped on the host. --------

  def compiled_acting():
    """Every iteration of every run in one program: jit(shard_map(scan))."""
    def reset_and_init(rule_params):
      def reset(rng):  # One run's environments, [D, ...].
        env_rng, rng = jax.random.split(rng)
        env_state, timestep = jax.vmap(setup.env.reset)(
            jax.random.split(env_rng, num_devices))
        return rng, env_state, timestep
      rngs, env_state, timestep = jax.vmap(reset, out_axes=(0, 1, 1))(
          seed_keys(config))
      return init_program(rngs, env_state, timestep, rule_params)

    program = compiled.program(
        per_seed(iteration), length=config.steps_per_call, mesh=mesh,
        state_specs=state_specs(), output_specs=P(SEED),
        precision=config.matmul_precision)

    def step(state, count):
      state, metrics = program(state, count)
      check(metrics, int(mesh_lib.fetch(state.step)) - count)
      return state, metrics

    return dict(init=lambda: reset_and_init(default_rule_params()),
                state_shapes=lambda: jax.eval_shape(reset_and_init,
                                                    rule_shapes()),
                step=step, program=program)

  if setup.host_envs:
    acting = host_acting.make(
        setup, state_specs=state_specs(), seed_keys=seed_keys(config),
        iteration_keys=iteration_keys,
        actor_keys=lambda key: actor_keys(key, config.rollout_len),
        actor_step=agent.actor_step, learn_iteration=per_seed(iteration),
        init_program=init_program, rule_params=default_rule_params,
        rule_shapes=rule_shapes, check=check)
  else:
    acting = compiled_acting()
  rule_title = plots.rule_title(config.rule, rule_params is not None)
  return run_lib.Job(
      name='eval', config=config, setup=setup,
      rows=lambda metrics, first: eval_report.rows(
          config, setup.log_keys, metrics, first),
      summary=functools.partial(eval_report.summary, setup),
      outputs=lambda state, rows, run_dir, lead: eval_report.outputs(
          config, rule_title, rows, run_dir, lead),
      progress=lambda rows: dict(
          avg_return=f'{eval_report.recent_return(rows):.3f}'),
      steps_per_call=config.steps_per_call, warmup=setup.warmup,
      description=f'eval {config.rule} {eval_report.seeds_title(config)}',
      **acting)


def evaluate(job: run_lib.Job, state: EvalState, *, params=None, env=None,
             num_rollouts: int = 20, seed: int = 0,
             run: int = 0) -> dict[str, float]:
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
    run: which of the `num_seeds` runs (0: the one of `config.seed`).
  """
  setup, config = job.setup, job.config
  if not 0 <= run < config.num_seeds:
    raise ValueError(f'run must be in [0, num_seeds={config.num_seeds}), '
                     f'got {run}.')
  if params is None:
    params = jax.tree.map(lambda x: x[run],
                          mesh_lib.fetch(state.learner_state.params))
  if env is None and config.env == config_lib.CUSTOM_ENV:
    env = setup.env
  elif env is None and setup.jittable_env is None:
    raise ValueError(
        f'evaluate needs a jittable environment; env={config.env!r} is '
        'stepped on the host: pass env= (a jittable Environment).')
  elif env is None:
    env = environments.get_environment(
        setup.jittable_env, config.num_envs,
        dataclasses.replace(config, env=setup.jittable_env).env_settings())
  return actors.evaluate_policy(setup.agent, params, env,
                                jax.random.PRNGKey(seed), num_rollouts,
                                config.rollout_len, config.matmul_precision)


def rule(job: run_lib.Job, state: EvalState):
  """The rule's meta-parameters of an eval job's state, as NumPy arrays."""
  del job
  return mesh_lib.fetch(state.rule_params)
