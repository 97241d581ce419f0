# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval job: an agent trained by a fixed rule, as in the upstream's
eval notebook.

setup.py        what the job is built from (devices, environment, agent,
                buffer sizes, the runs' keys and rates) and the layout of
                its state
steps.py        the steps as module functions of (setup, state, ...):
                init_runs, act, store, learn, maybe_learn, iteration
acting.py       the computation for each way of acting: compiled with the
                iteration, or on the host between compiled actor steps
job.py          `make_eval(config) -> Job`; evaluate, rule
report.py       checks, rows, summary, plots
"""
