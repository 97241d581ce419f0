# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Helpers of the smoke runs and tests: a fast-compiling JAX environment for
notebook and command-line subprocesses, an environment with a bug."""

import contextlib
import functools
import os
import pathlib

import numpy as np


# XLA:CPU's element-wise emitters instead of its fusion emitters: the same
# programs, compiled in about a third less time (the tiny meta-training
# program of test_loops_trainer.py: 12.6-13.0 s -> 8.3-8.6 s, two runs
# each; the default suite from a fresh clone 9 min 30 s -> 7 min 09 s,
# docs/development.md), rounding a little
# differently. An option of jaxlib 0.10's CPU compiler; 0.11 has only the
# fusion emitters, so it is used where the jaxlib knows it.
LEGACY_EMITTERS = 'xla_cpu_use_fusion_emitters'


# How close two runs of the same steps by programs of other shapes stay
# (fused or one step per call, several seeds or one, split over devices or
# not) under `fast_compile`: XLA:CPU sums in other orders for other shapes,
# and a few learner updates carry the rounding on. Measured on the tiny runs
# of test_loops_eval.py: at most 2.3e-5 apart (metrics), 1.4e-5 (learner
# state). Counts (episodes) agree exactly and are compared exactly.
SAME_RUN = {'rtol': 1e-5, 'atol': 1e-4}


@functools.cache
def legacy_emitters() -> bool:
  """Whether this jaxlib's CPU compiler takes `LEGACY_EMITTERS`."""
  import jax  # pylint: disable=g-import-not-at-top
  try:
    jax.jit(lambda x: x + 1).lower(0.0).compile(
        compiler_options={LEGACY_EMITTERS: False})
  except jax.errors.JaxRuntimeError as e:  # No such compile option.
    if LEGACY_EMITTERS not in str(e):
      raise
    return False
  return True


def xla_flags(num_devices: int | None = None) -> str:
  """`XLA_FLAGS` of a fast-compiling subprocess: this process's flags, the
  legacy emitters (where known) and `num_devices` host devices if given."""
  flags = os.environ.get('XLA_FLAGS', '').split()
  if legacy_emitters():
    flags.append(f'--{LEGACY_EMITTERS}=false')
  if num_devices is not None:
    flags.append(f'--xla_force_host_platform_device_count={num_devices}')
  return ' '.join(flags)


def fast_jax_env(num_devices: int | None = None) -> dict[str, str]:
  """Environment that makes JAX compile less, for short smoke runs.

  The session's persistent compilation cache (`$DISCO_RL_TEST_JAX_CACHE`,
  set by conftest.py for the whole session), so e.g. the eval notebook
  reuses what the eval CLI compiled. XLA's expensive optimisation passes
  off, which roughly halves compile times, and its CPU compiler's legacy
  emitters (`xla_flags`, with `num_devices` host devices if given).
  """
  cache = os.environ.get('DISCO_RL_TEST_JAX_CACHE', 'off')
  return ({} if cache == 'off' else {
      'JAX_COMPILATION_CACHE_DIR': cache,
      'JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS': '0',
      'JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES': '-1'}) | {
      # Smoke runs: cheaper XLA compilation (same semantics, slower code).
      'JAX_DISABLE_MOST_OPTIMIZATIONS': '1',
      'XLA_FLAGS': xla_flags(num_devices)}


@contextlib.contextmanager
def fast_compile():
  """XLA's expensive optimisations off and XLA:CPU's legacy emitters (where
  the jaxlib has them) for what is compiled inside.

  For tests of loop mechanics on tiny settings, whose compile time dominates
  (same semantics; the programs run slower and round a little differently).
  Not for numerical comparisons with recorded results.
  """
  import jax  # pylint: disable=g-import-not-at-top
  from jax._src import compiler  # pylint: disable=g-import-not-at-top
  previous = (jax.config.values['jax_disable_most_optimizations'],
              compiler.get_compile_options)
  jax.config.update('jax_disable_most_optimizations', True)
  if legacy_emitters():
    # JAX passes no compiler options of its own to every compilation; its
    # one function that builds them (private, called at each compile) is
    # wrapped to add the option, as `jit(...).compile(compiler_options=)`
    # would. A compile option, unlike XLA_FLAGS, can change within a process.
    build = previous[1]

    @functools.wraps(build)
    def with_legacy_emitters(*args, env_options_overrides=None, **kwargs):
      return build(*args, env_options_overrides={
          LEGACY_EMITTERS: False, **(env_options_overrides or {})}, **kwargs)
    compiler.get_compile_options = with_legacy_emitters
  try:
    yield
  finally:
    jax.config.update('jax_disable_most_optimizations', previous[0])
    compiler.get_compile_options = previous[1]


class NanRewardForEnv1:
  """Wraps a batched jittable env: environment 1 returns NaN rewards."""

  def __init__(self, env):
    self._env = env

  def __getattr__(self, name):
    return getattr(self._env, name)

  def step(self, state, actions):
    state, timestep = self._env.step(state, actions)
    return state, timestep.replace(reward=timestep.reward.at[1].set(np.nan))
