# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The meta-training job (disco_rl.jobs.meta.job) on one CPU device.

Several devices: the meta-train notebook (test_notebooks.py) and
test_runtime_multiprocess.py.
"""

import dataclasses
import functools
import json
import pathlib
import types

import chex
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np
import pytest
import smoke_env
import tiny

from disco_rl import meta_grad_stats
from disco_rl import meta_objective
from disco_rl import rollout_checks
from disco_rl.jobs import records
from disco_rl.jobs.meta import config as meta_config
from disco_rl.jobs.meta import job as meta_lib
from disco_rl.jobs.meta import setup as meta_setup
from disco_rl.jobs.meta import steps
from disco_rl.runtime import divergence
from disco_rl.runtime import mesh as mesh_lib
from disco_rl.update_rules import disco

ROOT = pathlib.Path(__file__).resolve().parent.parent

DATA = pathlib.Path(__file__).resolve().parent / 'data'
TINY = tiny.meta_config(num_devices=1, steps_per_call=3)
ONE_STEP = dataclasses.replace(TINY, steps_per_call=1, num_steps=1)


# Slow (about 90 s: two programs compiled). In the default run the
# upstream-equivalence test below covers scanned meta-steps: three
# meta-steps in one call repeat the upstream's run of one step per call.
@pytest.mark.slow
def test_scanned_meta_steps_equal_one_meta_step_per_call():
  with smoke_env.fast_compile():
    fused_state, fused = smoke_env.run_calls(
      meta_lib.make_meta_train(TINY), [3, 1]
    )
    single = meta_lib.make_meta_train(
      dataclasses.replace(TINY, steps_per_call=1)
    )
    state, stepped = smoke_env.run_calls(single, [1] * 4)
  assert sorted(fused) == sorted(stepped)
  assert all(len(v) == 4 for v in fused.values())
  for key in fused:
    np.testing.assert_allclose(
      fused[key], stepped[key], rtol=1e-4, atol=1e-7, err_msg=key
    )
  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7),
    meta_lib.rule(single, state),
    meta_lib.rule(single, fused_state),
  )
  assert int(fused_state.step) == int(state.step) == 4
  # The rule moved, and the loop logged its meta-gradient every step.
  initial = meta_lib.rule(single, single.init())
  moved = sum(
    np.sum((np.asarray(a) - np.asarray(b)) ** 2)
    for a, b in zip(
      jax.tree.leaves(meta_lib.rule(single, state)),
      jax.tree.leaves(initial),
      strict=True,
    )
  )
  assert moved > 0
  assert (fused['meta_grad_norm'] > 0).all()
  for key in ('pos_rewards', 'neg_rewards'):  # 2 inner steps x 2 x 3 steps.
    assert ((fused[key] >= 0) & (fused[key] <= 12)).all(), fused[key]


def test_a_call_runs_between_one_and_steps_per_call_steps():
  job = meta_lib.make_meta_train(dataclasses.replace(TINY, steps_per_call=2))
  with pytest.raises(ValueError, match=r'count must be in \[1, 2\], got 3'):
    job.step(None, 3)


# Slow since 2026-12-04 (about 75 s alone, 108 s in the default run: the
# full-size agent and rule, for the 8-minute default run): the golden
# meta-gradient (test_golden_meta.py) holds the same numbers at 2e-4 on
# fixed inputs, and this file's tiny runs the loop around it.
@pytest.mark.slow
def test_meta_training_repeats_the_upstream_first_steps():
  """Same settings and seeds as the upstream notebook: the same run.

  tests/data/upstream_meta_train_steps.json holds the first meta-steps of the
  upstream notebook (see its description). The counts of rewarded steps are
  integers per agent, so they agree exactly while the two runs' rounding
  differences stay small; the meta-gradient norms agree closely at first and
  drift apart slowly (the loop is chaotic).
  """
  recorded = json.loads((DATA / 'upstream_meta_train_steps.json').read_text())
  steps = 3
  job = meta_lib.make_meta_train(
    meta_config.MetaTrainConfig(
      num_steps=steps, num_devices=1, steps_per_call=steps
    )
  )
  _, logs = smoke_env.run_calls(job, [steps])
  np.testing.assert_array_equal(
    logs['pos_rewards'], recorded['pos_rewards'][:steps]
  )
  # The first meta-gradient's norm moves with the order of floating-point
  # operations: measured against the recording, 6.4e-5 with the inner
  # updates in a loop, -1.9e-3 unrolled (the default), -6.6e-4 looped or
  # unrolled with XLA's other matrix-product kernels
  # (--xla_cpu_experimental_ynn_fusion_type=); the next step's, within 3e-6
  # in every case.
  for key in ('meta_grad_norm', 'meta_up_norm'):
    np.testing.assert_allclose(
      logs[key], recorded[key][:steps], rtol=3e-3, err_msg=key
    )


# ----------------------------------------------------------------------------
# The steps, module functions of the setup (disco_rl.jobs.meta.steps).


def _on_the_mesh(setup, fn, in_specs, out_specs):
  """`fn` of one device's view, under jit(shard_map) on the setup's mesh
  (the parts of `in_specs` and `out_specs` with a device axis lose it
  inside, as in `compiled.program`)."""

  def one_device(*args):
    args = mesh_lib.map_per_device(mesh_lib.local_block, in_specs, args)
    return mesh_lib.map_per_device(mesh_lib.device_block, out_specs, fn(*args))

  return jax.jit(
    jax.shard_map(
      one_device,
      mesh=setup.mesh,
      in_specs=in_specs,
      out_specs=out_specs,
      check_vma=False,
    )
  )


def test_the_setup_computes_once_what_the_steps_read():
  config = dataclasses.replace(
    ONE_STEP, num_agents=3, tasks=('catch', 'gymnax:CartPole-v1')
  )
  setup = meta_setup.make_setup(config)
  catch, cartpole = setup.members
  assert setup.groups == ((catch, 0, 2), (cartpole, 2, 1))
  assert setup.groups is setup.groups
  assert setup.state_specs is setup.state_specs
  assert setup.state_specs == meta_setup.state_specs(2)
  # ln(actions) over the agents: Catch's 3 actions twice, CartPole's 2.
  np.testing.assert_allclose(
    setup.uniform_entropy, (2 * np.log(3) + np.log(2)) / 3, rtol=1e-12
  )
  assert setup.rule is catch.agent.update_rule
  chex.assert_trees_all_equal_shapes_and_dtypes(
    setup.rule_shapes,
    jax.eval_shape(setup.rule.init_params, jax.random.PRNGKey(0))[0],
  )
  np.testing.assert_array_equal(setup.seed_key, jax.random.PRNGKey(config.seed))
  assert setup.unroll
  assert not dataclasses.replace(
    setup, config=dataclasses.replace(config, max_unrolled_inner_steps=0)
  ).unroll


def test_a_meta_step_splits_its_keys_as_upstream():
  """The next loop key, then per agent an acting and a meta-gradient key
  from this device's share of the step's key."""
  setup = meta_setup.make_setup(ONE_STEP)
  split = _on_the_mesh(
    setup, functools.partial(steps.step_keys, setup), (P(),), P()
  )
  rng, act_keys, grad_keys = split(jax.random.PRNGKey(7))
  expected_rng, step_rng = jax.random.split(jax.random.PRNGKey(7))
  act_rng, grad_rng = jax.random.split(jax.random.split(step_rng, 1)[0])
  np.testing.assert_array_equal(rng, expected_rng)
  np.testing.assert_array_equal(act_keys, jax.random.split(act_rng, 2))
  np.testing.assert_array_equal(grad_keys, jax.random.split(grad_rng, 2))


def test_the_meta_gradients_parts_are_logged_then_summed():
  """[N, 2, ...] parts are summed to [N, ...] and logged per part and
  head; the update's logs name the norms and a uniform target's
  entropy."""
  setup = meta_setup.make_setup(
    dataclasses.replace(ONE_STEP, meta_grad_parts=True)
  )
  parts = jax.tree.map(
    lambda s: jnp.stack(
      [jnp.ones((2,) + s.shape), jnp.full((2,) + s.shape, 2.0)], axis=1
    ),
    setup.rule_shapes,
  )
  grads, part_logs = steps.sum_parts(setup, parts)
  chex.assert_trees_all_equal(
    grads,
    jax.tree.map(lambda s: jnp.full((2,) + s.shape, 3.0), setup.rule_shapes),
  )
  heads = [
    h for h in meta_grad_stats.HEADS if f'meta_grad_pg_{h}_norm' in part_logs
  ]
  assert heads
  assert set(part_logs) == {
    f'meta_grad_{part}_{head}_{stat}'
    for part in meta_objective.PARTS
    for head in heads
    for stat in ('norm', 'coherence', 't_share')
  }
  summed, no_logs = steps.sum_parts(meta_setup.make_setup(ONE_STEP), grads)
  assert summed is grads and no_logs == {}

  updates = jax.tree.map(lambda g: -0.5 * g[0], grads)
  logs = steps.update_logs(
    setup,
    grads,
    updates,
    {'total_loss': jnp.array([1.0, 3.0])},
    {'meta_loss': jnp.array([2.0, 4.0])},
    part_logs,
  )
  size = sum(int(np.prod(s.shape)) for s in jax.tree.leaves(setup.rule_shapes))
  np.testing.assert_allclose(logs['meta_grad_norm'], 3 * np.sqrt(size))
  np.testing.assert_allclose(logs['meta_up_norm'], 1.5 * np.sqrt(size))
  assert float(logs['uniform_entropy']) == np.float32(np.log(3))
  assert float(logs['agent_total_loss']) == 2.0
  assert float(logs['meta_loss']) == 3.0
  assert set(logs) == {
    'agent_total_loss',
    'meta_loss',
    'meta_grad_norm',
    'meta_up_norm',
    'uniform_entropy',
    *part_logs,
    *(f'meta_grad_{head}_norm' for head in heads),
  }


def test_a_call_stops_at_its_first_diverged_meta_step():
  """The host's check of a call (`checked_step`), on a stand-in program:
  the meta-step that diverged is named, the ones before it kept."""
  logs = {
    'meta_loss': np.array([1.0, np.nan, 1.0]),
    'meta_grad_norm': np.ones(3),
    'agent_total_loss': np.ones(3),
    divergence.KEY: np.ones(3),
  }
  state = types.SimpleNamespace(step=np.int32(7))  # After meta-steps 4..6.
  program = lambda state, count: (state, dict(logs))
  with pytest.raises(
    divergence.DivergedError, match=r'^learning diverged at meta-step 5: '
  ) as raised:
    meta_lib.checked_step(program, state, 3)
  good = divergence.good_steps(raised.value)
  assert good is not None and good.count == 1
  fine = dict(logs, meta_loss=np.ones(3))
  assert meta_lib.checked_step(lambda s, c: (s, dict(fine)), state, 3)[0] is (
    state
  )


# 26 s in the default suite (2026-12-07): slow; the meta job's lowered
# programs were byte-identical before and after its steps moved (95ebaac).
@pytest.mark.slow
def test_meta_step_is_one_step_of_the_job(fast_compile):
  """`steps.meta_step` under jit(shard_map) alone gives the state and logs
  of one call of the job's program of one meta-step (identical on a CPU;
  the tolerance allows XLA's other fusions around the program's scan)."""
  del fast_compile
  config = dataclasses.replace(ONE_STEP, num_inner_steps=1)
  job = meta_lib.make_meta_train(config)
  setup = job.setup
  meta_step = _on_the_mesh(
    setup,
    functools.partial(steps.meta_step, setup),
    (setup.state_specs,),
    (setup.state_specs, P()),
  )
  state, logs = meta_step(job.init())
  expected, expected_logs = job.step(job.init(), 1)
  assert int(state.step) == int(expected.step) == 1
  chex.assert_trees_all_close(
    jax.device_get(state), jax.device_get(expected), rtol=1e-6, atol=1e-6
  )
  logs.pop(rollout_checks.KEY, None)
  logs.pop(divergence.KEY)
  assert set(logs) == set(expected_logs)
  for key, value in logs.items():
    np.testing.assert_allclose(
      value, expected_logs[key][0], rtol=1e-6, atol=1e-6, err_msg=key
    )


# ----------------------------------------------------------------------------
# The paper's meta-optimisation: per-agent Adam, clipping, remat, lifetimes.


def _first_update(config):
  """The rule's change over one meta-step, in units of the learning rate."""
  job = meta_lib.make_meta_train(config)
  state = job.init()
  before = meta_lib.rule(job, state)
  state, logs = job.step(state, 1)
  after = meta_lib.rule(job, state)
  change = jax.tree.map(
    lambda a, b: (a - b) / config.meta_learning_rate, after, before
  )
  return np.concatenate([np.ravel(x) for x in jax.tree.leaves(change)]), logs


