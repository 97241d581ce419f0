# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The study facility's edges (issue 71), each as the fault a user meets:
a spec that does not load, a later stage's bad setting found only when
reached, a log without a terminal, a refusal without the way out, a
reference not above random play, a truncated results.csv, a one-panel
figure's legend and an "over 1 environments" title."""

import contextlib
import io
import math
import pathlib
import textwrap

import pandas as pd
import pytest
import test_studies_report as synthetic
import tiny

from disco_rl.cli import study as study_cli
from disco_rl.studies import report as report_lib
from disco_rl.studies import run as study_run

# The tiny eval settings of the study's cells (its spec's `base`).
STUDY_BASE = tiny.source(
  tiny.eval_settings(rule=None, batch_size=8, buffer_capacity=16)
)
SPEC = textwrap.dedent("""
    from disco_rl.studies.spec import RatePick, Rule, Stage, Study

    STUDY = Study(
        name='edges',
        base=BASE,
        rules=(Rule('actor_critic'),),
        stages=(
            Stage('tune', envs=('jittable_catch[rows=5,columns=5]',),
                  seeds=(0,), rates=(3e-3, 3e-2), num_steps=8),
            Stage('compare', envs=('jittable_catch[rows=6,columns=4]',),
                  seeds=(0,), rates=RatePick('tune'), num_steps=8,
                  SETTINGS),
        ))
""").replace('BASE', STUDY_BASE)


def _spec(tmp_path, settings='settings={}', name='spec.py'):
  path = tmp_path / name
  path.write_text(SPEC.replace('SETTINGS', settings))
  return path


def _main(*args):
  """(exit status, stdout, stderr) of the command's `main` here; its
  output is not a terminal."""
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
      status = study_cli.main([str(a) for a in args])
    except SystemExit as e:
      status = e.code
  return status, out.getvalue(), err.getvalue()


def _one_error_line(err):
  assert err.startswith('error: ') and err.count('\n') == 1, err
  return err


# ----------------------------------------------------------------------------
# Specs and settings.


def test_a_spec_with_a_syntax_error_is_one_error_line(tmp_path):
  spec = tmp_path / 'broken.py'
  spec.write_text('STUDY = Study(name="x",\n')  # Was a traceback.
  status, _, err = _main(spec, '--out', tmp_path / 'out')
  assert status == 2
  assert f'SPEC {spec} is not valid Python' in _one_error_line(err)


def test_a_spec_whose_code_fails_is_one_error_line(tmp_path):
  spec = tmp_path / 'undefined.py'
  spec.write_text('STUDY = Studdy()\n')
  status, _, err = _main(spec, '--out', tmp_path / 'out')
  assert status == 2
  assert "does not load: NameError: name 'Studdy'" in _one_error_line(err)


def test_help_names_the_command():
  status, out, _ = _main('--help')
  assert status == 0
  assert out.startswith('usage: python -m disco_rl.cli.study ')


@pytest.mark.parametrize(
  'settings, fragment',
  [
    (
      "settings=dict(batch_size='8')",
      r'Cell compare/jittable_catch\[rows=6,columns=4\]/actor_critic: '
      r"batch_size must be an integer, got '8'",
    ),
    (
      'settings=dict(debug_checks="no")',
      'debug_checks must be True or False',
    ),
  ],
)
def test_a_later_stage_s_bad_setting_is_refused_before_any_cell_runs(
  tmp_path, settings, fragment
):
  """Was found when the stage was reached, after earlier ones ran."""
  out = tmp_path / 'out'
  status, _, err = _main(_spec(tmp_path, settings), '--out', out)
  assert status == 2
  assert pd.Series([_one_error_line(err)]).str.contains(fragment).all(), err
  assert not (out / 'runs').exists()


def test_a_later_stage_s_bad_environment_setting_is_refused_first(tmp_path):
  spec = tmp_path / 'gymnax.py'
  spec.write_text(
    SPEC.replace(
      "'jittable_catch[rows=6,columns=4]'",
      "'gymnax:CartPole-v1[max_steps_in_episode=-5]'",
    ).replace('SETTINGS', 'settings={}')
  )
  out = tmp_path / 'out'
  status, _, err = _main(spec, '--out', out)
  assert status == 2
  assert (
    'setting max_steps_in_episode must be an integer >= 1'
    in _one_error_line(err)
  )
  assert not (out / 'runs').exists()


