# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""update_rules.warm_start and the eval job's warm start (issue 70)."""

import dataclasses
import types as pytypes

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
import stopped_runs
import tiny

from disco_rl import agent as agent_lib
from disco_rl import types
from disco_rl.cli import main as cli_main
from disco_rl.environments import jittable_envs
from disco_rl.jobs import trainer as trainer_lib
from disco_rl.jobs.eval import steps as eval_steps
from disco_rl.update_rules import base
from disco_rl.update_rules import warm_start

T, B = 3, 2


@dataclasses.dataclass(eq=False)
class _Fake(base.UpdateRule):
  """A rule whose losses are constants times its hyper-parameters, so the
  warm start's arithmetic can be read off exactly."""

  scale: float
  outputs: tuple[str, ...] = ('logits',)

  def init_params(self, rng):
    del rng
    return dict(w=jnp.full((2,), self.scale)), {}

  def flat_output_spec(self, action_spec):
    del action_spec
    return {k: types.ArraySpec((3,), np.float32) for k in self.outputs}

  def init_meta_state(self, rng, params):
    del rng, params
    return dict(calls=jnp.zeros((), jnp.int32))

  def unroll_meta_net(
    self, meta_params, params, state, meta_state, rollout, hyper_params,
    unroll_policy_fn, rng, axis_name=None,
  ):  # fmt: skip
    del meta_params, params, state, rollout, unroll_policy_fn, rng, axis_name
    out = dict(value=jnp.full((T, B), self.scale))
    return out, dict(calls=meta_state['calls'] + 1)

  def agent_loss(self, rollout, meta_out, hyper_params, backprop):
    del rollout, backprop
    loss = meta_out['value'] * (
      hyper_params['pi_cost'] + 10.0 * hyper_params.get('y_cost', 0.0)
    )
    return loss, dict(loss=jnp.mean(loss))

  def agent_loss_no_meta(self, rollout, meta_out, hyper_params):
    del rollout
    return meta_out['value'] * 100.0, dict(rest=jnp.mean(meta_out['value']))


HYPER = dict(
  main=dict(pi_cost=1.0, y_cost=1.0), warm=dict(pi_cost=1.0, y_cost=0.0)
)


def _losses(rule, updates):
  """(loss with meta-gradient, loss without) [T, B] at update `updates`."""
  state = rule.init_meta_state(None, None)
  state['updates'] = jnp.asarray(updates, jnp.int32)
  meta_out, new_state = rule.unroll_meta_net(
    None, None, None, state, None, HYPER, None, None
  )
  assert int(new_state['updates']) == updates + 1
  assert int(new_state['main']['calls']) == 1  # Both advance every update.
  if rule.warm is not None:
    assert int(new_state['warm']['calls']) == 1
  with_meta, log = rule.agent_loss(None, meta_out, HYPER, False)
  without, _ = rule.agent_loss_no_meta(None, meta_out, HYPER)
  assert float(log[warm_start.WARM_KEY]) == float(updates < rule.steps)
  return float(with_meta[0, 0]), float(without[0, 0])


@pytest.mark.parametrize(
  'predictions, warm_loss',
  [
    # w = 1: the warm rule's loss (scale 2: 2 * pi_cost).
    (False, 2.0),
    # ... plus main's terms but the policy's (scale 1: 10 * y_cost).
    (True, 2.0 + 10.0),
  ],
)
def test_the_warm_rule_s_loss_then_the_main_rule_s(predictions, warm_loss):
  rule = warm_start.WarmStart(
    main=_Fake(1.0), warm=_Fake(2.0), steps=2, predictions=predictions
  )
  # Main's loss without meta-gradient (100 * 1) at every update; the warm
  # rule's (100 * 2) only during the warm start.
  assert _losses(rule, 0) == (warm_loss, 100.0 + 200.0)
  assert _losses(rule, 1) == (warm_loss, 100.0 + 200.0)
  # From update `steps` on: main's whole loss, pi_cost + 10 * y_cost.
  assert _losses(rule, 2) == (11.0, 100.0)
  assert _losses(rule, 50) == (11.0, 100.0)


def test_a_warm_start_of_the_main_rule_s_predictions_alone():
  rule = warm_start.WarmStart(
    main=_Fake(1.0), warm=None, steps=3, predictions=True
  )
  assert _losses(rule, 2) == (10.0, 100.0)  # y's term, not the policy's.
  assert _losses(rule, 3) == (11.0, 100.0)


