# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""A few eval or meta-train steps, in one of several processes or alone.

Run by test_runtime_multiprocess.py:

  python multiprocess_run.py eval|meta OUT [COORDINATOR NUM_PROCESSES
      PROCESS_ID]

With the last three arguments the process joins the others first (CPU
collectives over gloo). Process 0 (or the only one) saves the learned agent
(eval) or rule (meta) parameters and the metrics to OUT as an .npz file.
"""

import sys

import jax
import numpy as np
import tiny

from disco_rl.jobs.eval import job as eval_lib
from disco_rl.jobs.meta import job as meta_lib
from disco_rl.runtime import distributed
from disco_rl.runtime import mesh

EVAL = tiny.eval_config(
  batch_size=8, buffer_capacity=16, steps_per_call=2, num_steps=4
)
# A suite of two tasks (two agent groups, network shapes and environments).
META = tiny.meta_config(
  steps_per_call=2, num_steps=2, tasks=('catch', 'catch[rows=4,columns=3]')
)


def _flat(tree, prefix):
  leaves = jax.tree_util.tree_leaves_with_path(tree)
  return {
    prefix + jax.tree_util.keystr(path): np.asarray(leaf)
    for path, leaf in leaves
  }


def run_eval() -> dict[str, np.ndarray]:
  """Two calls of the eval job: the agent's parameters and each call's
  metrics."""
  job = eval_lib.make_eval(EVAL)
  state = job.init()
  arrays = {}
  for i in range(2):
    state, metrics = job.step(state, EVAL.steps_per_call)
    arrays.update({f'eval_metrics/{i}/{k}': v for k, v in metrics.items()})
  arrays.update(_flat(mesh.fetch(state.learner_state.params), 'agent'))
  return arrays


def run_meta() -> dict[str, np.ndarray]:
  """One call of the meta-training job: the rule's parameters and logs."""
  job = meta_lib.make_meta_train(META)
  state, logs = job.step(job.init(), META.steps_per_call)
  arrays = _flat(meta_lib.rule(job, state), 'rule')
  arrays.update({f'meta_logs/{k}': v for k, v in logs.items()})
  return arrays


def main(argv):
  job, out = argv[1], argv[2]
  if len(argv) > 3:
    distributed.initialize(
      distributed.DistributedConfig(
        coordinator_address=argv[3],
        num_processes=int(argv[4]),
        process_id=int(argv[5]),
      )
    )
  assert len(jax.devices()) == 2, jax.devices()
  arrays = {'eval': run_eval, 'meta': run_meta}[job]()
  if jax.process_index() == 0:
    np.savez(out, **arrays)
  print(
    f'process {jax.process_index()} of {jax.process_count()}: done', flush=True
  )


if __name__ == '__main__':
  main(sys.argv)
