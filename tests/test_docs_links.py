"""The documentation's links lead somewhere: every relative link in README.md and docs/ names a file
of the checkout (and a heading of it, when it names one), and every docs/ path the code and tests
cite exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
CITED = re.compile(r"docs/[\w./-]*\w")
CODE_DIRS = ("harness", "reports", "benches", "tests", "scripts")


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def broken_links(page: Path) -> list[str]:
    """The page's relative links whose file, or heading in it, does not exist."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    broken = []
    for target in LINK.findall(text):
        # https:, mailto:
        if re.match(r"[a-z]+:", target):
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target} (no such heading)")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_of_a_page_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_every_docs_path_the_code_cites_exists() -> None:
    cited = {
        (source.relative_to(ROOT), path)
        for folder in CODE_DIRS
        for source in (ROOT / folder).rglob("*")
        if source.is_file() and source.suffix in ("", ".py") and "__pycache__" not in source.parts
        for path in CITED.findall(source.read_text(encoding="utf-8", errors="replace"))
    }
    assert [
        (str(source), path) for source, path in sorted(cited) if not (ROOT / path).exists()
    ] == []


def test_a_moved_page_and_a_missing_heading_are_caught(tmp_path: Path) -> None:
    (tmp_path / "here.md").write_text("# Here\n\n## A `code` heading's title\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](here.md#a-code-headings-title) [gone](moved.md) [bad](here.md#nowhere)\n"
        "```\n[in code](ignored.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page) == ["moved.md (no such file)", "here.md#nowhere (no such heading)"]