def test_the_rule_s_parameters_and_outputs():
  rule = warm_start.WarmStart(
    main=_Fake(1.0, ('logits', 'y')), warm=_Fake(2.0, ('logits', 'v')),
    steps=1,
  )  # fmt: skip
  params, _ = rule.init_params(jax.random.PRNGKey(0))
  chex.assert_trees_all_equal(params, dict(w=jnp.ones((2,))))  # main's
  assert sorted(rule.flat_output_spec(None)) == ['logits', 'v', 'y']


@pytest.mark.parametrize(
  'kwargs, message',
  [
    (dict(steps=0), 'steps must be an integer >= 1, got 0'),
    (dict(warm=None), 'with warm=None, predictions must be True'),
    (
      dict(main=_Fake(1.0, ('v',)), warm=_Fake(2.0, ('v',))),
      None,  # The same spec twice is one output.
    ),
  ],
)
def test_bad_warm_starts_fail_at_the_call(kwargs, message):
  settings = dict(main=_Fake(1.0), warm=_Fake(2.0), steps=1)
  settings.update(kwargs)
  if message is None:
    warm_start.WarmStart(**settings).flat_output_spec(None)
    return
  with pytest.raises(ValueError, match=message):
    warm_start.WarmStart(**settings)


def test_outputs_of_one_name_and_two_specs_are_an_error():
  class Wide(_Fake):
    def flat_output_spec(self, action_spec):
      return {'v': types.ArraySpec((5,), np.float32)}

  rule = warm_start.WarmStart(main=_Fake(1.0, ('v',)), warm=Wide(2.0), steps=1)
  with pytest.raises(ValueError, match=r"per-state outputs \['v'\]"):
    rule.flat_output_spec(None)


# --------------------------------------------------------------------------
# The agent's settings and the eval job.

WARM = dict(rule='disco_103', warm_start_rule='actor_critic')


@pytest.mark.parametrize(
  'warm, entropy_cost', [('actor_critic', 0.2), ('ppo', 0.01)]
)
def test_settings_wrap_the_two_rules_and_build_an_agent(warm, entropy_cost):
  config = tiny.eval_config(
    rule='disco_103', warm_start_rule=warm, warm_start_steps=4
  )
  settings = config.run_agent_settings()
  assert settings.update_rule_name == 'warm_start'
  assert settings.update_rule.main.name == 'disco'
  assert settings.update_rule.warm.name == warm
  assert settings.hyper_params.warm.entropy_cost == entropy_cost
  assert settings.learning_rate == config.learning_rate
  env = jittable_envs.CatchJittableEnvironment(
    batch_size=2, env_settings=jittable_envs.get_config_catch()
  )
  agent = agent_lib.Agent(
    single_observation_spec=env.single_observation_spec(),
    single_action_spec=env.single_action_spec(),
    agent_settings=settings,
    batch_axis_name=None,
  )
  assert isinstance(agent.update_rule, warm_start.WarmStart)
  assert agent.update_rule.steps == 4
  assert set(agent.update_rule.required_agent_outputs()) == {
    'logits', 'y', 'v', 'z', 'aux_pi', 'q',
  }  # fmt: skip
  state = agent.initial_learner_state(jax.random.PRNGKey(0))
  assert int(state.meta_state['updates']) == 0


@pytest.mark.parametrize(
  'changes, message',
  [
    (dict(warm_start_steps=3), 'warm_start_steps=3 needs a warm start'),
    (dict(warm_start_rule='ppo'), 'give its length, warm_start_steps >= 1'),
    (
      dict(warm_start_predictions=True),
      'give its length, warm_start_steps >= 1',
    ),
    (
      dict(rule='actor_critic', warm_start_rule='ppo', warm_start_steps=3),
      "a rule with a meta-network .*; rule is 'actor_critic'",
    ),
    (
      dict(warm_start_rule='actor_critic', warm_start_steps=-1),
      'warm_start_steps',
    ),
  ],
)
def test_bad_warm_start_settings_name_the_setting(changes, message):
  with pytest.raises(ValueError, match=message):
    tiny.eval_config(**{'rule': 'disco_103', **changes})


def test_a_disco_rule_cannot_be_the_warm_rule():
  disco = tiny.eval_config(rule='disco_103').run_agent_settings()
  with pytest.raises(ValueError, match="hand-written one .* got 'disco'"):
    agent_lib.with_warm_start(disco, disco, 3)


def test_the_command_refuses_a_warm_start_without_its_length(capsys):
  code = cli_main.main(
    ['eval', '--warm-start-rule', 'actor_critic', '--out', '/nonexistent']
  )
  err = capsys.readouterr().err.strip().splitlines()
  assert code == 2 and len(err) == 1 and err[0].startswith('error:')
  assert 'warm_start_steps >= 1' in err[0]


