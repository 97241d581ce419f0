# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Checks that need several devices, run in a subprocess by test_multidevice.py.

JAX fixes the number of CPU devices when it starts, from
`XLA_FLAGS=--xla_force_host_platform_device_count=N`, so these checks run in a
fresh interpreter: `python multidevice_checks.py CHECK N`. Each check raises
(non-zero exit) on failure.
"""

import functools
import importlib.util
import os
import pathlib
import sys

import golden_cases
import jax
import jax.numpy as jnp
import numpy as np
import smoke_env
import tiny

from disco_rl import actors
from disco_rl import agent as agent_lib
from disco_rl import utils
from disco_rl import weights
from disco_rl.runtime import mesh as mesh_lib

AXIS = 'i'


def _golden():
  directory = pathlib.Path(os.environ['DISCO_RL_GOLDEN_DIR'])
  spec = importlib.util.spec_from_file_location(
    'golden_mp', directory / 'golden.py'
  )
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module, directory


def check_pmap_golden(num_devices: int) -> None:
  """learner_disco_pmap2 under pmap on 2 devices, against both references.

  The current-JAX recording is the primary check (its tight tolerance); the
  jax 0.6.2 one is the historical record at its own. Both were recorded with
  the same settings, so the compiled steps serve both.
  """
  assert num_devices == 2, 'the golden case was recorded on 2 devices'
  golden, directory = _golden()
  cases = []
  for reference in golden_cases.REFERENCES:
    subdir = directory / reference.subdir
    if not (subdir / 'learner_disco_pmap2.npz').is_file():
      raise FileNotFoundError(
        f'golden case learner_disco_pmap2 missing from {subdir}'
      )
    cases.append(
      golden_cases.CheckedCase(
        golden, golden.load('learner_disco_pmap2', str(subdir)), reference
      )
    )
  settings = [
    {k: v for k, v in case.meta.items() if k != 'jax_version'} for case in cases
  ]
  assert all(s == settings[0] for s in settings), settings
  agent, env = golden_cases.make_agent(cases[0].meta, batch_axis_name=AXIS)
  devices = jax.devices()[:num_devices]
  learner_step = jax.pmap(
    agent.learner_step,
    axis_name=AXIS,
    static_broadcasted_argnums=5,
    devices=devices,
  )
  unroll = jax.pmap(
    actors.unroll_jittable_actor,
    axis_name=AXIS,
    static_broadcasted_argnums=(5, 6, 7),
    devices=devices,
  )
  rule_params = utils.replicate_across_devices(
    weights.load_disco_103(os.environ['DISCO_RL_WEIGHTS'], download=False),
    devices,
  )
  for case in cases:
    _replay_pmap_case(
      case, agent, env, devices, learner_step, unroll, rule_params
    )
    print(f'pmap golden ({case.reference.name}): ok')


def _replay_pmap_case(
  case, agent, env, devices, learner_step, unroll, rule_params
):
  """Acts and learns with the recorded keys, checking every step's values."""
  seed = case.meta['seed']
  replicate = functools.partial(utils.replicate_across_devices, devices=devices)
  learner_state = replicate(
    agent.initial_learner_state(jax.random.PRNGKey(seed))
  )
  actor_state = replicate(agent.initial_actor_state(jax.random.PRNGKey(seed)))
  env_state, timestep = jax.vmap(env.reset)(
    jax.random.split(jax.random.PRNGKey(seed + 2), len(devices))
  )
  acting_params = learner_state.params
  num_steps = len(
    {k.split('|')[1] for k in case.arrays if k.startswith('step|')}
  )
  assert num_steps >= 2, num_steps
  for i in range(num_steps):
    prefix = f'step|{i}'
    # Acting with the recorded keys regenerates the recorded rollout.
    rng_act = golden_cases.as_key(case.arrays[f'{prefix}|rng_act'])
    rollout, _, timestep, env_state = unroll(
      acting_params,
      actor_state,
      timestep,
      env_state,
      rng_act,
      env,
      case.meta['T'],
      agent.actor_step,
    )
    case.check(rollout, f'{prefix}|rollout')

    recorded = golden_cases.rollout_from(case.subtree(f'{prefix}|rollout'))
    rng_learn = golden_cases.as_key(case.arrays[f'{prefix}|rng_learn'])
    learner_state, _, logs = learner_step(
      rng_learn, recorded, learner_state, actor_state, rule_params, False
    )
    # Parameters whose Adam updates are set by rounding may be off within
    # Adam's bound (golden_cases.CheckedCase.compare_learner_state).
    case.check_learner_state(learner_state, prefix, replicas=len(devices))
    case.check(golden_cases.without_meta_out(logs), f'{prefix}|logs')
    acting_params = jax.tree.map(
      jnp.asarray, case.subtree(f'{prefix}|learner_state')['params']
    )


