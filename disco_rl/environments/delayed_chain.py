# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The delayed-chain MDPs LPG was meta-trained on (Oh et al. 2020).

Two actions. The first action of an episode chooses one of two chains; the
episode lasts `length` steps (the start and `length - 1` states of the
chosen chain, one action each, the later ones without effect), and only its
last step is rewarded: +1 if the first action was the rewarding one, else
-1. The chain length and the rewarding action are drawn once per *layout*
(fixed over an agent's life, as in LPG: `length` in [min, max] uniformly,
the rewarding action 0 or 1) from `PRNGKey(layout_seed)`, or with
`layout_seed=-1` from each `reset` key, shared by the batch. Variants (the
paper's appendix):

* 'short' (length 5-30) and 'long' (5-50);
* 'short_noisy', 'long_noisy': every step but the last also pays +1 or -1
  at random (equally likely), noise the agent must see through;
* 'distractor': 'short' with 20 random bits (fresh at every step) beside
  the state in the observation.

Observation (`{'observation': uint8}`): the one-hot of the state, [1 + 2 *
(max - 1)] (the start, then step k of chain a at `1 + 2 * (k - 1) + a`),
then the distractor bits. Written from the paper's description and two
public reimplementations (the rewarding first action and the two chains'
distinct states; the +-1 noise on every step but the last); GROOVE has no
delayed chain.
"""

import dataclasses

import chex
from dm_env import specs
import jax
import jax.numpy as jnp
import numpy as np

from disco_rl import types
from disco_rl.environments import base

NUM_ACTIONS = 2


@dataclasses.dataclass(frozen=True)
class ChainConfig:
  """One variant.

  Attributes:
    min_length: the shortest chain (>= 2 steps).
    max_length: the longest chain (its states size the observation).
    noisy: every step but the last pays +1 or -1 at random.
    distractor_bits: random bits appended to the observation.
  """

  min_length: int
  max_length: int
  noisy: bool = False
  distractor_bits: int = 0


CONFIGS = {
  'short': ChainConfig(5, 30),
  'short_noisy': ChainConfig(5, 30, noisy=True),
  'long': ChainConfig(5, 50),
  'long_noisy': ChainConfig(5, 50, noisy=True),
  'distractor': ChainConfig(5, 30, distractor_bits=20),
}


@chex.dataclass(frozen=True)
class ChainState:
  """One instance's state.

  Attributes:
    length: [] int32, the chain's steps per episode.
    rewarding: [] int32, the first action that pays +1.
    step: [] int32, steps taken in the episode (0: at the start).
    chain: [] int32, the chain chosen by the first action.
    rng: its key.
  """

  length: chex.Array
  rewarding: chex.Array
  step: chex.Array
  chain: chex.Array
  rng: chex.PRNGKey


def num_states(config: ChainConfig) -> int:
  """The states of the longest chain: the start and two chains."""
  return 1 + 2 * (config.max_length - 1)


def state_index(step: chex.Array, chain: chex.Array) -> chex.Array:
  """[] int32: 0 at the start, `1 + 2 * (step - 1) + chain` after it."""
  return jnp.where(step == 0, 0, 1 + 2 * (step - 1) + chain)


def draw_layout(
  key: chex.PRNGKey, config: ChainConfig, length: int | None = None
) -> tuple[chex.Array, chex.Array]:
  """(length, rewarding action), [] int32 each: the chain's length drawn
  uniformly in [min, max] (or `length`), the rewarding action 0 or 1."""
  length_key, action_key = jax.random.split(key)
  if length is None:
    drawn = jax.random.randint(
      length_key, (), config.min_length, config.max_length + 1, jnp.int32
    )
  else:
    drawn = jnp.int32(length)
  return drawn, jax.random.randint(action_key, (), 0, NUM_ACTIONS, jnp.int32)


def chain_reward(
  state: ChainState, ended: chex.Array, noise: chex.Array
) -> chex.Array:
  """[] float32: +1 or -1 at the last step (by the first action), else
  `noise`."""
  final = jnp.where(state.chain == state.rewarding, 1.0, -1.0)
  return jnp.where(ended, final, noise).astype(jnp.float32)


class DelayedChain(base.AdapterEnvironment[ChainState]):
  """`batch_size` instances of a delayed chain (module docstring), pure JAX.

  Every episode ends by termination (discount 0) at its last step, which
  already shows the next episode's start (`base.transition`).
  """

  def __init__(
    self,
    batch_size: int,
    config: ChainConfig,
    layout_seed: int = 0,
    length: int | None = None,
    name: str = 'delayed chain',
  ):
    """Builds the environment.

    Args:
      batch_size: the number of instances B.
      config: the variant (`CONFIGS`).
      layout_seed: the seed of the chain's length and rewarding action
        (>= 0), or -1: drawn from each `reset` key, shared by the batch.
      length: the chain's length instead of a drawn one (2 to the
        variant's max).
      name: shown in messages.
    """
    self.batch_size = base.check_batch_size(batch_size)
    self.config = config
    self.name = name
    if (
      isinstance(layout_seed, bool)
      or not isinstance(layout_seed, int)
      or layout_seed < -1
    ):
      raise ValueError(
        f'{name}: layout_seed must be an integer >= 0, or -1 '
        f'(drawn per reset key), got {layout_seed!r}.'
      )
    if length is not None and (
      isinstance(length, bool)
      or not isinstance(length, int)
      or not 2 <= length <= config.max_length
    ):
      raise ValueError(
        f'{name}: length must be an integer in [2, '
        f'{config.max_length}], got {length!r}.'
      )
    self.layout_seed, self.length = layout_seed, length
    size = num_states(config) + config.distractor_bits
    self._single_observation_spec = {
      'observation': specs.Array((size,), np.uint8, name='observation')
    }
    self._single_action_spec = base.discrete_action_spec(NUM_ACTIONS)

  def _observe(self, state: ChainState, key: chex.PRNGKey) -> types.Specs:
    one_hot = jax.nn.one_hot(
      state_index(state.step, state.chain),
      num_states(self.config),
      dtype=jnp.uint8,
    )
    bits = self.config.distractor_bits
    if bits:
      noise = jax.random.bernoulli(key, 0.5, (bits,)).astype(jnp.uint8)
      one_hot = jnp.concatenate([one_hot, noise])
    return {'observation': one_hot}

  def layout(self, rng_key: chex.PRNGKey) -> tuple[chex.Array, chex.Array]:
    """(length, rewarding action) `reset(rng_key)` gives every instance."""
    if self.layout_seed >= 0:
      key = jax.random.PRNGKey(self.layout_seed)
    else:
      key = jax.random.fold_in(rng_key, 0x1A7)
    return draw_layout(key, self.config, self.length)

  def _reset_one(self, layout, key: chex.PRNGKey):
    carry, observe_key = jax.random.split(key)
    state = ChainState(
      length=layout[0],
      rewarding=layout[1],
      step=jnp.int32(0),
      chain=jnp.int32(0),
      rng=carry,
    )
    return state, base.restart(self._observe(state, observe_key))

  def reset(  # pytype: disable=signature-mismatch
    self, rng_key: chex.PRNGKey
  ) -> tuple[ChainState, types.EnvironmentTimestep]:
    """B new episodes of one chain (`layout(rng_key)`), instance b with
    `split(rng_key, B)[b]`: step types FIRST, rewards 0, [B]."""
    layout = self.layout(rng_key)
    keys = jax.random.split(rng_key, self.batch_size)
    return jax.vmap(self._reset_one, in_axes=(None, 0))(layout, keys)

  def _step_one(self, state: ChainState, action: chex.Array):
    carry, noise_key, observe_key = jax.random.split(state.rng, 3)
    chain = jnp.where(state.step == 0, action, state.chain)
    state = dataclasses.replace(
      state, step=state.step + 1, chain=chain, rng=carry
    )
    ended = state.step >= state.length
    noise: jax.Array | float = 0.0
    if self.config.noisy:
      noise = jnp.where(jax.random.bernoulli(noise_key), 1.0, -1.0)
    reward = chain_reward(state, ended, noise)
    state = dataclasses.replace(
      state,
      step=jnp.where(ended, 0, state.step),
      chain=jnp.where(ended, 0, state.chain),
    )
    timestep, info = base.transition(
      self._observe(state, observe_key), reward, ended, False
    )
    return state, timestep, info

  def step_with_info(self, state: ChainState, actions: chex.Array):
    """`step`, and how each episode ended; [B] actions in [0, 2)."""
    chex.assert_shape(actions, (self.batch_size,))
    return jax.vmap(self._step_one)(state, jnp.asarray(actions, jnp.int32))