@pytest.mark.usefixtures('disco_103_params', 'fast_compile')
def test_a_run_switches_rules_and_resumes_exactly_across_the_switch(
  tmp_path,
):
  """Three warm-start updates, then Disco103: the weight is in the rows;
  stopped before the switch and resumed past it equals a straight run."""
  settings = dict(
    **WARM, warm_start_steps=3, batch_size=4, replay_ratio=2, num_steps=7
  )
  _, straight, rows = stopped_runs.stopped_and_straight(
    tiny.eval_config(**settings), 2, tmp_path
  )
  learned = rows[rows['learned'] == 1]
  assert list(learned[warm_start.WARM_KEY]) == [1.0] * 3 + [0.0] * (
    len(learned) - 3
  )
  # The rule's update count is part of the checkpointed state.
  meta_state = jax.device_get(straight.state.learner_state.meta_state)
  assert int(np.asarray(meta_state['updates']).ravel()[0]) == len(learned)


def test_step_learning_rate_is_the_warm_starts_for_its_updates():
  # Warm-up of 3 iterations, a warm start of 2 updates at 1e-3: the
  # iterations 3 and 4 (updates 0 and 1) take 1e-3, the others the run's.
  config = tiny.eval_config(
    **WARM, warm_start_steps=2, warm_start_learning_rate=1e-3
  )
  setup = pytypes.SimpleNamespace(config=config, warmup=3)
  got = [
    float(
      eval_steps.step_learning_rate(
        setup, pytypes.SimpleNamespace(step=jnp.asarray(step)), jnp.asarray(0.5)
      )
    )
    for step in range(3, 7)
  ]
  np.testing.assert_allclose(got, [1e-3, 1e-3, 0.5, 0.5])
  # Without a rate of its own, the warm start takes the run's.
  setup = pytypes.SimpleNamespace(
    config=tiny.eval_config(**WARM, warm_start_steps=2), warmup=3
  )
  state = pytypes.SimpleNamespace(step=jnp.asarray(3))
  assert eval_steps.step_learning_rate(setup, state, 0.5) == 0.5


@pytest.mark.slow  # The Trainer's run of what the test above checks.
@pytest.mark.usefixtures('disco_103_params', 'fast_compile')
def test_the_warm_start_s_learning_rate_holds_for_its_updates_only(tmp_path):
  """A run at 1e-2 whose two warm-start updates take 1e-3 is, for those
  two updates, the run at 1e-3; the third update differs."""
  settings = dict(
    **WARM, warm_start_steps=2, batch_size=4, replay_ratio=2, num_steps=4
  )
  runs = {}
  for name, rates in dict(
    slow=dict(learning_rate=1e-3),
    warm_slow=dict(learning_rate=1e-2, warm_start_learning_rate=1e-3),
  ).items():
    trainer = trainer_lib.Trainer(
      tiny.eval_config(**settings, **rates), tmp_path / name, progress=False
    )
    trainer.fit()
    rows = pd.read_csv(tmp_path / name / 'metrics.csv')
    runs[name] = rows[rows['learned'] == 1].reset_index(drop=True)
  slow, warm_slow = runs['slow'], runs['warm_slow']
  # Row i holds the loss of update i, on the parameters after i updates.
  for column in ('total_loss', 'global_gradient_norm', 'pi_hat_entropy'):
    np.testing.assert_array_equal(slow[column][:3], warm_slow[column][:3])
    assert slow[column][3] != warm_slow[column][3], column


def test_a_warm_start_rate_needs_a_warm_start():
  with pytest.raises(ValueError, match='give warm_start_steps >= 1'):
    tiny.eval_config(rule='disco_103', warm_start_learning_rate=1e-3)
  with pytest.raises(ValueError, match='finite number > 0, got -1.0'):
    tiny.eval_config(**WARM, warm_start_steps=2, warm_start_learning_rate=-1.0)


@pytest.mark.slow
@pytest.mark.usefixtures('disco_103_params', 'fast_compile')
def test_ppo_warms_a_run_up_too(tmp_path):
  config = tiny.eval_config(
    rule='disco_103', warm_start_rule='ppo', warm_start_steps=2, num_steps=4
  )
  trainer = trainer_lib.Trainer(config, tmp_path, progress=False)
  trainer.fit()
  rows = pd.read_csv(tmp_path / 'metrics.csv')
  learned = rows[rows['learned'] == 1]
  assert list(learned[warm_start.WARM_KEY]) == [1.0, 1.0, 0.0, 0.0]
  assert np.isfinite(learned['total_loss']).all()
