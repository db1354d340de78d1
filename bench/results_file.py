"""bench/RESULTS.md holds one section per bench script between the script's own markers
(`<!-- NAME:begin -->` … `<!-- NAME:end -->`), so rewriting one script's figures keeps the
others'."""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_section(name: str, body: str, path: Path = RESULTS) -> None:
    """`body` (markdown, without the markers) replaces the section `name`, or is appended."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = path.read_text() if path.exists() else "# Benchmark results\n"
    block = f"{begin}\n{body.strip(chr(10))}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def publish(name: str, body: str, notes: Path | None = None) -> None:
    """A bench script's report step: `body` with `notes` (markdown) appended, written as
    section `name` and printed."""
    if notes is not None:
        body += "\n" + notes.read_text()
    write_section(name, body)
    print(body)
