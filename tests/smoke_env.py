# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Helpers of the smoke runs and tests: a fast-compiling JAX environment for
notebook and command-line subprocesses, an environment with a bug."""

import contextlib
import os
import pathlib

import numpy as np


def fast_jax_env() -> dict[str, str]:
  """Environment that makes JAX compile less, for short smoke runs.

  The session's persistent compilation cache (`$DISCO_RL_TEST_JAX_CACHE`,
  set by conftest.py for the whole session), so e.g. the eval notebook
  reuses what the eval CLI compiled. And XLA's expensive optimisation passes
  off, which roughly halves compile times.
  """
  cache = os.environ.get('DISCO_RL_TEST_JAX_CACHE', 'off')
  return ({} if cache == 'off' else {
      'JAX_COMPILATION_CACHE_DIR': cache,
      'JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS': '0',
      'JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES': '-1'}) | {
      # Smoke runs: cheaper XLA compilation (same semantics, slower code).
      'JAX_DISABLE_MOST_OPTIMIZATIONS': '1'}


@contextlib.contextmanager
def fast_compile():
  """XLA's expensive optimisations off for what is compiled inside.

  For tests of loop mechanics on tiny settings, whose compile time dominates
  (same semantics; the programs run slower). Not for numerical comparisons
  with recorded results.
  """
  import jax  # pylint: disable=g-import-not-at-top
  previous = jax.config.values['jax_disable_most_optimizations']
  jax.config.update('jax_disable_most_optimizations', True)
  try:
    yield
  finally:
    jax.config.update('jax_disable_most_optimizations', previous)


class NanRewardForEnv1:
  """Wraps a batched jittable env: environment 1 returns NaN rewards."""

  def __init__(self, env):
    self._env = env

  def __getattr__(self, name):
    return getattr(self._env, name)

  def step(self, state, actions):
    state, timestep = self._env.step(state, actions)
    return state, timestep.replace(reward=timestep.reward.at[1].set(np.nan))
