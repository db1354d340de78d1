"""The README stays the short page a newcomer reads first: its two commands are the ones the
getting-started page shows (and test_docs_commands.py runs), and its links lead somewhere."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")


def blocks(text: str, fence: str) -> list[str]:
    return [b.strip() for b in re.findall(rf"```{fence}\n(.*?)```", text, re.S)]


def test_the_readme_shows_the_getting_started_commands() -> None:
    section = README.split("## The two commands\n", 1)[1].split("\n## ", 1)[0]
    demo, tests = blocks(section, "")
    page = blocks((REPO / "docs/getting-started.md").read_text(encoding="utf-8"), "shell")
    assert demo == page[0] and tests == page[-1]


def test_every_relative_link_of_the_readme_exists() -> None:
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    assert links, "the README links to the documentation"
    missing = [link for link in links if "://" not in link and not (REPO / link).exists()]
    assert not missing, missing


def test_the_readme_fits_a_first_read() -> None:
    lines = len(README.splitlines())
    assert lines <= 160, f"README.md has {lines} lines: move the detail to a page under docs/"
