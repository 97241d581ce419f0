# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval loop for a host (dm_env) environment, e.g. `env='catch'`.

Each actor step is one compiled program over the mesh
(`eval_program.host_act`); the host steps the environments with the chosen
actions; storing and learning run as one compiled program per rollout
(`eval_program.host_store_and_learn`), the same functions as in the fused
loop. One process and one run (`num_seeds=1`).
"""

import chex
import jax
import numpy as np

from disco_rl import types
from disco_rl import utils
from disco_rl.loops import config as config_lib
from disco_rl.loops import devices as devices_lib
from disco_rl.loops import eval_program
from disco_rl.loops import eval_setup
from disco_rl.loops import program

AXIS = devices_lib.AXIS
P = jax.sharding.PartitionSpec


class HostEvalLoop:
  """The eval loop of a host environment (see the module's docstring).

  The same interface as `eval_loop.EvalLoop`; the environments' state lives
  on the host (`host_env_state`, checkpointed by the eval job).

  Attributes:
    setup: the run's devices, environment (all `num_envs` of them), agent
      and sizes.
    rule_params: the rule's meta-parameters, replicated on the mesh.
    host_env_state: the host environments' state.
  """

  def __init__(self, config: config_lib.EvalConfig, rule_params=None,
               devices=None, load_weights: bool = True):
    if not config_lib.steps_on_host(config.env):
      raise ValueError(f'env={config.env!r} is jittable: use EvalLoop (or '
                       'make_eval_loop).')
    self.setup = eval_setup.make_setup(config, devices)
    if jax.process_count() > 1:
      raise ValueError('A host environment runs in one process; got '
                       f'{jax.process_count()} processes.')
    self.rule_params = eval_setup.rule_params_on_mesh(
        self.setup, rule_params, load_weights)
    self.host_env_state = None
    specs = eval_program.state_specs()
    mesh, precision = self.setup.mesh, config.matmul_precision
    self._init = program.on_mesh(
        lambda *args: eval_program.init(self.setup, *args),
        devices_lib.shardings(mesh, specs), precision)
    self._act = program.over_mesh(
        lambda *args: eval_program.host_act(self.setup, *args), mesh,
        (P(), P(), P(AXIS), P(AXIS)), (P(AXIS), P(AXIS)), precision)
    self._store_and_learn = program.over_mesh(
        lambda *args: eval_program.host_store_and_learn(self.setup, *args),
        mesh, (specs, P(AXIS), P()), (specs, P(devices_lib.SEED_AXIS)),
        precision,
        donate_state=True)

  def _to_devices(self, host_timestep) -> types.EnvironmentTimestep:
    """[E, ...] host arrays as [D, 1, E / D, ...] blocks (one run)."""
    num = self.setup.batch_devices
    split = jax.tree.map(
        lambda x: np.asarray(x).reshape((num, 1, -1) + np.shape(x)[1:]),
        host_timestep)
    return devices_lib.place(split, devices_lib.per_device(self.setup.mesh))

  def init(self, rngs: chex.PRNGKey | None = None
           ) -> eval_program.EvalState:
    """Resets the host environments; the initial state on the mesh.

    Args:
      rngs: [1, 2] or [2]: the run's key (default: `PRNGKey(config.seed)`).
    """
    if rngs is None:
      rngs = eval_setup.seed_keys(self.setup.config)
    rngs = eval_setup.as_seed_keys(rngs, 1)
    env_rng, rng = jax.random.split(rngs[0])
    self.host_env_state, host_timestep = self.setup.env.reset(env_rng)
    host_timestep = jax.tree.map(np.asarray, host_timestep)
    return self._init(rng[None], None, self._to_devices(host_timestep))

  def compile(self, state: eval_program.EvalState) -> float:
    """Nothing ahead: the actor step and the learn program compile at their
    first use, inside the first call. Returns 0.0."""
    del state
    return 0.0

  def run(self, state: eval_program.EvalState, num_steps: int | None = None):
    """Runs `num_steps` iterations (default `steps_per_call`).

    Returns:
      (new state, {name: [num_steps, 1] NumPy array}), as `EvalLoop.run`.
      Each iteration's metrics are checked as it ends: a fault stops the
      run at once.
    """
    config = self.setup.config
    num_steps = config.steps_per_call if num_steps is None else int(num_steps)
    if num_steps < 1:
      raise ValueError(f'num_steps must be >= 1, got {num_steps}.')
    collected = []
    for _ in range(num_steps):
      state, metrics = self._iterate(state)
      metrics = jax.tree.map(lambda x: np.asarray(x)[None], metrics)
      eval_program.raise_first_problem(
          self.setup, metrics, int(devices_lib.fetch(state.step)) - 1)
      collected.append(metrics)
    return state, jax.tree.map(lambda *steps: np.concatenate(steps),
                               *collected)

  def _iterate(self, state: eval_program.EvalState):
    """One iteration: `rollout_len` actor steps, the host environments
    stepped after each, then the store-and-learn program."""
    _, act_key, _ = eval_program.iteration_keys(state.rng[0])
    timestep, actor_state = state.timestep, state.actor_state
    steps = []
    for step_key in jax.random.split(act_key, self.setup.config.rollout_len):
      recorded, actor_state = self._act(state.learner_state.params, step_key,
                                        timestep, actor_state)
      actions = np.asarray(recorded.actions).reshape(-1)
      self.host_env_state, host_timestep = self.setup.env.step(
          self.host_env_state, actions)
      timestep = self._to_devices(jax.tree.map(np.asarray, host_timestep))
      steps.append(recorded)
    # [D, S, T, E, ...]: time after the device and seed axes.
    rollout = types.ActorRollout.from_timestep(utils.tree_stack(steps, axis=2))
    state = state.replace(timestep=timestep, actor_state=actor_state)
    state, metrics = self._store_and_learn(state, rollout, self.rule_params)
    return state, devices_lib.fetch(metrics)
