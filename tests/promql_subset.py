"""A small PromQL evaluator for the tests: enough of the language for the agent-substrate
preset's queries and the upstream dashboards' (docs/guide/server-metrics.md), evaluated at one
instant over counters that a `Samples` source gives at any time.

Supported: selectors `name{k="v", k!="v", k=~"re", k!~"re"}` (a missing label is ""),
`rate(sel[d])` and `increase(sel[d])` from the two values at the range's edges (a drop is a
reset: the later value is the increase), `sum [by (labels)] (expr)`,
`histogram_quantile(q, expr)` (linear inside the bucket, the last finite bound past it), a
number, and `a / b` matching label sets one to one. Durations: ms, s, m, h.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

Labels = tuple[tuple[str, str], ...]
Vector = dict[Labels, float]
# (metric name, labels) -> value at a time: a scrape, or a series' state then.
Samples = Callable[[float], dict[tuple[str, Labels], float]]

_TOKEN = re.compile(
    r'\s*(?:(?P<num>\d+(?:\.\d+)?(?:ms|s|m|h)?)|(?P<str>"(?:[^"\\]|\\.)*")|'
    r"(?P<op>=~|!~|!=|[(){}\[\],=/])|(?P<id>[A-Za-z_:$][A-Za-z0-9_:]*))"
)
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class PromQLError(ValueError):
    pass


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text.rstrip()):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise PromQLError(f"cannot read {text[pos:]!r}")
        out.append(m.group().strip())
        pos = m.end()
    return out


def duration(text: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    if m is None:
        raise PromQLError(f"bad duration {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


@dataclass
class _Parser:
    tokens: list[str]
    pos: int = 0

    def peek(self) -> str:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if expected is not None and token != expected:
            raise PromQLError(f"expected {expected!r}, got {token!r}")
        self.pos += 1
        return token

    def expr(self) -> Callable[[Samples, float], Vector]:
        left = self.term()
        while self.peek() == "/":
            self.take()
            right, first = self.term(), left
            left = lambda s, t, a=first, b=right: _divide(a(s, t), b(s, t))  # noqa: E731
        return left

    def term(self) -> Callable[[Samples, float], Vector]:
        token = self.take()
        if token == "(":
            inner = self.expr()
            self.take(")")
            return inner
        if re.fullmatch(r"\d+(?:\.\d+)?", token):
            return lambda s, t, v=float(token): {(): v}
        if token == "sum":
            by = self.grouping()
            self.take("(")
            inner = self.expr()
            self.take(")")
            by = by if by is not None else self.grouping()
            return lambda s, t: _sum(inner(s, t), by or ())
        if token in ("rate", "increase"):
            self.take("(")
            name, matchers = self.selector(self.take())
            self.take("[")
            span = duration(self.take())
            self.take("]")
            self.take(")")
            per_second = token == "rate"
            return lambda s, t: _ranged(s, t, name, matchers, span, per_second)
        if token == "histogram_quantile":
            self.take("(")
            q = float(self.take())
            self.take(",")
            inner = self.expr()
            self.take(")")
            return lambda s, t: _quantile(q, inner(s, t))
        name, matchers = self.selector(token)
        return lambda s, t: {
            k: v for (n, k), v in s(t).items() if n == name and _match(k, matchers)
        }

    def grouping(self) -> tuple[str, ...] | None:
        if self.peek() != "by":
            return None
        self.take()
        self.take("(")
        labels = []
        while self.peek() != ")":
            labels.append(self.take())
            if self.peek() == ",":
                self.take()
        self.take(")")
        return tuple(labels)

    def selector(self, name: str) -> tuple[str, list[tuple[str, str, str]]]:
        matchers = []
        if self.peek() == "{":
            self.take()
            while self.peek() != "}":
                label, op, text = self.take(), self.take(), self.take()
                matchers.append((label, op, text[1:-1].replace('\\"', '"')))
                if self.peek() == ",":
                    self.take()
            self.take("}")
        return name, matchers


def _match(labels: Labels, matchers: list[tuple[str, str, str]]) -> bool:
    have = dict(labels)
    for label, op, text in matchers:
        value = have.get(label, "")
        ok = {
            "=": value == text,
            "!=": value != text,
            "=~": re.fullmatch(text, value) is not None,
            "!~": re.fullmatch(text, value) is None,
        }[op]
        if not ok:
            return False
    return True


def _ranged(
    samples: Samples,
    t: float,
    name: str,
    matchers: list[tuple[str, str, str]],
    span: float,
    per_second: bool,
) -> Vector:
    now, then = samples(t), samples(t - span)
    out: Vector = {}
    for (n, labels), value in now.items():
        if n != name or not _match(labels, matchers) or (n, labels) not in then:
            continue  # PromQL needs two points in the range
        before = then[(n, labels)]
        increase = value - before if value >= before else value
        out[labels] = increase / span if per_second else increase
    return out


def _sum(vector: Vector, by: tuple[str, ...]) -> Vector:
    out: Vector = {}
    for labels, value in vector.items():
        key = tuple((k, v) for k, v in labels if k in by)
        out[key] = out.get(key, 0.0) + value
    return out


def _divide(a: Vector, b: Vector) -> Vector:
    return {k: v / b[k] for k, v in a.items() if k in b and b[k] != 0}


def _quantile(q: float, vector: Vector) -> Vector:
    groups: dict[Labels, list[tuple[float, float]]] = {}
    for labels, value in vector.items():
        le = dict(labels).get("le")
        if le is None:
            continue
        rest = tuple((k, v) for k, v in labels if k != "le")
        groups.setdefault(rest, []).append((float(le), value))
    out: Vector = {}
    for rest, buckets in groups.items():
        buckets.sort()
        total = buckets[-1][1] if buckets and math.isinf(buckets[-1][0]) else 0.0
        if total <= 0:
            continue
        rank, lower, below = q * total, 0.0, 0.0
        for bound, count in buckets:
            if count >= rank:
                if math.isinf(bound):
                    out[rest] = lower
                else:
                    share = (rank - below) / (count - below) if count > below else 1.0
                    out[rest] = lower + (bound - lower) * share
                break
            lower, below = bound, count
    return out


def evaluate(query: str, samples: Samples, t: float) -> Vector:
    """The instant vector of `query` at time `t`."""
    parser = _Parser(_tokens(query))
    compiled = parser.expr()
    if parser.pos != len(parser.tokens):
        raise PromQLError(f"unexpected {parser.peek()!r} in {query!r}")
    return compiled(samples, t)


def scrapes_source(scrapes: list[tuple[float, dict[tuple[str, Labels], float]]]) -> Samples:
    """A Samples of scrapes taken at their times: at t, the last scrape at or before t."""
    ordered = sorted(scrapes, key=lambda s: s[0])

    def at(t: float) -> dict[tuple[str, Labels], float]:
        found = [values for taken, values in ordered if taken <= t + 1e-9]
        return found[-1] if found else {}

    return at


def parse_exposition(text: str) -> dict[tuple[str, Labels], float]:
    """A Prometheus text exposition as {(sample name, labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[tuple[str, Labels], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = float(sample.value)
    return out


__all__ = ["PromQLError", "Samples", "evaluate", "parse_exposition", "scrapes_source"]