def check_sharding(num_devices: int) -> None:
  """shard/replicate/gather round trips and the divisibility error."""
  devices = jax.devices()[:num_devices]
  assert len(devices) == num_devices, jax.devices()
  data = {
    'a': np.arange(num_devices * 6).reshape(num_devices * 3, 2),
    'b': np.ones((num_devices * 2,), np.float32),
  }
  sharded = utils.shard_across_devices(data, devices)
  assert sharded['a'].shape == (num_devices, 3, 2)
  for d, shard in enumerate(sharded['a'].addressable_shards):
    assert shard.device == devices[d]
    np.testing.assert_array_equal(
      np.asarray(shard.data)[0], data['a'][3 * d : 3 * d + 3]
    )
  back = utils.gather_from_devices(sharded)
  np.testing.assert_array_equal(back['a'], data['a'])
  np.testing.assert_array_equal(back['b'], data['b'])

  replicated = utils.replicate_across_devices({'w': np.arange(3.0)}, devices)
  assert replicated['w'].shape == (num_devices, 3)
  assert {s.device for s in replicated['w'].addressable_shards} == set(devices)
  # Sharded inputs feed a pmap without copies, and collectives see every
  # device.
  total = jax.pmap(
    lambda x: jax.lax.psum(x.sum(), AXIS), axis_name=AXIS, devices=devices
  )(sharded['b'])
  np.testing.assert_allclose(np.asarray(total), num_devices * 2.0)

  try:
    utils.shard_across_devices(
      {'x': np.zeros((num_devices * 2 + 1, 2))}, devices
    )
  except ValueError as e:
    assert 'does not divide' in str(e) and str(num_devices) in str(e), e
  else:
    raise AssertionError('expected a ValueError for an indivisible batch')

  # Replicated jax.Arrays (what the loops' shard_map programs return): the
  # spread compares the devices' own buffers.
  mesh = mesh_lib.make_mesh(devices)
  same = mesh_lib.place({'w': np.arange(3.0)}, mesh_lib.replicated(mesh))
  assert utils.replica_spread(same, replicated=True) == 0.0
  drifted = jax.make_array_from_single_device_arrays(
    (3,),
    mesh_lib.replicated(mesh),
    [
      jax.device_put(np.arange(3.0) + d * 0.5, device)
      for d, device in enumerate(devices)
    ],
  )
  assert utils.replica_spread({'w': drifted}, replicated=True) == (
    0.5 * (num_devices - 1)
  )

  # The loops' device picker: all devices when every share divides, else
  # the share is named.
  assert mesh_lib.pick_devices({'batch': 4 * num_devices}) == devices
  assert len(mesh_lib.pick_devices({'batch': 1})) == 1
  try:
    mesh_lib.pick_devices({'buffer_capacity': num_devices + 1}, num_devices)
  except ValueError as e:
    assert f'buffer_capacity={num_devices + 1} does not divide' in str(e), e
  else:
    raise AssertionError('expected a ValueError for an indivisible share')
  print('sharding: ok')


def check_replicated_learner(num_devices: int) -> None:
  """Disco learner on per-device batches: replicas stay identical."""
  devices = jax.devices()[:num_devices]
  meta = dict(rows=5, cols=5, batch=2, settings=None)
  settings = agent_lib.get_settings_disco()
  settings.net_settings.net_args = dict(
    dense=(32,),
    model_arch_name='lstm',
    head_w_init_std=1e-2,
    model_kwargs=dict(head_mlp_hiddens=(16,), lstm_size=16),
  )
  env = golden_cases.catch_env(meta)
  agent = agent_lib.Agent(
    single_observation_spec=env.single_observation_spec(),
    single_action_spec=env.single_action_spec(),
    agent_settings=settings,
    batch_axis_name=AXIS,
  )
  rule = agent.update_rule
  rule_params, _ = rule.init_params(jax.random.PRNGKey(1))
  replicate = functools.partial(utils.replicate_across_devices, devices=devices)
  learner_state = replicate(agent.initial_learner_state(jax.random.PRNGKey(0)))
  actor_state = replicate(agent.initial_actor_state(jax.random.PRNGKey(0)))
  rule_params = replicate(rule_params)
  env_state, timestep = jax.vmap(env.reset)(
    jax.random.split(jax.random.PRNGKey(3), num_devices)
  )
  unroll = jax.pmap(
    actors.unroll_jittable_actor,
    axis_name=AXIS,
    static_broadcasted_argnums=(5, 6, 7),
    devices=devices,
  )
  learner_step = jax.pmap(
    agent.learner_step,
    axis_name=AXIS,
    static_broadcasted_argnums=5,
    devices=devices,
  )
  rng = jax.random.PRNGKey(7)
  for _ in range(2):
    rng, act_rng, learn_rng = jax.random.split(rng, 3)
    rollout, _, timestep, env_state = unroll(
      learner_state.params,
      actor_state,
      timestep,
      env_state,
      jax.random.split(act_rng, num_devices),
      env,
      6,
      agent.actor_step,
    )
    learner_state, _, logs = learner_step(
      jax.random.split(learn_rng, num_devices),
      rollout,
      learner_state,
      actor_state,
      rule_params,
      False,
    )
  # Different data per device, yet parameters, optimiser state, EMAs and the
  # meta-RNN state (all driven by pmean-ed quantities) agree exactly.
  for leaf in jax.tree.leaves(learner_state):
    leaf = np.asarray(leaf)
    for d in range(1, num_devices):
      np.testing.assert_array_equal(leaf[d], leaf[0])
  actions = np.asarray(rollout.actions)
  assert not all(
    np.array_equal(actions[0], actions[d]) for d in range(1, num_devices)
  ), 'devices saw the same data'
  assert np.all(np.isfinite(np.asarray(logs['total_loss'])))
  print('replicated learner: ok')


