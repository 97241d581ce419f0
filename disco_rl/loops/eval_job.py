# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval job as `Trainer` runs it: its loop, rows, summary and outputs.

`make_eval_loop` picks the loop for the environment (the fused `EvalLoop`,
or `HostEvalLoop` for the dm_env Catch); `EvalJob` is what the `Trainer`
drives (steps, rows, checkpointed host state, summary, plots);
`evaluate_policy` measures a policy acting without learning.
"""

import dataclasses
import pathlib
from typing import Any

import chex
import jax
import jax.numpy as jnp
import numpy as np

from disco_rl import actors
from disco_rl import agent as agent_lib
from disco_rl.environments import base as base_env
from disco_rl.environments import get_environment
from disco_rl.environments.wrappers import batched_env
from disco_rl.loops import checkpoint
from disco_rl.loops import config as config_lib
from disco_rl.loops import devices as devices_lib
from disco_rl.loops import driver
from disco_rl.loops import eval_loop
from disco_rl.loops import eval_program
from disco_rl.loops import eval_setup
from disco_rl.loops import host_eval_loop
from disco_rl.loops import reporting


def make_eval_loop(config: config_lib.EvalConfig, rule_params=None,
                   devices=None, load_weights: bool = True,
                   env: base_env.Environment | None = None
                   ) -> eval_loop.EvalLoop | host_eval_loop.HostEvalLoop:
  """The loop for the configured environment (fused unless it is a host one).

  `load_weights=False`: without `rule_params`, a fresh meta-network stands
  in for Disco103's weights (a run about to be restored from a checkpoint).
  `env`: the jittable Environment of `env='custom'` (see
  `eval_setup.make_setup`, which checks the config).
  """
  if config_lib.steps_on_host(config.env):
    return host_eval_loop.HostEvalLoop(config, rule_params=rule_params,
                                       devices=devices,
                                       load_weights=load_weights)
  return eval_loop.EvalLoop(config, rule_params=rule_params, devices=devices,
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

  def __init__(self, config: config_lib.EvalConfig, rule_params=None,
               devices=None, restoring: bool = False,
               env: base_env.Environment | None = None):
    self.config = config
    self.loop = make_eval_loop(config, rule_params=rule_params,
                               devices=devices, load_weights=not restoring,
                               env=env)
    self.warmup = self.loop.setup.warmup_iterations
    self.steps_per_call = config.steps_per_call
    self.rows_per_step = config.num_seeds
    self.description = f'eval {config.rule} {_seeds_title(config)}'

  def iterations(self, learner_steps: int) -> int:
    return learner_steps + self.warmup

  def learner_steps(self, iterations: int) -> int:
    return max(0, iterations - self.warmup)

  def init(self) -> eval_program.EvalState:
    return self.loop.init(eval_setup.seed_keys(self.config))

  def compile(self, state: eval_program.EvalState) -> float:
    return self.loop.compile(state)

  def run(self, state: eval_program.EvalState, num_steps: int):
    return self.loop.run(state, num_steps)

  def to_rows(self, metrics, first_step: int):
    return eval_program.metrics_rows(self.loop.setup, metrics, first_step)

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
    if isinstance(self.loop, host_eval_loop.HostEvalLoop):
      # A dm_env keeps its state in the object (boards, random generators).
      return dict(host_env=checkpoint.encode_object(
          (self.loop.setup.env, self.loop.host_env_state)))
    return {}

  def set_host_state(self, extra: dict[str, Any]) -> None:
    if isinstance(self.loop, host_eval_loop.HostEvalLoop):
      env, self.loop.host_env_state = checkpoint.decode_object(
          extra['host_env'])
      self.loop.setup = dataclasses.replace(self.loop.setup, env=env)

  def evaluate(self, state: eval_program.EvalState, params=None, env=None,
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
      env = self.loop.setup.env
    elif env is None and config_lib.steps_on_host(cfg.env) and (
        cfg.env != 'catch'):
      raise ValueError(
          f'evaluate needs a jittable environment; env={cfg.env!r} is '
          'stepped on the host: pass env= (a jittable Environment).')
    elif env is None:
      name = 'jittable_catch' if cfg.env == 'catch' else cfg.env
      env = get_environment(name, batch_size=cfg.num_envs,
                            env_settings=eval_setup.env_settings(
                                dataclasses.replace(cfg, env=name)))
    with jax.default_matmul_precision(cfg.matmul_precision):
      return evaluate_policy(self.loop.setup.agent, params, env,
                             jax.random.PRNGKey(seed), num_rollouts,
                             cfg.rollout_len)

  def summary(self, state: eval_program.EvalState, rows,
              timing: driver.Timing
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
        devices=self.loop.setup.num_devices,
        processes=jax.process_count(),
        replay_bytes_per_trajectory=eval_program.bytes_per_trajectory(state),
    )

  def write_outputs(self, state: eval_program.EvalState, rows,
                    output_dir: pathlib.Path, lead: bool) -> dict[str, str]:
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
