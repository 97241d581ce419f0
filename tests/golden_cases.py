# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Rebuilds the golden cases' agents and inputs (shared by tests and the
multi-device subprocess checks)."""

import json

import jax
import jax.numpy as jnp
import numpy as np

from disco_rl import actors
from disco_rl import agent as agent_lib
from disco_rl import types
from disco_rl.environments import jittable_envs


def from_golden(template, case, prefix: str):
  """`template`'s tree with every leaf read from the golden key it maps to.

  The structure (dataclasses, LSTM states, optax states) is the port's own;
  only the values come from the file.
  """

  def part(key) -> str:
    for attr in ('key', 'name', 'idx'):
      if hasattr(key, attr):
        return str(getattr(key, attr))
    raise TypeError(f'unsupported tree path element {key!r}')

  def read(path, leaf):
    key = '|'.join([prefix, *map(part, path)])
    value = case.arrays[key]
    assert value.shape == np.shape(leaf), (key, value.shape, np.shape(leaf))
    return jnp.asarray(value, dtype=leaf.dtype)

  return jax.tree_util.tree_map_with_path(read, template)


def settings_from_case(meta: dict):
  """Our settings for the rule of a golden case, with its recorded overrides.

  The recorded settings must agree with our defaults everywhere else: this is
  how the tests check `get_settings_disco()` / `get_settings_actor_critic()`.
  """
  recorded = json.loads(meta['settings'])
  name = recorded['update_rule_name']
  ours = {'disco': agent_lib.get_settings_disco,
          'actor_critic': agent_lib.get_settings_actor_critic}[name]()
  ours.net_settings = recorded['net_settings']
  ours.learning_rate = recorded['learning_rate']
  mine = _jsonable(ours.to_dict())
  assert mine == recorded, (
      'our default settings differ from the recorded upstream settings:\n'
      f'{mine}\n!=\n{recorded}')
  return ours


def _jsonable(x):
  if hasattr(x, 'items'):
    return {k: _jsonable(v) for k, v in x.items()}
  if isinstance(x, (list, tuple)):
    return [_jsonable(v) for v in x]
  return x


def catch_env(meta: dict, batch_size: int | None = None,
              rows_key: str = 'rows', cols_key: str = 'cols'):
  settings = jittable_envs.get_config_catch()
  settings.rows = meta[rows_key]
  settings.columns = meta[cols_key]
  return jittable_envs.CatchJittableEnvironment(
      batch_size=batch_size or meta['batch'], env_settings=settings)


def make_agent(meta: dict, batch_axis_name=None, **env_kwargs):
  env = catch_env(meta, **env_kwargs)
  agent = agent_lib.Agent(
      single_observation_spec=env.single_observation_spec(),
      single_action_spec=env.single_action_spec(),
      agent_settings=settings_from_case(meta),
      batch_axis_name=batch_axis_name)
  return agent, env


def rollout_from(tree: dict, states=None) -> types.ActorRollout:
  """An ActorRollout from a golden subtree (numpy leaves)."""
  return types.ActorRollout(
      observations=jnp.asarray(tree['observations']),
      actions=jnp.asarray(tree['actions']),
      rewards=jnp.asarray(tree['rewards']),
      discounts=jnp.asarray(tree['discounts']),
      agent_outs=jax.tree.map(jnp.asarray, tree['agent_outs']),
      states={} if states is None else states,
      logits=jnp.asarray(tree['logits']),
  )


def unroll_actor(agent, env, params, actor_state, env_state, timestep, rng,
                 num_steps: int):
  """`actors.unroll_jittable_actor` with the agent's actor step; returns
  (rollout, actor_state, env_state, timestep)."""
  rollout, actor_state, timestep, env_state = actors.unroll_jittable_actor(
      params, actor_state, timestep, env_state, rng, env, num_steps,
      agent.actor_step)
  return rollout, actor_state, env_state, timestep


def without_meta_out(logs: dict) -> dict:
  return {k: v for k, v in logs.items() if k != 'meta_out'}


def as_key(x) -> jax.Array:
  return jnp.asarray(np.asarray(x, dtype=np.uint32))
