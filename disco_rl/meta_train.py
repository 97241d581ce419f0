# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Meta-training an update rule with a population of agents.

For each agent: act for `num_inner_steps` rollouts and one 2x longer
validation rollout; update the agent (and a value function) on the training
rollouts with the current rule, keeping the computation differentiable
(`is_meta_training=True`); the meta-loss is a policy-gradient loss of the
updated agent on the validation rollout (advantages from the value function)
plus regularisers of the rule's outputs. Its gradient w.r.t. the rule's
parameters, averaged over agents and devices, drives a meta-optimiser.
"""

from collections.abc import Mapping
import dataclasses
import functools
import pathlib
import time
from typing import Any

import chex
import distrax
import jax
import jax.numpy as jnp
from ml_collections import config_dict
import numpy as np
import optax
import tqdm

from disco_rl import actors
from disco_rl import agent as agent_lib
from disco_rl import types
from disco_rl import utils
from disco_rl.environments import base as base_env
from disco_rl.environments import jittable_envs
from disco_rl.value_fns import value_fn as value_fn_lib


@chex.dataclass
class MetaTrainState:
  """Everything one agent of the population carries between meta-steps."""

  learner_state: agent_lib.LearnerState
  actor_state: types.HaikuState
  value_state: types.ValueState
  env_state: Any
  env_timestep: types.EnvironmentTimestep


@dataclasses.dataclass(frozen=True)
class MetaLossWeights:
  """Weights of the meta-objective's regularisers (upstream's values)."""

  entropy: float = 1e-2  # Entropy of the validation policy (bonus).
  prediction_entropy: float = 1e-3  # Entropy of the y and z predictions.
  target_mean: float = 1e-3  # Squared batch means of the pi/y/z targets.
  target_kl: float = 1e-2  # KL(target network policy || pi target).


def catch_env(batch_size: int, rows: int = 5,
              columns: int = 5) -> jittable_envs.CatchJittableEnvironment:
  """The jittable Catch used for meta-training (5x5 by default)."""
  settings = jittable_envs.get_config_catch()
  settings.rows, settings.columns = rows, columns
  return jittable_envs.CatchJittableEnvironment(batch_size=batch_size,
                                                env_settings=settings)


def default_value_fn_config() -> types.ValueFnConfig:
  """The meta-training value function of the upstream notebook."""
  return types.ValueFnConfig(
      net='mlp',
      net_args=dict(dense=(256, 256), head_w_init_std=1e-2, action_spec=()),
      learning_rate=1e-3,
      max_abs_update=1.0,
      discount_factor=0.99,
      td_lambda=0.96,
      outer_value_cost=1.0,
  )


class MetaTrainAgent:
  """One member of the population: an agent, its value function and env.

  Attributes:
    agent: the `agent.Agent` trained by the rule.
    value_fn: the `ValueFunction` giving the meta-objective's advantages.
    env: its jittable environment (per-device batch).
  """

  def __init__(
      self,
      batch_size_per_device: int,
      agent_settings: config_dict.ConfigDict | Mapping[str, Any],
      value_fn_config: types.ValueFnConfig,
      axis_name: str | None = None,
      env: base_env.Environment | None = None,
  ):
    if batch_size_per_device < 1:
      raise ValueError('batch_size_per_device must be >= 1, got '
                       f'{batch_size_per_device}.')
    self.batch_size_per_device = batch_size_per_device
    self.env = env if env is not None else catch_env(batch_size_per_device)
    if self.env.batch_size != batch_size_per_device:
      raise ValueError(
          f'env.batch_size={self.env.batch_size} differs from '
          f'batch_size_per_device={batch_size_per_device}.')
    self.agent = agent_lib.Agent(
        agent_settings=agent_settings,
        single_observation_spec=self.env.single_observation_spec(),
        single_action_spec=self.env.single_action_spec(),
        batch_axis_name=axis_name,
    )
    self.value_fn = value_fn_lib.ValueFunction(value_fn_config,
                                               axis_name=axis_name)

  @property
  def learner_step(self):
    return self.agent.learner_step

  @property
  def actor_step(self):
    return self.agent.actor_step

  @property
  def unroll_net(self):
    return self.agent.unroll_net

  def init_state(self, rng_key: chex.PRNGKey) -> MetaTrainState:
    """A fresh agent: parameters, value function and a reset environment."""
    learner_rng, actor_rng, value_rng = jax.random.split(rng_key, 3)
    env_state, env_timestep = self.env.reset(rng_key)
    dummy_obs = utils.zeros_like_spec(self.env.single_observation_spec(),
                                      prepend_shape=(self.batch_size_per_device,))
    return MetaTrainState(
        learner_state=self.agent.initial_learner_state(learner_rng),
        actor_state=self.agent.initial_actor_state(actor_rng),
        value_state=self.value_fn.initial_state(value_rng, dummy_obs),
        env_state=env_state,
        env_timestep=env_timestep,
    )

  def unroll_actor(self, state: MetaTrainState, rng: chex.PRNGKey,
                   rollout_len: int) -> tuple[MetaTrainState,
                                              types.ActorRollout]:
    """Acts `rollout_len` steps with the current parameters."""
    rollout, actor_state, timestep, env_state = actors.unroll_jittable_actor(
        state.learner_state.params, state.actor_state, state.env_timestep,
        state.env_state, rng, self.env, rollout_len, self.actor_step)
    return state.replace(actor_state=actor_state, env_state=env_state,
                         env_timestep=timestep), rollout


def _entropy(logits: chex.Array) -> chex.Array:
  return distrax.Softmax(logits).entropy()


def _act_on(agent: agent_lib.Agent, params, rng, rollout: types.ActorRollout):
  """The agent's outputs [T, B, ...] on the observations of a rollout."""
  timestep = rollout.to_env_timestep()
  t, b = rollout.rewards.shape[:2]
  flat = jax.tree.map(lambda x: x.reshape((t * b,) + x.shape[2:]), timestep)
  recorded, _ = agent.actor_step(params, rng, flat,
                                 rollout.first_state(time_axis=0))
  return jax.tree.map(lambda x: x.reshape((t, b) + x.shape[1:]), recorded)


