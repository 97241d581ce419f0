# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The meta-training loop: the meta-training program compiled over devices.

`MetaTrainLoop` compiles `steps_per_call` meta-steps of `meta_program.run`
into one `jax.jit` program over the device mesh (`jax.shard_map`,
`loops/program.py`), the population state donated; the logs of all
meta-steps come back together and are checked on the host.
"""

import chex
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from disco_rl import types
from disco_rl.loops import config as config_lib
from disco_rl.loops import devices as devices_lib
from disco_rl.loops import meta_program
from disco_rl.loops import meta_setup
from disco_rl.loops import program


class MetaTrainLoop:
  """A population of agents over a task suite meta-training one update rule.

  Usage:
    loop = MetaTrainLoop(config)
    state = loop.init(jax.random.PRNGKey(config.seed))
    state, logs = loop.run(state)  # steps_per_call meta-steps

  `logs` holds one [K] NumPy array per name for the K meta-steps run.

  Attributes:
    setup: the run's devices, tasks, agents (`setup.members`, one per task)
      and the rule's optimiser (read when the programs are traced, at their
      first use).
  """

  def __init__(self, config: config_lib.MetaTrainConfig, devices=None):
    self.setup = meta_setup.make_setup(config, devices)
    specs = meta_program.state_specs(len(self.setup.tasks))
    mesh, precision = self.setup.mesh, config.matmul_precision
    self._init = program.on_mesh(
        lambda *args: meta_program.init(self.setup, *args),
        devices_lib.shardings(mesh, specs), precision)
    self._run = program.over_mesh(
        lambda *args: meta_program.run(self.setup, *args), mesh,
        (specs, P()), (specs, P()), precision, donate_state=True)

  def init(self, rng: chex.PRNGKey, update_rule_params=None
           ) -> meta_program.PopulationState:
    """The initial population on the mesh (see `meta_program.init`).

    Args:
      rng: the run's key (the notebook's `PRNGKey(seed)`).
      update_rule_params: starting meta-parameters; default per
        `config.init`: Disco103's weights, or a fresh meta-network drawn
        with `jax.random.PRNGKey(config.rule_seed)`.
    """
    params = devices_lib.place(
        meta_setup.initial_rule_params(self.setup, update_rule_params),
        devices_lib.replicated(self.setup.mesh))
    return self._init(rng, params)

  def lower(self, state: meta_program.PopulationState) -> jax.stages.Lowered:
    """The run program lowered for `state` (`.compile()`, cost analysis)."""
    return self._run.lower(state, jnp.int32(1))

  def compile(self, state: meta_program.PopulationState) -> float:
    """Compiles the run program for `state` before the first call (a point
    where a run can stop before any step); `run` then uses it.

    Returns:
      The seconds it took (0.0 if it was compiled before).
    """
    return self._run.compile(state, jnp.int32(1))

  def run(self, state: meta_program.PopulationState,
          num_steps: int | None = None):
    """Runs `num_steps` (<= steps_per_call, default all) meta-steps.

    The given state is donated: use the returned one.

    Returns:
      (new state, {name: [num_steps] NumPy array} of scalar logs).

    Raises:
      RolloutError, DivergedError: see `meta_program.raise_first_problem`.
    """
    per_call = self.setup.config.steps_per_call
    num_steps = per_call if num_steps is None else int(num_steps)
    if not 0 < num_steps <= per_call:
      raise ValueError(f'num_steps must be in [1, steps_per_call={per_call}]'
                       f', got {num_steps}.')
    state, logs = self._run(state, jnp.int32(num_steps))
    logs = jax.tree.map(lambda v: v[:num_steps], devices_lib.fetch(logs))
    meta_program.raise_first_problem(
        logs, int(devices_lib.fetch(state.step)) - num_steps)
    return state, logs

  def params(self, state: meta_program.PopulationState) -> types.MetaParams:
    """The current meta-parameters as NumPy arrays on the host."""
    return devices_lib.fetch(state.update_rule_params)


# The name this loop had before (the tests and `disco_rl.meta_train` use it).
MetaTrainer = MetaTrainLoop
