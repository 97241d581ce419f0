# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The 'lpg:' family: LPG's gridworlds and delayed chains (Oh et al. 2020),
against the paper's (and GROOVE's) descriptions."""

import functools

import dm_env
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tiny

import disco_rl
from disco_rl import environments
from disco_rl.environments import base
from disco_rl.environments import delayed_chain
from disco_rl.environments import lpg
from disco_rl.environments import lpg_gridworld

pytestmark = pytest.mark.usefixtures('fast_compile')

_KEY = jax.random.PRNGKey(0)


@functools.cache
def _fns(name, batch_size, **settings):
  """The environment, its jitted reset and step_with_info, cached."""
  env = environments.get_environment(name, batch_size, settings)
  return env, jax.jit(env.reset), jax.jit(env.step_with_info)


def _first(tree):
  """Instance 0 of a batched tree, as NumPy."""
  return jax.tree.map(lambda x: np.asarray(x[0]), tree)


def _broadcast(state, **fields):
  """`state` with `fields` (one instance's values) in every instance."""
  batch = jax.tree.leaves(state)[0].shape[0]
  return state.replace(
    **{
      k: jnp.broadcast_to(jnp.asarray(v), (batch,) + np.shape(v))
      for k, v in fields.items()
    }
  )


def _approach(layout, cell):
  """(a free cell next to `cell`, the action that moves from it onto
  `cell`)."""
  size = int(layout.grid_size)
  homes = {tuple(h) for h in layout.homes.tolist()}
  for action, (d_row, d_column) in enumerate(lpg_gridworld.MOVES[:4]):
    near = (int(cell[0] - d_row), int(cell[1] - d_column))
    if (
      0 <= near[0] < size
      and 0 <= near[1] < size
      and not layout.walls[near]
      and near not in homes
    ):
      return np.array(near, np.int32), action
  raise AssertionError(f'no free cell next to {cell}')


def _binomial_close(fraction, p, n):
  """Whether an observed fraction of n trials is within 5 sd of p."""
  return abs(fraction - p) <= 5 * np.sqrt(p * (1 - p) / n) + 1e-3


# ----------------------------------------------------------------------------
# The family.


def test_every_name_follows_the_interface():
  """Traced abstractly (no compile): specs, batched timesteps, the state."""
  names = lpg.lpg_names()
  assert 'lpg:dense' in names and 'lpg:rand_small' in names
  assert 'lpg:delayed_chain_short' in names and len(names) == 20
  for name in names:
    env = environments.get_environment(name, 3)
    base.check_jittable_environment(env, name)
    assert not environments.family(name).on_host
    spec = env.single_observation_spec()['observation']
    assert spec.dtype == np.uint8
  sizes = {
    name: environments.get_environment(name, 1)
    .single_observation_spec()['observation']
    .shape
    for name in (
      'lpg:dense',
      'lpg:sparse',
      'lpg:rand_small',
      'lpg:all',
      'lpg:delayed_chain_long',
      'lpg:delayed_chain_distractor',
    )
  }
  assert sizes == {
    'lpg:dense': (11 * 11 * 2**4,),  # Cell x objects.
    'lpg:sparse': (13 * 13 * 2**2,),
    'lpg:rand_small': (7, 7, 3),  # Agent + 2 object types.
    'lpg:all': (10 * 10 * 2**5,),
    'lpg:delayed_chain_long': (1 + 2 * 49,),
    'lpg:delayed_chain_distractor': (1 + 2 * 29 + 20,),
  }


def test_unknown_names_and_settings_are_refused():
  with pytest.raises(ValueError, match="Close matches: 'lpg:dense'"):
    environments.check_name('lpg:dence')
  with pytest.raises(
    ValueError,
    match=r"Unknown 'lpg:dense' setting\(s\) "
    "'length'",
  ):
    environments.get_environment('lpg:dense', 2, dict(length=3))
  with pytest.raises(ValueError, match="observation='state' needs"):
    environments.get_environment('lpg:rand_small', 2, dict(observation='state'))
  with pytest.raises(ValueError, match='layout_seed must be'):
    environments.get_environment(
      'lpg:delayed_chain_short', 2, dict(layout_seed=-2)
    )
  with pytest.raises(
    ValueError, match=r'length must be an integer in \[2, 30\]'
  ):
    environments.get_environment('lpg:delayed_chain_short', 2, dict(length=31))


# ----------------------------------------------------------------------------
# Gridworlds: objects.

_DENSE = lpg_gridworld.CONFIGS['dense']
_BATCH = 2048


def test_the_configurations_are_groove_s():
  """Spot checks against GROOVE's configs.py (the paper's appendix)."""
  dense, sparse = _DENSE, lpg_gridworld.CONFIGS['sparse']
  assert (dense.size, dense.max_steps, dense.object_types) == (
    11,
    (500, 500),
    (0, 0, 1, 2),
  )
  assert (dense.rewards, dense.p_terminate, dense.p_respawn) == (
    (1.0, -1.0, -1.0),
    (0.0, 0.5, 0.0),
    (0.05, 0.1, 0.5),
  )
  assert (sparse.size, sparse.max_steps, sparse.p_terminate) == (
    13,
    (50, 50),
    (1.0, 1.0),
  )
  longer = lpg_gridworld.CONFIGS['longer']
  assert len(longer.walls) == 7 and 1 * 9 + 4 not in longer.walls
  assert not lpg_gridworld.CONFIGS['rand_small'].tabular
  assert lpg_gridworld.CONFIGS['all'].num_random_walls == 15


def test_collecting_pays_each_kind_s_reward_and_may_terminate():
  """Dense: slots of types 0, 0, 1, 2 pay +1, +1, -1, -1; only type 1
  terminates (probability 0.5); a collected object is gone and the
  tabular observation says so."""
  env, reset, step = _fns('lpg:dense', _BATCH)
  state, _ = reset(_KEY)
  layout = _first(state.layout)
  size = _DENSE.size
  for slot, (reward, p_end) in enumerate(
    [(1.0, 0.0), (1.0, 0.0), (-1.0, 0.5), (-1.0, 0.0)]
  ):
    cell = layout.homes[slot]
    near, action = _approach(layout, cell)
    before = _broadcast(state, position=near)
    after, timestep, info = step(before, jnp.full((_BATCH,), action))
    np.testing.assert_array_equal(timestep.reward, reward)
    terminated = np.asarray(info.terminated)
    assert _binomial_close(terminated.mean(), p_end, _BATCH), slot
    np.testing.assert_array_equal(info.discount, np.where(terminated, 0, 1))
    np.testing.assert_array_equal(
      timestep.step_type == dm_env.StepType.LAST, terminated
    )
    going = ~terminated
    np.testing.assert_array_equal(
      np.asarray(after.position)[going], np.broadcast_to(cell, (going.sum(), 2))
    )
    assert not np.asarray(after.present)[going, slot].any()
    # The tabular state: the cell, and which objects are present.
    bits = 15 - 2**slot
    index = np.asarray(timestep.observation['observation']).argmax(-1)
    np.testing.assert_array_equal(
      index[going], cell[0] * size + cell[1] + size * size * bits
    )
    # A terminated episode restarts at the start, every object back.
    if terminated.any():
      np.testing.assert_array_equal(
        np.asarray(after.position)[terminated],
        np.broadcast_to(layout.start, (terminated.sum(), 2)),
      )
      assert np.asarray(after.present)[terminated].all()
  assert env.single_action_spec().maximum == 4


def test_tabular_objects_respawn_in_place_with_their_probability():
  """Every step an absent object is back with its type's probability
  (dense: 0.05, 0.05, 0.1, 0.5), at its own cell."""
  _, reset, step = _fns('lpg:dense', _BATCH)
  state, _ = reset(_KEY)
  layout = _first(state.layout)
  state = _broadcast(state, present=np.zeros(4, bool))
  for p_respawn in ([0.05, 0.05, 0.1, 0.5], [0.0975, 0.0975, 0.19, 0.75]):
    # Staying at the start (no object's cell); after one and two steps.
    state, timestep, _ = step(state, jnp.full((_BATCH,), 4))
    assert (timestep.reward == 0).all()
    present = np.asarray(state.present)
    for slot, p in enumerate(p_respawn):
      assert _binomial_close(present[:, slot].mean(), p, _BATCH), (slot, p)
    np.testing.assert_array_equal(
      np.asarray(state.objects), np.broadcast_to(layout.homes, (_BATCH, 4, 2))
    )


def test_random_objects_appear_at_random_free_cells():
  """rand_dense: objects start, and respawn, at distinct random cells free
  of walls, the agent and other objects; the object map shows them."""
  _, reset, step = _fns('lpg:rand_dense', 512)
  state, timestep = reset(_KEY)
  layout = _first(state.layout)
  grid = np.asarray(timestep.observation['observation'])  # [B, G, G, 4]
  assert grid.shape == (512, 11, 11, 4)
  np.testing.assert_array_equal(grid[..., 0].sum((1, 2)), 1)  # The agent.
  # Types 0, 0, 1, 2: two of type 0, one each of 1 and 2, on distinct cells.
  np.testing.assert_array_equal(
    grid[..., 1:].sum((1, 2)), np.broadcast_to([2, 1, 1], (512, 3))
  )
  assert (grid.sum(-1) <= 1).all()
  assert len({tuple(c) for c in np.asarray(state.objects)[:, 3]}) > 50
  state = _broadcast(state, present=np.zeros(4, bool))
  for _ in range(3):
    state, timestep, _ = step(state, jnp.full((512,), 4))
    objects, present = np.asarray(state.objects), np.asarray(state.present)
    for b in range(512):
      cells = [tuple(c) for c in objects[b][present[b]]]
      assert len(set(cells)) == len(cells)
      assert tuple(layout.start) not in cells
      assert not any(layout.walls[c] for c in cells)
  assert 20 < len({tuple(c) for c in objects[present[:, 3], 3]})


def test_episodes_end_at_the_step_limit():
  """The step limit truncates (discount 1) and restarts the episode."""
  _, reset, step = _fns('lpg:sparse', 2, max_steps=7)
  state, first = reset(_KEY)
  for t in range(1, 15):
    state, timestep, info = step(state, jnp.full((2,), 4))
    last = t % 7 == 0
    assert (
      timestep.step_type
      == (dm_env.StepType.LAST if last else dm_env.StepType.MID)
    ).all(), t
    np.testing.assert_array_equal(info.truncated, last)
    np.testing.assert_array_equal(info.discount, 1.0)
    np.testing.assert_array_equal(state.time, t % 7)
  np.testing.assert_array_equal(
    timestep.observation['observation'], first.observation['observation']
  )


# ----------------------------------------------------------------------------
# Gridworlds: layouts.


def _layout(name, seed, key=_KEY):
  env = environments.get_environment(name, 2, dict(layout_seed=seed))
  return jax.tree.map(np.asarray, env.layout(key))


def _same(a, b):
  return all(
    np.array_equal(x, y)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
  )


def test_layouts_are_fixed_by_their_seed_and_differ_across_seeds():
  for name in ('lpg:dense', 'lpg:all'):
    assert _same(_layout(name, 3), _layout(name, 3))
    assert _same(_layout(name, 3), _layout(name, 3, jax.random.PRNGKey(9)))
    layouts = [_layout(name, seed) for seed in range(6)]
    starts = {tuple(ln.start) for ln in layouts}
    homes = {ln.homes.tobytes() for ln in layouts}
    assert len(starts) > 3 and len(homes) == 6, name
  # A distribution draws the rest of the layout too.
  layouts = [_layout('lpg:all', seed) for seed in range(8)]
  assert len({int(ln.grid_size) for ln in layouts}) > 1
  assert len({int(ln.max_steps) for ln in layouts}) > 1
  assert len({ln.walls.tobytes() for ln in layouts}) == 8
  assert all(
    4 <= ln.grid_size <= 10
    and 20 <= ln.max_steps <= 750
    and 1 <= ln.num_objects <= 5
    and ln.walls.sum() == 15
    and 0 <= ln.rewards[0] <= 1
    for ln in layouts
  )
  for ln in layouts:  # Start and objects on distinct free cells of the grid.
    cells = [tuple(ln.start)] + [tuple(h) for h in ln.homes]
    assert len(set(cells)) == 6
    assert all(max(c) < ln.grid_size and not ln.walls[c] for c in cells)
  # The fixed configurations keep their walls and objects' types.
  assert _layout('lpg:longer', 5).walls.sum() == 7
  np.testing.assert_array_equal(_layout('lpg:dense', 1).rewards, [1, 1, -1, -1])


def test_layout_seed_minus_one_draws_a_layout_per_reset_key():
  """Shared by the batch, different for another reset key."""
  _, reset, _ = _fns('lpg:all', 4, layout_seed=-1)
  first, _ = reset(jax.random.PRNGKey(1))
  again, _ = reset(jax.random.PRNGKey(1))
  other, _ = reset(jax.random.PRNGKey(2))
  for leaf in jax.tree.leaves(first.layout):
    assert (np.asarray(leaf) == np.asarray(leaf)[:1]).all()  # Shared.
  assert _same(first.layout, again.layout)
  assert not _same(first.layout, other.layout)


# ----------------------------------------------------------------------------
# Delayed chains.


def test_the_chain_pays_only_at_its_end_by_the_first_action():
  """Length 6: five unrewarded steps along the chosen chain (distinct
  states per chain), then +1 or -1 by the first action, a termination,
  and the start again."""
  env, reset, step = _fns('lpg:delayed_chain_short', 4, length=6)
  state, timestep = reset(_KEY)
  length, rewarding = (int(x) for x in env.layout(_KEY))
  assert length == 6
  np.testing.assert_array_equal(
    timestep.observation['observation'].argmax(-1), 0
  )
  first = jnp.array([0, 1, 0, 1])
  for _ in range(2):  # Two episodes.
    for t in range(1, 7):
      actions = first if t == 1 else 1 - first
      state, timestep, info = step(state, actions)
      index = np.asarray(timestep.observation['observation']).argmax(-1)
      if t < 6:
        np.testing.assert_array_equal(timestep.reward, 0.0)
        assert (timestep.step_type == dm_env.StepType.MID).all()
        np.testing.assert_array_equal(index, 1 + 2 * (t - 1) + first)
      else:
        np.testing.assert_array_equal(
          timestep.reward, np.where(first == rewarding, 1.0, -1.0)
        )
        assert (timestep.step_type == dm_env.StepType.LAST).all()
        np.testing.assert_array_equal(info.terminated, True)
        np.testing.assert_array_equal(info.discount, 0.0)
        np.testing.assert_array_equal(index, 0)  # The next start.


def test_chain_lengths_and_rewarding_actions_per_seed():
  configs = delayed_chain.CONFIGS
  assert (configs['short'].min_length, configs['short'].max_length) == (5, 30)
  assert (configs['long'].min_length, configs['long'].max_length) == (5, 50)
  assert configs['long_noisy'].noisy and not configs['long'].noisy
  draws = []
  for seed in range(20):
    env = delayed_chain.DelayedChain(2, configs['long'], layout_seed=seed)
    draws.append(tuple(int(x) for x in env.layout(_KEY)))
    again = tuple(int(x) for x in env.layout(jax.random.PRNGKey(5)))
    assert again == draws[-1]
  lengths, actions = zip(*draws, strict=True)
  assert all(5 <= n <= 50 for n in lengths) and len(set(lengths)) > 5
  assert set(actions) == {0, 1}
  # -1: from the reset key, one for the batch.
  _, reset, _ = _fns('lpg:delayed_chain_long', 3, layout_seed=-1)
  per_key = {}
  for seed in range(8):
    state, _ = reset(jax.random.PRNGKey(seed))
    assert len(set(np.asarray(state.length).tolist())) == 1
    per_key[seed] = int(state.length[0])
  assert len(set(per_key.values())) > 1


def test_noisy_chains_pay_plus_or_minus_one_until_the_end():
  _, reset, step = _fns('lpg:delayed_chain_short_noisy', 512, length=8)
  state, _ = reset(_KEY)
  rewarding = int(state.rewarding[0])
  first = jnp.asarray(np.arange(512) % 2)
  noise = []
  for t in range(1, 9):
    state, timestep, _ = step(state, first)
    if t < 8:
      assert set(np.asarray(timestep.reward).tolist()) == {-1.0, 1.0}
      noise.append(np.asarray(timestep.reward))
  np.testing.assert_array_equal(
    timestep.reward, np.where(first == rewarding, 1.0, -1.0)
  )
  assert abs(np.mean(noise)) < 0.05  # 3,584 draws of +-1: sd 0.017.


def test_distractor_bits_change_every_step():
  _, reset, step = _fns('lpg:delayed_chain_distractor', 64)
  state, timestep = reset(_KEY)
  bits = [np.asarray(timestep.observation['observation'])[:, 59:]]
  state, timestep, _ = step(state, jnp.zeros(64, jnp.int32))
  bits.append(np.asarray(timestep.observation['observation'])[:, 59:])
  assert bits[0].shape == (64, 20)
  assert 0.4 < bits[0].mean() < 0.6 and (bits[0] != bits[1]).any()
  np.testing.assert_array_equal(
    timestep.observation['observation'][:, :59].argmax(-1), 1
  )


# ----------------------------------------------------------------------------
# Training.


def test_a_tabular_actor_critic_agent_trains_on_a_gridworld(tmp_path):
  """The eval job through the Trainer: net='tabular' on the dense
  gridworld's state one-hot, episodes cut at 3 steps so that some end."""
  config = tiny.eval_config(
    **tiny.SMALL,
    env='lpg:dense',
    env_kwargs=dict(max_steps=3, layout_seed=2),
    net='tabular',
    num_steps=4,
    steps_per_call=2,
    num_devices=1,
  )
  trainer = disco_rl.Trainer(config, tmp_path / 'run', progress=False)
  summary = trainer.fit()
  assert summary['steps'] == 4 and summary['interrupted'] is None
  assert summary['final_avg_return'] is not None  # Episodes ended.
  assert trainer.job.setup.agent.settings.net_settings.name == 'tabular'
