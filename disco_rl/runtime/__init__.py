# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The runtime: what runs any job, knowing none (no module here imports
`disco_rl.jobs`; tests/test_imports.py checks it).

job.py          the `Job` a job hands over: its computation and its
                `Report`, typed
host_loop.py    `run(job, ...)`: the host loop, call by call, with
                checkpoints and stops
compiled.py     the one builder of jit(shard_map(scan(step))) programs
mesh.py         devices, the mesh, placing and fetching, processes
run_dir.py      a run's directory: its files, lock, record and checkpoints
checkpoints.py  saving and restoring a state (orbax) and host state
metrics.py      rows to metrics.csv and back, JSON-safe figures
divergence.py   the check for diverged learning, rows kept up to it
signals.py      SIGINT/SIGTERM turned into a stop at the next call
distributed.py  several processes: starting them, agreeing, timeouts
"""