# Slow (two meta-gradient compilations); the default run trains with remat in
# test_jobs_trainer.py's resume test.
@pytest.mark.slow
def test_remat_gives_the_same_meta_gradient(fast_compile):
  del fast_compile
  config = dataclasses.replace(ONE_STEP, num_inner_steps=3)
  plain, plain_logs = _first_update(config)
  remat, remat_logs = _first_update(dataclasses.replace(config, remat=True))
  np.testing.assert_allclose(remat, plain, atol=1e-4)
  np.testing.assert_allclose(
    remat_logs['meta_grad_norm'], plain_logs['meta_grad_norm'], rtol=1e-4
  )


# Slow (two meta-gradient compilations); the default run's upstream
# comparison below runs the unrolled program, the golden meta-gradient test
# the loop.
@pytest.mark.slow
@pytest.mark.parametrize('remat', [False, True])
def test_unrolled_inner_updates_give_the_same_meta_gradient(
  fast_compile, remat
):
  del fast_compile
  config = dataclasses.replace(ONE_STEP, num_inner_steps=3, remat=remat)
  unrolled, unrolled_logs = _first_update(config)
  looped, looped_logs = _first_update(
    dataclasses.replace(config, max_unrolled_inner_steps=0)
  )
  np.testing.assert_allclose(unrolled, looped, atol=1e-4)
  for key in ('meta_grad_norm', 'meta_loss', 'pos_rewards'):
    np.testing.assert_allclose(
      unrolled_logs[key], looped_logs[key], rtol=1e-4, err_msg=key
    )