# ----------------------------------------------------------------------------
# A study run without a terminal, then refused, then reported.


@pytest.fixture(scope='module')
def ran(tmp_path_factory):
  tmp = tmp_path_factory.mktemp('edges')
  out = tmp / 'out'
  return tmp, out, _main(_spec(tmp), '--out', out)


def test_without_a_terminal_each_cell_is_one_line_without_escape_codes(ran):
  _, _, (status, out, err) = ran
  assert status == 0, err
  cells = [line for line in out.splitlines() if line.startswith('cell ')]
  assert len(cells) == 2, out
  # Which cell, its environment, and what the counts mean.
  assert cells[0] == (
    'cell 1 of 2, tune/jittable_catch[rows=5,columns=5]/actor_critic: 2 '
    'runs (1 seed x 2 rates), 8 learner steps after 1 warm-up iteration '
    '(its bar counts both: 9)'
  ), cells[0]
  assert cells[1].startswith('cell 2 of 2, compare/'), cells[1]
  assert '\x1b' not in out + err and '\r' not in out + err


def test_without_a_terminal_a_cell_shows_that_it_moves(ran):
  """A cell of 2,000 updates ran ten minutes with no line at all (the
  bars are a terminal's); now its run prints a line about every tenth of
  its steps (here 8 steps of calls of 4: a line per call)."""
  _, _, (status, out, err) = ran
  assert status == 0, err
  lines = out.splitlines()
  first = lines.index(next(x for x in lines if x.startswith('cell 1 ')))
  second = lines.index(next(x for x in lines if x.startswith('cell 2 ')))
  steps = [x.split()[1] for x in lines[first:second] if x.startswith('step ')]
  assert steps == ['4/9', '8/9', '9/9'], lines[first:second]  # Per call.
  assert any(x.startswith('step ') for x in lines[second:])


def test_a_refused_cell_names_removing_its_folder(ran):
  tmp, out, _ = ran
  changed = _spec(tmp, 'settings=dict(rollout_len=6)', 'changed.py')
  status, _, err = _main(changed, '--out', out, '--no-progress')
  assert status == 2
  err = _one_error_line(err)
  assert 'finished with other settings' in err
  folder = out / 'runs/compare/jittable_catch_rows_6_columns_4/actor_critic'
  assert f'remove its folder {folder}' in err
  assert str(out / 'cells.json') in err


def test_report_on_a_truncated_results_file_is_one_error_line(ran, tmp_path):
  tmp, out, _ = ran
  copy = tmp_path / 'copy'
  copy.mkdir()
  for name in ('results.csv', 'curves.csv'):
    (copy / name).write_bytes((out / name).read_bytes())
  text = (copy / 'results.csv').read_text()
  (copy / 'results.csv').write_text(text[: text.rindex('\n') - 30])
  status, _, err = _main(_spec(tmp), '--out', copy, '--report')
  assert status == 2  # Was a report of NaN, without a word.
  assert f'{copy / "results.csv"} is truncated' in _one_error_line(err)
  # Cut after the seed, a newline added: a short row.
  head, last = text[: text.rindex('\n')].rsplit('\n', 1)
  last = last[: last.index('actor_critic,') + len('actor_critic,0')]
  (copy / 'results.csv').write_text(f'{head}\n{last}\n')
  with pytest.raises(ValueError, match='line 4 has no learning_rate, budget'):
    report_lib.read_results(copy / 'results.csv')


# ----------------------------------------------------------------------------
# A reference not above random play; ties in the rate pick.


def _runs(finals):
  """A tuning stage's results: {(env, rate): [finals of seeds]}, rule r."""
  return pd.DataFrame(
    [
      dict(
        study='s',
        stage='t',
        env=env,
        rule='r',
        learning_rate=rate,
        seed=seed,
        final_return=final,
      )
      for (env, rate), values in finals.items()
      for seed, final in enumerate(values)
    ]
  )


