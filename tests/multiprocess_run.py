# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A few eval and meta-train steps, in one of several processes or alone.

Run by test_loops_multiprocess.py:

  python multiprocess_run.py OUT [COORDINATOR NUM_PROCESSES PROCESS_ID]

With the last three arguments the process joins the others first (CPU
collectives over gloo). Process 0 (or the only one) saves the learned agent
and rule parameters and the metrics to OUT as .npz files.
"""

import sys

import jax
import numpy as np

from disco_rl.loops import config as config_lib
from disco_rl.loops import devices

EVAL = config_lib.EvalConfig(
    rule='actor_critic', batch_size=8, replay_ratio=2, buffer_capacity=16,
    rollout_len=5, dense=(16,), model_lstm_size=8, model_head_hiddens=(8,),
    steps_per_call=2, num_steps=4)
# A suite of two tasks (two agent groups, network shapes and environments).
META = config_lib.MetaTrainConfig(
    num_agents=2, batch_size_per_device=2, rollout_len=3, dense=(16,),
    model_lstm_size=8, model_head_hiddens=(8,), value_dense=(8,),
    steps_per_call=2, num_steps=2,
    tasks=('catch', 'catch[rows=4,columns=3]'))


def _flat(tree, prefix):
  leaves = jax.tree_util.tree_leaves_with_path(tree)
  return {prefix + jax.tree_util.keystr(path): np.asarray(leaf)
          for path, leaf in leaves}


def main(argv):
  out = argv[1]
  if len(argv) > 2:
    devices.initialize_distributed(devices.DistributedConfig(
        coordinator_address=argv[2], num_processes=int(argv[3]),
        process_id=int(argv[4])))
  from disco_rl.loops import eval_loop  # pylint: disable=g-import-not-at-top
  from disco_rl.loops import meta_loop  # pylint: disable=g-import-not-at-top
  assert len(jax.devices()) == 2, jax.devices()

  loop = eval_loop.EvalLoop(EVAL)
  state = loop.init(jax.random.PRNGKey(0))
  eval_metrics = []
  for _ in range(2):
    state, metrics = loop.run(state)
    eval_metrics.append(metrics)
  params = devices.fetch(state.learner_state.params)

  trainer = meta_loop.MetaTrainer(META)
  population = trainer.init(jax.random.PRNGKey(META.seed))
  population, logs = trainer.run(population)
  rule = trainer.params(population)

  if jax.process_index() == 0:
    arrays = dict(_flat(params, 'agent'), **_flat(rule, 'rule'))
    for i, m in enumerate(eval_metrics):
      arrays.update({f'eval_metrics/{i}/{k}': v for k, v in m.items()})
    arrays.update({f'meta_logs/{k}': v for k, v in logs.items()})
    np.savez(out, **arrays)
  print(f'process {jax.process_index()} of {jax.process_count()}: done',
        flush=True)


if __name__ == '__main__':
  main(sys.argv)