def meta_loss(
    update_rule_params: types.MetaParams,
    agent_state: MetaTrainState,
    train_rollouts: types.ActorRollout,
    valid_rollout: types.ActorRollout,
    rng: chex.PRNGKey,
    agent: MetaTrainAgent,
    weights: MetaLossWeights = MetaLossWeights(),
) -> tuple[chex.Array, tuple[MetaTrainState, types.LogDict, types.LogDict]]:
  """The meta-objective of one agent, differentiable w.r.t. the rule.

  Args:
    update_rule_params: the rule's meta-parameters.
    agent_state: the agent before its inner updates.
    train_rollouts: [N, T, B, ...] rollouts, one per inner update.
    valid_rollout: a [2T, B, ...] rollout for the meta-objective.
    rng: a random key.
    agent: the population member.
    weights: regulariser weights.

  Returns:
    (meta-loss, (agent state after the inner updates, inner-step metrics
    [N] per key, meta logs)).
  """
  num_inner = train_rollouts.rewards.shape[0]
  train_rng, valid_rng = jax.random.split(rng)

  def inner_step(carry, xs):
    learner_state, actor_state, value_state = carry
    rollout, step_rng = xs
    new_learner_state, new_actor_state, metrics = agent.learner_step(
        rng=step_rng, rollout=rollout, learner_state=learner_state,
        agent_net_state=actor_state, update_rule_params=update_rule_params,
        is_meta_training=True)
    # The value function follows the policy the rollout was scored with.
    agent_out, _ = agent.unroll_net(learner_state.params, actor_state,
                                    rollout)
    new_value_state, _, _ = agent.value_fn.update(value_state, rollout,
                                                  agent_out['logits'])
    return (new_learner_state, new_actor_state, new_value_state), metrics

  (learner_state, actor_state, value_state), metrics = jax.lax.scan(
      inner_step,
      (agent_state.learner_state, agent_state.actor_state,
       agent_state.value_state),
      (train_rollouts, jax.random.split(train_rng, num_inner)))
  train_meta_out = metrics.pop('meta_out')

  # Policy gradient of the updated agent on the validation rollout.
  on_valid = _act_on(agent.agent, learner_state.params, valid_rng,
                     valid_rollout)
  value_out, _, _, _ = agent.value_fn.get_value_outs(
      value_state, valid_rollout, on_valid['logits'])
  a_t = valid_rollout.actions[:-1]
  logits_t = on_valid['logits'][:-1]
  pg_loss = utils.differentiable_policy_gradient_loss(
      logits_t, a_t, adv_t=jax.lax.stop_gradient(value_out.normalized_adv),
      backprop=False)

  # Regularisers of the validation agent.
  entropy_t = _entropy(logits_t)
  outs = on_valid['agent_outs']
  z_a_t = utils.batch_lookup(outs['z'][:-1], a_t)
  prediction_entropy = (jnp.mean(_entropy(outs['y']))
                        + jnp.mean(_entropy(z_a_t)))
  reg_loss = (-weights.entropy * jnp.mean(entropy_t)
              - weights.prediction_entropy * prediction_entropy)

  # Regularisers of the rule's targets on the training rollouts [N, T, B, .].
  pi_hat, y_hat, z_hat = (train_meta_out['pi'], train_meta_out['y'],
                          train_meta_out['z'])
  chex.assert_equal_shape_prefix([pi_hat, y_hat, z_hat], 3)
  for target in (y_hat, z_hat, pi_hat):
    reg_loss += weights.target_mean * jnp.mean(
        jnp.square(jnp.mean(target, axis=(1, 2, 3))))
  target_logits = train_meta_out['target_out']['logits'][:, :-1]
  chex.assert_equal_shape([target_logits, pi_hat])
  reg_loss += weights.target_kl * jnp.mean(
      utils.categorical_kl(jax.lax.stop_gradient(target_logits), pi_hat))

  loss = jnp.mean(pg_loss) + reg_loss
  meta_log = dict(
      adv=jnp.mean(value_out.adv),
      normalized_adv=jnp.mean(value_out.normalized_adv),
      entropy=jnp.mean(entropy_t),
      value=jnp.mean(value_out.value),
      val_importance_weight=jnp.mean(jnp.minimum(value_out.rho, 1.0)),
      meta_loss=loss,
      pg_loss=jnp.mean(pg_loss),
      reg_loss=reg_loss,
  )
  new_state = agent_state.replace(learner_state=learner_state,
                                  actor_state=actor_state,
                                  value_state=value_state)
  return loss, (new_state, metrics, meta_log)


