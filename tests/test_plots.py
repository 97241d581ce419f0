# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""One colour per rule in every figure (disco_rl.plots.RULE_COLOURS, used
by the study reports' and the scripts' figures), and a returns plot titled
by the rule that trained its agent."""

from matplotlib import colors
import pytest
import tiny

from disco_rl import plots
from disco_rl.jobs import config as config_lib
from disco_rl.jobs.eval import job as eval_lib


def _hex(colour) -> str:
  return colors.to_hex(colour)


def test_every_rule_has_its_own_colour_and_no_other_line_takes_it():
  rules = set(config_lib.RULES) | {'learned', 'random'}
  assert rules <= set(plots.RULE_COLOURS) and rules <= set(plots.RULE_NAMES)
  rule_colours = [_hex(c) for c in plots.RULE_COLOURS.values()]
  assert len(set(rule_colours)) == len(rule_colours)
  others = {
    _hex(plots.other_colour(i)) for i in range(len(plots.OTHER_COLOURS))
  }
  assert not others & set(rule_colours)
  with pytest.raises(ValueError, match="no colour for rule 'sarsa'"):
    plots.rule_colour('sarsa')


def _returns_plot_title(monkeypatch, rule: str, rule_params=None) -> str:
  """The title of an eval job's returns.png (the job is built, nothing is
  compiled or run: its `outputs` draws from the rows given)."""
  config = tiny.eval_config(
    **tiny.SMALL,
    rule=rule,
    num_steps=2,
    batch_size=2,
    replay_ratio=1,
    buffer_capacity=4,
    steps_per_call=None,
  )
  job = eval_lib.make_eval(config, rule_params=rule_params)
  titles = []
  monkeypatch.setattr(
    plots, 'plot_runs', lambda *args, **kwargs: titles.append(args[5]) or 'p'
  )

  class RunDir:
    def file(self, name):
      return name

  job.report.outputs(
    None, [dict(seed=0, step=0, env_steps=1, avg_return=0.0)], RunDir(), True
  )
  return titles[0]


def test_a_returns_plot_names_the_rule_that_trained_its_agent(monkeypatch):
  assert _returns_plot_title(monkeypatch, 'actor_critic').startswith(
    'actor-critic on jittable_catch columns=8,rows=8 (seed 0)'
  )
  assert _returns_plot_title(monkeypatch, 'disco_103').startswith(
    'Disco103 on '
  )
  # A meta-trained rule's parameters (--weights): not titled Disco103.
  title = _returns_plot_title(monkeypatch, 'disco_103', rule_params={})
  assert title.startswith('a given rule (disco_103 layout) on ')
  assert 'Disco103' not in title
