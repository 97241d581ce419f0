# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""Writes tests/durations.json (seconds per test) from a run's JUnit XML.

  make test PYTEST_ARGS=--junitxml=/tmp/junit.xml
  python tests/durations.py /tmp/junit.xml

conftest.py starts the longest tests first from it. Setup and teardown
count with the test (JUnit's time is their sum).
"""

import json
import pathlib
import sys
import xml.etree.ElementTree as ET


def durations(junit_xml: str) -> dict[str, float]:
  """{'tests/test_x.py::test_y[param]': seconds} of every test case."""
  seconds = {}
  for case in ET.parse(junit_xml).getroot().iter('testcase'):
    parts = case.get('classname').split('.')  # tests.test_x[.Class]
    last = max(i for i, part in enumerate(parts) if part.startswith('test_'))
    node = '::'.join(
      [
        '/'.join(parts[: last + 1]) + '.py',
        *parts[last + 1 :],
        case.get('name'),
      ]
    )
    seconds[node] = round(float(case.get('time')), 2)
  return dict(sorted(seconds.items()))


def main(argv):
  if len(argv) != 2:
    sys.exit(f'usage: {argv[0]} JUNIT_XML')
  path = pathlib.Path(__file__).with_name('durations.json')
  path.write_text(json.dumps(durations(argv[1]), indent=0) + '\n')
  print(f'{path}: {len(durations(argv[1]))} tests')


if __name__ == '__main__':
  main(sys.argv)