def calculate_meta_gradient(
    update_rule_params: types.MetaParams,
    agent_state: MetaTrainState,
    train_rollouts: types.ActorRollout,
    valid_rollout: types.ActorRollout,
    rng: chex.PRNGKey,
    agent: MetaTrainAgent,
    axis_name: str | None = None,
    weights: MetaLossWeights = MetaLossWeights(),
) -> tuple[types.MetaParams, tuple[MetaTrainState, types.LogDict,
                                   types.LogDict]]:
  """Gradient of `meta_loss` w.r.t. the rule, averaged over `axis_name`.

  Returns:
    (meta-gradient, (new agent state, inner metrics, meta logs)); the
    gradient, metrics and logs are averaged across devices under `pmap`.
  """
  grads, (new_state, metrics, meta_log) = jax.grad(meta_loss, has_aux=True)(
      update_rule_params, agent_state, train_rollouts, valid_rollout, rng,
      agent, weights)
  if axis_name is not None:
    grads, metrics, meta_log = jax.lax.pmean((grads, metrics, meta_log),
                                             axis_name)
  return grads, (new_state, metrics, meta_log)


# ----------------------------------------------------------------------------
# The population loop (the upstream meta_train notebook, on any devices).

AXIS = 'i'


@dataclasses.dataclass
class MetaTrainConfig:
  """Settings of a meta-training run (defaults: the upstream notebook).

  Attributes:
    num_steps: meta-steps.
    num_agents: population size.
    batch_size_per_device: environments per agent and device.
    rollout_len: steps per training rollout (validation is twice as long).
    num_inner_steps: agent updates per meta-step.
    rows: Catch rows.
    columns: Catch columns.
    learning_rate: the agents' learning rate.
    dense: agent MLP hidden sizes.
    model_lstm_size: agent action-model LSTM size.
    model_head_hiddens: agent action-model head sizes.
    value_dense: value-function MLP hidden sizes.
    meta_learning_rate: Adam learning rate of the rule's parameters.
    init: 'random' (fresh meta-network) or 'disco_103' (fine-tune).
    rule_seed: seed of the fresh meta-network when init='random' (the
      upstream notebook draws it with key 1).
    seed: seed of the agents, environments and meta-steps.
    num_devices: devices to use (None: all local devices).
  """

  num_steps: int = 800
  num_agents: int = 2
  batch_size_per_device: int = 32
  rollout_len: int = 16
  num_inner_steps: int = 2
  rows: int = 5
  columns: int = 5
  learning_rate: float = 5e-4
  dense: tuple[int, ...] = (512, 512)
  model_lstm_size: int = 256
  model_head_hiddens: tuple[int, ...] = (256,)
  value_dense: tuple[int, ...] = (256, 256)
  meta_learning_rate: float = 5e-4
  init: str = 'random'
  rule_seed: int = 1
  seed: int = 4
  num_devices: int | None = None


