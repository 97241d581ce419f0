# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What the learner-step tests on LPG's delayed chain share (the rule's
sizes, its policy targets): a tabular agent on two environments of
'lpg:delayed_chain_short' and a rollout along both chains."""

import jax
import numpy as np

from disco_rl import agent as agent_lib
from disco_rl import types
from disco_rl.environments import lpg


def tabular_chain_agent(**settings) -> agent_lib.Agent:
  """A tabular agent of the Disco rule (learning rate 1e-2, tiny heads) on
  two environments of the short delayed chain; `settings` go to
  `agent_lib.make_settings` (the rule's sizes, its policy target)."""
  env = lpg.make('lpg:delayed_chain_short', 2, {}, 0)
  return agent_lib.Agent(
    single_observation_spec=env.single_observation_spec(),
    single_action_spec=env.single_action_spec(),
    agent_settings=agent_lib.make_settings(
      'disco_103', 1e-2, (8,), 4, (4,), net='tabular', **settings
    ),
    batch_axis_name=None,
  )


def chain_rollout(agent, params) -> types.ActorTimestep:
  """A rollout [T=5, B=2] along both chains, the last step rewarded (+1 and
  -1), with the outputs of the agent's network of `params` (`agent_outs`,
  `logits`) from its initial actor state (`states`)."""
  steps = np.arange(5)[:, None]
  states = np.where(steps == 0, 0, 1 + 2 * (steps - 1) + np.arange(2))
  observations = {'observation': jax.nn.one_hot(states, 59, dtype=np.uint8)}
  actor_state = agent.initial_actor_state(jax.random.PRNGKey(0))
  outs, _ = agent.network.unroll(
    params, actor_state, observations, np.zeros((5, 2), bool)
  )
  return types.ActorTimestep(
    observations=observations,
    actions=np.ones((5, 2), np.int32),
    rewards=np.where(steps == 4, [1.0, -1.0], 0.0).astype(np.float32),
    discounts=np.ones((5, 2), bool),
    agent_outs=outs,
    logits=outs['logits'],
    states=actor_state,
  )
