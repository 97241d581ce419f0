# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""One colour per rule in every figure (disco_rl.plots.RULE_COLOURS, used
by the scripts' figures), and a returns plot titled by the rule that
trained its agent."""

import pathlib
import sys

from matplotlib import colors
import numpy as np
import pytest

from disco_rl import EvalConfig
from disco_rl import plots
from disco_rl.loops import config as config_lib
from disco_rl.loops import eval as eval_lib

SCRIPTS = pathlib.Path(__file__).resolve().parent.parent / 'scripts'
sys.path.insert(0, str(SCRIPTS))
import comparison  # pylint: disable=g-import-not-at-top,wrong-import-position


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


def _lines(ax) -> dict[str, str]:
  """{legend label: line colour} of the lines drawn on `ax`."""
  return {line.get_label(): _hex(line.get_color()) for line in ax.lines}


def test_the_comparison_figures_draw_each_rule_in_its_colour():
  fig, ax = plots.new_figure()
  curve = dict(env_steps=np.arange(10.0), avg_return=np.linspace(0, 1, 10))
  # In an order other than the colours' own: the colour follows the rule.
  comparison.draw_rules(
    ax,
    {'actor_critic': [curve, curve], 'learned': [curve], 'disco_103': [curve]},
  )
  assert _lines(ax) == {
    'actor-critic (2 seeds)': _hex(plots.RULE_COLOURS['actor_critic']),
    'meta-trained here (1 seeds)': _hex(plots.RULE_COLOURS['learned']),
    'Disco103 (1 seeds)': _hex(plots.RULE_COLOURS['disco_103']),
  }
  fig.clf()


def test_the_comparison_figures_draw_random_play_where_given(
  tmp_path, monkeypatch
):
  """A dashed random-play line at its return, in its colour; the grid
  draws each column's own."""
  curve = dict(env_steps=np.arange(10.0), avg_return=np.linspace(0, 1, 10))
  fig, ax = plots.new_figure()
  comparison.draw_rules(ax, {'learned': [curve]}, random=-0.75)
  (random_line,) = [ln for ln in ax.lines if ln.get_label() == 'random play']
  assert _hex(random_line.get_color()) == _hex(plots.RULE_COLOURS['random'])
  assert random_line.get_linestyle() == '--'
  assert list(random_line.get_ydata()) == [-0.75, -0.75]
  fig.clf()
  drawn = []
  original = comparison.draw_rules
  monkeypatch.setattr(
    comparison,
    'draw_rules',
    lambda ax, c, x, random: drawn.append(random) or original(ax, c, x, random),
  )
  comparison.plot_rules_grid(
    tmp_path / 'grid.png',
    'title',
    {('eval', 'a'): {'learned': [curve]}, ('eval', 'b'): {'learned': [curve]}},
    randoms={'a': -0.5},
  )
  assert drawn == [-0.5, None]


def _returns_plot_title(monkeypatch, rule: str, rule_params=None) -> str:
  """The title of an eval job's returns.png (the job is built, nothing is
  compiled or run: its `outputs` draws from the rows given)."""
  config = EvalConfig(
    rule=rule,
    num_steps=2,
    batch_size=2,
    replay_ratio=1,
    buffer_capacity=4,
    rollout_len=4,
    dense=(8,),
    model_lstm_size=4,
    model_head_hiddens=(4,),
  )
  job = eval_lib.make_eval(config, rule_params=rule_params)
  titles = []
  monkeypatch.setattr(
    plots, 'plot_runs', lambda *args, **kwargs: titles.append(args[5]) or 'p'
  )

  class RunDir:
    def file(self, name):
      return name

  job.outputs(
    None, [dict(seed=0, step=0, env_steps=1, avg_return=0.0)], RunDir(), True
  )
  return titles[0]


def test_a_returns_plot_names_the_rule_that_trained_its_agent(monkeypatch):
  assert _returns_plot_title(monkeypatch, 'actor_critic').startswith(
    'actor-critic on jittable_catch 8x8'
  )
  assert _returns_plot_title(monkeypatch, 'disco_103').startswith(
    'Disco103 on '
  )
  # A meta-trained rule's parameters (--weights): not titled Disco103.
  title = _returns_plot_title(monkeypatch, 'disco_103', rule_params={})
  assert title.startswith('a given rule (disco_103 layout) on ')
  assert 'Disco103' not in title
