# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""What a command-line job does before JAX and the package are imported.

Light on purpose (no JAX): the jobs import it first.
"""

import contextlib
import signal
import sys


@contextlib.contextmanager
def interruptible_imports(module_name: str):
  """Ctrl-C while a job imports JAX and the package (a second or two).

  Run as a command (`module_name == '__main__'`), the job ends with one line
  and exit status 130, nothing written; imported as a module, the
  KeyboardInterrupt goes on to the importer.

  Usage (at the top of a job's module):
    with startup.interruptible_imports(__name__):
      from disco_rl.examples import cli
  """
  try:
    yield
  except KeyboardInterrupt:
    if module_name != '__main__':
      raise
    print('interrupted by SIGINT while starting: nothing was written',
          file=sys.stderr)
    sys.exit(128 + signal.SIGINT.value)
