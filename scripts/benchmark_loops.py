#!/usr/bin/env python3
# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Loop speed: one call per step (the previous pmap design) vs the fused loops.

Runs, in one process and on the same settings, side by side:

eval (Disco103, the upstream notebook's settings: Catch 8x8, 64 trajectories
of 29 steps per learner step, replay ratio 32, MLP 512x512):
  - step-per-call: a `jax.pmap` program per iteration (act, buffer, sample,
    learn), metrics fetched after every iteration (this project's previous
    loop);
  - fused: the eval job (`make_eval`), `--eval-steps-per-call` iterations
    per call;
  - the learner step alone (the agent's `learner_step` on a batch sampled
    from the fused job's filled buffer, in a `compiled.program` as the fused
    job's iterations are), one call per step and `--eval-steps-per-call`
    steps in one call, to give the fused job's overhead over it (acting,
    storing and the learning gate);
  - fused with the agent network in bfloat16 (`precision='bfloat16'`).
meta-train (the upstream notebook's settings):
  - step-per-call: a `jax.pmap` meta-step with a Python loop over the inner
    rollouts (this project's previous loop);
  - fused: the meta-training job (`make_meta_train`) with its settings
    (`--meta-steps-per-call`
    meta-steps per call, 10 by default; agents one after another on a CPU;
    the 2 inner updates unrolled, where the previous loop ran them in a
    `lax.scan`).

Timed rounds alternate between the variants so that load from elsewhere on
the machine affects them alike. Prints steps/s, compile time (tracing,
lowering and XLA compilation of the program, measured apart from running
it: the fastest of `--compile-rounds` compilations in alternating order with
JAX's caches cleared, so that the process's first compilation, which pays
one-time costs, is not charged to one variant) and the process's peak
resident memory after each variant was built and run (it only grows: compare
the increments).

  python scripts/benchmark_loops.py                 # both, ~20 min on 2 CPUs
  python scripts/benchmark_loops.py --only eval --rounds 3
"""

import argparse
import dataclasses
import json
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P
import numpy as np
import optax

from disco_rl import actors
from disco_rl import meta_objective
from disco_rl import metrics as metrics_lib
from disco_rl import replay
from disco_rl import weights
from disco_rl.loops import compiled
from disco_rl.loops import config as config_lib
from disco_rl.loops import eval as eval_lib
from disco_rl.loops import eval_setup
from disco_rl.loops import mesh as mesh_lib
from disco_rl.loops import meta as meta_lib
from disco_rl.loops import run as run_lib

AXIS = mesh_lib.AXIS
# --tiny: settings that only check the script runs.
TINY_EVAL = dict(
  batch_size=4,
  replay_ratio=2,
  buffer_capacity=8,
  rollout_len=5,
  dense=(16,),
  model_lstm_size=8,
  model_head_hiddens=(8,),
)
TINY_META = dict(
  batch_size_per_device=2,
  rollout_len=3,
  dense=(16,),
  model_lstm_size=8,
  model_head_hiddens=(8,),
  value_dense=(8,),
)


def _block(tree):
  jax.tree.map(lambda x: x.block_until_ready(), tree)
  return tree


def _compile_seconds(lowerable, *args) -> float:
  """Seconds to trace, lower and compile a program (not run it)."""
  start = time.perf_counter()
  lowerable.lower(*args).compile()
  return time.perf_counter() - start


def _compile_times(programs, results, rounds: int) -> None:
  """Each program's compile time into `results[name]['compile_s']`.

  A process's first compilation pays one-time costs, and this machine is
  shared: every program is compiled `rounds` times, the order reversed each
  round and JAX's caches cleared before each compile, and the fastest is
  kept (all of them go to 'compile_s_all').

  Args:
    programs: {name: (object with .lower(*args): a job, a
      `compiled.Program`, a pmapped function; args)}.
    results: {name: dict} to fill.
    rounds: compilations per program.
  """
  names = list(programs)
  for r in range(rounds):
    for name in names if r % 2 == 0 else names[::-1]:
      lowerable, args = programs[name]
      jax.clear_caches()
      seconds = _compile_seconds(lowerable, *args)
      results[name].setdefault('compile_s_all', []).append(seconds)
      print(f'  compile {name}: {seconds:.1f} s', flush=True)
  for name in names:
    results[name]['compile_s'] = min(results[name]['compile_s_all'])


def _one_run(state: eval_setup.EvalState) -> eval_setup.EvalState:
  """The fused job's state of its first (only) run, without the seed axis
  and without the rule's parameters (given apart): what the previous loop
  works on. Shares no buffer with `state` (which the job donates)."""
  first = lambda tree: jax.tree.map(lambda x: x[0], tree)
  per_device = lambda tree: jax.tree.map(lambda x: x[:, 0], tree)
  return state.replace(
    learner_state=first(state.learner_state),
    rng=first(state.rng),
    actor_state=per_device(state.actor_state),
    env_state=per_device(state.env_state),
    timestep=per_device(state.timestep),
    acc_rewards=per_device(state.acc_rewards),
    replay=per_device(state.replay),
    rule_params=None,
    step=jnp.copy(state.step),
  )


def _replicate(tree, num):
  return jax.tree.map(
    lambda x: jnp.broadcast_to(x, (num,) + jnp.shape(x)), tree
  )


# ----------------------------------------------------------------------------
# The previous eval loop: one pmap program per iteration.


class StepPerCallEval:
  """Act, buffer, sample and learn in one `jax.pmap` call per iteration."""

  def __init__(self, job: run_lib.Job):
    self.job = job
    self.num = len(job.setup.devices)
    self.program = jax.pmap(
      self._iteration, axis_name=AXIS, devices=job.setup.devices
    )

  def init(self):
    state = _one_run(self.job.init())
    host = jax.device_get(state)
    # Replicated parts get a device axis, as pmap wants.
    return host.replace(
      learner_state=_replicate(host.learner_state, self.num),
      rng=jax.random.split(host.rng, self.num),
      step=np.zeros((self.num,), np.int32),
    )

  def _iteration(self, state, rule_params):
    setup = self.job.setup
    rng, act_key, learn_key = jax.random.split(state.rng, 3)
    rollout, actor_state, timestep, env_state = actors.unroll_jittable_actor(
      state.learner_state.params,
      state.actor_state,
      state.timestep,
      state.env_state,
      act_key,
      setup.env,
      setup.config.rollout_len,
      setup.agent.actor_step,
    )
    acc, returns = actors.accumulate_rewards(
      state.acc_rewards, (rollout.rewards, rollout.discounts)
    )
    total, episodes = actors.episode_returns(returns, rollout.discounts)
    buffer = replay.add(
      state.replay, replay.keep_outputs(rollout, setup.config.behaviour_outputs)
    )
    sample_key, step_key = jax.random.split(learn_key)
    batch = replay.sample(buffer, sample_key, setup.batch_per_device)
    learner_state, _, logs = setup.agent.learner_step(
      step_key, batch, state.learner_state, actor_state, rule_params, False
    )
    state = state.replace(
      learner_state=learner_state,
      actor_state=actor_state,
      timestep=timestep,
      env_state=env_state,
      acc_rewards=acc,
      replay=buffer,
      rng=rng,
      step=state.step + 1,
    )
    stats = dict(
      return_sum=jax.lax.psum(total, AXIS),
      episodes=jax.lax.psum(episodes, AXIS),
      **{k: logs[k] for k in setup.log_keys},
    )
    return state, stats

  def run(self, state, rule_params, count):
    for _ in range(count):
      state, stats = self.program(state, rule_params)
      jax.device_get(stats)  # The host reads every iteration's metrics.
    return state


# ----------------------------------------------------------------------------
# The learner step alone, on the fused job's filled buffer.


def learner_program(job: run_lib.Job, length: int) -> compiled.Program:
  """Up to `length` learner steps of the eval job's agent in one call, the
  program the fused job's iterations are (`compiled.program`: jit, shard_map,
  scan; the state donated; the logs fetched), without acting, storing or
  the learning gate.

  `(carry, count, buffer, actor_state, rule_params) -> (carry, logs)`:
  `carry` is (learner state, key), replicated; `buffer` and `actor_state`
  one run's [D, ...] per device. Each step samples a batch from the buffer
  and takes the fused job's learner step on it (with a device's own key;
  the logs averaged over devices).
  """
  setup = job.setup
  config = setup.config

  def learn(carry, buffer, actor_state, rule_params):
    learner_state, rng = carry
    rng, key = jax.random.split(rng)
    sample_key, step_key = jax.random.split(
      jax.random.fold_in(key, jax.lax.axis_index(AXIS))
    )
    batch = replay.sample(buffer, sample_key, setup.batch_per_device)
    learner_state, _, logs = setup.agent.learner_step(
      step_key, batch, learner_state, actor_state, rule_params, False
    )
    return (learner_state, rng), jax.lax.pmean(
      {k: logs[k] for k in setup.log_keys}, AXIS
    )

  return compiled.program(
    learn,
    length=length,
    mesh=setup.mesh,
    state_specs=P(),
    operand_specs=(P(AXIS), P(AXIS), P()),
    output_specs=P(),
    precision=config.matmul_precision,
  )


def bench_eval(args) -> dict:
  config = config_lib.EvalConfig(
    steps_per_call=args.eval_steps_per_call,
    num_devices=1,
    **TINY_EVAL if args.tiny else {},
  )
  rule_params = weights.load_disco_103()
  per_call = config.steps_per_call
  results = {}

  fused = eval_lib.make_eval(config, rule_params=rule_params)
  fused_state = fused.init()
  results['fused'] = {}
  # Fill the buffer past the learning gate.
  fused_state, _ = fused.step(fused_state, per_call)
  fused_state = _block(fused_state)
  results['fused']['peak_rss_mb'] = metrics_lib.peak_memory_mb()

  bf16 = eval_lib.make_eval(
    dataclasses.replace(config, precision='bfloat16'), rule_params=rule_params
  )
  bf16_state = bf16.init()
  results['fused_bfloat16'] = {}
  bf16_state, _ = bf16.step(bf16_state, per_call)
  bf16_state = _block(bf16_state)
  results['fused_bfloat16']['peak_rss_mb'] = metrics_lib.peak_memory_mb()

  stepper = StepPerCallEval(fused)
  step_state = stepper.init()
  step_params = _replicate(jax.tree.map(jnp.asarray, rule_params), stepper.num)
  results['step_per_call'] = {}
  step_state = _block(
    stepper.run(step_state, step_params, config.replay_ratio + 1)
  )
  results['step_per_call']['peak_rss_mb'] = metrics_lib.peak_memory_mb()

  # The learner step alone, on the (filled) fused buffer of the first run:
  # one call per step, and steps_per_call steps in one call.
  alone = _one_run(fused_state)
  mesh = fused.setup.mesh
  operands = (
    alone.replay,
    alone.actor_state,
    mesh_lib.place(rule_params, mesh_lib.replicated(mesh)),
  )
  learner_only = learner_program(fused, 1)
  learner_scanned = learner_program(fused, per_call)
  key = jax.random.PRNGKey(1)
  # Each program donates its carry: a copy of its own, placed as the
  # programs' outputs are (an input placed otherwise would compile again).
  carry = lambda: mesh_lib.place(
    jax.device_get((alone.learner_state, key)), mesh_lib.replicated(mesh)
  )
  results['learner_alone'] = {}
  alone_carry, _ = learner_only(carry(), 1, *operands)
  _block(alone_carry)
  results['learner_scanned'] = {}
  scanned_carry, _ = learner_scanned(carry(), per_call, *operands)
  _block(scanned_carry)

  times = {
    name: []
    for name in (
      'fused',
      'step_per_call',
      'learner_alone',
      'learner_scanned',
      'fused_bfloat16',
    )
  }
  for r in range(args.rounds):
    t = time.perf_counter()
    fused_state, _ = fused.step(fused_state, per_call)
    times['fused'].append((time.perf_counter() - t) / per_call)
    t = time.perf_counter()
    bf16_state, _ = bf16.step(bf16_state, per_call)
    times['fused_bfloat16'].append((time.perf_counter() - t) / per_call)
    t = time.perf_counter()
    step_state = _block(stepper.run(step_state, step_params, per_call))
    times['step_per_call'].append((time.perf_counter() - t) / per_call)
    t = time.perf_counter()
    for _ in range(per_call):  # Each call fetches its logs.
      alone_carry, _ = learner_only(alone_carry, 1, *operands)
    times['learner_alone'].append((time.perf_counter() - t) / per_call)
    t = time.perf_counter()
    scanned_carry, _ = learner_scanned(scanned_carry, per_call, *operands)
    times['learner_scanned'].append((time.perf_counter() - t) / per_call)
    print(
      f'  eval round {r + 1}/{args.rounds}: '
      + ', '.join(f'{k} {1e3 * v[-1]:.0f} ms/step' for k, v in times.items()),
      flush=True,
    )
  for name, values in times.items():
    results[name]['ms_per_step'] = 1e3 * float(np.median(values))
    results[name]['steps_per_s'] = 1.0 / float(np.median(values))
  _compile_times(
    {
      'fused': (fused.program, (fused_state,)),
      'step_per_call': (stepper.program, (step_state, step_params)),
      'learner_alone': (learner_only, (alone_carry, *operands)),
      'learner_scanned': (learner_scanned, (scanned_carry, *operands)),
      'fused_bfloat16': (bf16, (bf16_state,)),
    },
    results,
    args.compile_rounds,
  )
  results['fused_overhead_over_learner'] = (
    results['fused']['ms_per_step'] / results['learner_alone']['ms_per_step']
    - 1.0
  )
  results['fused_overhead_over_scanned_learner'] = (
    results['fused']['ms_per_step'] / results['learner_scanned']['ms_per_step']
    - 1.0
  )
  results['fused_speedup'] = (
    results['step_per_call']['ms_per_step'] / results['fused']['ms_per_step']
  )
  results['bfloat16_speedup'] = (
    results['fused']['ms_per_step'] / results['fused_bfloat16']['ms_per_step']
  )
  return results


# ----------------------------------------------------------------------------
# The previous meta-train loop: a pmap meta-step, inner rollouts in Python.


def _reward_logs(rewards) -> dict:
  """Mean reward and counts of positive and negative rewards, [] each (the
  fused job's)."""
  return dict(
    rewards=jnp.mean(rewards),
    pos_rewards=jnp.sum(rewards > 0).astype(jnp.float32),
    neg_rewards=jnp.sum(rewards < 0).astype(jnp.float32),
  )


def _step_logs(meta_log, metrics, grads, updates) -> dict:
  """A meta-step's scalar logs, the fused job's metrics.csv columns: the
  agents' meta logs and mean inner-update metrics ('agent_<name>'), the
  norm of the agents' mean meta-gradient and of the rule's update."""
  logs = jax.tree.map(
    jnp.mean, dict(meta_log, **{f'agent_{k}': v for k, v in metrics.items()})
  )
  logs['meta_grad_norm'] = optax.tree_utils.tree_norm(
    jax.tree.map(lambda g: jnp.mean(g, axis=0), grads)
  )
  logs['meta_up_norm'] = optax.tree_utils.tree_norm(updates)
  return logs


class StepPerCallMeta:
  """One `jax.pmap` meta-step per call, inner rollouts in a Python loop.

  As the previous loop (before the loops package) had it, logs included:
  the agents' mean inner-update metrics, reward counts, meta-gradient and
  update norms, the columns of its metrics.csv.
  """

  def __init__(self, job: run_lib.Job):
    self.job = job
    self.num = job.setup.num_devices
    self.program = jax.pmap(
      self._meta_step, axis_name=AXIS, devices=job.setup.devices
    )

  def init(self):
    state = jax.device_get(self.job.init())
    per_device = lambda x: x[0]
    (group,) = state.agents  # One task: Catch; its agents [N, ...].
    agents = group.replace(
      env_state=jax.tree.map(per_device, group.env_state),
      env_timestep=jax.tree.map(per_device, group.env_timestep),
    )
    return _replicate(state.replace(agents=agents), self.num)

  def _agent(self, params, agent_state, act_rng, grad_rng):
    cfg, member = self.job.setup.config, self.job.setup.members[0]
    rollouts = []
    for key in jax.random.split(act_rng, cfg.num_inner_steps):
      agent_state, rollout = member.unroll_actor(
        agent_state, key, cfg.rollout_len
      )
      rollouts.append(rollout)
    train = jax.tree.map(lambda *xs: jnp.stack(xs), *rollouts)
    agent_state, valid = member.unroll_actor(
      agent_state, act_rng, 2 * cfg.rollout_len
    )
    # The inner updates in a loop (lax.scan), as the previous loop had them.
    grads, (agent_state, metrics, meta_log) = (
      meta_objective.calculate_meta_gradient(
        params,
        agent_state,
        train,
        valid,
        grad_rng,
        member,
        axis_name=AXIS,
        unroll=1,
      )
    )
    # The logs the previous loop wrote to metrics.csv (the fused job's).
    meta_log = dict(meta_log, **_reward_logs(train.rewards))
    return grads, agent_state, jax.tree.map(jnp.mean, metrics), meta_log

  def _meta_step(self, state):
    n = self.job.setup.config.num_agents
    rng, step_rng = jax.random.split(state.rng)
    act_rng, grad_rng = jax.random.split(step_rng)
    grads, agents, metrics, meta_log = jax.vmap(
      self._agent, in_axes=(None, 0, 0, 0)
    )(
      state.update_rule_params,
      state.agents,
      jax.random.split(act_rng, n),
      jax.random.split(grad_rng, n),
    )
    meta_log = jax.lax.pmean(meta_log, AXIS)
    # The optimiser takes the agents' meta-gradients [N, ...] and averages.
    updates, opt_state = self.job.setup.meta_opt.update(
      grads, state.meta_opt_state
    )
    logs = _step_logs(meta_log, metrics, grads, updates)
    return state.replace(
      update_rule_params=optax.apply_updates(state.update_rule_params, updates),
      meta_opt_state=opt_state,
      agents=agents,
      rng=rng,
      step=state.step + 1,
    ), logs

  def run(self, state, count):
    for _ in range(count):
      state, logs = self.program(state)
      jax.device_get(logs)
    return state


def bench_meta(args) -> dict:
  config = config_lib.MetaTrainConfig(
    num_devices=1, **TINY_META if args.tiny else {}
  )
  if args.meta_steps_per_call:
    config = dataclasses.replace(
      config, steps_per_call=args.meta_steps_per_call
    )
  results = {}
  job = meta_lib.make_meta_train(config)
  state = job.init()  # Its key: PRNGKey(config.seed).
  per_call = config.steps_per_call
  results['fused'] = {}
  state, _ = job.step(state, per_call)
  _block(state)
  results['fused']['peak_rss_mb'] = metrics_lib.peak_memory_mb()
  stepper = StepPerCallMeta(job)
  step_state = stepper.init()
  results['step_per_call'] = {}
  # Two calls: the second sees pmap's output layout and compiles again.
  step_state = _block(stepper.run(step_state, 2))
  results['step_per_call']['peak_rss_mb'] = metrics_lib.peak_memory_mb()
  count = max(args.meta_steps // per_call, 1) * per_call
  times = {'fused': [], 'step_per_call': []}
  for r in range(args.rounds):
    t = time.perf_counter()
    for _ in range(count // per_call):
      state, _ = job.step(state, per_call)
    times['fused'].append((time.perf_counter() - t) / count)
    t = time.perf_counter()
    step_state = _block(stepper.run(step_state, count))
    times['step_per_call'].append((time.perf_counter() - t) / count)
    print(
      f'  meta round {r + 1}/{args.rounds}: '
      + ', '.join(f'{k} {v[-1]:.2f} s/meta-step' for k, v in times.items()),
      flush=True,
    )
  for name, values in times.items():
    results[name]['s_per_step'] = float(np.median(values))
    results[name]['steps_per_s'] = 1.0 / float(np.median(values))
  _compile_times(
    {
      'fused': (job.program, (state,)),
      'step_per_call': (stepper.program, (step_state,)),
    },
    results,
    args.compile_rounds,
  )
  results['fused_speedup'] = (
    results['step_per_call']['s_per_step'] / results['fused']['s_per_step']
  )
  return results


def _table(title, rows, results, unit):
  print(f'\n{title}')
  print(f'| | steps/s | {unit} | compile | peak RSS after |')
  print('|---|---|---|---|---|')
  for name in rows:
    r = results[name]
    per = r.get('ms_per_step', r.get('s_per_step'))
    rss = r.get('peak_rss_mb')
    print(
      f'| {name} | {r["steps_per_s"]:.3f} | {per:.3g} | '
      f'{r["compile_s"]:.0f} s | '
      f'{"-" if rss is None else f"{rss / 1024:.2f} GB"} |'
    )


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--only', choices=('eval', 'meta'), default=None)
  parser.add_argument('--rounds', type=int, default=2)
  parser.add_argument('--eval-steps-per-call', type=int, default=50)
  parser.add_argument(
    '--meta-steps',
    type=int,
    default=20,
    help='meta-steps per timed round and variant',
  )
  parser.add_argument(
    '--meta-steps-per-call',
    type=int,
    default=None,
    help="default: the job's (MetaTrainConfig)",
  )
  parser.add_argument(
    '--compile-rounds',
    type=int,
    default=2,
    help='compilations per program (the fastest is kept)',
  )
  parser.add_argument('--out', default='runs/bench_loops')
  parser.add_argument(
    '--tiny',
    action='store_true',
    help='tiny networks and batches: checks the script',
  )
  args = parser.parse_args()
  out = pathlib.Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  print(f'devices: {jax.devices()}', flush=True)
  summary = {}
  if args.only in (None, 'eval'):
    summary['eval'] = bench_eval(args)
    _table(
      'eval (Disco103, Catch 8x8, 64 x 29, MLP 512x512)',
      (
        'step_per_call',
        'fused',
        'learner_alone',
        'learner_scanned',
        'fused_bfloat16',
      ),
      summary['eval'],
      'ms/step',
    )
    print(
      f'fused vs step-per-call: {summary["eval"]["fused_speedup"]:.2f}x; '
      'fused overhead over the learner step alone: '
      f'{100 * summary["eval"]["fused_overhead_over_learner"]:.1f}% (one '
      'call per step), '
      f'{100 * summary["eval"]["fused_overhead_over_scanned_learner"]:.1f}'
      '% (scanned); '
      'bfloat16 agent network vs float32: '
      f'{summary["eval"]["bfloat16_speedup"]:.2f}x'
    )
  if args.only in (None, 'meta'):
    summary['meta'] = bench_meta(args)
    _table(
      'meta-train (the upstream notebook settings)',
      ('step_per_call', 'fused'),
      summary['meta'],
      's/meta-step',
    )
    print(f'fused vs step-per-call: {summary["meta"]["fused_speedup"]:.2f}x')
  (out / 'summary.json').write_text(json.dumps(summary, indent=2))
  print(f'\nsummary: {out / "summary.json"}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
