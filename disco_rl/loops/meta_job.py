# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Meta-training as `Trainer` runs it: its loop, rows, summary and outputs."""

import pathlib
from typing import Any

import jax
import numpy as np

from disco_rl import meta_objective
from disco_rl import types
from disco_rl.loops import config as config_lib
from disco_rl.loops import driver
from disco_rl.loops import meta_loop
from disco_rl.loops import meta_program
from disco_rl.loops import meta_setup
from disco_rl.loops import reporting
from disco_rl.loops import tasks as tasks_lib

PLOTS = (('pos_rewards', 'positive rewards per meta-step'),
         ('neg_rewards', 'negative rewards per meta-step'),
         ('meta_loss', 'meta loss'),
         ('meta_grad_norm', 'meta-gradient norm'),
         ('meta_up_norm', 'meta-update norm'),
         ('rewards', 'mean reward'))


class MetaTrainJob:
  """Meta-training as `Trainer` runs it: loop, rows, summary and outputs.

  A `Trainer` step is one meta-step.
  """

  name = 'meta_train'
  config_cls = config_lib.MetaTrainConfig

  def __init__(self, config: config_lib.MetaTrainConfig,
               rule_params=None, devices=None, restoring: bool = False):
    self.config = config
    self.loop = meta_loop.MetaTrainLoop(config, devices=devices)
    self.steps_per_call = config.steps_per_call
    self.rows_per_step = 1
    self.description = 'meta-train'
    # The rule's weights are loaded now, so that a bad file fails at once;
    # a run about to be restored starts from a fresh meta-network instead.
    self._rule_params = meta_setup.initial_rule_params(
        self.loop.setup, rule_params, load=not restoring)

  # The rule is part of the loop state (its `update_rule_params`).
  rule_params = None

  def iterations(self, num_steps: int) -> int:
    return num_steps

  def learner_steps(self, iterations: int) -> int:
    return iterations

  def init(self) -> meta_program.PopulationState:
    return self.loop.init(jax.random.PRNGKey(self.config.seed),
                          self._rule_params)

  def compile(self, state: meta_program.PopulationState) -> float:
    return self.loop.compile(state)

  def run(self, state: meta_program.PopulationState, num_steps: int):
    return self.loop.run(state, num_steps)

  def to_rows(self, logs, first_step: int):
    count = len(next(iter(logs.values())))
    return [dict(step=first_step + i, **{k: float(v[i]) for k, v in
                                         logs.items()}) for i in range(count)]

  def postfix(self, rows) -> dict[str, str]:
    return dict(pos_rewards=f'{rows[-1]["pos_rewards"]:.1f}',
                meta_loss=f'{rows[-1]["meta_loss"]:.3f}')

  def host_state(self) -> dict[str, Any]:
    return {}

  def set_host_state(self, extra: dict[str, Any]) -> None:
    del extra

  def rule_eval_config(self, state: meta_program.PopulationState,
                       params=None, env=None
                       ) -> tuple[types.MetaParams, config_lib.EvalConfig]:
    """What evaluating the rule trains: (its parameters, the eval settings).

    `Trainer.evaluate` trains a fresh agent with them.

    Args:
      state: the population state (its rule is the default).
      params: the rule's meta-parameters (default: the current ones).
      env: an `EvalConfig` (rule 'disco_103') for the agent, e.g. a held-out
        board size; default: `EvalConfig(num_steps=200)` on the first task,
        at the run's `matmul_precision`.
    """
    if params is None:
      params = self.loop.params(state)
    if env is None:
      env = config_lib.EvalConfig(
          **tasks_lib.eval_settings(self.loop.setup.tasks[0]),
          num_steps=200,
          matmul_precision=self.config.matmul_precision)
    if not isinstance(env, config_lib.EvalConfig) or env.rule != 'disco_103':
      raise ValueError('env must be an EvalConfig with rule disco_103 (a '
                       f'meta-learned rule), got {env!r}.')
    return params, env

  def summary(self, state: meta_program.PopulationState, rows,
              timing: driver.Timing) -> dict[str, Any]:
    """Positive rewards (last 100 meta-steps), speed, memory."""
    del state
    pos_rewards = [r['pos_rewards'] for r in rows] or [float('nan')]
    return dict(
        final_pos_rewards=float(np.mean(pos_rewards[-100:])),
        first_pos_rewards=pos_rewards[0],
        steps=len(rows),
        compile_s=timing.first_call_s,
        meta_steps_per_second=timing.steps_per_second,
        peak_memory_mb=reporting.peak_memory_mb(),
        devices=self.loop.setup.num_devices,
        processes=jax.process_count(),
        tasks=[t.spec() for t in self.loop.setup.tasks],
        agents_per_task=list(self.loop.setup.group_sizes),
    )

  def write_outputs(self, state: meta_program.PopulationState, rows,
                    output_dir: pathlib.Path, lead: bool) -> dict[str, Any]:
    """One plot per logged curve and the learned rule's parameters.

    Every process calls it (fetching the parameters may gather them); only
    the `lead` one writes.
    """
    params = self.loop.params(state)
    if not lead:
      return {}
    curves = list(PLOTS)
    if len(self.loop.setup.tasks) > 1:
      curves += [(f'rewards_task{g}', f'mean reward on {t.spec()}')
                 for g, t in enumerate(self.loop.setup.tasks)]
    outputs = dict(plots={
        key: str(reporting.plot_curve(
            [r['step'] for r in rows], [r[key] for r in rows],
            output_dir / f'{key}.png', 'meta-step', label,
            f'meta-training: {label}', smooth=20))
        for key, label in curves})
    weights_path = output_dir / 'update_rule_params.npz'
    meta_objective.save_params(params, weights_path)
    outputs['params_npz'] = str(weights_path)
    return outputs