def check_config(config: MetaTrainConfig) -> None:
  """Raises ValueError naming any setting that cannot work."""
  for name in ('num_steps', 'num_agents', 'batch_size_per_device',
               'num_inner_steps'):
    if getattr(config, name) < 1:
      raise ValueError(f'{name} must be >= 1, got {getattr(config, name)}.')
  if config.rollout_len < 2:
    raise ValueError(f'rollout_len must be >= 2, got {config.rollout_len}.')
  if config.init not in ('random', 'disco_103'):
    raise ValueError(f"init must be 'random' or 'disco_103', got "
                     f'{config.init!r}.')


def agent_settings(config: MetaTrainConfig) -> config_dict.ConfigDict:
  settings = agent_lib.get_settings_disco()
  settings.net_settings.net_args = dict(
      dense=tuple(config.dense), model_arch_name='lstm', head_w_init_std=1e-2,
      model_kwargs=dict(head_mlp_hiddens=tuple(config.model_head_hiddens),
                        lstm_size=config.model_lstm_size))
  settings.learning_rate = config.learning_rate
  return settings


def value_fn_config(config: MetaTrainConfig) -> types.ValueFnConfig:
  default = default_value_fn_config()
  return default.replace(net_args=dict(default.net_args,
                                       dense=tuple(config.value_dense)))


@chex.dataclass
class PopulationState:
  """Meta-parameters, their optimiser and every agent's state ([N, ...])."""

  update_rule_params: types.MetaParams
  meta_opt_state: optax.OptState
  agents: MetaTrainState


def _stack(trees):
  return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