# Slow (a meta-gradient compilation); the default run sees renewals before
# and after a resume in test_jobs_trainer.py.
@pytest.mark.slow
def test_agents_are_renewed_at_the_end_of_their_lifetime(fast_compile):
  """Lifetime 4 updates, 2 updates per meta-step, 2 agents: ages start
  staggered at 0 and 2; agent 1 is renewed after the first meta-step, agent
  0 after the second."""
  del fast_compile
  config = dataclasses.replace(ONE_STEP, agent_lifetime=4, steps_per_call=2)
  job = meta_lib.make_meta_train(config)
  state = job.init()
  np.testing.assert_array_equal(state.ages, [0, 2])

  def step_counts(state):
    """The agents' [2] optimiser step counts (Adam's `count`)."""
    counts = [
      np.asarray(x)
      for x in jax.tree.leaves(state.agents[0].learner_state.opt_state)
      if np.asarray(x).dtype.kind == 'i' and np.shape(x) == (2,)
    ]
    assert counts, 'no optimiser step count found'
    return counts[0]

  state, logs = job.step(state, 1)
  np.testing.assert_array_equal(state.ages, [2, 0])
  np.testing.assert_array_equal(logs['agents_renewed'], [1.0])
  # The renewed agent's optimiser starts again.
  np.testing.assert_array_equal(step_counts(state), [2, 0])
  state, logs = job.step(state, 1)
  np.testing.assert_array_equal(state.ages, [0, 2])
  np.testing.assert_array_equal(step_counts(state), [0, 2])


