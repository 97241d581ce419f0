# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""The pages hold together: every relative link and image of README.md and
docs/**/*.md names a file that exists (and a heading that exists, for a
link with an anchor), and every number of the README's results table is in
the committed results file its row cites."""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / 'README.md'] + sorted((ROOT / 'docs').rglob('*.md'))
# The columns of the README's results table that hold results.
RESULT_COLUMNS = ('Disco103', 'actor-critic', 'PPO', 'meta-trained here')
NUMBER = re.compile(r'-?\d[\d,]*(?:\.\d+)?')


def prose(text: str) -> str:
  """`text` without its fenced code blocks (their brackets are code)."""
  return re.sub(r'```.*?```', '', text, flags=re.S)


def links(text: str) -> list[str]:
  """The targets of the markdown links and images in `text`."""
  return re.findall(r'\]\(([^)\s]+)\)', prose(text))


def slug(heading: str) -> str:
  """GitHub's anchor of a heading: lower case, punctuation but '-' and '_'
  dropped, spaces as '-'."""
  text = re.sub(r'[`*]', '', heading.strip().lower())
  return re.sub(r'[^\w\- ]', '', text).replace(' ', '-')


def anchors(page: pathlib.Path) -> set[str]:
  """The anchors of a page's headings (a repeated one also as slug-1...)."""
  seen, out = {}, set()
  for heading in re.findall(r'^#+ (.+)$', prose(page.read_text()), re.M):
    base = slug(heading)
    count = seen.get(base, 0)
    out.add(base if not count else f'{base}-{count}')
    seen[base] = count + 1
  return out


def broken_links(page: pathlib.Path, root: pathlib.Path = ROOT) -> list[str]:
  """The relative links and images of `page` that do not resolve (named
  relative to `root`)."""
  bad = []
  for target in links(page.read_text()):
    if re.match(r'[a-z][a-z0-9+.-]*:', target):  # http:, mailto:, ...
      continue
    path, _, anchor = target.partition('#')
    file = (page.parent / path).resolve() if path else page
    if not file.exists():
      bad.append(f'{page.relative_to(root)}: {target} (no such file)')
    elif anchor and file.suffix == '.md' and anchor not in anchors(file):
      bad.append(f'{page.relative_to(root)}: {target} (no such heading)')
  return bad


@pytest.mark.parametrize(
  'page', PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES]
)
def test_every_link_and_image_resolves(page):
  assert not broken_links(page)


def test_a_broken_link_or_anchor_is_found(tmp_path):
  page = tmp_path / 'page.md'
  (tmp_path / 'there.md').write_text('# A heading, with punctuation\n')
  page.write_text(
    '# Here\n[ok](there.md#a-heading-with-punctuation) '
    '[self](#here) ![img](missing.png) [gone](there.md#nope)\n'
    '```\n[in code](not_checked.md)\n```\n'
  )
  assert broken_links(page, tmp_path) == [
    'page.md: missing.png (no such file)',
    'page.md: there.md#nope (no such heading)',
  ]


def results_table() -> list[dict[str, str]]:
  """The rows of the README's results table: {column: cell}."""
  text = (ROOT / 'README.md').read_text()
  section = text[text.index('## Results') :]
  rows = [line for line in section.splitlines() if line.startswith('|')]
  header = [c.strip() for c in rows[0].strip('|').split('|')]
  return [
    dict(
      zip(header, (c.strip() for c in row.strip('|').split('|')), strict=False)
    )
    for row in rows[2:]
  ]


def missing_numbers(row: dict[str, str], page: pathlib.Path) -> list[str]:
  """The numbers of the row's result cells that its cited file lacks."""
  target = re.search(r'\]\(([^)]+)\)', row['source']).group(1)
  text = (page.parent / target).read_text()
  missing = []
  for column in RESULT_COLUMNS:
    for number in NUMBER.findall(row[column]):
      if not re.search(rf'(?<![\d.]){re.escape(number)}(?![\d])', text):
        missing.append(f'{column}: {number} not in {target}')
  return missing


def test_the_readme_results_are_in_the_files_they_cite():
  rows = results_table()
  assert len(rows) >= 2
  for row in rows:
    assert row['source'].startswith('[') and set(RESULT_COLUMNS) <= set(row)
    assert not missing_numbers(row, ROOT / 'README.md'), row


def test_a_number_not_in_the_cited_file_is_found(tmp_path):
  (tmp_path / 'r.md').write_text('IQM 0.152 [0.099, 0.234]; -104.922\n')
  row = {
    'source': '[r](r.md)',
    'Disco103': 'IQM 0.152 [0.099, 0.234]',
    'actor-critic': '-104.922',
    'PPO': '-',
    'meta-trained here': '0.15 and 0.2345',
  }
  assert missing_numbers(row, tmp_path / 'README.md') == [
    'meta-trained here: 0.15 not in r.md',
    'meta-trained here: 0.2345 not in r.md',
  ]
