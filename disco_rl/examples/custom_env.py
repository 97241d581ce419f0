# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Bring your own environment: a jittable `Environment` trained with Disco103.

  python -m disco_rl.examples.custom_env --steps 300 --out runs/corridor

`Corridor` implements `disco_rl.environments.base.Environment` in pure JAX:
batched `reset(rng)` / `step(state, actions)` returning
`types.EnvironmentTimestep`s, and the two specs. The Trainer checks it when
it is built (`base.check_jittable_environment`: specs against what `reset`
and `step` return, a scalar int32 action spec, a `step` state like
`reset`'s), then compiles acting and learning with it. Without a Trainer,
`disco_rl.make_eval(config, env=Corridor)` builds the same eval job (`Job`:
`job.init()`, then `job.step(state, count)`).
"""

import argparse
import sys

import chex
import dm_env
from dm_env import specs
import jax
import jax.numpy as jnp
import numpy as np

import disco_rl
from disco_rl import types
from disco_rl.environments import base


@chex.dataclass(mappable_dataclass=False)
class CorridorState:
  position: chex.Array  # [B] int32 cell, 0 .. length - 1.
  steps: chex.Array  # [B] int32 steps taken in the episode.


class Corridor(base.Environment[CorridorState]):
  """Walk from the middle of a corridor to its right end (reward +1).

  Actions: 0 left, 1 right. Reaching either end, or `max_steps` steps, ends
  the episode (LAST). As every environment of the package does, the step that
  ends an episode already shows the next episode's first observation.
  Observations: a one-hot float32 [length] vector of the position.
  """

  def __init__(self, batch_size: int, length: int = 7, max_steps: int = 20):
    self.batch_size = base.check_batch_size(batch_size)
    self.length, self.max_steps = length, max_steps

  def _timestep(self, state, reward, last):
    return types.EnvironmentTimestep(
      observation=jax.nn.one_hot(state.position, self.length),
      step_type=jnp.where(
        last, dm_env.StepType.LAST, dm_env.StepType.MID
      ).astype(jnp.int32),
      reward=reward.astype(jnp.float32),
    )

  def _start(self):
    return CorridorState(
      position=jnp.full((self.batch_size,), self.length // 2, jnp.int32),
      steps=jnp.zeros((self.batch_size,), jnp.int32),
    )

  def reset(self, rng_key):
    del rng_key  # Deterministic.
    state = self._start()
    zeros = jnp.zeros((self.batch_size,))
    return state, self._timestep(state, zeros, zeros > 0)

  def step(self, state, actions):
    position = state.position + 2 * actions.astype(jnp.int32) - 1
    steps = state.steps + 1
    won = position == self.length - 1
    last = won | (position == 0) | (steps >= self.max_steps)
    start = self._start()
    state = CorridorState(
      position=jnp.where(last, start.position, position),
      steps=jnp.where(last, 0, steps),
    )
    return state, self._timestep(state, won.astype(jnp.float32), last)

  def single_observation_spec(self):
    return {'observation': specs.Array((self.length,), np.float32)}

  def single_action_spec(self):
    return specs.BoundedArray((), np.int32, minimum=0, maximum=1)


def train(num_steps: int, output_dir=None, rule_params=None, **settings):
  """Trains an agent on `Corridor` with Disco103; returns the Trainer's summary.

  Args:
    num_steps: learner steps.
    output_dir: the run directory (None: nothing is written).
    rule_params: Disco103's weights (default: found by `disco_rl.weights`).
    **settings: more `EvalConfig` fields (sizes, seed, ...).
  """
  config = disco_rl.EvalConfig(
    env='custom', rule='disco_103', num_steps=num_steps, **settings
  )
  # The Trainer builds one Corridor per device, each with that device's
  # share of the environments (an Environment object works as well).
  trainer = disco_rl.Trainer(
    config, output_dir, env=Corridor, rule_params=rule_params, progress=False
  )
  return trainer.fit()


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--steps', type=int, default=300)
  parser.add_argument('--out', default=None)
  args = parser.parse_args(argv)
  summary = train(
    args.steps,
    args.out,
    batch_size=16,
    replay_ratio=4,
    buffer_capacity=128,
    rollout_len=16,
    dense=(64,),
    model_lstm_size=32,
    model_head_hiddens=(32,),
    learning_rate=1e-2,
  )
  print(f'final average return: {summary["final_avg_return"]}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
