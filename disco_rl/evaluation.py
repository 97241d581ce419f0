# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Training an agent with a fixed update rule (e.g. Disco103): the eval job.

The loop follows the upstream eval notebook (act in a few environments, keep a
FIFO replay buffer of trajectories, one learner step per actor rollout on a
sampled batch) but runs each iteration as one compiled `jax.pmap` program per
device: acting in the jittable environment, writing the buffer, sampling and
the learner step all stay on the device. Each device holds its share of the
environments, of the buffer and of the learner batch; gradients and the
rule's statistics are averaged across devices, so the replicated parameters
stay identical.

Only scalar metrics leave the device, so host memory stays flat however long
the run (the upstream notebook keeps every step's `meta_out`).
"""

import csv
import dataclasses
import functools
import math
import os
import pathlib
import time
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from disco_rl import actors
from disco_rl import agent as agent_lib
from disco_rl import types
from disco_rl import utils
from disco_rl import weights as weights_lib
from disco_rl.environments import base as base_env
from disco_rl.environments import get_environment

AXIS = 'i'
RULES = ('disco_103', 'actor_critic')


@dataclasses.dataclass
class EvalConfig:
  """Settings of an eval run (defaults: the upstream eval notebook).

  Attributes:
    rule: 'disco_103' (the discovered rule with its weights) or
      'actor_critic' (the hand-designed baseline).
    env: 'jittable_catch' (acting compiled on device) or 'catch' (the host
      dm_env Catch, stepped in Python).
    rows: Catch board rows.
    columns: Catch board columns.
    num_steps: learner steps (one actor rollout each).
    batch_size: trajectories per learner step (across devices).
    rollout_len: steps per trajectory.
    replay_ratio: learner trajectories per acted trajectory; the number of
      environments is batch_size // replay_ratio.
    buffer_capacity: replay buffer size in trajectories (across devices).
    learning_rate: the agent's learning rate.
    dense: hidden sizes of the agent's MLP torso.
    model_lstm_size: size of the action-model LSTM.
    model_head_hiddens: hidden sizes of the action-model heads.
    seed: random seed.
    num_devices: devices to use; None picks as many local devices as the
      number of environments allows.
    behaviour_outputs: agent outputs kept in the buffer for the learner (the
      rules read only the behaviour logits); None keeps all.
  """

  rule: str = 'disco_103'
  env: str = 'jittable_catch'
  rows: int = 8
  columns: int = 8
  num_steps: int = 1000
  batch_size: int = 64
  rollout_len: int = 29
  replay_ratio: int = 32
  buffer_capacity: int = 1024
  learning_rate: float = 1e-2
  dense: tuple[int, ...] = (512, 512)
  model_lstm_size: int = 128
  model_head_hiddens: tuple[int, ...] = (128,)
  seed: int = 0
  num_devices: int | None = None
  behaviour_outputs: tuple[str, ...] | None = ('logits',)

  @property
  def num_envs(self) -> int:
    return self.batch_size // self.replay_ratio


def check_config(config: EvalConfig) -> None:
  """Raises ValueError naming any setting that cannot work."""
  if config.rule not in RULES:
    raise ValueError(f'Unknown rule {config.rule!r}; expected one of {RULES}.')
  for name in ('num_steps', 'batch_size', 'rollout_len', 'replay_ratio',
               'buffer_capacity'):
    if getattr(config, name) < 1:
      raise ValueError(f'{name} must be >= 1, got {getattr(config, name)}.')
  if config.rollout_len < 2:
    raise ValueError(f'rollout_len must be >= 2, got {config.rollout_len}.')
  if config.batch_size % config.replay_ratio:
    raise ValueError(
        f'batch_size={config.batch_size} must be a multiple of replay_ratio='
        f'{config.replay_ratio} (the number of environments is their ratio).')
  if config.buffer_capacity < config.batch_size:
    raise ValueError(f'buffer_capacity={config.buffer_capacity} is smaller '
                     f'than batch_size={config.batch_size}.')


def pick_devices(config: EvalConfig) -> list[jax.Device]:
  """The devices to run on; every per-device share must be whole."""
  available = jax.local_devices()
  if config.num_devices is None:
    count = max(d for d in range(1, len(available) + 1)
                if config.num_envs % d == 0 and config.batch_size % d == 0
                and config.buffer_capacity % d == 0)
  else:
    count = config.num_devices
    if not 1 <= count <= len(available):
      raise ValueError(f'num_devices={count} but {len(available)} local '
                       'devices are available.')
  for name, size in (('number of environments (batch_size // replay_ratio)',
                      config.num_envs), ('batch_size', config.batch_size),
                     ('buffer_capacity', config.buffer_capacity)):
    utils.check_divisible(size, count, name)
  return available[:count]


def agent_settings(config: EvalConfig):
  """Agent settings for the rule, with the eval network and learning rate."""
  if config.rule == 'disco_103':
    settings = agent_lib.get_settings_disco()
  else:
    settings = agent_lib.get_settings_actor_critic()
  settings.net_settings.name = 'mlp'
  settings.net_settings.net_args = dict(
      dense=tuple(config.dense),
      model_arch_name='lstm',
      head_w_init_std=1e-2,
      model_kwargs=dict(head_mlp_hiddens=tuple(config.model_head_hiddens),
                        lstm_size=config.model_lstm_size),
  )
  settings.learning_rate = config.learning_rate
  return settings


def make_env(config: EvalConfig, batch_size: int) -> base_env.Environment:
  settings = {'rows': config.rows, 'columns': config.columns}
  if config.env == 'catch':
    settings['random_seed'] = config.seed
  return get_environment(config.env, batch_size=batch_size,
                         env_settings=settings)


# ----------------------------------------------------------------------------
# Replay buffer (on device).


@chex.dataclass
class ReplayState:
  """A FIFO buffer of trajectories; every leaf is [capacity, T, ...].

  Attributes:
    data: the stored `ActorRollout` fields, trajectory-major.
    next_index: where the next trajectory goes.
    size: how many slots hold data.
  """

  data: Any
  next_index: chex.Array
  size: chex.Array


def replay_init(example: types.ActorRollout, capacity: int) -> ReplayState:
  """An empty buffer for rollouts shaped like `example` ([T, B, ...])."""
  data = jax.tree.map(
      lambda x: jnp.zeros((capacity, x.shape[0]) + x.shape[2:], x.dtype),
      example)
  return ReplayState(data=data, next_index=jnp.zeros((), jnp.int32),
                     size=jnp.zeros((), jnp.int32))


def replay_add(buffer: ReplayState, rollout: types.ActorRollout) -> ReplayState:
  """Appends the B trajectories of a [T, B, ...] rollout, oldest evicted."""
  capacity = jax.tree.leaves(buffer.data)[0].shape[0]
  batch = rollout.rewards.shape[1]
  slots = (buffer.next_index + jnp.arange(batch)) % capacity
  data = jax.tree.map(lambda store, x: store.at[slots].set(jnp.swapaxes(x, 0,
                                                                        1)),
                      buffer.data, rollout)
  return ReplayState(data=data,
                     next_index=(buffer.next_index + batch) % capacity,
                     size=jnp.minimum(buffer.size + batch, capacity))


def replay_sample(buffer: ReplayState, rng: chex.PRNGKey,
                  batch_size: int) -> types.ActorRollout:
  """`batch_size` stored trajectories, uniformly with replacement, [T, B]."""
  index = jax.random.randint(rng, (batch_size,), 0, buffer.size)
  return jax.tree.map(lambda store: jnp.swapaxes(store[index], 0, 1),
                      buffer.data)


# ----------------------------------------------------------------------------
# The loop.


@chex.dataclass
class LoopState:
  """What each device carries from one iteration to the next."""

  learner_state: agent_lib.LearnerState
  actor_state: types.HaikuState
  env_state: Any
  timestep: types.EnvironmentTimestep
  acc_rewards: chex.Array
  buffer: ReplayState


def _trim(rollout: types.ActorRollout, keep: tuple[str, ...] | None):
  if keep is None:
    return rollout
  missing = [k for k in keep if k not in rollout.agent_outs]
  if missing:
    raise ValueError(f'behaviour_outputs {missing} are not agent outputs '
                     f'({sorted(rollout.agent_outs)}).')
  return rollout.replace(agent_outs={k: rollout.agent_outs[k] for k in keep})


class EvalRun:
  """Builds the agent, devices and compiled programs for an `EvalConfig`."""

  def __init__(self, config: EvalConfig, rule_params=None,
               devices: list[jax.Device] | None = None):
    check_config(config)
    self.config = config
    self.devices = list(devices or pick_devices(config))
    num = len(self.devices)
    self.envs_per_device = config.num_envs // num
    self.batch_per_device = config.batch_size // num
    self.capacity_per_device = config.buffer_capacity // num
    self.jittable = config.env != 'catch'
    # The host environment steps every environment at once; a jittable one
    # is built per device.
    self.env = make_env(config, self.envs_per_device if self.jittable
                        else config.num_envs)
    self.agent = agent_lib.Agent(
        single_observation_spec=self.env.single_observation_spec(),
        single_action_spec=self.env.single_action_spec(),
        agent_settings=agent_settings(config),
        batch_axis_name=AXIS)
    if rule_params is None:
      if config.rule == 'disco_103':
        rule_params = weights_lib.load_disco_103()
      else:
        rule_params, _ = self.agent.update_rule.init_params(
            jax.random.PRNGKey(0))
    self.rule_params = utils.replicate_across_devices(rule_params,
                                                      self.devices)

    pmap = functools.partial(jax.pmap, axis_name=AXIS, devices=self.devices)
    self._act = pmap(self._act_fn)
    self._record = pmap(self._record_fn)
    self._learn = pmap(self._learn_fn)
    self._act_and_learn = pmap(self._act_and_learn_fn)
    self._actor_step = pmap(self.agent.actor_step)

  # -- Device programs (run under pmap; arrays are per device) -------------

  def _record_fn(self, state: LoopState, rollout: types.ActorRollout):
    """Buffers a rollout; returns the new state and episode statistics."""
    acc_rewards, returns = actors.accumulate_rewards(
        state.acc_rewards, (rollout.rewards, rollout.discounts))
    total, episodes = actors.episode_returns(returns, rollout.discounts)
    stats = dict(return_sum=jax.lax.psum(total, AXIS),
                 episodes=jax.lax.psum(episodes, AXIS))
    buffer = replay_add(state.buffer,
                        _trim(rollout, self.config.behaviour_outputs))
    return state.replace(acc_rewards=acc_rewards, buffer=buffer), stats

  def _act_fn(self, state: LoopState, rng):
    rollout, actor_state, timestep, env_state = actors.unroll_jittable_actor(
        state.learner_state.params, state.actor_state, state.timestep,
        state.env_state, rng, self.env, self.config.rollout_len,
        self.agent.actor_step)
    state = state.replace(actor_state=actor_state, timestep=timestep,
                          env_state=env_state)
    return self._record_fn(state, rollout)

  def _learn_fn(self, state: LoopState, rng, rule_params):
    sample_rng, learn_rng = jax.random.split(rng)
    batch = replay_sample(state.buffer, sample_rng, self.batch_per_device)
    learner_state, _, logs = self.agent.learner_step(
        learn_rng, batch, state.learner_state, state.actor_state,
        rule_params, False)
    scalars = {k: v for k, v in logs.items() if k != 'meta_out'}
    return state.replace(learner_state=learner_state), scalars

  def _act_and_learn_fn(self, state, act_rng, learn_rng, rule_params):
    state, stats = self._act_fn(state, act_rng)
    state, logs = self._learn_fn(state, learn_rng, rule_params)
    return state, stats, logs

  # -- Host side -------------------------------------------------------------

  def init(self, rng: chex.PRNGKey) -> LoopState:
    """Replicated learner state, per-device environments and buffers."""
    num = len(self.devices)
    learner_rng, actor_rng, env_rng = jax.random.split(rng, 3)
    learner_state = self.agent.initial_learner_state(learner_rng)
    actor_state = self.agent.initial_actor_state(actor_rng)
    if self.jittable:
      env_state, timestep = jax.vmap(self.env.reset)(
          jax.random.split(env_rng, num))
      self._host_env_state = None
    else:
      self._host_env_state, host_timestep = self.env.reset(env_rng)
      env_state = None
      timestep = utils.shard_across_devices(host_timestep, self.devices)
    example = _trim(self._example_rollout(learner_state.params, actor_state),
                    self.config.behaviour_outputs)
    replicate = functools.partial(utils.replicate_across_devices,
                                  devices=self.devices)
    return LoopState(
        learner_state=replicate(learner_state),
        actor_state=replicate(actor_state),
        env_state=env_state,
        timestep=timestep,
        acc_rewards=utils.shard_across_devices(
            np.zeros((self.config.num_envs,), np.float32), self.devices),
        buffer=replicate(replay_init(example, self.capacity_per_device)),
    )

  def _example_rollout(self, params, actor_state) -> types.ActorRollout:
    """Zeros shaped like one device's [T, B, ...] rollout."""
    n, t = self.envs_per_device, self.config.rollout_len
    if self.jittable:
      _, timestep = self.env.reset(jax.random.PRNGKey(0))
    else:
      timestep = types.EnvironmentTimestep(
          observation=utils.zeros_like_spec(
              self.env.single_observation_spec(), prepend_shape=(n,)),
          step_type=np.zeros((n,), np.int32),
          reward=np.zeros((n,), np.float32))
    recorded = jax.eval_shape(self.agent.actor_step, params,
                              jax.random.PRNGKey(0), timestep, actor_state)[0]
    return jax.tree.map(lambda s: jnp.zeros((t,) + s.shape, s.dtype),
                        types.ActorRollout.from_timestep(recorded))

  def _host_rollout(self, state: LoopState, rng):
    """Acts in the host environment, one pmapped actor step at a time."""
    steps = []
    timestep, actor_state = state.timestep, state.actor_state
    for step_rng in jax.random.split(rng, self.config.rollout_len):
      recorded, actor_state = self._actor_step(
          state.learner_state.params,
          jax.random.split(step_rng, len(self.devices)), timestep,
          actor_state)
      actions = np.asarray(utils.gather_from_devices(recorded.actions))
      self._host_env_state, host_timestep = self.env.step(
          self._host_env_state, actions)
      timestep = utils.shard_across_devices(host_timestep, self.devices)
      steps.append(recorded)
    rollout = types.ActorRollout.from_timestep(
        utils.tree_stack(steps, axis=1))  # [D, T, B/D, ...]
    return rollout, state.replace(timestep=timestep, actor_state=actor_state)

  def step(self, state: LoopState, rng: chex.PRNGKey, learn: bool):
    """One iteration: act, buffer, and if `learn` one learner step.

    Returns:
      (state, episode stats, learner logs); stats and logs are per-device
      arrays of scalars (identical across devices).
    """
    act_rng, learn_rng = jax.random.split(rng)
    num = len(self.devices)
    act_rngs = jax.random.split(act_rng, num)
    learn_rngs = jax.random.split(learn_rng, num)
    if not self.jittable:
      rollout, state = self._host_rollout(state, act_rng)
      state, stats = self._record(state, rollout)
      logs = {}
      if learn:
        state, logs = self._learn(state, learn_rngs, self.rule_params)
      return state, stats, logs
    if learn:
      return self._act_and_learn(state, act_rngs, learn_rngs,
                                 self.rule_params)
    state, stats = self._act(state, act_rngs)
    return state, stats, {}

  @property
  def log_keys(self) -> tuple[str, ...]:
    """Names of the learner scalars the eval job records per step."""
    return _log_keys_for(self.config.rule)

  def buffer_size(self, iteration: int) -> int:
    """Trajectories in each device's buffer after `iteration + 1` rollouts."""
    return min(self.capacity_per_device,
               (iteration + 1) * self.envs_per_device)


# ----------------------------------------------------------------------------
# Running, metrics and plots.


def resident_memory_mb() -> float:
  """This process's resident memory (Linux; NaN elsewhere)."""
  try:
    with open('/proc/self/statm') as f:
      pages = int(f.read().split()[1])
    return pages * os.sysconf('SC_PAGE_SIZE') / 2**20
  except (OSError, ValueError, IndexError):
    return float('nan')


def peak_memory_mb() -> float:
  """Peak resident memory of this process so far."""
  import resource  # pylint: disable=g-import-not-at-top
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class MetricsWriter:
  """Appends one CSV row per step; columns fixed by the first row."""

  def __init__(self, path: pathlib.Path):
    self.path = pathlib.Path(path)
    self.path.parent.mkdir(parents=True, exist_ok=True)
    self._file = open(self.path, 'w', newline='')
    self._writer = None

  def write(self, row: dict[str, float]) -> None:
    if self._writer is None:
      self._writer = csv.DictWriter(self._file, fieldnames=list(row),
                                    extrasaction='ignore', restval='')
      self._writer.writeheader()
    self._writer.writerow(row)
    self._file.flush()

  def close(self) -> None:
    self._file.close()


def read_metrics(path) -> dict[str, np.ndarray]:
  """Columns of a metrics CSV as float arrays (empty cells are NaN)."""
  with open(path, newline='') as f:
    rows = list(csv.DictReader(f))
  if not rows:
    return {}
  return {key: np.array([float(r[key]) if r[key] != '' else np.nan
                         for r in rows]) for key in rows[0]}


def plot_curve(x, y, path, xlabel: str, ylabel: str, title: str,
               smooth: int = 0) -> pathlib.Path:
  """Saves a line plot (optionally with a moving average) as PNG."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  fig, ax = plt.subplots(figsize=(7, 4))
  x, y = np.asarray(x), np.asarray(y, dtype=float)
  ax.plot(x, y, alpha=0.35 if smooth else 1.0, label=ylabel)
  if smooth and len(y) >= smooth:
    valid = np.where(np.isnan(y), 0.0, y)
    counts = np.convolve(~np.isnan(y), np.ones(smooth), 'valid')
    avg = np.convolve(valid, np.ones(smooth), 'valid') / np.maximum(counts, 1)
    ax.plot(x[smooth - 1:], avg, label=f'{ylabel} ({smooth}-step mean)')
  ax.set_xlabel(xlabel)
  ax.set_ylabel(ylabel)
  ax.set_title(title)
  ax.grid(alpha=0.3)
  ax.legend()
  fig.tight_layout()
  path = pathlib.Path(path)
  fig.savefig(path, dpi=100)
  plt.close(fig)
  return path


def _mean_over_devices(tree) -> dict[str, float]:
  return {k: float(np.mean(v)) for k, v in jax.device_get(tree).items()}


def run_eval(config: EvalConfig, output_dir, rule_params=None,
             progress: bool = True, log_every: int = 0) -> dict[str, Any]:
  """Trains an agent with the configured rule; writes metrics and a plot.

  Args:
    config: the run's settings.
    output_dir: where `metrics.csv` and `returns.png` go.
    rule_params: the rule's meta-parameters; default: the Disco103 weights
      (found by `disco_rl.weights`) for 'disco_103', none needed otherwise.
    progress: show a tqdm progress bar.
    log_every: also print a line every `log_every` steps (0: never).

  Returns:
    A summary: final average return (mean over the last 100 steps or fewer),
    steps per second, compile time, peak memory and the output paths.
  """
  import tqdm  # pylint: disable=g-import-not-at-top
  output_dir = pathlib.Path(output_dir)
  output_dir.mkdir(parents=True, exist_ok=True)
  run = EvalRun(config, rule_params=rule_params)
  state = run.init(jax.random.PRNGKey(config.seed))
  rng = jax.random.PRNGKey(config.seed + 1)
  writer = MetricsWriter(output_dir / 'metrics.csv')
  env_steps = 0
  returns = []
  start = time.perf_counter()
  first_learn_done = None
  bar = tqdm.trange(config.num_steps, disable=not progress,
                    desc=f'eval {config.rule} seed {config.seed}')
  try:
    for step in bar:
      rng, step_rng = jax.random.split(rng)
      learn = run.buffer_size(step) >= run.batch_per_device
      state, stats, logs = run.step(state, step_rng, learn)
      stats = _mean_over_devices(stats)
      logs = _mean_over_devices(logs) if logs else {}
      env_steps += config.num_envs * config.rollout_len
      avg_return = (stats['return_sum'] / stats['episodes']
                    if stats['episodes'] else float('nan'))
      returns.append(avg_return)
      if learn and first_learn_done is None:
        first_learn_done = time.perf_counter() - start
      row = dict(step=step, env_steps=env_steps, avg_return=avg_return,
                 episodes=stats['episodes'], learned=int(learn),
                 rss_mb=resident_memory_mb(),
                 time_s=time.perf_counter() - start)
      row.update({k: logs.get(k, float('nan')) for k in run.log_keys})
      writer.write(row)
      recent = np.nanmean(returns[-100:]) if returns else float('nan')
      bar.set_postfix(avg_return=f'{recent:.3f}')
      if log_every and (step + 1) % log_every == 0:
        print(f'step {step + 1}/{config.num_steps} avg_return(last 100)='
              f'{recent:.3f} rss={row["rss_mb"]:.0f}MB', flush=True)
  finally:
    writer.close()
  elapsed = time.perf_counter() - start
  metrics = read_metrics(output_dir / 'metrics.csv')
  plot = plot_curve(metrics['env_steps'], metrics['avg_return'],
                    output_dir / 'returns.png', 'environment steps',
                    'average return',
                    f'{config.rule} on {config.env} {config.rows}x'
                    f'{config.columns} (seed {config.seed})', smooth=20)
  tail = metrics['avg_return'][-100:]
  return dict(
      final_avg_return=float(np.nanmean(tail)) if len(tail) else float('nan'),
      steps=config.num_steps,
      seconds=elapsed,
      compile_and_first_step_s=first_learn_done,
      steps_per_second=config.num_steps / elapsed,
      peak_memory_mb=peak_memory_mb(),
      rss_mb_at_100=float(metrics['rss_mb'][min(99, len(metrics['rss_mb']) - 1)]),
      rss_mb_final=float(metrics['rss_mb'][-1]),
      devices=len(run.devices),
      metrics_csv=str(output_dir / 'metrics.csv'),
      plot_png=str(plot),
  )


@functools.lru_cache(maxsize=None)
def _log_keys_for(rule: str) -> tuple[str, ...]:
  common = ('total_loss', 'global_gradient_norm', 'global_update_norm',
            'entropy')
  if rule == 'disco_103':
    return common + ('pi_loss', 'q_loss', 'aux_kl_loss', 'pi_hat_entropy')
  return common + ('pg_advs', 'avg_value')

