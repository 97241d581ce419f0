# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval loop's pieces: replay buffer, configuration checks, metrics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from disco_rl import evaluation
from disco_rl import meta_train
from disco_rl import types


def _rollout(t, b, offset):
  """A rollout whose trajectory j carries the value offset + j everywhere."""
  ids = jnp.broadcast_to(offset + jnp.arange(b, dtype=jnp.float32), (t, b))
  return types.ActorRollout(
      observations=ids[..., None], actions=ids.astype(jnp.int32),
      rewards=ids, discounts=jnp.ones((t, b), bool),
      agent_outs={'logits': jnp.stack([ids] * 3, -1)}, states={},
      logits=jnp.stack([ids] * 3, -1))


class TestReplay:

  def test_add_is_fifo_and_wraps(self):
    buffer = evaluation.replay_init(_rollout(4, 3, 0), capacity=5)
    assert int(buffer.size) == 0
    buffer = evaluation.replay_add(buffer, _rollout(4, 3, 0))  # ids 0,1,2
    buffer = evaluation.replay_add(buffer, _rollout(4, 3, 10))  # 10,11,12
    assert int(buffer.size) == 5 and int(buffer.next_index) == 1
    # Slot 0 was overwritten by the sixth trajectory (id 12), FIFO order.
    np.testing.assert_array_equal(buffer.data.rewards[:, 0],
                                  [12, 1, 2, 10, 11])
    # Trajectories are stored whole: [capacity, T, ...].
    assert buffer.data.observations.shape == (5, 4, 1)
    np.testing.assert_array_equal(buffer.data.rewards[3], [10] * 4)

  def test_sample_returns_stored_trajectories_time_major(self):
    buffer = evaluation.replay_init(_rollout(4, 2, 0), capacity=8)
    buffer = evaluation.replay_add(buffer, _rollout(4, 2, 5))  # ids 5, 6
    sample = jax.jit(evaluation.replay_sample, static_argnums=2)(
        buffer, jax.random.PRNGKey(0), 64)
    assert sample.rewards.shape == (4, 64)
    ids = np.asarray(sample.rewards[0])
    assert set(ids.tolist()) == {5.0, 6.0}  # Never an empty slot.
    # Each sampled column is one whole trajectory.
    np.testing.assert_array_equal(sample.rewards, np.broadcast_to(ids, (4, 64)))
    np.testing.assert_array_equal(sample.logits[..., 2], sample.rewards)


class TestConfig:

  @pytest.mark.parametrize('changes,fragment', [
      (dict(rule='ppo'), "Unknown rule 'ppo'"),
      (dict(batch_size=5, replay_ratio=2),
       'batch_size=5 must be a multiple of replay_ratio=2'),
      (dict(buffer_capacity=8, batch_size=16, replay_ratio=2),
       'buffer_capacity=8 is smaller than batch_size=16'),
      (dict(rollout_len=1), 'rollout_len must be >= 2'),
      (dict(num_steps=0), 'num_steps must be >= 1'),
  ])
  def test_bad_settings(self, changes, fragment):
    config = evaluation.EvalConfig(**changes)
    with pytest.raises(ValueError, match=fragment):
      evaluation.check_config(config)

  def test_devices_must_divide_the_batch(self):
    config = evaluation.EvalConfig(batch_size=6, replay_ratio=2,
                                   buffer_capacity=12, num_devices=2)
    if jax.local_device_count() < 2:
      with pytest.raises(ValueError, match='num_devices=2 but 1 local'):
        evaluation.pick_devices(config)
    else:
      with pytest.raises(ValueError, match='does not divide across 2'):
        evaluation.pick_devices(config)

  def test_default_device_choice_divides_everything(self):
    config = evaluation.EvalConfig()
    devices = evaluation.pick_devices(config)
    assert config.num_envs % len(devices) == 0
    assert config.batch_size % len(devices) == 0

  def test_settings_follow_the_config(self):
    config = evaluation.EvalConfig(rule='actor_critic', dense=(7,),
                                   learning_rate=0.5)
    settings = evaluation.agent_settings(config)
    assert settings.update_rule_name == 'actor_critic'
    assert settings.learning_rate == 0.5
    assert tuple(settings.net_settings.net_args['dense']) == (7,)

  def test_meta_train_bad_settings(self):
    with pytest.raises(ValueError, match='num_agents must be >= 1'):
      meta_train.check_config(meta_train.MetaTrainConfig(num_agents=0))
    with pytest.raises(ValueError, match="init must be 'random' or"):
      meta_train.check_config(meta_train.MetaTrainConfig(init='disco_104'))


def test_metrics_round_trip_and_plot(tmp_path):
  writer = evaluation.MetricsWriter(tmp_path / 'm.csv')
  for step in range(30):
    writer.write(dict(step=step, avg_return=float('nan') if step == 3 else
                      step / 10))
  writer.close()
  metrics = evaluation.read_metrics(tmp_path / 'm.csv')
  np.testing.assert_array_equal(metrics['step'], np.arange(30))
  assert np.isnan(metrics['avg_return'][3])
  png = evaluation.plot_curve(metrics['step'], metrics['avg_return'],
                              tmp_path / 'c.png', 'step', 'avg_return', 't',
                              smooth=5)
  assert png.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_memory_probes():
  assert evaluation.resident_memory_mb() > 10
  assert evaluation.peak_memory_mb() >= evaluation.resident_memory_mb() * 0.5
