# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The eval job: an agent trained by a fixed rule, as in the upstream's
eval notebook.

setup.py        what the job is built from (devices, environment, agent,
                buffer sizes) and the layout of its state
job.py          `make_eval(config) -> Job`: the steps and the program
host_acting.py  acting in environments stepped on the host (dm_env Catch,
                envpool), between compiled actor steps
report.py       checks, rows, summary, plots
"""