# Slow (a meta-gradient compilation), as the test above.
@pytest.mark.slow
def test_a_renewed_agent_starts_in_new_environments(fast_compile):
  """As GROOVE's agents: an agent renewed at the end of its lifetime starts
  new episodes in a new layout (gridworlds drawing one per reset key);
  the agent that goes on keeps its own."""
  del fast_compile
  config = dataclasses.replace(
    ONE_STEP,
    tasks=('lpg:small[layout_seed=-1]',),
    agent_lifetime=4,
    steps_per_call=1,
  )
  job = meta_lib.make_meta_train(config)
  state = job.init()
  np.testing.assert_array_equal(state.ages, [0, 2])

  def layouts(state):
    """Each agent's layout (its first instance's), as NumPy arrays."""
    env_state = jax.device_get(state.agents[0].env_state)
    return [
      jax.tree.map(lambda x, i=i: np.asarray(x)[0, i, 0], env_state.layout)
      for i in range(2)
    ]

  before = layouts(state)
  state, _ = job.step(state, 1)
  np.testing.assert_array_equal(state.ages, [2, 0])  # Agent 1 renewed.
  after = layouts(state)
  chex.assert_trees_all_equal(after[0], before[0])
  assert not all(
    np.array_equal(a, b)
    for a, b in zip(
      jax.tree.leaves(after[1]), jax.tree.leaves(before[1]), strict=True
    )
  ), 'the renewed agent kept its layout'
  step_types = np.asarray(
    jax.device_get(state.agents[0].env_timestep.step_type)
  )
  assert (step_types[0, 1] == 0).all(), step_types  # Its episodes start.


