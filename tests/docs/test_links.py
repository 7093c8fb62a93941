"""Every relative link of README.md and docs/ resolves: to a file, and to a heading of it.

Links are read outside code (fenced blocks and inline code are skipped); ``http(s)``/``mailto``
links are left alone. A ``#fragment`` must be the GitHub anchor of a heading of the target
Markdown file (lowercased, punctuation dropped, spaces to hyphens, ``-1``, ``-2`` for repeats).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__: list[str] = []

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def unfenced(text: str) -> str:
    """``text`` without its fenced code blocks."""
    return re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.MULTILINE | re.DOTALL)


def prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code."""
    return re.sub(r"`[^`\n]*`", "", unfenced(text))


def links(text: str) -> Iterator[str]:
    for match in LINK.finditer(prose(text)):
        target = match.group(1)
        if not EXTERNAL.match(target):
            yield target


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"[`*_]", "", text).strip().lower()  # emphasis and code marks go
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    found: set[str] = set()
    counts: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", unfenced(text), flags=re.MULTILINE):
        base = slug(heading)
        n = counts.get(base, 0)
        counts[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def broken(page: Path) -> list[str]:
    """The links of ``page`` that do not resolve, each with why."""
    text = page.read_text(encoding="utf-8")
    bad = []
    for target in links(text):
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            bad.append(f"{target}: no file {file}")
        elif fragment and file.suffix == ".md" and fragment not in anchors(
                file.read_text(encoding="utf-8")):
            bad.append(f"{target}: no heading #{fragment} in {file.name}")
    return bad


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken(page) == []


def test_the_checks_see_a_broken_link_and_a_missing_anchor(tmp_path: Path) -> None:
    (tmp_path / "b.md").write_text("# The `Jobs` page, again!\n## Jobs\n## Jobs\n")
    page = tmp_path / "a.md"
    page.write_text("[ok](b.md#the-jobs-page-again) [ok](b.md#jobs-1) ![x](b.md)\n"
                    "[bad](c.md) [bad](b.md#nope) [web](https://x.org/y) `[code](d.md)`\n"
                    "```\n[fenced](e.md)\n```\n")
    assert [entry.split(":")[0] for entry in broken(page)] == ["c.md", "b.md#nope"]
