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
  rows, summary, outputs, evaluate   on the host

`compiled.program` runs `steps_per_call` iterations of every run in one
jit(shard_map(scan)). Environments stepped in Python (the dm_env Catch,
envpool's Atari; `environments.family(name).on_host`) differ in acting
alone, decided once below: each actor step is a compiled call, the host
steps the environments, and storing and learning are one more call.

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
from disco_rl.loops import mesh as mesh_lib
from disco_rl.loops import replay
from disco_rl.loops import run as run_lib
from disco_rl.loops import run_dir as run_dir_lib
from disco_rl import metrics as metrics_lib
from disco_rl.networks import nets
from disco_rl import plots
from disco_rl import rollout_checks
from disco_rl import types
from disco_rl import utils
from disco_rl import weights

AXIS, SEED = mesh_lib.AXIS, mesh_lib.SEED_AXIS
PER_DEVICE = P(AXIS, SEED)  # [D, S, ...]: a row per device, the seeds split.
RETURNS_PLOT = 'returns.png'


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
  num_seeds, num_devices = config.num_seeds, setup.batch_devices

  def per_seed(fn):
    """`fn(state, *args)` of one run mapped over the S runs (and over the
    leading axis of `args`); its outputs get [S]."""
    def mapped(state, *args):
      return jax.vmap(fn, in_axes=(_SEED_AXES,) + (0,) * len(args),
                      out_axes=(_SEED_AXES, 0))(state, *args)
    return mapped

  def device_key(key):
    """A key of this device's own, from a replicated one."""
    return jax.random.fold_in(key, jax.lax.axis_index(AXIS))

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
    rng, act_key, learn_key = jax.random.split(state.rng, 3)
    if rollout is None:
      state, rollout = act(state, act_key)
    state, stats = store(state, rollout)
    state, logs = maybe_learn(state, learn_key)
    return state.replace(rng=rng, step=state.step + 1), dict(stats, **logs)

  def default_rule_params():
    if rule_params is not None:
      return rule_params
    return weights.starting_rule_params(rule, config.rule == 'disco_103')

  def rule_shapes():
    return jax.eval_shape(rule.init_params, jax.random.PRNGKey(0))[0]

  init_program = compiled.placed(
      init_runs, mesh_lib.shardings(mesh, state_specs()),
      config.matmul_precision)

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
      raise_first_problem(metrics, int(mesh_lib.fetch(state.step)) - count)
      return state, metrics

    return dict(
        init=lambda: reset_and_init(mesh_lib.place(
            default_rule_params(), mesh_lib.replicated(mesh))),
        state_shapes=lambda: jax.eval_shape(reset_and_init, rule_shapes()),
        step=step, compile=program.compile, lower=program.lower)

  def host_acting():
    """Each actor step one compiled call, the host environments stepped
    between; storing and learning one more call per iteration."""
    envs, env_states = list(setup.host_envs), [None] * num_seeds
    obs_spec = setup.env.single_observation_spec()

    def to_devices(timesteps):
      """S host timesteps [E, ...] as [D, S, E / D, ...] on the mesh."""
      def split(*xs):
        x = np.stack([np.asarray(x) for x in xs])  # [S, E, ...]
        x = x.reshape((num_seeds, num_devices, -1) + x.shape[2:])
        return np.swapaxes(x, 0, 1)
      timestep = jax.tree.map(split, *timesteps)
      timestep = timestep.replace(
          observation=jax.tree.map(lambda x, s: x.astype(s.dtype),
                                   timestep.observation, obs_spec),
          step_type=timestep.step_type.astype(np.int32),
          reward=timestep.reward.astype(np.float32))
      return mesh_lib.place(timestep, mesh_lib.shardings(mesh, PER_DEVICE))

    def actor_step(actor_state, params, keys, timestep):
      recorded, actor_state = jax.vmap(
          lambda p, k, t, a: agent.actor_step(p, device_key(k), t, a))(
              params, keys, timestep, actor_state)
      return actor_state, recorded

    act_program = compiled.program(
        actor_step, length=1, mesh=mesh, state_specs=PER_DEVICE,
        operand_specs=(P(SEED), P(SEED), PER_DEVICE),
        output_specs=PER_DEVICE, precision=config.matmul_precision)
    learn_program = compiled.program(
        per_seed(iteration), length=1, mesh=mesh, state_specs=state_specs(),
        operand_specs=(PER_DEVICE,), output_specs=P(SEED),
        precision=config.matmul_precision)

    def init():
      rngs, timesteps = [], []
      for j, key in enumerate(seed_keys(config)):
        env_rng, rng = jax.random.split(key)
        env_states[j], timestep = envs[j].reset(env_rng)
        rngs.append(rng)
        timesteps.append(timestep)
      return init_program(jnp.stack(rngs), None, to_devices(timesteps),
                          mesh_lib.place(default_rule_params(),
                                         mesh_lib.replicated(mesh)))

    def state_shapes():
      shape = (num_devices, num_seeds, setup.envs_per_device)
      timestep = types.EnvironmentTimestep(
          observation=jax.tree.map(
              lambda s: jax.ShapeDtypeStruct(shape + s.shape, s.dtype),
              obs_spec),
          step_type=jax.ShapeDtypeStruct(shape, jnp.int32),
          reward=jax.ShapeDtypeStruct(shape, jnp.float32))
      return jax.eval_shape(init_program, seed_keys(config), None, timestep,
                            rule_shapes())

    def one_iteration(state: EvalState):
      act_keys = [jax.random.split(jax.random.split(rng, 3)[1],
                                   config.rollout_len)
                  for rng in mesh_lib.fetch(state.rng)]
      timestep, actor_state, steps = state.timestep, state.actor_state, []
      for t in range(config.rollout_len):
        keys = mesh_lib.place(jnp.stack([k[t] for k in act_keys]),
                              mesh_lib.shardings(mesh, P(SEED)))
        actor_state, recorded = act_program(
            actor_state, 1, state.learner_state.params, keys, timestep)
        recorded = jax.tree.map(lambda x: x[0], recorded)  # [D, S, E/D...]
        timesteps = []
        for j, env in enumerate(envs):
          env_states[j], host_timestep = env.step(
              env_states[j], recorded.actions[:, j].reshape(-1))
          timesteps.append(host_timestep)
        timestep = to_devices(timesteps)
        steps.append(recorded)
      # [D, S, T, E, ...]: time after the device and seed axes.
      rollout = mesh_lib.place(types.ActorRollout.from_timestep(
          utils.tree_stack(steps, axis=2)), mesh_lib.shardings(
              mesh, PER_DEVICE))
      return learn_program(state.replace(timestep=timestep,
                                         actor_state=actor_state), 1,
                           rollout)

    def step(state, count):
      """`count` iterations, each checked as it ends."""
      calls = []
      for _ in range(count):
        state, metrics = one_iteration(state)
        raise_first_problem(metrics, int(mesh_lib.fetch(state.step)) - 1)
        calls.append(metrics)
      return state, jax.tree.map(lambda *xs: np.concatenate(xs), *calls)

    def host_state():
      """The environments' state, in the objects and beside them."""
      return dict(host_env=run_dir_lib.encode_object((envs, env_states)))

    def load_host_state(extra):
      envs[:], env_states[:] = run_dir_lib.decode_object(extra['host_env'])

    return dict(init=init, state_shapes=state_shapes, step=step,
                compile=lambda state: 0.0, lower=None, host_state=host_state,
                load_host_state=load_host_state)

  # -- On the host. ---------------------------------------------------------

  def raise_first_problem(metrics, first_step: int) -> None:
    """Raises for the first problem of a call's [K, S] `metrics` (and drops
    the checks' entries): a rollout that failed the debug checks
    (`RolloutError`) or a learner step whose loss or parameters are not
    finite (`DivergedError`), whichever came first, in seed order."""
    faults = metrics.pop(rollout_checks.KEY, None)
    flags = metrics.pop(divergence.KEY)
    for j in range(num_seeds):
      name = '' if num_seeds == 1 else f'seed {config.seed + j} '
      run_faults = (None if faults is None
                    else jax.tree.map(lambda x, j=j: x[:, j], faults))
      columns = {k: v[:, j] for k, v in metrics.items()}
      columns[divergence.KEY] = flags[:, j]
      divergence.raise_if_diverged(
          columns, ('total_loss',), first_step, name + 'loop step',
          "the agent's parameters", active=columns['learned'] > 0,
          hint='Try a smaller learning_rate (--learning-rate).',
          until=rollout_checks.first_index(run_faults))
      rollout_checks.raise_if_faulty(run_faults, name + 'rollout')

  def rows(metrics, first_step: int) -> run_lib.Rows:
    """One row per iteration and seed, in that order, from [K, S] metrics."""
    per_iteration = config.num_envs * config.rollout_len
    out = []
    for i in range(len(metrics['episodes'])):
      for j in range(num_seeds):
        episodes = float(metrics['episodes'][i, j])
        out.append(dict(
            step=first_step + i, seed=config.seed + j,
            env_steps=(first_step + i + 1) * per_iteration,
            episodes=episodes,
            avg_return=(float(metrics['return_sum'][i, j]) / episodes
                        if episodes else float('nan')),
            learned=int(metrics['learned'][i, j]),
            **{k: float(metrics[k][i, j]) for k in setup.log_keys}))
    return out

  def seed_rows(rows):
    """The rows of each run, in seed order (rows alternate over seeds)."""
    return [rows[j::num_seeds] for j in range(num_seeds)]

  def summary(state: EvalState, rows, timing: run_lib.Timing):
    """Final average return (last 100 iterations; over the runs and per
    run), speed, memory."""
    per_run = seed_rows(rows)
    rss = [r['rss_mb'] for r in per_run[0]] or [float('nan')]
    one_buffer = jax.tree.map(lambda x: x[0, 0], state.replay)
    return dict(
        final_avg_return=recent_return(rows, num_seeds),
        final_avg_return_per_seed={
            str(config.seed + j): recent_return(run_rows)
            for j, run_rows in enumerate(per_run)},
        steps=max(0, len(per_run[0]) - setup.warmup),
        iterations=len(per_run[0]),
        compile_and_first_step_s=timing.first_call_s,
        steps_per_second=timing.steps_per_second,
        peak_memory_mb=metrics_lib.peak_memory_mb(),
        rss_mb_at_100=rss[min(99, len(rss) - 1)], rss_mb_final=rss[-1],
        devices=setup.num_devices, processes=jax.process_count(),
        replay_bytes_per_trajectory=replay.bytes_per_trajectory(one_buffer))

  def outputs(state, rows, run_dir: run_dir_lib.RunDir, lead: bool):
    """The learning curve of every run (`returns.png`)."""
    del state
    if not lead:
      return {}
    per_run = seed_rows(rows)
    path = plots.plot_runs(
        [r['env_steps'] for r in per_run[0]],
        {f'seed {config.seed + j}': [r['avg_return'] for r in run_rows]
         for j, run_rows in enumerate(per_run)},
        run_dir.file(RETURNS_PLOT), 'environment steps', 'average return',
        f'{rule_title} on {env_title(config)} ({seeds_title(config)})',
        smooth=20)
    return dict(plot_png=str(path))

  def evaluate(state: EvalState, params=None, env=None,
               num_rollouts: int = 20, seed: int = 0,
               run: int = 0) -> dict[str, float]:
    """The policy acting without learning (`actors.evaluate_policy`).

    Args:
      state: the job's state (its parameters are the default).
      params: the network's parameters (default: run `run`'s current ones).
      env: a jittable `Environment` whose observations fit the agent
        (default: the run's own; for a host one its jittable twin).
      num_rollouts: rollouts of `rollout_len` steps.
      seed: the acting key's seed.
      run: which of the `num_seeds` runs (0: the one of `config.seed`).
    """
    if not 0 <= run < num_seeds:
      raise ValueError(f'run must be in [0, num_seeds={num_seeds}), got '
                       f'{run}.')
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
    return actors.evaluate_policy(agent, params, env,
                                  jax.random.PRNGKey(seed), num_rollouts,
                                  config.rollout_len, config.matmul_precision)

  rule_title = plots.rule_title(config.rule, rule_params is not None)
  acting = host_acting() if setup.host_envs else compiled_acting()
  return run_lib.Job(
      name='eval', config=config, setup=setup, rows=rows, summary=summary,
      outputs=outputs, evaluate=evaluate,
      progress=lambda rows: dict(
          avg_return=f'{recent_return(rows, num_seeds):.3f}'),
      rule=lambda state: mesh_lib.fetch(state.rule_params),
      steps_per_call=config.steps_per_call, rows_per_step=num_seeds,
      warmup=setup.warmup,
      description=f'eval {config.rule} {seeds_title(config)}', **acting)


def recent_return(rows, num_seeds: int = 1) -> float:
  """The mean `avg_return` of the last 100 iterations (of all runs)."""
  recent = np.asarray([r['avg_return'] for r in rows[-100 * num_seeds:]],
                      float)
  return (float(np.nanmean(recent)) if np.isfinite(recent).any()
          else float('nan'))


def seeds_title(config: config_lib.EvalConfig) -> str:
  """'seed 3' or 'seeds 0-7'."""
  if config.num_seeds == 1:
    return f'seed {config.seed}'
  return f'seeds {config.seed}-{config.seed + config.num_seeds - 1}'


def env_title(config: config_lib.EvalConfig) -> str:
  """'jittable_catch 8x8', 'gymnax:DeepSea-bsuite size=10', 'custom'."""
  if config.env in config_lib.CATCH_ENVS:
    return f'{config.env} {config.rows}x{config.columns}'
  kwargs = ','.join(f'{k}={v}' for k, v in config.env_kwargs.items())
  return f'{config.env} {kwargs}'.strip()
