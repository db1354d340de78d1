"""Reading back the Markdown tables `agentsession gate --summary` writes, as a Markdown
reader does (GFM): a row's cells split at each `|` that is not backslash-escaped, each cell's
backslash escapes undone and its `<br>` a line break. Written here, apart from the renderer,
so a test checks the cells against gate.json's values rather than the renderer's own code."""

from __future__ import annotations

import re


def cells(row: str) -> list[str]:
    """The cells of one table row, unescaped."""
    assert row.startswith("|") and row.endswith("|"), row
    out, cell, i = [], "", 1
    while i < len(row) - 1:
        char = row[i]
        if char == "\\" and i + 1 < len(row) - 1:
            cell += row[i : i + 2]
            i += 2
            continue
        if char == "|":
            out.append(cell)
            cell = ""
        else:
            cell += char
        i += 1
    out.append(cell)
    return [unescape(c.strip()) for c in out]


def unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text.replace("<br>", "\n"))


def tables(markdown: str) -> list[list[list[str]]]:
    """Every table in the text: its rows (the header first, the delimiter row left out)."""
    found: list[list[list[str]]] = []
    rows: list[list[str]] = []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            rows.append(cells(line))
            continue
        if rows:
            assert set("".join(rows[1])) <= {"-", ":", " "}, rows[1]  # the delimiter row
            found.append([rows[0], *rows[2:]])
            rows = []
    return found


def table_after(markdown: str, heading: str) -> list[dict[str, str]]:
    """The first table after the line that starts with `heading`, as {column: cell} rows."""
    rest = markdown[markdown.index(heading) :]
    head, *rows = tables(rest)[0]
    for row in rows:
        assert len(row) == len(head), (head, row)  # no cell split by a stray `|`
    return [dict(zip(head, row, strict=True)) for row in rows]


def number(cell: str) -> float:
    """The number a cell starts with: `40.2 ms` → 40.2, `1.20 s` → 1200 (ms), `+101.4%` →
    1.014, `4.00/s` → 4.0."""
    match = re.match(r"([+-]?\d+(?:\.\d+)?)\s*(ms|s|%|/s)?", cell)
    assert match, cell
    value, unit = float(match.group(1)), match.group(2)
    if unit == "s":
        return value * 1000
    if unit == "%":
        return value / 100
    return value
