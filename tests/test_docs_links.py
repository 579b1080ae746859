"""README.md is the overview and points into docs/ (the MkDocs site, whose own links `mkdocs build --strict`
checks, `make docs`): every relative link of the README names a file that exists and, with `#anchor`, a heading
of that page, and every page of the site is linked from it."""

from __future__ import annotations

import re

from markdown.extensions.toc import slugify
from support import REPO

LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: str) -> set[str]:
    """The heading ids MkDocs gives a page (Python-Markdown's toc slugs of the headings' text)."""
    ids, fence = set(), False
    for line in (REPO / page).read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            ids.add(slugify(line.lstrip("#").strip().replace("`", ""), "-"))
    return ids


def test_every_relative_link_of_the_readme_resolves():
    links = [t for t in LINK.findall((REPO / "README.md").read_text()) if "://" not in t]
    assert links
    for target in links:
        path, _, anchor = target.partition("#")
        assert (REPO / path).is_file(), target
        if anchor:
            assert anchor in anchors(path), f"{target}: no heading with that anchor"


def test_the_readme_points_at_every_docs_page_and_every_page_is_in_the_site():
    linked = {t.partition("#")[0] for t in LINK.findall((REPO / "README.md").read_text())}
    pages = {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")}
    assert len(pages) >= 8 and pages <= linked, pages - linked
    nav = (REPO / "mkdocs.yml").read_text()
    assert all(re.search(rf"^\s+- .+: {p.removeprefix('docs/')}$", nav, re.M) for p in pages)
