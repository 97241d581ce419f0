# Copyright 2025 The disco_rl authors.
# Licensed under the Apache License, Version 2.0 (see LICENSE).
"""MkDocs hooks (mkdocs.yml's `hooks:`): the site from the pages as they are
written for GitHub.

The pages link to each other by their paths in the repository: the README
at the root links to `docs/runs.md`, a page under docs/ to `../README.md`
or `../scripts/x.py`. MkDocs only knows the files under docs/, so this hook

- adds the pages that live outside docs/ (ROOT_PAGES: the README as the
  site's index, the changelog, the weights' README) as generated pages;
- rewrites every relative link and image of a page (outside code) from its
  source file's place in the repository to the site: a file under docs/ or
  a ROOT_PAGES source becomes a link to its page there; a folder, or a file
  elsewhere in the repository (a script, a test), becomes the link's text,
  as the site holds no copy of it; a link to a file that does not exist is
  a warning, which `mkdocs build --strict` turns into a failure.
"""

import logging
import os
import pathlib
import posixpath
import re

from mkdocs.structure.files import File

log = logging.getLogger('mkdocs.plugins.disco_rl')

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Site page (under docs/) -> its source file, relative to the root.
ROOT_PAGES = {
  'index.md': 'README.md',
  'changelog.md': 'CHANGELOG.md',
  'weights.md': 'weights/README.md',
}
_FENCE = re.compile(r'^ *```.*?^ *``` *$', re.S | re.M)
_LINK = re.compile(r'(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)')


def on_files(files, config):
  for page, source in ROOT_PAGES.items():
    text = (ROOT / source).read_text()
    files.append(File.generated(config, page, content=text))
  return files


def _source(page_uri: str, docs_dir: pathlib.Path) -> pathlib.Path:
  """Where the page `page_uri` (relative to docs/) is in the repository."""
  if page_uri in ROOT_PAGES:
    return ROOT / ROOT_PAGES[page_uri]
  return docs_dir / page_uri


def _site_target(path: pathlib.Path, docs_dir: pathlib.Path) -> str | None:
  """The file under docs/ that shows `path` (relative to docs/), or None."""
  for page, source in ROOT_PAGES.items():
    if path == ROOT / source:
      return page
  if path.is_relative_to(docs_dir):
    return path.relative_to(docs_dir).as_posix()
  return None


def rewrite_links(markdown: str, page_uri: str, docs_dir) -> str:
  """`markdown` of the page `page_uri` with its relative links made the
  site's (see the module's docstring)."""
  docs_dir = pathlib.Path(docs_dir).resolve()
  source = _source(page_uri, docs_dir)
  here = posixpath.dirname(page_uri)

  def link(match):
    image, text, target = match.groups()
    if re.match(r'[a-z][a-z0-9+.-]*:', target) or target.startswith('#'):
      return match.group(0)
    path, sep, anchor = target.partition('#')
    file = pathlib.Path(os.path.normpath(source.parent / path))
    if not file.exists():
      log.warning(
        '%s: %s links to %s, which does not exist',
        page_uri,
        source.relative_to(ROOT),
        target,
      )
      return match.group(0)
    site = None if file.is_dir() else _site_target(file, docs_dir)
    if site is None:  # A folder, or a file outside docs/: its name, as text.
      return text
    new = posixpath.relpath(site, here or '.') + sep + anchor
    return f'{image}[{text}]({new})'

  parts, last = [], 0
  for fence in _FENCE.finditer(markdown):
    parts.append(_LINK.sub(link, markdown[last : fence.start()]))
    parts.append(fence.group(0))
    last = fence.end()
  parts.append(_LINK.sub(link, markdown[last:]))
  return ''.join(parts)


def on_page_markdown(markdown, page, config, files):
  del files
  return rewrite_links(markdown, page.file.src_uri, config['docs_dir'])
