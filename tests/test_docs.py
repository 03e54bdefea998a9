"""The README is a short map and docs/ holds one page per topic: every relative link resolves
(the file, and the heading when the link names one), the README stays under 300 lines, and no
page carries a dated note."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
DATED_NOTE = re.compile(r"this stop|\b20\d\d-\d\d-\d\d\b(?!T)", re.IGNORECASE)


def _prose(page: Path) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks, with their numbers."""
    lines, fenced = [], False
    for number, line in enumerate(page.read_text("utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def _anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation but `-` and `_` dropped, spaces to `-`,
    a repeated id numbered."""
    seen: dict[str, int] = {}
    anchors = set()
    for _, line in _prose(page):
        match = HEADING.match(line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _links(page: Path) -> list[tuple[int, str]]:
    return [
        (number, target)
        for number, line in _prose(page)
        for target in LINK.findall(line)
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto:
    ]


def test_the_readme_is_a_short_map():
    lines = (ROOT / "README.md").read_text("utf-8").splitlines()
    assert len(lines) < 300, f"README.md has {len(lines)} lines: move the topic to a docs/ page"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path):
    broken = []
    for number, target in _links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{page.name}:{number}: {target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{page.name}:{number}: {target}: no such heading")
    assert not broken, "\n".join(broken)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / target.partition("#")[0]).resolve() for _, target in _links(PAGES[0])}
    unlinked = [p.name for p in PAGES[1:] if p.resolve() not in linked]
    assert not unlinked, f"add these docs pages to the README's list: {unlinked}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_dated_notes(page: Path):
    dated = [
        f"{page.name}:{n}: {line.strip()}"
        for n, line in _prose(page)
        if DATED_NOTE.search(re.sub(r"`[^`]*`", "", line))  # a log line quoted may hold a date
    ]
    assert not dated, "write it as a present-tense fact, without the date:\n" + "\n".join(dated)


def test_the_link_check_finds_a_broken_link_and_a_missing_heading(tmp_path: Path):
    page = tmp_path / "page.md"
    other = tmp_path / "other.md"
    other.write_text("# Other\n\n## A `code` heading: here\n", "utf-8")
    page.write_text(
        "[ok](other.md#a-code-heading-here) [gone](missing.md) [bad](other.md#nope)\n"
        "```\n[in code](ignored.md)\n```\n[web](https://example.com)\n",
        "utf-8",
    )
    targets = [target for _, target in _links(page)]
    assert targets == ["other.md#a-code-heading-here", "missing.md", "other.md#nope"]
    assert _anchors(other) == {"other", "a-code-heading-here"}
