# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The fused eval loop: the eval program compiled for jittable environments.

`EvalLoop` compiles `steps_per_call` iterations of `eval_program.run`
(act, store, maybe learn; every run of `num_seeds`) into one `jax.jit`
program over the device mesh (`jax.shard_map`, `loops/program.py`): acting,
the buffer, sampling, the learning gate and the learner step never leave
the devices, the metrics of all iterations come back together, and the
state is donated so the buffer is updated in place. The environments
stepped in Python have their own loop, `host_eval_loop.HostEvalLoop`.
"""

import chex
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from disco_rl.environments import base as base_env
from disco_rl.loops import config as config_lib
from disco_rl.loops import devices as devices_lib
from disco_rl.loops import eval_program
from disco_rl.loops import eval_setup
from disco_rl.loops import program


class EvalLoop:
  """The fused eval loop for jittable environments.

  Usage:
    loop = EvalLoop(config)
    state = loop.init()  # The runs of seeds config.seed, config.seed + 1...
    state, metrics = loop.run(state, config.steps_per_call)

  `metrics` holds one [K, S] NumPy array per name (K iterations of S runs):
  `return_sum` and `episodes` of the episodes that ended, `learned` (1.0 if
  the iteration took a learner step) and the learner scalars
  (`setup.log_keys`; NaN before learning starts).

  Attributes:
    setup: the run's devices, environment, agent and sizes (read when the
      programs are traced, at their first use).
    rule_params: the rule's meta-parameters, replicated on the mesh.
  """

  def __init__(self, config: config_lib.EvalConfig, rule_params=None,
               devices=None, load_weights: bool = True,
               env: base_env.Environment | None = None):
    """Builds the environment, the agent and the compiled programs.

    Args:
      config: the run's settings.
      rule_params: the rule's meta-parameters (default: see
        `eval_setup.default_rule_params`).
      devices: the devices to use (default: the config's choice).
      load_weights: see `eval_setup.default_rule_params`.
      env: with `config.env == 'custom'`, the jittable environment (see
        `eval_setup.make_setup`).
    """
    if config_lib.steps_on_host(config.env):
      raise ValueError(f'env={config.env!r} is stepped on the host: use '
                       'HostEvalLoop (or make_eval_loop).')
    self.setup = eval_setup.make_setup(config, devices, env)
    self.rule_params = eval_setup.rule_params_on_mesh(
        self.setup, rule_params, load_weights)
    specs = eval_program.state_specs()
    self._init = program.on_mesh(
        lambda rngs: eval_program.reset(self.setup, rngs),
        devices_lib.shardings(self.setup.mesh, specs),
        config.matmul_precision)
    self._run = program.over_mesh(
        lambda *args: eval_program.run(self.setup, *args), self.setup.mesh,
        (specs, P(), P()), (specs, eval_program.METRICS_SPEC),
        config.matmul_precision,
        donate_state=True)

  def init(self, rngs: chex.PRNGKey | None = None
           ) -> eval_program.EvalState:
    """The initial state of the runs, placed on the mesh.

    Args:
      rngs: [S, 2], one key per run, or [2] when `num_seeds` is 1 (default:
        `eval_setup.seed_keys(config)`).
    """
    config = self.setup.config
    if rngs is None:
      rngs = eval_setup.seed_keys(config)
    return self._init(eval_setup.as_seed_keys(rngs, config.num_seeds))

  def lower(self, state: eval_program.EvalState) -> jax.stages.Lowered:
    """The run program lowered for `state` (`.compile()`, cost analysis)."""
    return self._run.lower(state, jnp.int32(1), self.rule_params)

  def compile(self, state: eval_program.EvalState) -> float:
    """Compiles the run program for `state` before the first call (a point
    where a run can stop before any step); `run` then uses it.

    Returns:
      The seconds it took (0.0 if it was compiled before).
    """
    return self._run.compile(state, jnp.int32(1), self.rule_params)

  def run(self, state: eval_program.EvalState, num_steps: int | None = None):
    """Runs `num_steps` (<= steps_per_call, default all) iterations.

    One compiled program whatever `num_steps` is. The given state is donated
    (its buffers are reused): use the returned one.

    Returns:
      (new state, {name: [num_steps, S] NumPy array}).

    Raises:
      RolloutError, DivergedError: see `eval_program.raise_first_problem`.
    """
    per_call = self.setup.config.steps_per_call
    num_steps = per_call if num_steps is None else int(num_steps)
    if not 0 < num_steps <= per_call:
      raise ValueError(f'num_steps must be in [1, steps_per_call={per_call}]'
                       f', got {num_steps}.')
    state, metrics = self._run(state, jnp.int32(num_steps), self.rule_params)
    metrics = jax.tree.map(lambda v: v[:num_steps],
                           devices_lib.fetch(metrics))
    first_step = int(devices_lib.fetch(state.step)) - num_steps
    eval_program.raise_first_problem(self.setup, metrics, first_step)
    return state, metrics
