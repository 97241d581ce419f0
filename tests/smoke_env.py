# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Helpers of the smoke runs and tests: a fast-compiling JAX environment for
notebook and command-line subprocesses, the `disco-rl` command line as
users type it, an environment with a bug."""

import contextlib
import functools
import os
import pathlib
import sys

import numpy as np

# XLA:CPU's element-wise emitters instead of its fusion emitters: the same
# programs, compiled in about a third less time (the tiny meta-training
# program of test_jobs_trainer.py: 12.6-13.0 s -> 8.3-8.6 s, two runs
# each; the default suite from a fresh clone 9 min 30 s -> 7 min 09 s,
# docs/development.md), rounding a little
# differently. An option of jaxlib 0.10's CPU compiler; 0.11 has only the
# fusion emitters, so it is used where the jaxlib knows it.
LEGACY_EMITTERS = 'xla_cpu_use_fusion_emitters'


# How close two runs of the same steps by programs of other shapes stay
# (fused or one step per call, several seeds or one, split over devices or
# not) under `fast_compile`: XLA:CPU sums in other orders for other shapes,
# and a few learner updates carry the rounding on. Measured on the tiny runs
# of test_jobs_eval.py: at most 2.3e-5 apart (metrics), 1.4e-5 (learner
# state) on one machine; on a 2-core AMD EPYC (AVX2), 1.3e-4 (metrics:
# pg_advs of the 3-seed program's seed 7; 9.7e-5 with --xla_cpu_max_isa=AVX
# or SSE4_2) and 7.8e-5 (learner state, but for the Adam outliers that
# `assert_same_learner_state` allows). Counts (episodes) agree exactly and
# are compared exactly.
SAME_RUN = {'rtol': 1e-5, 'atol': 5e-4}


def run_calls(job, calls):
  """A loop job's state after calls of `calls` steps each, and its metrics
  (or logs) of all the steps, concatenated."""
  state, metrics = job.init(), []
  for count in calls:
    state, m = job.step(state, count)
    metrics.append(m)
  return state, {k: np.concatenate([m[k] for m in metrics]) for k in metrics[0]}


# The plots of a meta-training run (its summary's `plots`).
META_PLOTS = (
  'pos_rewards',
  'neg_rewards',
  'meta_loss',
  'meta_grad_norm',
  'meta_up_norm',
  'agent_pi_hat_entropy',
  'rewards',
)


def assert_same_learner_state(
  got, want, *, learning_rate: float, max_abs_update: float
) -> None:
  """`got` and `want` (an agent's `LearnerState`) are the same run's, from
  programs of other shapes: every array within `SAME_RUN`, but for a few
  parameter elements that Adam moved apart.

  An element whose gradient is zero but for rounding (1e-8 to 1e-6, where
  the leaf's others are 1e-4 to 1e-2; other program shapes sum in other
  orders) gets an Adam update m / (sqrt(v) + eps) of up to max_abs_update
  (the clip) whatever its size, its sign the rounding's: measured in
  test_jobs_eval.py's 3-seed run, +6.7e-8 in one program and -1.8e-8 in
  the other, and a parameter 0.03 (3 learning rates) apart after 5
  updates, at every --xla_cpu_max_isa. So at most 1% of a parameter leaf's
  elements (at least one) may be further apart than `SAME_RUN`, each by at
  most 2 * learning_rate * max_abs_update per update so far (the
  optimiser's count); the optimiser's moments, which do not divide, and the
  rule's state stay within it.
  """
  import jax  # pylint: disable=g-import-not-at-top

  updates = int(want.opt_state[0].count)  # The agent's Adam, first.
  bound = 2 * learning_rate * max_abs_update * updates

  def params(path, g, w):
    g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
    apart = ~np.isclose(g, w, **SAME_RUN)
    name = jax.tree_util.keystr(path)
    assert apart.sum() <= max(1, apart.size // 100), (
      f'{name}: {apart.sum()} of {apart.size} elements apart'
    )
    gap = np.abs(g - w)[apart]
    assert (gap <= bound).all(), f'{name}: {gap.max()} > {bound}'

  jax.tree_util.tree_map_with_path(params, got.params, want.params)
  jax.tree.map(
    lambda g, w: np.testing.assert_allclose(g, w, **SAME_RUN),
    (got.opt_state, got.meta_state),
    (want.opt_state, want.meta_state),
  )


@functools.cache
def legacy_emitters() -> bool:
  """Whether this jaxlib's CPU compiler takes `LEGACY_EMITTERS`."""
  import jax  # pylint: disable=g-import-not-at-top

  try:
    jax.jit(lambda x: x + 1).lower(0.0).compile(
      compiler_options={LEGACY_EMITTERS: False}
    )
  except jax.errors.JaxRuntimeError as e:  # No such compile option.
    if LEGACY_EMITTERS not in str(e):
      raise
    return False
  return True


OPTIMISED_GOLDEN = 'DISCO_RL_TEST_OPTIMISED_GOLDEN'


def optimised_golden() -> bool:
  """Whether the golden tests compile with XLA's optimisations
  (`$DISCO_RL_TEST_OPTIMISED_GOLDEN=1`, as `make test-slow` runs them) or,
  by default, without its expensive passes like every other test."""
  value = os.environ.get(OPTIMISED_GOLDEN, '0')
  if value not in ('0', '1'):
    raise ValueError(f'{OPTIMISED_GOLDEN} must be 0 or 1, got {value!r}.')
  return value == '1'


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
  return (
    {}
    if cache == 'off'
    else {
      'JAX_COMPILATION_CACHE_DIR': cache,
      'JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS': '0',
      'JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES': '-1',
    }
  ) | {
    # Smoke runs: cheaper XLA compilation (same semantics, slower code).
    'JAX_DISABLE_MOST_OPTIMIZATIONS': '1',
    'XLA_FLAGS': xla_flags(num_devices),
  }


def disco_rl_command(*args: str) -> list[str]:
  """The command line `disco-rl ARGS...` (e.g. 'eval', '--steps', '3'):
  the console script installed beside this Python (pyproject.toml's
  `[project.scripts]`), as users run the commands.

  Raises:
    FileNotFoundError: the package is installed without it (installed
      before the script existed: `pip install -e .` again).
  """
  script = pathlib.Path(sys.executable).with_name('disco-rl')
  if not script.is_file():
    raise FileNotFoundError(
      f'{script}: no disco-rl console script beside this Python; install '
      'the package again (pip install --no-deps -e .).'
    )
  return [str(script), *args]


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

  previous = (
    jax.config.values['jax_disable_most_optimizations'],
    compiler.get_compile_options,
  )
  jax.config.update('jax_disable_most_optimizations', True)
  if legacy_emitters():
    # JAX passes no compiler options of its own to every compilation; its
    # one function that builds them (private, called at each compile) is
    # wrapped to add the option, as `jit(...).compile(compiler_options=)`
    # would. A compile option, unlike XLA_FLAGS, can change within a process.
    build = previous[1]

    @functools.wraps(build)
    def with_legacy_emitters(*args, env_options_overrides=None, **kwargs):
      return build(
        *args,
        env_options_overrides={
          LEGACY_EMITTERS: False,
          **(env_options_overrides or {}),
        },
        **kwargs,
      )

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
