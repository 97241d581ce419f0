# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Command-line jobs: `python -m disco_rl.examples.eval` / `.meta_train`."""
