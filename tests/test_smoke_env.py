# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The tests' cheaper compilation (tests/smoke_env.py): what `fast_compile`
changes inside, and that it puts everything back."""

import jax
from jax._src import compiler
import pytest
import smoke_env


def _overrides() -> dict[str, object]:
  options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
  return dict(options.env_option_overrides)


def test_jaxlib_0_10_has_the_legacy_emitters():
  # The suite's time depends on them (about 2 of its minutes on the 2-core
  # machine); a jaxlib 0.10 without them would lose that silently.
  if jax.__version_info__ < (0, 11):
    assert smoke_env.legacy_emitters()


def test_fast_compile_asks_for_the_legacy_emitters_and_puts_back():
  build = compiler.get_compile_options
  optimisations_off = jax.config.values['jax_disable_most_optimizations']
  outside = _overrides()
  with smoke_env.fast_compile():
    assert jax.config.values['jax_disable_most_optimizations']
    expected = (
      {smoke_env.LEGACY_EMITTERS: False} if smoke_env.legacy_emitters() else {}
    )
    assert _overrides() == outside | expected
    # Options given at the call are kept, and win.
    options = compiler.get_compile_options(
      num_replicas=1,
      num_partitions=1,
      env_options_overrides={smoke_env.LEGACY_EMITTERS: True},
    )
    assert dict(options.env_option_overrides) == {
      smoke_env.LEGACY_EMITTERS: True
    }
    # And programs compile and run with them.
    assert float(jax.jit(lambda x: 2 * x + 1)(1.5)) == 4.0
  assert compiler.get_compile_options is build
  assert (
    jax.config.values['jax_disable_most_optimizations'] == optimisations_off
  )
  assert _overrides() == outside


def test_subprocess_flags_keep_this_process_flags(monkeypatch):
  monkeypatch.setenv('XLA_FLAGS', '--xla_dump_to=/tmp/x')
  legacy = (
    [f'--{smoke_env.LEGACY_EMITTERS}=false']
    if smoke_env.legacy_emitters()
    else []
  )
  assert smoke_env.xla_flags().split() == ['--xla_dump_to=/tmp/x', *legacy]
  assert smoke_env.xla_flags(num_devices=3).split() == [
    '--xla_dump_to=/tmp/x',
    *legacy,
    '--xla_force_host_platform_device_count=3',
  ]
  assert smoke_env.fast_jax_env(2)['XLA_FLAGS'] == smoke_env.xla_flags(2)


def test_golden_tests_compile_fast_unless_asked_otherwise(monkeypatch):
  monkeypatch.delenv(smoke_env.OPTIMISED_GOLDEN, raising=False)
  assert not smoke_env.optimised_golden()
  for value, optimised in (('0', False), ('1', True)):
    monkeypatch.setenv(smoke_env.OPTIMISED_GOLDEN, value)
    assert smoke_env.optimised_golden() is optimised
  monkeypatch.setenv(smoke_env.OPTIMISED_GOLDEN, 'yes')
  with pytest.raises(
    ValueError,
    match=r"DISCO_RL_TEST_OPTIMISED_GOLDEN must be 0 or 1, got 'yes'",
  ):
    smoke_env.optimised_golden()
