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
  - fused: `EvalLoop`, `--eval-steps-per-call` iterations per call;
  - the learner step alone (jit + shard_map on a sampled batch), one call per
    step and `--eval-steps-per-call` steps scanned in one call, to give the
    fused loop's overhead over it;
  - fused with the agent network in bfloat16 (`precision='bfloat16'`).
meta-train (the upstream notebook's settings):
  - step-per-call: a `jax.pmap` meta-step with a Python loop over the inner
    rollouts (this project's previous loop);
  - fused: `MetaTrainLoop` with the job's settings (`--meta-steps-per-call`
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
from disco_rl import meta_train
from disco_rl import weights
from disco_rl.loops import config as config_lib
from disco_rl.loops import devices as devices_lib
from disco_rl.loops import eval_loop
from disco_rl.loops import eval_program
from disco_rl.loops import meta_loop
from disco_rl.loops import meta_program
from disco_rl.loops import replay
from disco_rl.loops import reporting

AXIS = devices_lib.AXIS
# --tiny: settings that only check the script runs.
TINY_EVAL = dict(batch_size=4, replay_ratio=2, buffer_capacity=8,
                 rollout_len=5, dense=(16,), model_lstm_size=8,
                 model_head_hiddens=(8,))
TINY_META = dict(batch_size_per_device=2, rollout_len=3, dense=(16,),
                 model_lstm_size=8, model_head_hiddens=(8,), value_dense=(8,))


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
    programs: {name: (object with .lower(*args), args)}.
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


def _one_run(state: eval_program.EvalState) -> eval_program.EvalState:
  """The fused loop's state of its first (only) run, without the seed axis:
  what the previous loop and the learner step alone work on."""
  first = lambda tree: jax.tree.map(lambda x: x[0], tree)
  per_device = lambda tree: jax.tree.map(lambda x: x[:, 0], tree)
  return state.replace(
      learner_state=first(state.learner_state), rng=first(state.rng),
      actor_state=per_device(state.actor_state),
      env_state=per_device(state.env_state),
      timestep=per_device(state.timestep),
      acc_rewards=per_device(state.acc_rewards),
      replay=per_device(state.replay))


def _replicate(tree, num):
  return jax.tree.map(lambda x: jnp.broadcast_to(x, (num,) + jnp.shape(x)),
                      tree)


# ----------------------------------------------------------------------------
# The previous eval loop: one pmap program per iteration.


class StepPerCallEval:
  """Act, buffer, sample and learn in one `jax.pmap` call per iteration."""

  def __init__(self, loop: eval_loop.EvalLoop):
    self.loop = loop
    self.num = len(loop.setup.devices)
    self.program = jax.pmap(self._iteration, axis_name=AXIS,
                            devices=loop.setup.devices)

  def init(self, rng):
    state = _one_run(self.loop.init(rng))
    host = jax.device_get(state)
    # Replicated parts get a device axis, as pmap wants.
    return host.replace(learner_state=_replicate(host.learner_state,
                                                 self.num),
                        rng=jax.random.split(host.rng, self.num),
                        step=np.zeros((self.num,), np.int32))

  def _iteration(self, state, rule_params):
    loop = self.loop.setup
    rng, act_key, learn_key = jax.random.split(state.rng, 3)
    rollout, actor_state, timestep, env_state = actors.unroll_jittable_actor(
        state.learner_state.params, state.actor_state, state.timestep,
        state.env_state, act_key, loop.env, loop.config.rollout_len,
        loop.agent.actor_step)
    acc, returns = actors.accumulate_rewards(
        state.acc_rewards, (rollout.rewards, rollout.discounts))
    total, episodes = actors.episode_returns(returns, rollout.discounts)
    buffer = replay.add(state.replay, replay.keep_outputs(
        rollout, loop.config.behaviour_outputs))
    sample_key, step_key = jax.random.split(learn_key)
    batch = replay.sample(buffer, sample_key, loop.batch_per_device)
    learner_state, _, logs = loop.agent.learner_step(
        step_key, batch, state.learner_state, actor_state, rule_params, False)
    state = state.replace(learner_state=learner_state,
                          actor_state=actor_state, timestep=timestep,
                          env_state=env_state, acc_rewards=acc,
                          replay=buffer, rng=rng, step=state.step + 1)
    stats = dict(return_sum=jax.lax.psum(total, AXIS),
                 episodes=jax.lax.psum(episodes, AXIS),
                 **{k: logs[k] for k in loop.log_keys})
    return state, stats

  def run(self, state, rule_params, count):
    for _ in range(count):
      state, stats = self.program(state, rule_params)
      jax.device_get(stats)  # The host reads every iteration's metrics.
    return state


def bench_eval(args) -> dict:
  config = config_lib.EvalConfig(steps_per_call=args.eval_steps_per_call,
                                 num_devices=1, **TINY_EVAL if args.tiny else {})
  rule_params = weights.load_disco_103()
  results = {}

  fused = eval_loop.EvalLoop(config, rule_params=rule_params)
  fused_state = fused.init(jax.random.PRNGKey(0))
  results['fused'] = {}
  # Fill the buffer past the learning gate.
  fused_state, _ = fused.run(fused_state)
  fused_state = _block(fused_state)
  results['fused']['peak_rss_mb'] = reporting.peak_memory_mb()

  bf16 = eval_loop.EvalLoop(dataclasses.replace(config, precision='bfloat16'),
                            rule_params=rule_params)
  bf16_state = bf16.init(jax.random.PRNGKey(0))
  results['fused_bfloat16'] = {}
  bf16_state, _ = bf16.run(bf16_state)
  bf16_state = _block(bf16_state)
  results['fused_bfloat16']['peak_rss_mb'] = reporting.peak_memory_mb()

  stepper = StepPerCallEval(fused)
  step_state = stepper.init(jax.random.PRNGKey(0))
  step_params = _replicate(jax.tree.map(jnp.asarray, rule_params),
                           stepper.num)
  results['step_per_call'] = {}
  step_state = _block(stepper.run(step_state, step_params,
                                  config.replay_ratio + 1))
  results['step_per_call']['peak_rss_mb'] = reporting.peak_memory_mb()

  # The learner step alone, on a batch from the (filled) fused buffer.
  alone_state = _one_run(fused_state)
  def learn_alone(state, key, params):
    local = jax.tree.map(lambda x: x[0], state.replay)
    batch = replay.sample(local, key, fused.setup.batch_per_device)
    new, _, logs = fused.setup.agent.learner_step(
        key, batch, state.learner_state,
        jax.tree.map(lambda x: x[0], state.actor_state), params, False)
    return new, jax.lax.pmean({k: logs[k] for k in fused.setup.log_keys}, AXIS)

  # One run's state (`_one_run`): the fused loop's specs without the seed
  # axis.
  specs = jax.tree.map(
      lambda spec: P(*(a for a in spec if a != devices_lib.SEED_AXIS)),
      eval_program.state_specs(), is_leaf=lambda x: isinstance(x, P))
  learner_only = jax.jit(jax.shard_map(
      learn_alone, mesh=fused.setup.mesh, in_specs=(specs, P(), P()),
      out_specs=(P(), P()), check_vma=False))
  key = jax.random.PRNGKey(1)
  results['learner_alone'] = {}
  learner_state, logs = learner_only(alone_state, key,
                                     fused.rule_params)
  _block(learner_state)

  # The learner step alone, steps_per_call of them scanned in one call: the
  # same kind of program as the fused loop, without acting and storing.
  def learn_scanned(state, key, params):
    def body(learner_state, step_key):
      return learn_alone(state.replace(learner_state=learner_state), step_key,
                         params)
    return jax.lax.scan(body, state.learner_state,
                        jax.random.split(key, config.steps_per_call))

  learner_scanned = jax.jit(jax.shard_map(
      learn_scanned, mesh=fused.setup.mesh, in_specs=(specs, P(), P()),
      out_specs=(P(), P()), check_vma=False))
  results['learner_scanned'] = {}
  scanned_state, _ = learner_scanned(alone_state, key,
                                     fused.rule_params)
  _block(scanned_state)

  per_call = config.steps_per_call
  times = {name: [] for name in ('fused', 'step_per_call', 'learner_alone',
                                  'learner_scanned', 'fused_bfloat16')}
  for r in range(args.rounds):
    t = time.perf_counter()
    fused_state, _ = fused.run(fused_state)
    times['fused'].append((time.perf_counter() - t) / per_call)
    t = time.perf_counter()
    bf16_state, _ = bf16.run(bf16_state)
    times['fused_bfloat16'].append((time.perf_counter() - t) / per_call)
    t = time.perf_counter()
    step_state = _block(stepper.run(step_state, step_params, per_call))
    times['step_per_call'].append((time.perf_counter() - t) / per_call)
    t = time.perf_counter()
    for _ in range(per_call):
      learner_state, logs = learner_only(
          alone_state.replace(learner_state=learner_state), key,
          fused.rule_params)
      jax.device_get(logs)
    times['learner_alone'].append((time.perf_counter() - t) / per_call)
    t = time.perf_counter()
    scanned_state, logs = learner_scanned(
        alone_state.replace(learner_state=scanned_state), key,
        fused.rule_params)
    jax.device_get(logs)
    times['learner_scanned'].append((time.perf_counter() - t) / per_call)
    print(f'  eval round {r + 1}/{args.rounds}: ' + ', '.join(
        f'{k} {1e3 * v[-1]:.0f} ms/step' for k, v in times.items()),
        flush=True)
  for name, values in times.items():
    results[name]['ms_per_step'] = 1e3 * float(np.median(values))
    results[name]['steps_per_s'] = 1.0 / float(np.median(values))
  _compile_times({
      'fused': (fused, (fused_state,)),
      'step_per_call': (stepper.program, (step_state, step_params)),
      'learner_alone': (learner_only, (alone_state, key,
                                       fused.rule_params)),
      'learner_scanned': (learner_scanned,
                          (alone_state, key, fused.rule_params)),
      'fused_bfloat16': (bf16, (bf16_state,)),
  }, results, args.compile_rounds)
  results['fused_overhead_over_learner'] = (
      results['fused']['ms_per_step'] / results['learner_alone']['ms_per_step']
      - 1.0)
  results['fused_overhead_over_scanned_learner'] = (
      results['fused']['ms_per_step']
      / results['learner_scanned']['ms_per_step'] - 1.0)
  results['fused_speedup'] = (results['step_per_call']['ms_per_step']
                              / results['fused']['ms_per_step'])
  results['bfloat16_speedup'] = (results['fused']['ms_per_step']
                                 / results['fused_bfloat16']['ms_per_step'])
  return results


# ----------------------------------------------------------------------------
# The previous meta-train loop: a pmap meta-step, inner rollouts in Python.


class StepPerCallMeta:
  """One `jax.pmap` meta-step per call, inner rollouts in a Python loop.

  As the previous loop (before the loops package) had it, logs included:
  the agents' mean inner-update metrics, reward counts, meta-gradient and
  update norms, the columns of its metrics.csv.
  """

  def __init__(self, trainer: meta_loop.MetaTrainLoop):
    self.trainer = trainer
    self.num = trainer.setup.num_devices
    self.program = jax.pmap(self._meta_step, axis_name=AXIS,
                            devices=trainer.setup.devices)

  def init(self, rng):
    state = jax.device_get(self.trainer.init(rng))
    per_device = lambda x: x[0]
    group, = state.agents  # One task: Catch.
    agents = group.replace(
        env_state=jax.tree.map(per_device, group.env_state),
        env_timestep=jax.tree.map(per_device, group.env_timestep))
    return _replicate(state.replace(agents=agents), self.num)

  def _agent(self, params, agent_state, act_rng, grad_rng):
    cfg, member = self.trainer.setup.config, self.trainer.setup.member
    rollouts = []
    for key in jax.random.split(act_rng, cfg.num_inner_steps):
      agent_state, rollout = member.unroll_actor(agent_state, key,
                                                 cfg.rollout_len)
      rollouts.append(rollout)
    train = jax.tree.map(lambda *xs: jnp.stack(xs), *rollouts)
    agent_state, valid = member.unroll_actor(agent_state, act_rng,
                                             2 * cfg.rollout_len)
    # The inner updates in a loop (lax.scan), as the previous loop had them.
    grads, (agent_state, metrics, meta_log) = (
        meta_train.calculate_meta_gradient(
            params, agent_state, train, valid, grad_rng, member,
            axis_name=AXIS, unroll=1))
    # The logs the previous loop wrote to metrics.csv (the fused loop's).
    meta_log = dict(meta_log, **meta_program.reward_logs(train.rewards))
    return grads, agent_state, jax.tree.map(jnp.mean, metrics), meta_log

  def _meta_step(self, state):
    n = self.trainer.setup.config.num_agents
    rng, step_rng = jax.random.split(state.rng)
    act_rng, grad_rng = jax.random.split(step_rng)
    grads, agents, metrics, meta_log = jax.vmap(
        self._agent, in_axes=(None, 0, 0, 0))(
            state.update_rule_params, state.agents,
            jax.random.split(act_rng, n), jax.random.split(grad_rng, n))
    meta_log = jax.lax.pmean(meta_log, AXIS)
    # The optimiser takes the agents' meta-gradients [N, ...] and averages.
    updates, opt_state = self.trainer.setup.meta_opt.update(
        grads, state.meta_opt_state)
    logs = meta_program.step_logs(meta_log, metrics, grads, updates)
    return state.replace(
        update_rule_params=optax.apply_updates(state.update_rule_params,
                                               updates),
        meta_opt_state=opt_state, agents=agents, rng=rng,
        step=state.step + 1), logs

  def run(self, state, count):
    for _ in range(count):
      state, logs = self.program(state)
      jax.device_get(logs)
    return state


def bench_meta(args) -> dict:
  config = config_lib.MetaTrainConfig(num_devices=1,
                                      **TINY_META if args.tiny else {})
  if args.meta_steps_per_call:
    config = dataclasses.replace(config,
                                 steps_per_call=args.meta_steps_per_call)
  results = {}
  trainer = meta_loop.MetaTrainLoop(config)
  state = trainer.init(jax.random.PRNGKey(config.seed))
  results['fused'] = {}
  state, _ = trainer.run(state)
  _block(state)
  results['fused']['peak_rss_mb'] = reporting.peak_memory_mb()
  stepper = StepPerCallMeta(trainer)
  step_state = stepper.init(jax.random.PRNGKey(4))
  results['step_per_call'] = {}
  # Two calls: the second sees pmap's output layout and compiles again.
  step_state = _block(stepper.run(step_state, 2))
  results['step_per_call']['peak_rss_mb'] = reporting.peak_memory_mb()
  per_call = config.steps_per_call
  count = max(args.meta_steps // per_call, 1) * per_call
  times = {'fused': [], 'step_per_call': []}
  for r in range(args.rounds):
    t = time.perf_counter()
    for _ in range(count // per_call):
      state, _ = trainer.run(state)
    times['fused'].append((time.perf_counter() - t) / count)
    t = time.perf_counter()
    step_state = _block(stepper.run(step_state, count))
    times['step_per_call'].append((time.perf_counter() - t) / count)
    print(f'  meta round {r + 1}/{args.rounds}: ' + ', '.join(
        f'{k} {v[-1]:.2f} s/meta-step' for k, v in times.items()), flush=True)
  for name, values in times.items():
    results[name]['s_per_step'] = float(np.median(values))
    results[name]['steps_per_s'] = 1.0 / float(np.median(values))
  _compile_times({'fused': (trainer, (state,)),
                  'step_per_call': (stepper.program, (step_state,))},
                 results, args.compile_rounds)
  results['fused_speedup'] = (results['step_per_call']['s_per_step']
                              / results['fused']['s_per_step'])
  return results


def _table(title, rows, results, unit):
  print(f'\n{title}')
  print(f'| | steps/s | {unit} | compile | peak RSS after |')
  print('|---|---|---|---|---|')
  for name in rows:
    r = results[name]
    per = r.get('ms_per_step', r.get('s_per_step'))
    rss = r.get('peak_rss_mb')
    print(f'| {name} | {r["steps_per_s"]:.3f} | {per:.3g} | '
          f'{r["compile_s"]:.0f} s | '
          f'{"-" if rss is None else f"{rss / 1024:.2f} GB"} |')


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--only', choices=('eval', 'meta'), default=None)
  parser.add_argument('--rounds', type=int, default=2)
  parser.add_argument('--eval-steps-per-call', type=int, default=50)
  parser.add_argument('--meta-steps', type=int, default=20,
                      help='meta-steps per timed round and variant')
  parser.add_argument('--meta-steps-per-call', type=int, default=None,
                      help='default: the job\'s (MetaTrainConfig)')
  parser.add_argument('--compile-rounds', type=int, default=2,
                      help='compilations per program (the fastest is kept)')
  parser.add_argument('--out', default='runs/bench_loops')
  parser.add_argument('--tiny', action='store_true',
                      help='tiny networks and batches: checks the script')
  args = parser.parse_args()
  out = pathlib.Path(args.out)
  out.mkdir(parents=True, exist_ok=True)
  print(f'devices: {jax.devices()}', flush=True)
  summary = {}
  if args.only in (None, 'eval'):
    summary['eval'] = bench_eval(args)
    _table('eval (Disco103, Catch 8x8, 64 x 29, MLP 512x512)',
           ('step_per_call', 'fused', 'learner_alone', 'learner_scanned',
            'fused_bfloat16'),
           summary['eval'],
           'ms/step')
    print(f'fused vs step-per-call: {summary["eval"]["fused_speedup"]:.2f}x; '
          'fused overhead over the learner step alone: '
          f'{100 * summary["eval"]["fused_overhead_over_learner"]:.1f}% (one '
          'call per step), '
          f'{100 * summary["eval"]["fused_overhead_over_scanned_learner"]:.1f}'
          '% (scanned); '
          'bfloat16 agent network vs float32: '
          f'{summary["eval"]["bfloat16_speedup"]:.2f}x')
  if args.only in (None, 'meta'):
    summary['meta'] = bench_meta(args)
    _table('meta-train (the upstream notebook settings)',
           ('step_per_call', 'fused'), summary['meta'], 's/meta-step')
    print(f'fused vs step-per-call: {summary["meta"]["fused_speedup"]:.2f}x')
  (out / 'summary.json').write_text(json.dumps(summary, indent=2))
  print(f'\nsummary: {out / "summary.json"}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
