# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Gate G1 of issue 54 (docs/studies/lpg_transfer.md): fresh table agents
trained by the rule meta-trained here on LPG's gridworlds, against the
actor-critic, on fixed gridworlds the meta-training distribution never
draws.

  disco-rl study studies/lpg_gridworlds.py \
      --out runs/lpg_gridworlds
  disco-rl study studies/lpg_gridworlds.py \
      --out runs/lpg_gridworlds_tiny --tiny     # test size

The agents are the meta-training's (the `lpg` preset's): a table per state
(`net='table'`), the Disco agent's action model of 8 units, 16
environments acting 20 steps per iteration, one learner step per acted
batch on that batch (replay ratio 1 from a buffer of the batch: on-policy,
as the meta-training's inner updates). The budget: 2,000 learner updates
per run (640,000 environment steps), tuning and held-out alike.

Learning rates: each rule's rate is chosen from `RATES` on the stage
'tune' (the `all` distribution's layouts 1-3, seeds 100-102, apart from
the reported seeds) by `RatePick`'s procedure (the highest mean of the
final returns normalised from random play to the best mean there; the
smaller rate on a tie), never on the held-out gridworlds. The stage
'held_out' runs each rule at its pick on LPG's fixed `dense`, `sparse`
and `long_dense` gridworlds (layout 0), seeds 0-4.

The gate passes when, on the held-out gridworlds, the rule's final return
leaves random play and is at least half of the actor-critic's.

`RULE` is the rule file the study reads: the meta-training's latest
committed milestone until its last meta-step; the gate is decided on the
final rule (a milestone's result is a progress check, and the page says
which rule each result used).
"""

from disco_rl.studies.spec import RatePick
from disco_rl.studies.spec import Rule
from disco_rl.studies.spec import Stage
from disco_rl.studies.spec import Study
from disco_rl.update_rules import disco

# The meta-trained rule (export_rule's npz) and its sizes (the 'tiny'
# sizes of docs/studies/lpg_transfer.md; checked against the file).
# Relative to this file's folder.
# The final rule of meta_tiny_b (G1 failed on it, 2026-12-04: the page
# ran both rules at every rate of RATES on the held-out gridworlds, which
# decides the gate for whichever rate RatePick would choose).
RULE = '../docs/results/lpg_transfer/meta_tiny_b/rule_step_9250.npz'
RULE_SIZES = disco.NAMED_SIZES['tiny'].changes()
TUNE = tuple(f'lpg:all[layout_seed={seed}]' for seed in (1, 2, 3))
HELD_OUT = ('lpg:dense', 'lpg:sparse', 'lpg:long_dense')
# Around the rate the meta-training's agents learn at (the lpg preset's
# 3e-2); until that preset moved from 5e-4 (2026-12-03), 3e-4 to 1e-2.
RATES = (1e-3, 3e-3, 1e-2, 3e-2)
UPDATES = 2000
BASE = dict(
  net='table',
  model_lstm_size=8,
  model_head_hiddens=(8,),
  batch_size=16,
  rollout_len=20,
  replay_ratio=1,
  buffer_capacity=16,
  steps_per_call=100,
  debug_checks=False,
)

STUDY = Study(
  name='lpg_gridworlds',
  base=BASE,
  rules=(
    Rule(
      'disco_103',
      name='learned',
      weights=RULE,
      settings=dict(rule_sizes=RULE_SIZES),
    ),
    Rule('actor_critic'),
  ),
  stages=(
    Stage(
      'tune', envs=TUNE, seeds=(100, 101, 102), rates=RATES, num_steps=UPDATES
    ),
    Stage(
      'held_out',
      envs=HELD_OUT,
      seeds=(0, 1, 2, 3, 4),
      rates=RatePick('tune'),
      num_steps=UPDATES,
    ),
  ),
  baseline='actor_critic',
  # --tiny: the same grid at 20 updates of 4 environments.
  tiny=dict(num_steps=20, batch_size=4, buffer_capacity=4, steps_per_call=10),
)