class MetaTrainer:
  """A population of identical agents, meta-training one update rule.

  Each meta-step is one `jax.pmap` program over the devices; inside it the
  population is `vmap`-ed (the agents share settings, not state). Each
  device acts in its own environments; agent gradients, value-function
  gradients, the rule's statistics and the meta-gradient are averaged over
  devices.
  """

  def __init__(self, config: MetaTrainConfig,
               devices: list[jax.Device] | None = None):
    check_config(config)
    self.config = config
    self.devices = list(devices or jax.local_devices())
    if config.num_devices is not None:
      if not 1 <= config.num_devices <= len(self.devices):
        raise ValueError(f'num_devices={config.num_devices} but '
                         f'{len(self.devices)} devices are available.')
      self.devices = self.devices[:config.num_devices]
    self.member = MetaTrainAgent(
        batch_size_per_device=config.batch_size_per_device,
        agent_settings=agent_settings(config),
        value_fn_config=value_fn_config(config),
        axis_name=AXIS,
        env=catch_env(config.batch_size_per_device, config.rows,
                      config.columns))
    self.meta_opt = optax.adam(learning_rate=config.meta_learning_rate)
    self._step = jax.pmap(self._meta_step, axis_name=AXIS,
                          devices=self.devices)

  def init(self, rng: chex.PRNGKey, update_rule_params=None
           ) -> PopulationState:
    """Replicated parameters; per-device environment states.

    Agent `i` is initialised from `jax.random.split(rng, num_agents)[i]`, as
    in the upstream notebook, so on one device a run repeats the upstream's.
    Device 0 keeps the environments that initialisation reset; every other
    device resets its own (the upstream copies device 0's to all).

    Args:
      rng: a random key for the agents and their environments.
      update_rule_params: starting meta-parameters; default per
        `config.init`: Disco103's weights, or a fresh meta-network drawn
        with `jax.random.PRNGKey(config.rule_seed)`.
    """
    cfg = self.config
    if update_rule_params is None:
      if cfg.init == 'disco_103':
        from disco_rl import weights  # pylint: disable=g-import-not-at-top
        update_rule_params = weights.load_disco_103()
      else:
        update_rule_params, _ = self.member.agent.update_rule.init_params(
            jax.random.PRNGKey(cfg.rule_seed))
    update_rule_params = jax.tree.map(jnp.asarray, update_rule_params)
    agent_keys = jax.random.split(rng, cfg.num_agents)
    agents = _stack([self.member.init_state(key) for key in agent_keys])
    state = utils.replicate_across_devices(
        PopulationState(update_rule_params=update_rule_params,
                        meta_opt_state=self.meta_opt.init(update_rule_params),
                        agents=agents),
        self.devices)
    num = len(self.devices)
    if num == 1:
      return state
    # [D, N] keys: device 0 keeps its environments, the others reset theirs.
    reset_keys = jnp.stack([agent_keys] + [
        jax.vmap(lambda k, d=d: jax.random.fold_in(k, d))(agent_keys)
        for d in range(1, num)])
    env_state, timestep = jax.vmap(jax.vmap(self.member.env.reset))(
        reset_keys)
    first = (agents.env_state, agents.env_timestep)
    env_state, timestep = jax.tree.map(lambda x, x0: x.at[0].set(x0),
                                       (env_state, timestep), first)
    sharding = jax.tree.leaves(state.agents)[0].sharding
    return state.replace(agents=state.agents.replace(
        env_state=jax.device_put(env_state, sharding),
        env_timestep=jax.device_put(timestep, sharding)))

  def _agent_meta_gradient(self, update_rule_params, agent_state, act_rng,
                           grad_rng):
    """Rollouts and the meta-gradient of one agent (on one device)."""
    cfg = self.config
    step_rngs = jax.random.split(act_rng, cfg.num_inner_steps)
    rollouts = []
    for i in range(cfg.num_inner_steps):
      agent_state, rollout = self.member.unroll_actor(agent_state,
                                                      step_rngs[i],
                                                      cfg.rollout_len)
      rollouts.append(rollout)
    train_rollouts = _stack(rollouts)
    agent_state, valid_rollout = self.member.unroll_actor(
        agent_state, act_rng, 2 * cfg.rollout_len)
    grads, (agent_state, metrics, meta_log) = calculate_meta_gradient(
        update_rule_params, agent_state, train_rollouts, valid_rollout,
        grad_rng, self.member, axis_name=AXIS)
    rewards = train_rollouts.rewards
    meta_log = dict(meta_log,
                    rewards=jnp.mean(rewards),
                    pos_rewards=jnp.sum(rewards > 0).astype(jnp.float32),
                    neg_rewards=jnp.sum(rewards < 0).astype(jnp.float32))
    metrics = jax.tree.map(jnp.mean, metrics)
    return grads, agent_state, metrics, meta_log

  def _meta_step(self, state: PopulationState, rng):
    # Keys as the upstream derives them: one per agent for acting (its
    # training and validation rollouts) and one for its meta-gradient.
    act_rng, grad_rng = jax.random.split(rng)
    grads, agents, metrics, meta_log = jax.vmap(
        self._agent_meta_gradient, in_axes=(None, 0, 0, 0))(
            state.update_rule_params, state.agents,
            jax.random.split(act_rng, self.config.num_agents),
            jax.random.split(grad_rng, self.config.num_agents))
    # The counts are per device; average them like the upstream logs do.
    meta_log = jax.lax.pmean(meta_log, AXIS)
    avg_grads = jax.tree.map(lambda g: jnp.mean(g, axis=0), grads)
    updates, meta_opt_state = self.meta_opt.update(avg_grads,
                                                   state.meta_opt_state)
    params = optax.apply_updates(state.update_rule_params, updates)
    logs = jax.tree.map(jnp.mean, dict(meta_log, **{
        f'agent_{k}': v for k, v in metrics.items()}))
    logs['meta_grad_norm'] = optax.global_norm(avg_grads)
    logs['meta_up_norm'] = optax.global_norm(updates)
    return PopulationState(update_rule_params=params,
                           meta_opt_state=meta_opt_state,
                           agents=agents), logs

  def step(self, state: PopulationState, rng: chex.PRNGKey):
    """One meta-step; returns the new state and scalar logs (host floats)."""
    new_state, logs = self._step(state, jax.random.split(rng,
                                                         len(self.devices)))
    return new_state, logs

  def params(self, state: PopulationState) -> types.MetaParams:
    """The current meta-parameters, from the first device, on the host."""
    return utils.get_first(state.update_rule_params)