def check_seed_shards(num_devices: int) -> None:
  """Seeds sharded over devices: each group of devices runs its seeds as a
  run alone on as many devices; checkpoints resume exactly."""
  import dataclasses  # pylint: disable=g-import-not-at-top
  import tempfile  # pylint: disable=g-import-not-at-top

  from disco_rl.jobs import trainer  # pylint: disable=g-import-not-at-top
  from disco_rl.jobs.eval import job as eval_lib  # pylint: disable=g-import-not-at-top
  from disco_rl.jobs.eval import setup as eval_setup  # pylint: disable=g-import-not-at-top

  assert num_devices == 4, 'the cases below are for 4 devices'
  # 4 environments, a learner batch of 4, a buffer of 8, split over the
  # devices of a seed group.
  tiny_config = tiny.eval_config(
    replay_ratio=1, steps_per_call=3, seed=5, debug_checks=False
  )

  def shape(setup):
    """(seed groups, devices per group) of an eval job's mesh."""
    return (setup.mesh.shape[mesh_lib.SEED_AXIS], setup.batch_devices)

  def run(config):
    """One call of `steps_per_call` iterations of a new eval job."""
    job = eval_lib.make_eval(config)
    state, metrics = job.step(job.init(), config.steps_per_call)
    return job, jax.device_get(state.learner_state), metrics

  # 3 seeds do not split 4 devices into groups: every device holds a share
  # of every run (compared with runs alone on one device elsewhere).
  setup = eval_setup.make_setup(dataclasses.replace(tiny_config, num_seeds=3))
  assert shape(setup) == (1, 4), shape(setup)
  # (seeds, devices): seed groups x devices per group, as picked.
  for num_seeds, expected in ((4, (4, 1)), (2, (2, 2))):
    config = dataclasses.replace(tiny_config, num_seeds=num_seeds)
    job, learner, metrics = run(config)
    assert shape(job.setup) == expected, (num_seeds, shape(job.setup))
    assert job.setup.mesh.devices.shape == expected
    # The last group: its seed and devices are offset from the first's.
    for j in (num_seeds - 1,):
      alone_config = dataclasses.replace(
        tiny_config, seed=5 + j, num_devices=expected[1]
      )
      _, alone_learner, alone_metrics = run(alone_config)
      for key in alone_metrics:
        np.testing.assert_allclose(
          metrics[key][:, j],
          alone_metrics[key][:, 0],
          err_msg=f'{num_seeds} {key} {j}',
          **smoke_env.SAME_RUN,
        )
      jax.tree.map(
        lambda many, one, j=j: np.testing.assert_allclose(
          many[j], one[0], **smoke_env.SAME_RUN
        ),
        learner,
        alone_learner,
      )
  # The runs' parameters live on their own group of devices.
  config = dataclasses.replace(tiny_config, num_seeds=2)
  state = eval_lib.make_eval(config).init()
  leaf = jax.tree.leaves(state.learner_state.params)[0]
  assert leaf.sharding.spec[0] == mesh_lib.SEED_AXIS, leaf.sharding
  assert {
    (s.index[0].start, s.index[0].stop) for s in leaf.addressable_shards
  } == {(0, 1), (1, 2)}
  # Exact resume of seed-sharded runs.
  with tempfile.TemporaryDirectory() as tmp:
    whole = trainer.Trainer(
      dataclasses.replace(config, num_steps=6), f'{tmp}/whole', progress=False
    )
    whole.fit()
    whole.close()
    part = trainer.Trainer(
      dataclasses.replace(config, num_steps=3), f'{tmp}/part', progress=False
    )
    part.fit()
    part.close()
    resumed = trainer.Trainer(
      dataclasses.replace(config, num_steps=6),
      f'{tmp}/part',
      resume=True,
      progress=False,
    )
    resumed.fit()
    resumed.close()
    assert len(resumed.rows) == len(whole.rows) == 2 * whole.step
    for a, b in zip(resumed.rows, whole.rows, strict=True):
      assert a.keys() == b.keys()
      keys = [k for k in a if k not in ('rss_mb', 'time_s')]  # The host's.
      np.testing.assert_array_equal([a[k] for k in keys], [b[k] for k in keys])
  print('seed shards: ok')


CHECKS = {
  'seed_shards': check_seed_shards,
  'pmap_golden': check_pmap_golden,
  'sharding': check_sharding,
  'replicated_learner': check_replicated_learner,
}

if __name__ == '__main__':
  name, count = sys.argv[1], int(sys.argv[2])
  if jax.device_count() < count:
    raise SystemExit(
      f'need {count} devices, have {jax.device_count()}; set '
      f'XLA_FLAGS=--xla_force_host_platform_device_count={count}'
    )
  CHECKS[name](count)