# Slow (a meta-gradient compilation, 70 s here under load), as the test
# above; the lpg preset's resume test also draws lifetimes.
@pytest.mark.slow
def test_lifetimes_are_drawn_per_agent_at_each_start(fast_compile):
  """lifetime_sampling='log_uniform': each agent draws its lifetime (in
  [min_agent_lifetime, agent_lifetime]) at its start and at each restart;
  an agent starts afresh exactly when its age reaches the lifetime it drew
  (one update per meta-step here, so ages step by one), and only then;
  first lives are staggered. The lifetimes differ over agents and over
  restarts."""
  del fast_compile
  config = dataclasses.replace(
    ONE_STEP,
    num_agents=4,
    num_inner_steps=1,
    lifetime_sampling='log_uniform',
    min_agent_lifetime=1,
    agent_lifetime=4,
    debug_checks=False,
  )
  job = meta_lib.make_meta_train(config)
  state = job.init()
  lifetimes = np.asarray(state.lifetimes)
  ages = np.asarray(state.ages)
  np.testing.assert_array_equal(ages, np.arange(4) * lifetimes // 4)
  drawn, renewals = [lifetimes], 0
  for _ in range(12):
    counts = _adam_counts(state)
    state, logs = job.step(state, 1)
    renewed = ages + 1 >= lifetimes  # Age reached after this update.
    np.testing.assert_array_equal(
      state.ages, np.where(renewed, 0, ages + 1), err_msg=str(lifetimes)
    )
    # A renewed agent's optimiser starts again; the others step on.
    np.testing.assert_array_equal(
      _adam_counts(state), np.where(renewed, 0, counts + 1)
    )
    np.testing.assert_array_equal(logs['agents_renewed'], [renewed.sum()])
    new = np.asarray(state.lifetimes)
    np.testing.assert_array_equal(new[~renewed], lifetimes[~renewed])
    drawn.append(new[renewed])
    renewals += renewed.sum()
    lifetimes, ages = new, np.asarray(state.ages)
  drawn = np.concatenate(drawn)
  assert renewals >= 8 and drawn.min() >= 1 and drawn.max() <= 4, drawn
  assert len(set(drawn.tolist())) >= 3, drawn  # They vary.
  # The first lifetimes, and those of the first restarts, are not all alike.
  assert len(set(drawn[:4].tolist())) > 1, drawn


def test_lifetimes_drawn_log_uniformly_and_first_lives_staggered():
  """meta_setup's draws: in [low, high], log-uniform (as many below the
  geometric mean as above), one key per agent (agent i's lifetime is the
  same in a population of any size); first lives staggered over each
  agent's own lifetime. A state of fixed lifetimes keeps its parts (its
  checkpoints restore), one of drawn lifetimes adds them."""
  draw = jax.jit(meta_setup.draw_lifetimes, static_argnums=(1, 2, 3))
  key = jax.random.PRNGKey(0)
  lifetimes = np.asarray(draw(key, 4000, 10, 250))
  assert lifetimes.dtype == np.int32
  assert lifetimes.min() == 10 and lifetimes.max() == 250
  below = np.mean(lifetimes < np.sqrt(10 * 250))
  assert 0.45 < below < 0.55, below
  np.testing.assert_array_equal(draw(key, 3, 10, 250), lifetimes[:3])
  np.testing.assert_array_equal(draw(key, 5, 7, 7), [7] * 5)
  np.testing.assert_array_equal(
    meta_setup.staggered_ages(jnp.array([8, 8, 12, 100])), [0, 2, 6, 75]
  )
  np.testing.assert_array_equal(
    meta_setup.staggered_ages(jnp.full((3,), 9)),
    meta_setup.initial_ages(3, 9),
  )
  fixed, drawn = meta_setup.state_specs(2), meta_setup.state_specs(2, True)
  assert type(fixed) is meta_setup.PopulationState
  assert set(fixed) == {
    'update_rule_params',
    'meta_opt_state',
    'agents',
    'ages',
    'rng',
    'step',
  }
  assert set(drawn) == set(fixed) | {'lifetimes'}
  assert meta_setup.lifetimes_of(fixed) is None


def _adam_counts(state):
  """The first group's agents' [N] optimiser step counts (Adam's `count`)."""
  counts = [
    np.asarray(x)
    for x in jax.tree.leaves(state.agents[0].learner_state.opt_state)
    if np.asarray(x).dtype.kind == 'i' and np.ndim(x) == 1
  ]
  assert counts, 'no optimiser step count found'
  return counts[0]


@pytest.mark.parametrize(
  'changes, fragment',
  [
    (
      dict(agent_lifetime=1, num_inner_steps=2),
      'agent_lifetime=1 is shorter than one meta-step',
    ),
    (dict(meta_grad_clip=-1.0), 'meta_grad_clip must be >= 0, got -1.0'),
    (
      dict(min_agent_lifetime=2, agent_lifetime=10),
      "min_agent_lifetime=2 .* needs lifetime_sampling='log_uniform'",
    ),
    (
      dict(lifetime_sampling='log_uniform', min_agent_lifetime=2),
      'draws lifetimes up to agent_lifetime: set agent_lifetime > 0',
    ),
    (
      dict(
        lifetime_sampling='log_uniform',
        min_agent_lifetime=1,
        agent_lifetime=10,
      ),
      'min_agent_lifetime=1 must be at least one meta-step',
    ),
    (
      dict(
        lifetime_sampling='log_uniform',
        min_agent_lifetime=20,
        agent_lifetime=10,
      ),
      'and at most agent_lifetime=10',
    ),
    (dict(min_agent_lifetime=-1), 'min_agent_lifetime must be >= 0, got -1'),
    (dict(lifetime_sampling='uniform'), "Unknown lifetime_sampling 'uniform'"),
    (
      dict(max_unrolled_inner_steps=-1),
      'max_unrolled_inner_steps must be >= 0, got -1',
    ),
    (dict(meta_grad_norm='median'), "Unknown meta_grad_norm 'median'"),
    (dict(meta_entropy_cost=-1.0), 'meta_entropy_cost must be >= 0, got -1.0'),
    (
      dict(meta_target_kl_cost=float('nan')),
      'meta_target_kl_cost must be finite and >= 0, got nan',
    ),
    (
      dict(meta_action_l2_cost=-1e-3),
      'meta_action_l2_cost must be >= 0, got -0.001',
    ),
    (
      dict(meta_action_l2_cost=5e-3),
      'meta_action_l2_cost=0.005 penalises the scalar of policy_target '
      "'action' or 'action_pg'; got policy_target='absolute'",
    ),
  ],
)
def test_bad_meta_optimisation_settings(changes, fragment):
  with pytest.raises(ValueError, match=fragment):
    dataclasses.replace(TINY, **changes)


# Slow (a meta-gradient compilation).
@pytest.mark.slow
def test_the_meta_objectives_regularisers_follow_the_config(fast_compile):
  """With every regulariser's weight 0 the meta-loss is the validation
  policy gradient's alone; with upstream's weights it is not."""
  del fast_compile
  assert ONE_STEP.meta_loss_weights() == meta_objective.MetaLossWeights()
  config = dataclasses.replace(
    ONE_STEP,
    meta_entropy_cost=0.0,
    meta_prediction_entropy_cost=0.0,
    meta_target_mean_cost=0.0,
    meta_target_kl_cost=0.0,
  )
  _, logs = smoke_env.run_calls(meta_lib.make_meta_train(config), [1])
  np.testing.assert_array_equal(logs['reg_loss'], [0.0])
  np.testing.assert_allclose(logs['meta_loss'], logs['pg_loss'], rtol=1e-6)
  _, logs = smoke_env.run_calls(meta_lib.make_meta_train(ONE_STEP), [1])
  assert np.all(logs['reg_loss'] != 0.0)


def test_action_l2_is_the_mean_square_of_the_action_targets_scalar():
  pi_action = np.array([[[0.5, -1.0]], [[2.0, 0.0]]], np.float32)  # [N, T, B]
  np.testing.assert_allclose(
    meta_objective.action_l2({'pi_action': pi_action, 'pi': None}),
    (0.25 + 1.0 + 4.0 + 0.0) / 4,
  )
  with pytest.raises(ValueError, match=r"got keys \['pi', 'y'\]"):
    meta_objective.action_l2({'pi': None, 'y': None})
  config = dataclasses.replace(
    TINY, policy_target='action', meta_action_l2_cost=5e-3
  )
  assert config.meta_loss_weights().action_l2 == 5e-3
  assert meta_objective.MetaLossWeights().action_l2 == 0.0  # Not upstream's.


# Slow (a meta-gradient compilation).
@pytest.mark.slow
def test_the_action_targets_l2_is_logged_and_weighted(fast_compile):
  """With policy target 'action' the meta-log has the scalar's mean
  square; its weight adds that times the weight to the regularisers, alone
  when the other weights are 0."""
  del fast_compile
  costs = dict.fromkeys(meta_config.META_LOSS_COSTS, 0.0)
  config = dataclasses.replace(
    ONE_STEP,
    policy_target='action',
    rule_sizes=disco.NAMED_SIZES['tiny'].changes(),
    **{**costs, 'meta_action_l2_cost': 0.5},
  )
  _, logs = smoke_env.run_calls(meta_lib.make_meta_train(config), [1])
  assert np.all(logs['action_l2'] > 0.0)
  np.testing.assert_allclose(logs['reg_loss'], 0.5 * logs['action_l2'])
  np.testing.assert_allclose(
    logs['meta_loss'], logs['pg_loss'] + logs['reg_loss'], rtol=1e-6
  )


def test_presets():
  from disco_rl.cli import meta_train as command  # pylint: disable=g-import-not-at-top

  paper = meta_config.MetaTrainConfig(
    **{**command.PRESETS['paper'], 'num_agents': 2}
  )
  assert paper.meta_grad_norm == 'per_agent_adam'
  assert paper.meta_learning_rate == 1e-3 and paper.meta_grad_clip == 1.0
  assert paper.num_inner_steps == 20 and paper.remat
  assert paper.batch_size_per_device == 96 and paper.rollout_len == 29
  assert paper.num_agents == 2  # Overridden.
  assert meta_config.MetaTrainConfig(**command.PRESETS['notebook']) == (
    meta_config.MetaTrainConfig()
  )
  lpg = meta_config.MetaTrainConfig(**command.PRESETS['lpg'])
  assert [t.spec() for t in lpg.suite] == ['lpg:all[layout_seed=-1,net=table]']
  assert lpg.model_lstm_size == 8 and lpg.value_dense == (16,)
  assert lpg.batch_size_per_device == 64 and lpg.rollout_len == 20
  assert lpg.num_inner_steps == 5 and lpg.meta_grad_norm == 'per_agent_adam'
  assert lpg.sampled_lifetimes
  assert (lpg.min_agent_lifetime, lpg.agent_lifetime) == (10, 250)
  assert (lpg.learning_rate, lpg.meta_learning_rate) == (3e-2, 1e-3)
  assert lpg.rule_sizes == {'prediction_size': 8}


@pytest.mark.parametrize(
  'arm, policy_target',
  [
    ('ACT_PG_SGD_GROOVE_L2_0.25_L1000', 'action_pg'),
    ('ACT_SGD_GROOVE_L2_0.25_L1000', 'action'),
  ],
)
def test_the_lpg_actor_preset_is_the_recipe_the_page_measured(
  arm, policy_target
):
  """The preset and the settings its arms ran with (their run.json in
  docs/results/lpg_transfer/l1000/arm_settings/) differ only in the run's
  length, seeds and call length (and the 'action' arm in its policy
  target)."""
  from disco_rl.cli import meta_train as command  # pylint: disable=g-import-not-at-top

  path = ROOT / 'docs/results/lpg_transfer/l1000/arm_settings' / f'{arm}.json'
  settings = records.upgrade_settings(
    meta_config.MetaTrainConfig, json.loads(path.read_text())['settings']
  )
  ran = meta_config.MetaTrainConfig(**settings)
  run_only = ('num_steps', 'seed', 'rule_seed', 'steps_per_call')
  preset = meta_config.MetaTrainConfig(
    **{
      **command.PRESETS['lpg_actor'],
      **{name: getattr(ran, name) for name in run_only},
      'policy_target': policy_target,
    }
  )
  # The sizes as the run's command spelt them ('8x1' or [8, 1]).
  assert disco.as_sizes(preset.rule_sizes) == disco.as_sizes(ran.rule_sizes)
  assert dataclasses.replace(preset, rule_sizes=ran.rule_sizes) == ran


# The task suite: agents in groups, one per environment.


# Slow (about 95 s: two populations compiled). The default run covers
# suites through the resume test of test_jobs_trainer.py, the meta-training
# notebook and the multi-process test, each with two task groups.
@pytest.mark.slow
def test_each_agent_of_a_suite_acts_as_in_a_single_task_population(
  fast_compile,
):
  """Agent i of a suite gets the same keys (initial state, rollouts,
  meta-gradient) as agent i of a one-task population: after a meta-step the
  parameters, value function and environment of the suite's second agent
  (CartPole, another network shape than Catch's) match those of agent 1 of a
  CartPole-only population."""
  config = dataclasses.replace(ONE_STEP, num_inner_steps=1, debug_checks=False)
  job = meta_lib.make_meta_train(
    dataclasses.replace(config, tasks=('catch', 'gymnax:CartPole-v1'))
  )
  assert job.setup.group_sizes == (1, 1)
  state = job.init()
  np.testing.assert_array_equal(state.ages, [0, 0])
  state, logs = job.step(state, 1)
  assert set(logs) >= {'rewards_task0', 'rewards_task1'}
  assert all(np.isfinite(v).all() for v in logs.values())
  catch_params, cartpole_params = (g.learner_state.params for g in state.agents)
  shapes = [
    (a.shape, b.shape)
    for a, b in zip(
      jax.tree.leaves(catch_params),
      jax.tree.leaves(cartpole_params),
      strict=True,
    )
  ]
  assert any(a != b for a, b in shapes), shapes  # 5x5 boards vs 4 numbers.

  single = meta_lib.make_meta_train(
    dataclasses.replace(config, tasks=('gymnax:CartPole-v1',))
  )
  alone, _ = single.step(single.init(), 1)
  (group,) = alone.agents
  agent_1 = lambda x: x[1:2]
  on_device = lambda x: x[:, 1:2]
  expected = group.replace(
    learner_state=jax.tree.map(agent_1, group.learner_state),
    actor_state=jax.tree.map(agent_1, group.actor_state),
    value_state=jax.tree.map(agent_1, group.value_state),
    env_state=jax.tree.map(on_device, group.env_state),
    env_timestep=jax.tree.map(on_device, group.env_timestep),
  )
  chex.assert_trees_all_close(
    jax.device_get(state.agents[1]),
    jax.device_get(expected),
    rtol=1e-6,
    atol=1e-6,
  )


@pytest.mark.slow  # The eval loop's test and test_loops_rollout_checks.py
# cover the mechanism in the default run.
def test_debug_checks_stop_at_the_bad_training_rollout(fast_compile):
  """An environment bug is reported with agent, field, time step, column
  (over the inner rollouts) and meta-step."""
  job = meta_lib.make_meta_train(
    dataclasses.replace(
      ONE_STEP,
      num_inner_steps=1,
      tasks=('catch', 'catch[rows=4,columns=3]'),
      num_agents=3,
    )
  )
  job.setup.members[1].env = smoke_env.NanRewardForEnv1(
    job.setup.members[1].env
  )
  state = job.init()
  with pytest.raises(
    rollout_checks.RolloutError,
    match=(
      r'^debug check failed: training rollout of agent 2\.rewards\[t=1, '
      r'b=1\] = nan is not finite \(loop step 0\)$'
    ),
  ):
    job.step(state, 1)


# ----------------------------------------------------------------------------
# Image tasks: the conv torso in meta-training.


def test_a_task_may_name_its_own_network():
  config = dataclasses.replace(
    ONE_STEP,
    conv_channels=(2,),
    tasks=('catch', 'gymnax:Breakout-MinAtar[net=conv]'),
  )
  setup = meta_setup.make_setup(config)
  catch, breakout = (m.agent.settings.net_settings.name for m in setup.members)
  assert (catch, breakout) == ('mlp', 'conv')
  params = jax.eval_shape(
    setup.members[1].agent.initial_learner_state, jax.random.PRNGKey(0)
  ).params
  assert params['conv_net/~_embedding_pass/conv_0']['w'].shape == (3, 3, 4, 2)
  with pytest.raises(
    ValueError,
    match=(
      r"net='conv' needs one image observation of shape \[H, W, C\]; task "
      r"'gymnax:CartPole-v1'"
    ),
  ):
    meta_setup.make_setup(
      dataclasses.replace(config, net='conv', tasks=('gymnax:CartPole-v1',))
    )
  with pytest.raises(
    ValueError,
    match=(
      r"Task 'catch\[net=cnn\]': unknown net 'cnn'; expected one of "
      r"\('mlp', 'conv', 'resnet', 'tabular', 'table'\)"
    ),
  ):
    dataclasses.replace(config, tasks=('catch[net=cnn]',))


@pytest.mark.slow  # ~45 s; the default run builds the conv suite (above).
def test_a_conv_population_meta_trains_on_minatar(fast_compile):
  """One meta-step of agents with the conv torso on Breakout: the rule
  moves, the agents' conv layers learn, every log is finite."""
  del fast_compile
  config = dataclasses.replace(
    ONE_STEP,
    num_inner_steps=1,
    net='conv',
    conv_channels=(2,),
    tasks=('gymnax:Breakout-MinAtar',),
    debug_checks=False,
  )
  job = meta_lib.make_meta_train(config)
  state = job.init()
  rule_before = meta_lib.rule(job, state)
  (group,) = state.agents
  conv_before = np.asarray(
    group.learner_state.params['conv_net/~_embedding_pass/conv_0']['w']
  )
  state, logs = job.step(state, 1)
  assert all(np.isfinite(v).all() for v in logs.values())
  moved = [
    np.abs(a - b).max()
    for a, b in zip(
      jax.tree.leaves(meta_lib.rule(job, state)),
      jax.tree.leaves(rule_before),
      strict=True,
    )
  ]
  assert max(moved) > 0
  (group,) = state.agents
  conv_after = group.learner_state.params['conv_net/~_embedding_pass/conv_0']
  assert np.abs(np.asarray(conv_after['w']) - conv_before).max() > 0