def save_params(params: types.MetaParams, path) -> None:
  """Saves meta-parameters in the disco_103.npz layout ('MODULE/w' keys)."""
  flat = {f'{module}/{name}': np.asarray(value)
          for module, leaves in params.items()
          for name, value in leaves.items()}
  np.savez(path, **flat)


def run_meta_train(config: MetaTrainConfig, output_dir,
                   progress: bool = True,
                   update_rule_params=None) -> dict[str, Any]:
  """Meta-trains a rule; writes metrics.csv, plots and the final weights.

  Returns:
    A summary: mean positive rewards over the last 100 meta-steps, meta-steps
    per second (after compilation), compile time and output paths.
  """
  from disco_rl import evaluation  # pylint: disable=g-import-not-at-top

  output_dir = pathlib.Path(output_dir)
  output_dir.mkdir(parents=True, exist_ok=True)
  trainer = MetaTrainer(config)
  # The upstream notebook's key plumbing: one key for the agents, the other
  # split once per meta-step.
  rng, init_rng = jax.random.split(jax.random.PRNGKey(config.seed))
  state = trainer.init(init_rng, update_rule_params)
  writer = evaluation.MetricsWriter(output_dir / 'metrics.csv')
  start = time.perf_counter()
  compile_s = None
  bar = tqdm.trange(config.num_steps, disable=not progress,
                    desc='meta-train')
  try:
    for step in bar:
      rng, step_rng = jax.random.split(rng)
      state, logs = trainer.step(state, step_rng)
      logs = {k: float(np.mean(v)) for k, v in jax.device_get(logs).items()}
      if compile_s is None:
        compile_s = time.perf_counter() - start
        steady_start = time.perf_counter()
      writer.write(dict(step=step, **logs,
                        rss_mb=evaluation.resident_memory_mb(),
                        time_s=time.perf_counter() - start))
      bar.set_postfix(pos_rewards=f'{logs["pos_rewards"]:.1f}',
                      meta_loss=f'{logs["meta_loss"]:.3f}')
  finally:
    writer.close()
  steady = time.perf_counter() - steady_start
  metrics = evaluation.read_metrics(output_dir / 'metrics.csv')
  plots = {}
  for key, label in (('pos_rewards', 'positive rewards per meta-step'),
                     ('neg_rewards', 'negative rewards per meta-step'),
                     ('meta_loss', 'meta loss'),
                     ('meta_grad_norm', 'meta-gradient norm'),
                     ('meta_up_norm', 'meta-update norm'),
                     ('rewards', 'mean reward')):
    plots[key] = str(evaluation.plot_curve(
        metrics['step'], metrics[key], output_dir / f'{key}.png',
        'meta-step', label, f'meta-training: {label}', smooth=20))
  weights_path = output_dir / 'update_rule_params.npz'
  save_params(trainer.params(state), weights_path)
  return dict(
      final_pos_rewards=float(np.mean(metrics['pos_rewards'][-100:])),
      first_pos_rewards=float(metrics['pos_rewards'][0]),
      steps=config.num_steps,
      compile_s=compile_s,
      meta_steps_per_second=((config.num_steps - 1) / steady
                             if config.num_steps > 1 else float('nan')),
      peak_memory_mb=evaluation.peak_memory_mb(),
      devices=len(trainer.devices),
      metrics_csv=str(output_dir / 'metrics.csv'),
      plots=plots,
      params_npz=str(weights_path),
  )
