# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Gate G2 (issue 69, docs/studies/lpg_transfer.md) for the action_pg rule
that G1 held out (studies/lpg_gridworlds_actor.py): fresh conv agents
trained by that rule on MinAtar Breakout, in the MinAtar study's regime
and budget (studies/minatar.py: its network, replay and 3,000 updates).

  disco-rl study studies/lpg_minatar_actor.py \
      --out runs/lpg_minatar_actor
  disco-rl study studies/lpg_minatar_actor.py \
      --out runs/lpg_minatar_actor_tiny --tiny     # test size

The procedure, fixed before any cell ran (2026-12-08):

- The rule: G1's `HELD_OUT_RULE` (the candidate with the best tuning
  score on the tuning gridworlds), run with the target it was
  meta-trained with ('action_pg'). Its agents here learn by Adam, as every
  rule of the MinAtar study does: the meta-training's plain SGD at 40 was
  for tables, and a conv network has no such rate on record.
- Stage 'breakout' (G2): Breakout, seeds 0-4, at each of the MinAtar
  study's sweep rates (`SWEEP_RATES`); no rate is chosen for G2. The gate
  passes when at some rate the mean final return over the five seeds is
  above random play (the study's `random_play.json`) and its bootstrap
  interval's lower end is too.
- G3 (the other four games and Catch 8x8 against the actor-critic and
  Disco103, rates chosen on Breakout alone) is a later stage of this
  spec, added once G2 has run.
"""

import pathlib
import runpy

from disco_rl.studies.spec import Rule
from disco_rl.studies.spec import Stage
from disco_rl.studies.spec import Study

_HERE = pathlib.Path(__file__).parent
_MINATAR = runpy.run_path(str(_HERE / 'minatar.py'))
_G1 = runpy.run_path(str(_HERE / 'lpg_gridworlds_actor.py'))
if _G1['HELD_OUT_RULE'] is None:
  raise ValueError(
    'studies/lpg_gridworlds_actor.py: HELD_OUT_RULE is None; G2 runs the '
    'rule G1 holds out, so G1 must name it first.'
  )
RULE_NAME = _G1['HELD_OUT_RULE']
# Relative to this file's folder, as the G1 spec's (the same folder).
RULE_FILE = _G1['CANDIDATES'][RULE_NAME]
# The rule's sizes and target, without G1's agent optimiser (SGD for
# tables): the MinAtar regime's Adam.
RULE_SETTINGS = {
  k: v for k, v in _G1['RULE_SETTINGS'].items() if k != 'agent_optimizer'
}
SWEEP_RATES = _MINATAR['SWEEP_RATES']
SEEDS = (0, 1, 2, 3, 4)

STUDY = Study(
  name='lpg_minatar_actor',
  base=_MINATAR['BASE'],
  rules=(
    Rule(
      'disco_103', name=RULE_NAME, weights=RULE_FILE, settings=RULE_SETTINGS
    ),
  ),
  stages=(
    Stage(
      'breakout',
      envs=(_MINATAR['env']('Breakout'),),
      seeds=SEEDS,
      rates=SWEEP_RATES,
      num_steps=_MINATAR['UPDATES'],
    ),
  ),
  references={_MINATAR['env']('Breakout'): _MINATAR['PPO_RETURNS']['Breakout']},
  tiny=_MINATAR['STUDY'].tiny,
)
