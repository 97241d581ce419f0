# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval job: an agent trained by a fixed update rule (e.g. Disco103).

As in the upstream eval notebook, each iteration acts for one rollout in a
few environments, stores the trajectories in a FIFO replay buffer and, once
the buffer holds a learner batch, takes one learner step on a uniformly
sampled batch.

`EvalLoop` (jittable environments) compiles `steps_per_call` iterations into
one `lax.scan` inside one `jax.jit` program over the device mesh
(`jax.shard_map`): acting, the buffer, sampling, the learning gate and the
learner step never leave the devices, the metrics of all iterations come
back together, and the loop state is donated so the buffer is updated in
place. `HostEvalLoop` (dm_env environments, stepped in Python) acts one
compiled actor step at a time and then runs the same buffer-and-learn
program.

Each device holds its share of the environments, of the buffer and of the
learner batch; gradients and the rule's statistics are averaged across
devices (the agent's `pmean` over `devices.AXIS`), so the replicated
parameters stay identical.

`config.num_seeds` independent runs (seeds `seed`, `seed + 1`, ...) share
one program, as purejaxrl's `vmap(make_train(config))`: every part of the
state but the iteration count has a seed axis S, every device holds its
share of each run, and the iteration is `vmap`ped over the seeds. Run `i`
computes what a run with `seed + i` alone computes (to float rounding).
"""

import dataclasses
import pathlib
from typing import Any

import chex
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np

from disco_rl import actors
from disco_rl import agent as agent_lib
from disco_rl import types
from disco_rl import utils
from disco_rl import weights
from disco_rl.environments import base as base_env
from disco_rl.environments import get_environment
from disco_rl.environments.wrappers import batched_env
from disco_rl.loops import checkpoint
from disco_rl.loops import config as config_lib
from disco_rl.loops import devices as devices_lib
from disco_rl.loops import divergence
from disco_rl.loops import driver
from disco_rl.loops import program
from disco_rl.loops import replay
from disco_rl.loops import rollout_checks
from disco_rl.loops import reporting
from disco_rl.networks import nets

AXIS = devices_lib.AXIS


@chex.dataclass
class EvalState:
  """Everything the eval loop carries from one iteration to the next.

  Replicated (the same on every device): `learner_state` [S, ...], `rng`
  [S, 2] and `step` [] (shared by the S seeds' runs, which go in step).
  Per device (a leading device axis D, sharded over the mesh):
  `actor_state` [D, S, ...], `env_state` [D, S, ...], `timestep`
  [D, S, E, ...], `acc_rewards` [D, S, E] and `replay` [D, S, C, ...], with
  E environments and C buffer slots per device and seed.

  Attributes:
    learner_state: the agent's parameters, optimiser and rule state.
    actor_state: the network's acting state.
    env_state: the jittable environments' state (None for host ones).
    timestep: the environments' current timestep.
    acc_rewards: each environment's return so far in its current episode.
    replay: the replay buffer.
    rng: the key the next iteration splits.
    step: [] int32, iterations done.
  """

  learner_state: agent_lib.LearnerState
  actor_state: types.HaikuState
  env_state: Any
  timestep: types.EnvironmentTimestep
  acc_rewards: chex.Array
  replay: replay.ReplayState
  rng: chex.PRNGKey
  step: chex.Array


def state_specs() -> EvalState:
  """The `PartitionSpec` of each part of an `EvalState` (a tree prefix)."""
  return EvalState(learner_state=P(), actor_state=P(AXIS),
                   env_state=P(AXIS), timestep=P(AXIS), acc_rewards=P(AXIS),
                   replay=P(AXIS), rng=P(), step=P())


def _map_per_device(fn, state: EvalState) -> EvalState:
  """Applies `fn` to the per-device parts of a state (inside shard_map)."""
  return devices_lib.map_per_device(fn, state_specs(), state)


def _seed_axes() -> EvalState:
  """The seed axis of each part of a state without its device axis (a
  `vmap` axes prefix): 0, but none for the shared `step`."""
  return EvalState(learner_state=0, actor_state=0, env_state=0, timestep=0,
                   acc_rewards=0, replay=0, rng=0, step=None)


def _per_seed(fn):
  """`fn(state, *args) -> (state, metrics)` for one seed's state, mapped
  over the S seeds of a state without its device axis; metrics get [S]."""
  return jax.vmap(fn, in_axes=(_seed_axes(),), out_axes=(_seed_axes(), 0))


def seed_keys(config: config_lib.EvalConfig) -> chex.PRNGKey:
  """[S, 2]: the key of each run, `PRNGKey(config.seed + i)`."""
  return jnp.stack([jax.random.PRNGKey(config.seed + i)
                    for i in range(config.num_seeds)])


def _device_key(key: chex.PRNGKey) -> chex.PRNGKey:
  """A key of this device's own, derived from a replicated one."""
  return jax.random.fold_in(key, jax.lax.axis_index(AXIS))


def _iteration_keys(rng: chex.PRNGKey):
  """(next loop key, acting key, learning key), replicated."""
  return tuple(jax.random.split(rng, 3))


def default_log_keys(rule: str) -> tuple[str, ...]:
  """The learner scalars the eval job records per step, for a rule."""
  common = ('total_loss', 'global_gradient_norm', 'global_update_norm',
            'entropy')
  if rule == 'disco_103':
    return common + ('pi_loss', 'q_loss', 'aux_kl_loss', 'pi_hat_entropy')
  return common + ('pg_advs', 'avg_value')


def make_agent(config: config_lib.EvalConfig,
               env: base_env.Environment) -> agent_lib.Agent:
  """The agent of an eval run, learning under the mesh axis.

  Raises:
    ValueError: if the environment's observations do not fit `config.net`
      (e.g. 'conv' on vectors), naming the environment and the shapes.
  """
  nets.check_observation_spec(
      config.net, env.single_observation_spec(),
      f'env {config.env!r} (its single_observation_spec())')
  settings = config_lib.agent_settings(
      config.rule, config.learning_rate, config.dense, config.model_lstm_size,
      config.model_head_hiddens, config.precision, net=config.net,
      conv_channels=config.conv_channels, conv_kernel=config.conv_kernel)
  return agent_lib.Agent(
      single_observation_spec=env.single_observation_spec(),
      single_action_spec=env.single_action_spec(),
      agent_settings=settings, batch_axis_name=AXIS)


def env_settings(config: config_lib.EvalConfig,
                 seed: int | None = None) -> dict[str, Any]:
  """The settings `get_environment` gets for `config.env`.

  Catch: its board (`rows`, `columns`), the host one also `random_seed`,
  plus `env_kwargs`; gymnax/craftax: `env_kwargs`.
  """
  settings = dict(config.env_kwargs)
  if config.env in config_lib.CATCH_ENVS:
    settings.update(rows=config.rows, columns=config.columns)
    if seed is not None:
      settings['random_seed'] = seed
  return settings


def default_rule_params(config: config_lib.EvalConfig,
                        agent: agent_lib.Agent, load: bool = True):
  """Disco103's weights, or the (empty) parameters of a hand-written rule.

  With `load=False` a fresh meta-network stands in for the weights (same
  structure; e.g. to be replaced by a checkpoint's).
  """
  return weights.starting_rule_params(
      agent.update_rule, config.rule == 'disco_103' and load)


class _EvalLoopBase:
  """Agent, devices, initial state and the buffer-and-learn step."""

  def __init__(self, config: config_lib.EvalConfig, rule_params=None,
               devices=None, load_weights: bool = True,
               env: base_env.Environment | None = None):
    config_lib.check_eval_config(config)
    if (env is None) != (config.env != config_lib.CUSTOM_ENV):
      raise ValueError(
          "An Environment object goes with env='custom' and env='custom' "
          'needs one: pass both EvalConfig(env=\'custom\', ...) and env= '
          f'(got env={config.env!r} and an env object: {env is not None}).')
    self.config = config
    self._given_env = env
    self.devices = list(devices) if devices is not None else (
        devices_lib.pick_devices(
            {'number of environments (batch_size // replay_ratio)':
                 config.num_envs,
             'batch_size': config.batch_size,
             'buffer_capacity': config.buffer_capacity},
            config.num_devices))
    num = len(self.devices)
    self.mesh = devices_lib.make_mesh(self.devices)
    self.envs_per_device = config.num_envs // num
    self.batch_per_device = config.batch_size // num
    self.capacity_per_device = config.buffer_capacity // num
    self.env = self._make_env()
    # Whether the compiled programs check every acted rollout.
    self.debug_checks = config.debug_checks
    self.agent = make_agent(config, self.env)
    if rule_params is None:
      rule_params = default_rule_params(config, self.agent, load_weights)
    self.rule_params = devices_lib.place(
        rule_params, devices_lib.replicated(self.mesh))
    self.log_keys = default_log_keys(config.rule)

  def _make_env(self) -> base_env.Environment:
    raise NotImplementedError

  def _over_mesh(self, fn, in_specs, out_specs, donate_state=False):
    """`fn` compiled over the mesh at `config.matmul_precision`."""
    return program.over_mesh(fn, self.mesh, in_specs, out_specs,
                             self.config.matmul_precision, donate_state)

  def _raise_first_problem(self, metrics, state: EvalState,
                           num_steps: int) -> None:
    """Raises for the first problem of a call's [K, S] host `metrics` (and
    drops the checks' entries): a rollout that failed the debug checks
    (`RolloutError`), or a learner step whose loss or parameters are not
    finite (`divergence.DivergedError`), whichever came first in a run (a
    step acts before it learns); the runs are checked in seed order."""
    faults = metrics.pop(rollout_checks.KEY, None)
    flags = metrics.pop(divergence.KEY)
    first_step = int(devices_lib.fetch(state.step)) - num_steps
    num_seeds = self.config.num_seeds
    for j in range(num_seeds):
      run = '' if num_seeds == 1 else f'seed {self.config.seed + j} '
      run_faults = (None if faults is None
                    else jax.tree.map(lambda x, j=j: x[:, j], faults))
      columns = {k: v[:, j] for k, v in metrics.items()}
      columns[divergence.KEY] = flags[:, j]
      divergence.raise_if_diverged(
          columns, ('total_loss',), first_step, run + 'loop step',
          "the agent's parameters", active=columns['learned'] > 0,
          hint='Try a smaller learning_rate (--learning-rate).',
          until=rollout_checks.first_index(run_faults))
      rollout_checks.raise_if_faulty(run_faults, run + 'rollout')

  # -- Per-device pieces (run inside shard_map) ------------------------------

  def _example_rollout(self, timestep) -> types.ActorRollout:
    """Zeros shaped like one device's [T, E, ...] stored rollout."""
    params = jax.eval_shape(self.agent.initial_learner_state,
                            jax.random.PRNGKey(0)).params
    actor_state = jax.eval_shape(self.agent.initial_actor_state,
                                 jax.random.PRNGKey(0))
    recorded, _ = jax.eval_shape(self.agent.actor_step, params,
                                 jax.random.PRNGKey(0), timestep, actor_state)
    rollout = replay.keep_outputs(types.ActorRollout.from_timestep(recorded),
                                  self.config.behaviour_outputs)
    return jax.tree.map(
        lambda s: jnp.zeros((self.config.rollout_len,) + s.shape, s.dtype),
        rollout)

  def _observe(self, state: EvalState, rollout: types.ActorRollout):
    """Episode statistics of a [T, E] rollout, and the rollout buffered.

    With `config.debug_checks` the stats also hold the rollout's first bad
    entry (`rollout_checks.KEY`: policy logits that are not finite, an
    action out of range or a reward that is not finite), raised on the host.
    """
    checks = {}
    if self.debug_checks:
      fault = rollout_checks.find_fault(rollout.actions, rollout.rewards,
                                        self.agent.num_actions, state.step,
                                        logits_t=rollout.logits)
      checks[rollout_checks.KEY] = rollout_checks.first_over_devices(
          fault, AXIS, rollout.rewards.shape[1])
    acc_rewards, returns = actors.accumulate_rewards(
        state.acc_rewards, (rollout.rewards, rollout.discounts))
    total, episodes = actors.episode_returns(returns, rollout.discounts)
    stats = dict(return_sum=jax.lax.psum(total, AXIS),
                 episodes=jax.lax.psum(episodes, AXIS), **checks)
    buffer = replay.add(
        state.replay, replay.keep_outputs(rollout,
                                          self.config.behaviour_outputs))
    return state.replace(acc_rewards=acc_rewards, replay=buffer), stats

  def _learn(self, state: EvalState, key: chex.PRNGKey, rule_params):
    """One learner step on a sampled batch; scalar logs averaged."""
    sample_key, step_key = jax.random.split(_device_key(key))
    batch = replay.sample(state.replay, sample_key, self.batch_per_device)
    learner_state, _, logs = self.agent.learner_step(
        step_key, batch, state.learner_state, state.actor_state, rule_params,
        False)
    scalars = jax.lax.pmean({k: logs[k] for k in self.log_keys}, AXIS)
    scalars[divergence.KEY] = jax.lax.pmin(
        divergence.all_finite(learner_state.params), AXIS)
    return state.replace(learner_state=learner_state), scalars

  def _maybe_learn(self, state: EvalState, key, rule_params):
    """The learner step once each buffer holds a learner batch (else NaN logs).

    Every device's (and seed's) buffer holds as many trajectories, `(step +
    1) * E` up to its capacity after this iteration's rollout: the shared
    `step` decides, so every device and seed takes the same branch (a
    `cond`, also under the seeds' `vmap`).
    """
    stored = jnp.minimum(self.capacity_per_device,
                         (state.step + 1) * self.envs_per_device)
    learn = stored >= self.batch_per_device

    def skip(state, key, rule_params):
      del key, rule_params
      logs = {k: jnp.full((), jnp.nan, jnp.float32) for k in self.log_keys}
      return state, dict(logs, **{divergence.KEY: jnp.ones((), jnp.float32)})

    state, logs = jax.lax.cond(learn, self._learn, skip, state, key,
                               rule_params)
    return state, dict(logs, learned=learn.astype(jnp.float32))

  # -- Host side -------------------------------------------------------------

  def _initial_states(self, rngs: chex.PRNGKey, env_state,
                      timestep) -> EvalState:
    """The state of S runs from their [S, 2] keys and environments ([D, S,
    ...] parts); per-device parts [D, S, ...] (traced under jit)."""
    states = jax.vmap(self._initial_state, in_axes=(0, 1, 1),
                      out_axes=_seed_axes())(rngs, env_state, timestep)
    return _map_per_device(
        lambda part: jax.tree.map(lambda x: jnp.moveaxis(x, 0, 1), part),
        states)

  def _initial_state(self, rng: chex.PRNGKey, env_state, timestep) -> EvalState:
    """One run's state: per-device parts get their leading device axis."""
    num = len(self.devices)
    learner_rng, actor_rng, loop_rng = jax.random.split(rng, 3)
    per_device = lambda x: jnp.broadcast_to(x, (num,) + jnp.shape(x))
    example = devices_lib.local_block(timestep)
    return EvalState(
        learner_state=self.agent.initial_learner_state(learner_rng),
        actor_state=jax.tree.map(per_device,
                                 self.agent.initial_actor_state(actor_rng)),
        env_state=env_state,
        timestep=timestep,
        acc_rewards=jnp.zeros((num, self.envs_per_device), jnp.float32),
        replay=jax.tree.map(per_device, replay.init(
            self._example_rollout(example), self.capacity_per_device)),
        rng=loop_rng,
        step=jnp.zeros((), jnp.int32),
    )

  def _state_shardings(self):
    return devices_lib.shardings(self.mesh, state_specs())

  def bytes_per_trajectory(self, state: EvalState) -> int:
    """Bytes one stored trajectory of one run takes in the replay buffer."""
    one_run = jax.tree.map(lambda x: x[0],
                           devices_lib.local_block(state.replay))
    return replay.bytes_per_trajectory(one_run)

  def metrics_rows(self, metrics: dict[str, np.ndarray], first_step: int
                   ) -> list[dict[str, float]]:
    """CSV rows from the [K, S] metrics of K iterations starting at
    `first_step`: one per iteration and seed, in that order."""
    rows = []
    per_iteration = self.config.num_envs * self.config.rollout_len
    num_steps, num_seeds = np.shape(metrics['episodes'])
    for i in range(num_steps):
      step = first_step + i
      for j in range(num_seeds):
        episodes = float(metrics['episodes'][i, j])
        row = dict(step=step, seed=self.config.seed + j,
                   env_steps=(step + 1) * per_iteration, episodes=episodes,
                   avg_return=(float(metrics['return_sum'][i, j]) / episodes
                               if episodes else float('nan')),
                   learned=int(metrics['learned'][i, j]))
        row.update({k: float(metrics[k][i, j]) for k in self.log_keys})
        rows.append(row)
    return rows


class EvalLoop(_EvalLoopBase):
  """The fused eval loop for jittable environments.

  Usage:
    loop = EvalLoop(config)
    state = loop.init(jax.random.PRNGKey(config.seed))
    state, metrics = loop.run(state, config.steps_per_call)

  `metrics` holds one [K] NumPy array per name (K iterations run):
  `return_sum` and `episodes` of the episodes that ended, `learned` (1.0 if
  the iteration took a learner step) and the learner scalars (`log_keys`;
  NaN before learning starts).
  """

  def __init__(self, config: config_lib.EvalConfig, rule_params=None,
               devices=None, load_weights: bool = True,
               env: base_env.Environment | None = None):
    """Builds the environment, the agent and the compiled programs.

    Args:
      config: the run's settings.
      rule_params: the rule's meta-parameters (default: see
        `default_rule_params`).
      devices: the devices to use (default: the config's choice).
      load_weights: see `default_rule_params`.
      env: with `config.env == 'custom'`, a jittable `Environment` of
        `batch_size // replay_ratio // devices` instances (one device's
        share), or a function of that number that builds one (e.g. the
        class); checked now (`base.check_jittable_environment`).
    """
    if config.env == 'catch':
      raise ValueError("env='catch' is stepped on the host: use HostEvalLoop "
                       '(or make_eval_loop).')
    super().__init__(config, rule_params, devices, load_weights, env)
    specs = state_specs()
    self._init = program.on_mesh(self._initial_state_on_device,
                                 self._state_shardings(),
                                 config.matmul_precision)
    self._run = self._over_mesh(self._run_on_device, (specs, P(), P()),
                                (specs, P()), donate_state=True)

  def _make_env(self) -> base_env.Environment:
    env = self._given_env
    if env is None:
      return get_environment(self.config.env,
                             batch_size=self.envs_per_device,
                             env_settings=env_settings(self.config))
    if callable(env) and not isinstance(env, base_env.Environment):
      env = env(self.envs_per_device)  # A factory of batch_size.
    base_env.check_jittable_environment(env)
    if env.batch_size != self.envs_per_device:
      raise ValueError(
          f'env.batch_size must be the environments per device, '
          f'batch_size // replay_ratio // devices = {self.config.batch_size}'
          f' // {self.config.replay_ratio} // {len(self.devices)} = '
          f'{self.envs_per_device}, got {env.batch_size}.')
    return env

  def _initial_state_on_device(self, rngs):
    def reset(rng):  # One run's environments, [D, ...].
      env_rng, rng = jax.random.split(rng)
      env_state, timestep = jax.vmap(self.env.reset)(
          jax.random.split(env_rng, len(self.devices)))
      return rng, env_state, timestep

    rngs, env_state, timestep = jax.vmap(reset, out_axes=(0, 1, 1))(rngs)
    return self._initial_states(rngs, env_state, timestep)

  def init(self, rngs: chex.PRNGKey) -> EvalState:
    """The initial state of the runs, placed on the mesh.

    Args:
      rngs: [S, 2], one key per run (`seed_keys(config)`), or [2] when
        `config.num_seeds` is 1.
    """
    return self._init(_check_keys(rngs, self.config.num_seeds))

  def _iteration(self, state: EvalState, key_set, rule_params):
    """Act, buffer, maybe learn: one iteration on one device's view."""
    rng, act_key, learn_key = key_set
    rollout, actor_state, timestep, env_state = actors.unroll_jittable_actor(
        state.learner_state.params, state.actor_state, state.timestep,
        state.env_state, _device_key(act_key), self.env,
        self.config.rollout_len, self.agent.actor_step)
    state = state.replace(actor_state=actor_state, timestep=timestep,
                          env_state=env_state)
    state, stats = self._observe(state, rollout)
    state, logs = self._maybe_learn(state, learn_key, rule_params)
    return state.replace(rng=rng, step=state.step + 1), dict(stats, **logs)

  def _run_on_device(self, state: EvalState, num_steps, rule_params):
    def iteration(state, rule_params):
      def one_run(state):
        return self._iteration(state, _iteration_keys(state.rng), rule_params)
      return _per_seed(one_run)(state)

    # Per-device parts arrive as [1, ...] blocks.
    state, metrics = driver.scan_up_to(
        iteration, _map_per_device(devices_lib.local_block, state), num_steps,
        self.config.steps_per_call, rule_params)
    return _map_per_device(devices_lib.device_block, state), metrics

  def lower(self, state: EvalState) -> jax.stages.Lowered:
    """The run program lowered for `state` (`.compile()`, cost analysis)."""
    return self._run.lower(state, jnp.int32(1), self.rule_params)

  def compile(self, state: EvalState) -> float:
    """Compiles the run program for `state` before the first call (a point
    where a run can stop before any step); `run` then uses it.

    Returns:
      The seconds it took (0.0 if it was compiled before).
    """
    return self._run.compile(state, jnp.int32(1), self.rule_params)

  def run(self, state: EvalState, num_steps: int | None = None):
    """Runs `num_steps` (<= steps_per_call, default all) iterations.

    One compiled program whatever `num_steps` is. The given state is donated
    (its buffers are reused): use the returned one.

    Returns:
      (new state, {name: [num_steps, S] NumPy array}).
    """
    per_call = self.config.steps_per_call
    num_steps = per_call if num_steps is None else int(num_steps)
    if not 0 < num_steps <= per_call:
      raise ValueError(f'num_steps must be in [1, steps_per_call={per_call}]'
                       f', got {num_steps}.')
    state, metrics = self._run(state, jnp.int32(num_steps), self.rule_params)
    metrics = jax.tree.map(lambda v: v[:num_steps],
                           devices_lib.fetch(metrics))
    self._raise_first_problem(metrics, state, num_steps)
    return state, metrics


class HostEvalLoop(_EvalLoopBase):
  """The eval loop for a host (dm_env) environment, e.g. `env='catch'`.

  Each actor step is one compiled program over the mesh; the host steps the
  environments with the chosen actions; buffering and learning run as one
  compiled program per rollout, the same as in `EvalLoop`. One process only.
  """

  def __init__(self, config: config_lib.EvalConfig, rule_params=None,
               devices=None, load_weights: bool = True):
    super().__init__(config, rule_params, devices, load_weights)
    if jax.process_count() > 1:
      raise ValueError('A host environment runs in one process; got '
                       f'{jax.process_count()} processes.')
    specs = state_specs()
    self.host_env_state = None
    self._init = program.on_mesh(self._initial_states,
                                 self._state_shardings(),
                                 config.matmul_precision)
    self._act = self._over_mesh(self._act_on_device,
                                (P(), P(), P(AXIS), P(AXIS)),
                                (P(AXIS), P(AXIS)))
    self._learn_program = self._over_mesh(
        self._record_and_learn_on_device, (specs, P(AXIS), P()),
        (specs, P()), donate_state=True)

  def _make_env(self) -> base_env.Environment:
    return get_environment(
        self.config.env, batch_size=self.config.num_envs,
        env_settings=env_settings(self.config, seed=self.config.seed))

  def _to_devices(self, host_timestep) -> types.EnvironmentTimestep:
    """[E, ...] host arrays as [D, 1, E / D, ...] blocks (one run)."""
    num = len(self.devices)
    split = jax.tree.map(
        lambda x: np.asarray(x).reshape((num, 1, -1) + np.shape(x)[1:]),
        host_timestep)
    return devices_lib.place(split, devices_lib.per_device(self.mesh))

  def init(self, rngs: chex.PRNGKey) -> EvalState:
    """Resets the host environments; the initial state on the mesh.

    Args:
      rngs: [1, 2] (`seed_keys(config)`) or [2]: the run's key.
    """
    rngs = _check_keys(rngs, 1)
    env_rng, rng = jax.random.split(rngs[0])
    self.host_env_state, host_timestep = self.env.reset(env_rng)
    host_timestep = jax.tree.map(np.asarray, host_timestep)
    return self._init(rng[None], None, self._to_devices(host_timestep))

  def _act_on_device(self, params, key, timestep, actor_state):
    def act(params, timestep, actor_state):
      return self.agent.actor_step(params, _device_key(key), timestep,
                                   actor_state)
    recorded, actor_state = jax.vmap(act)(
        params, devices_lib.local_block(timestep),
        devices_lib.local_block(actor_state))
    return devices_lib.device_block((recorded, actor_state))

  def _record_and_learn_on_device(self, state, rollout, rule_params):
    def one_run(state, rollout):
      rng, _, learn_key = _iteration_keys(state.rng)
      state, stats = self._observe(state, rollout)
      state, logs = self._maybe_learn(state, learn_key, rule_params)
      return state.replace(rng=rng, step=state.step + 1), dict(stats, **logs)

    state, metrics = jax.vmap(
        one_run, in_axes=(_seed_axes(), 0), out_axes=(_seed_axes(), 0))(
            _map_per_device(devices_lib.local_block, state),
            devices_lib.local_block(rollout))
    return _map_per_device(devices_lib.device_block, state), metrics

  def _iterate(self, state: EvalState):
    _, act_key, _ = _iteration_keys(state.rng[0])
    timestep, actor_state = state.timestep, state.actor_state
    steps = []
    for step_key in jax.random.split(act_key, self.config.rollout_len):
      recorded, actor_state = self._act(state.learner_state.params, step_key,
                                        timestep, actor_state)
      actions = np.asarray(recorded.actions).reshape(-1)
      self.host_env_state, host_timestep = self.env.step(
          self.host_env_state, actions)
      timestep = self._to_devices(jax.tree.map(np.asarray, host_timestep))
      steps.append(recorded)
    # [D, S, T, E, ...]: time after the device and seed axes.
    rollout = types.ActorRollout.from_timestep(utils.tree_stack(steps, axis=2))
    state = state.replace(timestep=timestep, actor_state=actor_state)
    state, metrics = self._learn_program(state, rollout, self.rule_params)
    return state, devices_lib.fetch(metrics)

  def compile(self, state: EvalState) -> float:
    """Nothing ahead: the actor step and the learn program compile at their
    first use, inside the first call. Returns 0.0."""
    del state
    return 0.0

  def run(self, state: EvalState, num_steps: int | None = None):
    """Runs `num_steps` iterations (default `steps_per_call`).

    Returns:
      (new state, {name: [num_steps] NumPy array}), as `EvalLoop.run`.
    """
    num_steps = self.config.steps_per_call if num_steps is None else int(
        num_steps)
    if num_steps < 1:
      raise ValueError(f'num_steps must be >= 1, got {num_steps}.')
    collected = []
    for _ in range(num_steps):
      state, metrics = self._iterate(state)
      # Checked after every iteration: a fault stops the run at once.
      metrics = jax.tree.map(lambda x: np.asarray(x)[None], metrics)
      self._raise_first_problem(metrics, state, 1)
      collected.append(metrics)
    return state, jax.tree.map(lambda *steps: np.concatenate(steps),
                               *collected)


def _check_keys(rngs: chex.PRNGKey, num_seeds: int) -> chex.PRNGKey:
  """[S, 2] keys (a single [2] key is one run's)."""
  rngs = jnp.asarray(rngs)
  if rngs.shape == (2,):
    rngs = rngs[None]
  if rngs.shape != (num_seeds, 2):
    raise ValueError(f'rngs must be [num_seeds={num_seeds}, 2] keys (one '
                     f'per run, see seed_keys), got shape {rngs.shape}.')
  return rngs


def make_eval_loop(config: config_lib.EvalConfig, rule_params=None,
                   devices=None, load_weights: bool = True,
                   env: base_env.Environment | None = None
                   ) -> EvalLoop | HostEvalLoop:
  """The loop for the configured environment (fused unless it is a host one).

  `load_weights=False`: without `rule_params`, a fresh meta-network stands
  in for Disco103's weights (a run about to be restored from a checkpoint).
  `env`: the jittable Environment of `env='custom'` (see `EvalLoop`).
  """
  config_lib.check_eval_config(config)
  if config.env == 'catch':
    return HostEvalLoop(config, rule_params=rule_params, devices=devices,
                        load_weights=load_weights)
  return EvalLoop(config, rule_params=rule_params, devices=devices,
                  load_weights=load_weights, env=env)


def evaluate_policy(agent: agent_lib.Agent, params, env: base_env.Environment,
                    rng: chex.PRNGKey, num_rollouts: int, rollout_len: int
                    ) -> dict[str, float]:
  """Average return of a policy acting (sampling, no learning) in `env`.

  Args:
    agent: the agent whose network acts.
    params: the network's parameters.
    env: a jittable environment (its batch acts at once).
    rng: a random key.
    num_rollouts: rollouts of `rollout_len` steps to act for.
    rollout_len: steps per rollout.

  Returns:
    {'avg_return': mean return of the episodes that ended (NaN if none),
     'episodes': how many ended}.
  """
  if (not isinstance(env, base_env.Environment)
      or isinstance(env, batched_env.BatchedSingleStreamEnvironment)):
    raise TypeError('env must be a jittable disco_rl Environment (e.g. '
                    f"get_environment('jittable_catch', ...)), got {env!r}.")
  if num_rollouts < 1:
    raise ValueError(f'num_rollouts must be >= 1, got {num_rollouts}.')

  @jax.jit
  def act(rng):
    reset_rng, rng = jax.random.split(rng)
    env_state, timestep = env.reset(reset_rng)
    carry = (agent.initial_actor_state(rng), timestep, env_state,
             jnp.zeros(timestep.reward.shape, jnp.float32))

    def one_rollout(carry, key):
      actor_state, timestep, env_state, acc = carry
      rollout, actor_state, timestep, env_state = (
          actors.unroll_jittable_actor(params, actor_state, timestep,
                                       env_state, key, env, rollout_len,
                                       agent.actor_step))
      acc, returns = actors.accumulate_rewards(
          acc, (rollout.rewards, rollout.discounts))
      stats = actors.episode_returns(returns, rollout.discounts)
      return (actor_state, timestep, env_state, acc), stats

    _, (totals, episodes) = jax.lax.scan(
        one_rollout, carry, jax.random.split(rng, num_rollouts))
    return jnp.sum(totals), jnp.sum(episodes)

  total, episodes = (float(x) for x in act(rng))
  return dict(avg_return=total / episodes if episodes else float('nan'),
              episodes=episodes)


def warmup_iterations(loop: EvalLoop | HostEvalLoop) -> int:
  """Iterations that only act: until each buffer holds a learner batch."""
  return -(-loop.batch_per_device // loop.envs_per_device) - 1


def _recent_return(rows, num_seeds: int = 1) -> float:
  """The mean `avg_return` of the last 100 iterations (of all runs)."""
  recent = np.asarray([r['avg_return'] for r in rows[-100 * num_seeds:]],
                      float)
  return (float(np.nanmean(recent)) if np.isfinite(recent).any()
          else float('nan'))


def _rows_of_each_seed(rows, num_seeds: int) -> list[list[dict[str, float]]]:
  """The rows of each run, in seed order (rows alternate over the seeds)."""
  return [rows[j::num_seeds] for j in range(num_seeds)]


class EvalJob:
  """The eval job as `Trainer` runs it: loop, rows, summary and outputs.

  A `Trainer` step is one iteration (one rollout acted, at most one learner
  step, in each of the `num_seeds` runs); `iterations(n)` is how many
  iterations take `n` learner steps. Each step gives `rows_per_step` rows,
  one per run.
  """

  name = 'eval'
  config_cls = config_lib.EvalConfig
  check_config = staticmethod(config_lib.check_eval_config)

  def __init__(self, config: config_lib.EvalConfig, rule_params=None,
               devices=None, restoring: bool = False,
               env: base_env.Environment | None = None):
    self.config = config
    self.loop = make_eval_loop(config, rule_params=rule_params,
                               devices=devices, load_weights=not restoring,
                               env=env)
    self.warmup = warmup_iterations(self.loop)
    self.steps_per_call = config.steps_per_call
    self.rows_per_step = config.num_seeds
    self.description = f'eval {config.rule} {_seeds_title(config)}'

  def iterations(self, learner_steps: int) -> int:
    return learner_steps + self.warmup

  def learner_steps(self, iterations: int) -> int:
    return max(0, iterations - self.warmup)

  def init(self) -> EvalState:
    return self.loop.init(seed_keys(self.config))

  def compile(self, state: EvalState) -> float:
    return self.loop.compile(state)

  def run(self, state: EvalState, num_steps: int):
    return self.loop.run(state, num_steps)

  def to_rows(self, metrics, first_step: int):
    return self.loop.metrics_rows(metrics, first_step)

  def postfix(self, rows) -> dict[str, str]:
    return dict(avg_return=f'{_recent_return(rows, self.rows_per_step):.3f}')

  @property
  def rule_params(self):
    """The rule's meta-parameters (checkpointed: a resumed run needs no file)."""
    return self.loop.rule_params

  @rule_params.setter
  def rule_params(self, params) -> None:
    self.loop.rule_params = params

  def host_state(self) -> dict[str, Any]:
    """What a checkpoint needs beyond the device state (JSON-able)."""
    if isinstance(self.loop, HostEvalLoop):
      # A dm_env keeps its state in the object (boards, random generators).
      return dict(host_env=checkpoint.encode_object(
          (self.loop.env, self.loop.host_env_state)))
    return {}

  def set_host_state(self, extra: dict[str, Any]) -> None:
    if isinstance(self.loop, HostEvalLoop):
      self.loop.env, self.loop.host_env_state = checkpoint.decode_object(
          extra['host_env'])

  def evaluate(self, state: EvalState, params=None, env=None,
               num_rollouts: int = 20, seed: int = 0,
               run: int = 0) -> dict[str, float]:
    """The agent's policy acting without learning (see `evaluate_policy`).

    Args:
      state: the loop state (its parameters are the default).
      params: the agent network's parameters (default: the current ones of
        run `run`).
      env: a jittable `Environment` whose observations fit the agent, or
        None: the run's own environment (its jittable version for 'catch';
        for 'custom' the given object itself).
      num_rollouts: rollouts of `rollout_len` steps.
      seed: the acting key's seed.
      run: which of the `num_seeds` runs (0: the one of `config.seed`).
    """
    cfg = self.config
    if not 0 <= run < cfg.num_seeds:
      raise ValueError(f'run must be in [0, num_seeds={cfg.num_seeds}), got '
                       f'{run}.')
    if params is None:
      params = jax.tree.map(lambda x: x[run],
                            devices_lib.fetch(state.learner_state.params))
    if env is None and cfg.env == config_lib.CUSTOM_ENV:
      env = self.loop.env
    elif env is None:
      name = 'jittable_catch' if cfg.env == 'catch' else cfg.env
      env = get_environment(name, batch_size=cfg.num_envs,
                            env_settings=env_settings(
                                dataclasses.replace(cfg, env=name)))
    with jax.default_matmul_precision(cfg.matmul_precision):
      return evaluate_policy(self.loop.agent, params, env,
                             jax.random.PRNGKey(seed), num_rollouts,
                             cfg.rollout_len)

  def summary(self, state: EvalState, rows, timing: driver.Timing
              ) -> dict[str, Any]:
    """Final average return (last 100 iterations; the mean over the runs,
    and each run's), speed, memory."""
    seeds = self.rows_per_step
    per_run = _rows_of_each_seed(rows, seeds)
    rss = [r['rss_mb'] for r in per_run[0]] or [float('nan')]
    return dict(
        final_avg_return=_recent_return(rows, seeds),
        final_avg_return_per_seed={
            str(self.config.seed + j): _recent_return(run_rows)
            for j, run_rows in enumerate(per_run)},
        steps=self.learner_steps(len(rows) // seeds),
        iterations=len(rows) // seeds,
        compile_and_first_step_s=timing.first_call_s,
        steps_per_second=timing.steps_per_second,
        peak_memory_mb=reporting.peak_memory_mb(),
        rss_mb_at_100=rss[min(99, len(rss) - 1)],
        rss_mb_final=rss[-1],
        devices=len(self.loop.devices),
        processes=jax.process_count(),
        replay_bytes_per_trajectory=self.loop.bytes_per_trajectory(state),
    )

  def write_outputs(self, state: EvalState, rows, output_dir: pathlib.Path,
                    lead: bool) -> dict[str, str]:
    """The learning curve (`returns.png`), written by the `lead` process."""
    del state
    if not lead:
      return {}
    cfg = self.config
    per_run = _rows_of_each_seed(rows, self.rows_per_step)
    path = reporting.plot_runs(
        [r['env_steps'] for r in per_run[0]],
        {f'seed {cfg.seed + j}': [r['avg_return'] for r in run_rows]
         for j, run_rows in enumerate(per_run)},
        output_dir / 'returns.png', 'environment steps', 'average return',
        f'{cfg.rule} on {_env_title(cfg)} ({_seeds_title(cfg)})', smooth=20)
    return dict(plot_png=str(path))


def _seeds_title(config: config_lib.EvalConfig) -> str:
  """'seed 3' or 'seeds 0-7'."""
  if config.num_seeds == 1:
    return f'seed {config.seed}'
  return f'seeds {config.seed}-{config.seed + config.num_seeds - 1}'


def _env_title(config: config_lib.EvalConfig) -> str:
  """'jittable_catch 8x8', 'gymnax:DeepSea-bsuite size=10', 'custom'."""
  if config.env in config_lib.CATCH_ENVS:
    return f'{config.env} {config.rows}x{config.columns}'
  kwargs = ','.join(f'{k}={v}' for k, v in config.env_kwargs.items())
  return f'{config.env} {kwargs}'.strip()
