# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The gridworlds LPG was meta-trained on (Oh et al. 2020, arXiv 2007.08794).

An agent walks a square grid (5 actions: up, down, left, right, stay; walls
and the border block it) among objects of a few types. Each type has a
reward, a termination probability and a respawn probability: stepping onto
an object collects it (its reward; the episode then terminates with the
type's probability) and removes it; every step an absent object comes back
with its type's respawn probability. Episodes also end at a step limit (a
truncation). The configurations are those of GROOVE (Jackson et al. 2023,
EmptyJackson/groove, `environments/gridworld/configs.py`), the JAX
reimplementation of LPG, by GROOVE's names:

* tabular (objects always return to their own cells; the observation is
  the state's one-hot): 'dense', 'sparse', 'long', 'longer', 'long_dense'
  (the paper's Dense, Sparse, Long Horizon, Longer Horizon, Long Dense);
* random (objects appear at random free cells at every episode start and
  respawn; the observation is the object map): 'rand_dense', 'rand_long',
  'rand_small', 'rand_sparse', 'rand_very_dense';
* GROOVE's distributions, whose grid size, walls, step limit, object count
  and object types are drawn with the layout: 'small', 'medium', 'large',
  'all' (tabular) and 'rand_all' (random).

A *layout* is what stays fixed over an agent's life: the grid size, walls,
step limit, the types' rewards and probabilities, the agent's start cell
and the objects' own cells. It is drawn from `PRNGKey(layout_seed)` (one
layout for every instance and every reset: held-out layouts are other
seeds), or, with `layout_seed=-1`, from each `reset` key, shared by the
batch (each meta-training agent, whose reset key is its own, then lives in
its own layout, as in GROOVE).

Cells are (row, column) pairs; a cell's index is `row * G + column` on the
configuration's largest grid G x G (a layout's grid is its top-left
`grid_size` x `grid_size` corner).
"""

import dataclasses

import chex
from dm_env import specs
import jax
import jax.numpy as jnp
import numpy as np

from disco_rl import types
from disco_rl.environments import base

# Row and column steps of the actions: up, down, left, right, stay.
MOVES = np.array([[-1, 0], [1, 0], [0, -1], [0, 1], [0, 0]], np.int32)
NUM_ACTIONS = len(MOVES)
STAY = 4
# The ranges GROOVE draws a distribution's object types from.
_REWARD_RANGE = (-1.0, 1.0)  # The first type's reward is in [0, 1].
_TERMINATE_RANGE = (1e-2, 1.0)  # Log-uniform.
_RESPAWN_RANGE = (1e-3, 1e-1)  # Log-uniform.
# Observation kinds: the state's one-hot (tabular) or the object map.
OBSERVATIONS = ('state', 'map')


@dataclasses.dataclass(frozen=True)
class GridConfig:
  """One configuration: fixed values, or the ranges a layout draws from.

  Attributes:
    size: G, the side of the largest grid (the observation's).
    grid_size: (min, max) side of a layout's grid, drawn uniformly.
    max_steps: (min, max) step limit of an episode, drawn log-uniformly
      and rounded (min == max: fixed).
    object_types: the type of each object slot [N]; a layout uses the
      first `num_objects` slots.
    num_objects: (min, max) objects in use, drawn uniformly.
    rewards: each type's reward [K], or None: drawn (the first type's in
      [0, 1], the others' in [-1, 1]).
    p_terminate: each type's termination probability on collection [K],
      or None: drawn log-uniformly in [0.01, 1].
    p_respawn: each type's respawn probability per step [K], or None:
      drawn log-uniformly in [0.001, 0.1].
    walls: fixed wall cells, as indices `row * size + column`.
    num_random_walls: walls drawn at distinct random cells of the G x G
      grid (those outside a layout's grid do nothing).
    tabular: objects return to their own cells (else to random free
      cells, also at every episode start); the default observation is
      then the state's one-hot, else the object map.
  """

  size: int
  grid_size: tuple[int, int]
  max_steps: tuple[int, int]
  object_types: tuple[int, ...]
  num_objects: tuple[int, int]
  rewards: tuple[float, ...] | None
  p_terminate: tuple[float, ...] | None
  p_respawn: tuple[float, ...] | None
  walls: tuple[int, ...] = ()
  num_random_walls: int = 0
  tabular: bool = True

  @property
  def num_slots(self) -> int:
    """N, the object slots."""
    return len(self.object_types)

  @property
  def num_types(self) -> int:
    """K, the object types."""
    return max(self.object_types) + 1


def _fixed(
  size,
  max_steps,
  object_types,
  rewards,
  p_terminate,
  p_respawn,
  walls=(),
  tabular=True,
) -> GridConfig:
  """A configuration of one layout but for its cells (the paper's)."""
  return GridConfig(
    size=size,
    grid_size=(size, size),
    max_steps=(max_steps, max_steps),
    object_types=tuple(object_types),
    num_objects=(len(object_types), len(object_types)),
    rewards=tuple(rewards),
    p_terminate=tuple(p_terminate),
    p_respawn=tuple(p_respawn),
    walls=tuple(int(w) for w in walls),
    tabular=tabular,
  )


def _drawn(
  sizes, max_steps, num_types, num_objects, num_walls, tabular=True
) -> GridConfig:
  """A GROOVE distribution: one object slot per type, all else drawn."""
  return GridConfig(
    size=sizes[1],
    grid_size=sizes,
    max_steps=max_steps,
    object_types=tuple(range(num_types)),
    num_objects=num_objects,
    rewards=None,
    p_terminate=None,
    p_respawn=None,
    num_random_walls=num_walls,
    tabular=tabular,
  )


def wall_line(
  size: int,
  row: int | None = None,
  column: int | None = None,
  gaps: tuple[int, ...] = (),
) -> tuple[int, ...]:
  """The cells of one full row or column, but for the `gaps` (columns of a
  row, rows of a column), as indices `row * size + column`."""
  if row is not None and column is None:
    return tuple(row * size + c for c in range(size) if c not in gaps)
  if column is not None and row is None:
    return tuple(r * size + column for r in range(size) if r not in gaps)
  raise ValueError('wall_line takes a row or a column.')


CONFIGS = {
  'dense': _fixed(
    11, 500, (0, 0, 1, 2), (1.0, -1.0, -1.0), (0.0, 0.5, 0.0), (0.05, 0.1, 0.5)
  ),
  'sparse': _fixed(13, 50, (0, 1), (1.0, -1.0), (1.0, 1.0), (0.0, 0.0)),
  'long': _fixed(11, 1000, (0, 0, 1, 1), (1.0, -1.0), (0.0, 0.5), (0.01, 1.0)),
  # A wall down the middle column with two gaps (GROOVE: 5 objects, the
  # paper 7).
  'longer': _fixed(
    9,
    2000,
    (0, 0, 1, 1, 1),
    (1.0, -1.0),
    (0.1, 0.8),
    (0.01, 1.0),
    walls=wall_line(9, column=4, gaps=(1, 7)),
  ),
  # Four rooms: a column and a row of walls, two gaps each.
  'long_dense': _fixed(
    11,
    2000,
    (0, 0, 0, 0),
    (1.0,),
    (0.0,),
    (0.005,),
    walls=wall_line(11, column=5, gaps=(0, 7))
    + wall_line(11, row=4, gaps=(2, 8)),
  ),
  'rand_dense': _fixed(
    11,
    500,
    (0, 0, 1, 2),
    (1.0, -1.0, -1.0),
    (0.0, 0.5, 0.0),
    (0.05, 0.1, 0.5),
    tabular=False,
  ),
  'rand_long': _fixed(
    11, 1000, (0, 0, 1, 1), (1.0, -1.0), (0.0, 0.5), (0.01, 1.0), tabular=False
  ),
  'rand_small': _fixed(
    7,
    500,
    (0, 0, 1, 1),
    (1.0, -1.0),
    (0.0, 0.5),
    (0.05, 0.1),
    walls=(9, 25),
    tabular=False,
  ),
  'rand_sparse': _fixed(
    7, 50, (0, 1, 1), (1.0, -1.0), (1.0, 1.0), (1.0, 1.0), tabular=False
  ),
  'rand_very_dense': _fixed(
    11, 2000, (0,), (1.0,), (0.0,), (1.0,), tabular=False
  ),
  'small': _drawn((4, 6), (20, 100), 3, (1, 3), 7),
  'medium': _drawn((6, 8), (100, 250), 4, (2, 4), 10),
  'large': _drawn((8, 10), (250, 750), 5, (2, 5), 15),
  'all': _drawn((4, 10), (20, 750), 5, (1, 5), 15),
  'rand_all': _drawn((4, 10), (20, 750), 5, (1, 5), 15, tabular=False),
}


@chex.dataclass(frozen=True)
class Layout:
  """What stays fixed over an agent's life (N slots, K types, G x G grid).

  Attributes:
    grid_size: [] int32, the side of the layout's grid (<= G).
    max_steps: [] int32, the episode's step limit.
    walls: [G, G] bool.
    start: [2] int32, the agent's first cell of every episode.
    homes: [N, 2] int32, each object's own cell (tabular configurations).
    num_objects: [] int32, the slots in use (the first ones).
    rewards: [N] float32, each slot's reward (its type's).
    p_terminate: [N] float32, each slot's termination probability.
    p_respawn: [N] float32, each slot's respawn probability per step.
  """

  grid_size: chex.Array
  max_steps: chex.Array
  walls: chex.Array
  start: chex.Array
  homes: chex.Array
  num_objects: chex.Array
  rewards: chex.Array
  p_terminate: chex.Array
  p_respawn: chex.Array


@chex.dataclass(frozen=True)
class GridState:
  """One instance's state.

  Attributes:
    layout: its `Layout`.
    position: [2] int32, the agent's cell.
    objects: [N, 2] int32, each object's cell.
    present: [N] bool, which objects are on the grid.
    time: [] int32, steps taken in the episode.
    rng: its key.
  """

  layout: Layout
  position: chex.Array
  objects: chex.Array
  present: chex.Array
  time: chex.Array
  rng: chex.PRNGKey


# ----------------------------------------------------------------------------
# Layouts.


def _uniform_int(key: chex.PRNGKey, bounds: tuple[int, int]) -> chex.Array:
  """[] int32 uniform in [min, max] (both included)."""
  return jax.random.randint(key, (), bounds[0], bounds[1] + 1, jnp.int32)


def _log_uniform(
  key: chex.PRNGKey, bounds: tuple[float, float], shape: tuple[int, ...] = ()
) -> chex.Array:
  """float32 of `shape`, log-uniform in [min, max]."""
  low, high = np.log(bounds[0]), np.log(bounds[1])
  return jnp.exp(jax.random.uniform(key, shape, jnp.float32, low, high))


def _type_values(
  key: chex.PRNGKey, fixed: tuple[float, ...] | None, num_types: int, draw
) -> chex.Array:
  """[K] float32: `fixed` (padded with zeros), or `draw(key, (K,))`."""
  if fixed is None:
    return draw(key, (num_types,))
  padded = tuple(fixed) + (0.0,) * (num_types - len(fixed))
  return jnp.asarray(padded, jnp.float32)


def _draw_rewards(key: chex.PRNGKey, shape: tuple[int, ...]) -> chex.Array:
  """[K] rewards in [-1, 1], the first type's in [0, 1] (GROOVE's)."""
  rewards = jax.random.uniform(key, shape, jnp.float32, *_REWARD_RANGE)
  return rewards.at[0].set(jnp.abs(rewards[0]))


def in_grid(cells: chex.Array, grid_size: chex.Array) -> chex.Array:
  """[...] bool: cells [..., 2] inside the top-left grid_size square."""
  return jnp.all((cells >= 0) & (cells < grid_size), axis=-1)


def _cell_grid(size: int) -> chex.Array:
  """[G * G, 2] int32: every cell, by index."""
  rows, columns = np.divmod(np.arange(size * size), size)
  return jnp.asarray(np.stack([rows, columns], -1), jnp.int32)


def _distinct_cells(
  key: chex.PRNGKey, free: chex.Array, count: int
) -> chex.Array:
  """[count, 2] int32: distinct cells drawn uniformly among the `free`
  ones ([G, G] bool, at least `count` of them)."""
  size = free.shape[0]
  scores = jnp.where(
    free.reshape(-1), jax.random.uniform(key, (size * size,)), -1.0
  )
  _, index = jax.lax.top_k(scores, count)
  return _cell_grid(size)[index]


def draw_layout(key: chex.PRNGKey, config: GridConfig) -> Layout:
  """A layout of `config` drawn with `key` (fixed values stay fixed)."""
  keys = jax.random.split(key, 8)
  size, num_types = config.size, config.num_types
  grid_size = _uniform_int(keys[0], config.grid_size)
  if config.max_steps[0] == config.max_steps[1]:
    max_steps = jnp.int32(config.max_steps[0])
  else:
    max_steps = jnp.round(_log_uniform(keys[1], config.max_steps)).astype(
      jnp.int32
    )
  fixed_walls = np.zeros(size * size, bool)
  fixed_walls[list(config.walls)] = True
  walls = jnp.asarray(fixed_walls)
  if config.num_random_walls:
    chosen = jax.random.choice(
      keys[2], size * size, (config.num_random_walls,), replace=False
    )
    walls = walls.at[chosen].set(True)
  walls = walls.reshape(size, size)
  free = ~walls & in_grid(_cell_grid(size), grid_size).reshape(size, size)
  cells = _distinct_cells(keys[3], free, config.num_slots + 1)
  types_ = jnp.asarray(config.object_types, jnp.int32)
  rewards = _type_values(keys[4], config.rewards, num_types, _draw_rewards)
  p_terminate = _type_values(
    keys[5],
    config.p_terminate,
    num_types,
    lambda k, s: _log_uniform(k, _TERMINATE_RANGE, s),
  )
  p_respawn = _type_values(
    keys[6],
    config.p_respawn,
    num_types,
    lambda k, s: _log_uniform(k, _RESPAWN_RANGE, s),
  )
  return Layout(
    grid_size=grid_size,
    max_steps=max_steps,
    walls=walls,
    start=cells[0],
    homes=cells[1:],
    num_objects=_uniform_int(keys[7], config.num_objects),
    rewards=rewards[types_],
    p_terminate=p_terminate[types_],
    p_respawn=p_respawn[types_],
  )


# ----------------------------------------------------------------------------
# Dynamics of one instance.


def move(
  layout: Layout, position: chex.Array, action: chex.Array
) -> chex.Array:
  """[2] the agent's next cell: one step, unless a wall or the border is
  in the way."""
  target = position + jnp.asarray(MOVES)[action]
  row = jnp.clip(target[0], 0, layout.grid_size - 1)
  column = jnp.clip(target[1], 0, layout.grid_size - 1)
  target = jnp.stack([row, column])
  return jnp.where(layout.walls[row, column], position, target)


def _in_use(layout: Layout) -> chex.Array:
  """[N] bool: the slots the layout uses."""
  return jnp.arange(layout.homes.shape[0]) < layout.num_objects


def free_cells(
  layout: Layout, position: chex.Array, objects: chex.Array, present: chex.Array
) -> chex.Array:
  """[G, G] bool: cells of the grid with no wall, agent or present
  object."""
  size = layout.walls.shape[0]
  cells = _cell_grid(size)  # [G * G, 2]
  taken = jnp.concatenate([position[None], objects])  # [N + 1, 2]
  here = jnp.all(cells[:, None] == taken[None], axis=-1)  # [G * G, N + 1]
  blocked = jnp.any(
    here & jnp.concatenate([jnp.ones((1,), bool), present]), axis=-1
  )
  free = in_grid(cells, layout.grid_size) & ~blocked
  return ~layout.walls & free.reshape(size, size)


def new_episode(
  config: GridConfig, layout: Layout, key: chex.PRNGKey
) -> tuple[chex.Array, chex.Array, chex.Array]:
  """(position [2], objects [N, 2], present [N]) at an episode's start:
  the agent at its start cell, every object in use present, at its own
  cell (tabular) or at distinct random free cells."""
  present = _in_use(layout)
  if config.tabular:
    return layout.start, layout.homes, present
  free = free_cells(layout, layout.start, layout.homes, jnp.zeros_like(present))
  return layout.start, _distinct_cells(key, free, config.num_slots), present


def respawn(
  config: GridConfig,
  layout: Layout,
  key: chex.PRNGKey,
  position: chex.Array,
  objects: chex.Array,
  present: chex.Array,
  collected: chex.Array,
) -> tuple[chex.Array, chex.Array]:
  """(objects [N, 2], present [N]) after a step's respawns and removals.

  Each object absent before the step comes back with its probability
  (`layout.p_respawn`), at its own cell (tabular) or at a random free
  cell; then the collected ones are removed (an object collected this
  step is absent after it), and unused slots stay absent.
  """
  respawn_key, cell_key = jax.random.split(key)
  back = ~present & jax.random.bernoulli(respawn_key, layout.p_respawn)
  if not config.tabular:
    free = free_cells(layout, position, objects, present)
    cells = _distinct_cells(cell_key, free, config.num_slots)
    objects = jnp.where(back[:, None], cells, objects)
  present = (present | back) & ~collected & _in_use(layout)
  return objects, present


def collected_objects(
  position: chex.Array, objects: chex.Array, present: chex.Array
) -> chex.Array:
  """[N] bool: the present objects at the agent's cell."""
  return present & jnp.all(objects == position, axis=-1)


def state_index(
  size: int, position: chex.Array, present: chex.Array
) -> chex.Array:
  """[] int32: the tabular state, `cell + G * G * sum_i present_i 2^i`."""
  bits = jnp.sum(
    present.astype(jnp.int32) << jnp.arange(present.shape[0], dtype=jnp.int32)
  )
  return position[0] * size + position[1] + size * size * bits


def object_map(
  config: GridConfig,
  position: chex.Array,
  objects: chex.Array,
  present: chex.Array,
) -> chex.Array:
  """[G, G, K + 1] uint8: the agent (channel 0) and the present objects of
  each type k (channel k + 1)."""
  size = config.size
  grid = jnp.zeros((size, size, config.num_types + 1), jnp.uint8)
  grid = grid.at[position[0], position[1], 0].set(1)
  channels = 1 + jnp.asarray(config.object_types, jnp.int32)
  return grid.at[objects[:, 0], objects[:, 1], channels].max(
    present.astype(jnp.uint8)
  )


class LPGGridworld(base.AdapterEnvironment[GridState]):
  """`batch_size` instances of an LPG gridworld (module docstring), pure JAX.

  Observations (`{'observation': uint8}`): 'state', the one-hot [G * G *
  2^N] of the agent's cell and which objects are present (the tabular
  state: with objects that come and go, the cell alone is not Markov), or
  'map', the object map [G, G, K + 1]. The step that ends an episode
  (LAST) already shows the next episode's first observation; a
  terminating object ends it with discount 0, the step limit with
  discount 1 (`base.transition`).
  """

  def __init__(
    self,
    batch_size: int,
    config: GridConfig,
    layout_seed: int = 0,
    observation: str | None = None,
    max_steps: int | None = None,
    name: str = 'lpg gridworld',
  ):
    """Builds the environment.

    Args:
      batch_size: the number of instances B.
      config: the configuration (`CONFIGS`).
      layout_seed: the layout's seed (>= 0), or -1: a layout from each
        `reset` key, shared by the batch.
      observation: 'state' or 'map' (default: 'state' for a tabular
        configuration, else 'map'); 'state' needs a tabular one.
      max_steps: the episode's step limit instead of the configuration's.
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
        f'(a layout per reset key), got {layout_seed!r}.'
      )
    self.layout_seed = layout_seed
    if observation is None:
      observation = 'state' if config.tabular else 'map'
    if observation not in OBSERVATIONS:
      raise ValueError(
        f'{name}: observation must be one of {OBSERVATIONS}, '
        f'got {observation!r}.'
      )
    if observation == 'state' and not config.tabular:
      raise ValueError(
        f"{name}: observation='state' needs objects at fixed "
        "cells (a tabular configuration); use 'map'."
      )
    self.observation = observation
    if max_steps is not None and (
      isinstance(max_steps, bool)
      or not isinstance(max_steps, int)
      or max_steps < 1
    ):
      raise ValueError(
        f'{name}: max_steps must be a positive integer, got {max_steps!r}.'
      )
    self.max_steps = max_steps
    size = config.size
    shape = (
      (size * size * 2**config.num_slots,)
      if observation == 'state'
      else (size, size, config.num_types + 1)
    )
    self._single_observation_spec = {
      'observation': specs.Array(shape, np.uint8, name='observation')
    }
    self._single_action_spec = base.discrete_action_spec(NUM_ACTIONS)

  def _observe(self, position, objects, present) -> types.Specs:
    if self.observation == 'map':
      grid = object_map(self.config, position, objects, present)
      return {'observation': grid}
    size = self.config.size
    index = state_index(size, position, present)
    return {
      'observation': jax.nn.one_hot(
        index, size * size * 2**self.config.num_slots, dtype=jnp.uint8
      )
    }

  def layout(self, rng_key: chex.PRNGKey) -> Layout:
    """The layout `reset(rng_key)` gives every instance."""
    if self.layout_seed >= 0:
      key = jax.random.PRNGKey(self.layout_seed)
    else:
      key = jax.random.fold_in(rng_key, 0x1A7)
    layout = draw_layout(key, self.config)
    if self.max_steps is not None:
      layout = dataclasses.replace(layout, max_steps=jnp.int32(self.max_steps))
    return layout

  def _reset_one(self, layout: Layout, key: chex.PRNGKey):
    carry, episode_key = jax.random.split(key)
    position, objects, present = new_episode(self.config, layout, episode_key)
    state = GridState(
      layout=layout,
      position=position,
      objects=objects,
      present=present,
      time=jnp.int32(0),
      rng=carry,
    )
    return state, base.restart(self._observe(position, objects, present))

  def reset(  # pytype: disable=signature-mismatch
    self, rng_key: chex.PRNGKey
  ) -> tuple[GridState, types.EnvironmentTimestep]:
    """B new episodes in one layout (`layout(rng_key)`), instance b with
    `split(rng_key, B)[b]`: step types FIRST, rewards 0, [B]."""
    layout = self.layout(rng_key)
    keys = jax.random.split(rng_key, self.batch_size)
    return jax.vmap(self._reset_one, in_axes=(None, 0))(layout, keys)

  def _step_one(self, state: GridState, action: chex.Array):
    layout = state.layout
    carry, step_key, end_key, episode_key = jax.random.split(state.rng, 4)
    position = move(layout, state.position, action)
    collected = collected_objects(position, state.objects, state.present)
    reward = jnp.sum(jnp.where(collected, layout.rewards, 0.0))
    p_end = jnp.minimum(
      jnp.sum(jnp.where(collected, layout.p_terminate, 0.0)), 1.0
    )
    terminated = jax.random.uniform(end_key) < p_end
    objects, present = respawn(
      self.config,
      layout,
      step_key,
      position,
      state.objects,
      state.present,
      collected,
    )
    time = state.time + 1
    truncated = time >= layout.max_steps
    ended = terminated | truncated
    # A finished episode restarts: the LAST step shows the next one's start.
    start = new_episode(self.config, layout, episode_key)
    position, objects, present = jax.tree.map(
      lambda new, old: jnp.where(ended, new, old),
      start,
      (position, objects, present),
    )
    state = GridState(
      layout=layout,
      position=position,
      objects=objects,
      present=present,
      time=jnp.where(ended, 0, time),
      rng=carry,
    )
    timestep, info = base.transition(
      self._observe(position, objects, present),
      reward,
      terminated,
      truncated & ~terminated,
    )
    return state, timestep, info

  def step_with_info(self, state: GridState, actions: chex.Array):
    """`step`, and how each episode ended; [B] actions in [0, 5)."""
    chex.assert_shape(actions, (self.batch_size,))
    return jax.vmap(self._step_one)(state, jnp.asarray(actions, jnp.int32))