def test_a_rate_pick_with_nothing_above_random_play_says_how_it_chose():
  """Every score was 0, and the tie went to the smaller rate unsaid."""
  results = _runs({('a', 1e-3): [-1.0, -2.0], ('a', 1e-2): [-3.0, -1.0]})
  notes = {}
  chosen, scores = study_run.pick_rates(results, {'a': 0.0}, notes)
  assert chosen == {'r': 1e-3}
  assert all(math.isnan(v) for v in scores['r'].values())
  assert notes['r'].startswith(
    "a left out of the scores (no cell's mean final return above random "
    'play), so no rate of r has a score: of its rates 0.001, 0.01 (a tie) '
    'the smallest, 0.001, taken'
  )


def test_a_rate_pick_leaves_out_a_flat_environment_and_states_a_tie():
  results = _runs(
    {
      ('a', 1e-3): [2.0, 2.0],
      ('a', 1e-2): [2.0, 2.0],
      ('b', 1e-3): [-1.0, -1.0],
      ('b', 1e-2): [-5.0, -5.0],
    }
  )
  notes = {}
  chosen, scores = study_run.pick_rates(results, {'a': 0.0, 'b': 0.0}, notes)
  # b (nothing above random play) no longer pulls 1e-2 down (it scored 0).
  assert scores['r'] == {'0.001': 1.0, '0.01': 1.0}
  assert chosen == {'r': 1e-3}
  assert 'b left out of the scores' in notes['r']
  assert (
    'rates 0.001, 0.01 of r tie at score 1.000: the smallest' in (notes['r'])
  )
  plain = {}
  study_run.pick_rates(results[results['env'] == 'a'].iloc[:2], {'a': 0}, plain)
  assert plain == {}


def test_a_report_says_when_a_reference_is_not_above_random_play(tmp_path):
  results, curves = synthetic._tables()  # pylint: disable=protected-access
  flat = results['env'] == 'e2'
  results.loc[flat, 'reference_return'] = -1.0  # Its random play: -1.
  results.loc[flat, 'normalised_score'] = math.nan
  numbers = report_lib.summarise(results, curves, reps=50, curve_reps=10)
  assert numbers['aggregate']['left_out']['e2'] == (
    'reference -1.000 not above random play -1.000: no scores'
  )
  assert 'e2' not in numbers['aggregate']['envs']
  text = report_lib.markdown(numbers)
  assert "On e2 no cell's mean final return is above random play" in text


# ----------------------------------------------------------------------------
# Figures.


def _one_environment():
  results, curves = synthetic._tables(  # pylint: disable=protected-access
    rules=[('disco_103', 1e-3), ('actor_critic', 3e-3), ('ppo', 1e-3)]
  )
  keep = results['env'] == 'e1'
  return results[keep], curves[curves['env'] == 'e1']


def test_a_one_panel_curves_figure_keeps_its_legend_whole():
  results, curves = _one_environment()
  results, curves = report_lib.prepare(results, curves)
  numbers = report_lib.numbers_of(results, curves, reps=50, curve_reps=10)
  fig = report_lib.draw_curves(numbers, curves)
  fig.canvas.draw()
  box, whole = fig.legends[0].get_window_extent(), fig.bbox
  assert whole.x0 <= box.x0 and box.x1 <= whole.x1, (box, whole)
  assert whole.y0 <= box.y0, (box, whole)


def test_the_iqm_curve_title_says_one_environment():
  results, curves = _one_environment()
  results, curves = report_lib.prepare(results, curves)
  numbers = report_lib.numbers_of(results, curves, reps=50, curve_reps=10)
  title = report_lib.draw_iqm_curve(numbers).axes[0].get_title()
  assert 'IQM over 1 environment,' in title.replace('\n', ' '), title


def test_the_study_guide_is_linked_and_lists_every_output():
  root = pathlib.Path(__file__).resolve().parents[1]
  readme = (root / 'README.md').read_text()
  documentation = readme[readme.index('## Documentation') :]
  assert '(docs/studies/README.md)' in documentation
  guide = (root / 'docs/studies/README.md').read_text()
  for name in ('cells.json', 'report.json', 'provisional', 'warm-up'):
    assert name in guide, name
