# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""disco_rl.agent beyond the golden cases: jit, meta-gradients, acting."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import smoke_env

from disco_rl import actors
from disco_rl import agent as agent_lib
from disco_rl import types
from disco_rl.environments import jittable_envs

TINY_NET = dict(
  dense=(16,),
  model_arch_name='lstm',
  head_w_init_std=1e-2,
  model_kwargs=dict(head_mlp_hiddens=(8,), lstm_size=8),
)


def _env(batch_size=3, rows=5, columns=5):
  settings = jittable_envs.get_config_catch()
  settings.rows, settings.columns = rows, columns
  return jittable_envs.CatchJittableEnvironment(
    batch_size=batch_size, env_settings=settings
  )


def _agent(settings):
  settings.net_settings.net_args = dict(TINY_NET)
  env = _env()
  agent = agent_lib.Agent(
    single_observation_spec=env.single_observation_spec(),
    single_action_spec=env.single_action_spec(),
    agent_settings=settings,
    batch_axis_name=None,
  )
  return agent, env


def _rollout(agent, env, params, num_steps=6, seed=0):
  env_state, timestep = env.reset(jax.random.PRNGKey(seed))
  rollout, *_ = jax.jit(actors.unroll_jittable_actor, static_argnums=(5, 6, 7))(
    params,
    agent.initial_actor_state(jax.random.PRNGKey(0)),
    timestep,
    env_state,
    jax.random.PRNGKey(seed + 1),
    env,
    num_steps,
    agent.actor_step,
  )
  return rollout


@pytest.fixture(scope='module')
def ac(fast_compile):
  del fast_compile
  agent, env = _agent(agent_lib.get_settings_actor_critic())
  state = agent.initial_learner_state(jax.random.PRNGKey(0))
  return agent, env, state, _rollout(agent, env, state.params)


@pytest.fixture(scope='module')
def dc(fast_compile):
  del fast_compile
  agent, env = _agent(agent_lib.get_settings_disco())
  # Compiled: initialising the meta-network op by op takes far longer.
  state = jax.jit(agent.initial_learner_state)(jax.random.PRNGKey(0))
  meta_params, _ = jax.jit(agent.update_rule.init_params)(jax.random.PRNGKey(1))
  return agent, env, state, meta_params, _rollout(agent, env, state.params)


class LearnerStepVariantsTest(chex.TestCase):
  """The actor-critic learner step, compiled and op by op, against one op-by-op
  reference computed without any jit."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.agent, env = _agent(agent_lib.get_settings_actor_critic())
    # As the tests compile (tests/conftest.py): op by op too, XLA's kernels
    # with and without its optimisations round differently.
    with smoke_env.fast_compile():
      cls.state = cls.agent.initial_learner_state(jax.random.PRNGKey(0))
      cls.rollout = _rollout(cls.agent, env, cls.state.params)
      cls.reference = cls._step(cls.agent.learner_step)

  @classmethod
  def _step(cls, learner_step):
    new_state, _, logs = learner_step(
      jax.random.PRNGKey(2),
      cls.rollout,
      cls.state,
      {},
      {'dummy': jnp.zeros(())},
      False,
    )
    return new_state, logs

  @chex.variants(with_jit=True, without_jit=True)
  def test_learner_step(self):
    got = self._step(self.variant(self.agent.learner_step, static_argnums=5))
    if self.variant.type == chex.ChexVariantType.WITHOUT_JIT:
      chex.assert_trees_all_equal(got, self.reference)
    else:
      # Compiled float32 reductions round differently from op-by-op ones
      # (e.g. the expectation over 601 value bins), and the first debiased
      # EMA step divides by 1 - 0.99, amplifying that: the upstream's own
      # compiled learner step is 3.4e-4 off its op-by-op record.
      chex.assert_trees_all_close(got, self.reference, rtol=1e-3, atol=1e-3)
    new_state, _ = got
    # The step changed the parameters and counted one Adam step.
    assert int(new_state.opt_state[0].count) == 1
    moved = jax.tree.map(
      lambda a, b: float(jnp.max(jnp.abs(a - b))),
      new_state.params,
      self.state.params,
    )
    assert max(jax.tree.leaves(moved)) > 0


def _params_after_step(meta_params, agent, state, rollout, is_meta_training):
  new_state, _, _ = agent.learner_step(
    jax.random.PRNGKey(3), rollout, state, {}, meta_params, is_meta_training
  )
  return sum(jnp.sum(jnp.sin(x)) for x in jax.tree.leaves(new_state.params))


def test_meta_gradient_flows_only_when_meta_training(dc):
  agent, _, state, meta_params, rollout = dc
  grad = jax.jit(jax.grad(_params_after_step), static_argnums=(1, 4))
  g_meta = grad(meta_params, agent, state, rollout, True)
  norms = [float(jnp.linalg.norm(x)) for x in jax.tree.leaves(g_meta)]
  assert all(np.isfinite(norms))
  assert sum(norms) > 0
  # Without meta-training the rule's outputs are constants of the loss.
  g_plain = grad(meta_params, agent, state, rollout, False)
  assert all(
    float(jnp.max(jnp.abs(x))) == 0.0 for x in jax.tree.leaves(g_plain)
  )


def test_disco_learner_step_is_finite_and_advances_meta_state(dc):
  agent, _, state, meta_params, rollout = dc
  new_state, _, logs = jax.jit(agent.learner_step, static_argnums=5)(
    jax.random.PRNGKey(0), rollout, state, {}, meta_params, False
  )
  for value in jax.tree.leaves(logs):
    assert np.all(np.isfinite(np.asarray(value)))
  assert float(new_state.meta_state['adv_ema_state'].decay_product) < 1.0
  rnn = new_state.meta_state['rnn_state']['lstm']['meta_rnn_state']
  assert float(jnp.abs(rnn.hidden).sum()) > 0  # The lifetime LSTM stepped.
  t, b = rollout.rewards.shape
  assert logs['meta_out']['pi'].shape == (t - 1, b, 3)
  assert logs['meta_out']['y'].shape == (t - 1, b, 600)


def test_actor_step_records_discounts_and_valid_actions(ac):
  agent, _, state, _ = ac
  timestep = types.EnvironmentTimestep(
    observation=jnp.zeros((4, 5, 5, 1)),
    step_type=jnp.array([1, 2, 1, 2]),
    reward=jnp.array([0.0, 1.0, 0.0, -1.0]),
  )
  recorded, _ = agent.actor_step(
    state.params, jax.random.PRNGKey(0), timestep, {}
  )
  np.testing.assert_array_equal(recorded.discounts, [True, False, True, False])
  assert recorded.actions.shape == (4,)
  assert set(np.asarray(recorded.actions).tolist()) <= {0, 1, 2}
  np.testing.assert_array_equal(recorded.logits, recorded.agent_outs['logits'])
