# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Gate G1 (issue 69, docs/studies/lpg_transfer.md) for the rules of the
settled recipe (ACT_SGD_GROOVE_L2_0.25_L1000): fresh table agents trained
by a rule meta-trained here from random parameters, against the
actor-critic, on LPG's fixed gridworlds that the meta-training never
draws.

  disco-rl study studies/lpg_gridworlds_l1000.py \
      --out runs/lpg_gridworlds_l1000
  disco-rl study studies/lpg_gridworlds_l1000.py \
      --out runs/lpg_gridworlds_l1000_tiny --tiny     # test size

Agents, budget and measurement as `lpg_gridworlds.py` (G1 of issue 54):
a table per state, 16 environments x 20 steps per learner update, 2,000
updates, final return over the last 10% of environment steps.

The procedure, fixed before any cell ran (2026-12-07):

- Candidates: the rule picked by 500-update agents on the tuning layouts
  among meta-steps 1,600-4,000 (`CANDIDATES['learned_2900']`) and the
  meta-training's last meta-step (`learned_6000`). The rules' agents
  learn as the meta-training's do, by plain SGD (`agent_optimizer='sgd'`),
  so their rates are a grid around the meta-training's 40 (`SGD_RATES`);
  the actor-critic keeps G1's Adam grid (`ADAM_RATES`).
- Stage 'tune' (`lpg:all` layouts 1-3, seeds 100-102, 2,000 updates):
  every candidate at every rate, the actor-critic at every rate.
  `RatePick('tune')` then gives each rule its rate (the highest mean of
  final returns normalised from random play to the best mean there).
- The candidate with the highest tuning score at its picked rate
  (`rates.json`'s `scores`) is the rule of stage 'held_out'
  (`HELD_OUT_RULE`, written here once the tuning stage has finished):
  LPG's `dense`, `sparse` and `long_dense` (layout 0), seeds 0-4, at its
  pick, beside the actor-critic at its pick. Nothing is chosen on those.

The gate passes when, on each held-out gridworld, the rule's mean final
return leaves random play and is at least half of the actor-critic's.
"""

import pathlib
import runpy

from disco_rl.studies.spec import RatePick
from disco_rl.studies.spec import Rule
from disco_rl.studies.spec import Stage
from disco_rl.studies.spec import Study
from disco_rl.update_rules import disco

# Relative to this file's folder; export_rule's npz files of the run's
# checkpoints (the tiny sizes, the action target).
CANDIDATES = {
  'learned_2900': '../docs/results/lpg_transfer/l1000/rule_step_2900.npz',
  'learned_6000': '../docs/results/lpg_transfer/l1000/rule_step_6000.npz',
}
# Set from the tuning stage's scores (see the procedure above): on
# 2026-12-07 learned_6000 at 10 scored 0.769, learned_2900 at 40 0.725
# (the actor-critic at 3e-2 0.748).
HELD_OUT_RULE = 'learned_6000'
RULE_SETTINGS = dict(
  rule_sizes=disco.NAMED_SIZES['tiny'].changes(),
  policy_target='action',
  agent_optimizer='sgd',
)
# G1's settings (lpg_gridworlds.py), read from its spec so that they stay
# one decision: the agents, the layouts, the seeds, the budget and the
# actor-critic's Adam grid.
_G1 = runpy.run_path(str(pathlib.Path(__file__).with_name('lpg_gridworlds.py')))
TUNE, HELD_OUT, UPDATES, BASE = (
  _G1[k] for k in ('TUNE', 'HELD_OUT', 'UPDATES', 'BASE')
)
ADAM_RATES = _G1['RATES']
# Around the meta-training's agents' SGD rate (40, GROOVE's).
SGD_RATES = (10.0, 20.0, 40.0, 80.0)


def g1_study(
  name: str,
  candidates: dict[str, str],
  rule_settings: dict,
  held_out_rule: str | None,
) -> Study:
  """G1's study by this file's procedure for other candidates (paths
  relative to the calling spec's folder, which must be this one's): the
  candidates tuned at `SGD_RATES`, the actor-critic at `ADAM_RATES`, and
  once `held_out_rule` is named, the held-out stage for it alone."""
  learned = tuple(
    Rule('disco_103', name=rule, weights=path, settings=rule_settings)
    for rule, path in candidates.items()
  )
  stages = (
    Stage(
      'tune',
      envs=TUNE,
      seeds=_G1['STUDY'].stage('tune').seeds,
      rates={
        **{rule: SGD_RATES for rule in candidates},
        'actor_critic': ADAM_RATES,
      },
      num_steps=UPDATES,
    ),
  )
  if held_out_rule is not None:
    stages += (
      Stage(
        'held_out',
        envs=HELD_OUT,
        seeds=_G1['STUDY'].stage('held_out').seeds,
        rates=RatePick('tune'),
        num_steps=UPDATES,
        rules=(held_out_rule, 'actor_critic'),
      ),
    )
  return Study(
    name=name,
    base=BASE,
    rules=(*learned, Rule('actor_critic')),
    stages=stages,
    baseline='actor_critic',
    tiny=_G1['STUDY'].tiny,  # G1's: 20 updates of 4 environments.
  )


STUDY = g1_study(
  'lpg_gridworlds_l1000', CANDIDATES, RULE_SETTINGS, HELD_OUT_RULE
)
