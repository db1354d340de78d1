"""Log-bucketed latency histograms: bounded relative error, mergeable by adding counts.

The bucket layout is fixed for the whole package (a DDSketch-style logarithmic mapping), so
two histograms recorded anywhere (another second, another shard, another process) merge by
plain addition of their count arrays and percentiles are never averaged.

Values are milliseconds. Bucket ``i`` holds values in ``(GAMMA**(i-1), GAMMA**i]`` and reports
``2 * GAMMA**i / (GAMMA + 1)``, which is within ``RELATIVE_ACCURACY`` of every value in it.
Values at or below ``MIN_MS`` (1 µs, including clock noise below zero) share a zero bucket
reported as 0; values above ``MAX_MS`` (~28 h) are clamped into the top bucket. The exact
min and max are kept beside the buckets, and quantiles are clamped to them.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from typing import Any

import numpy as np

# A hair under 1 % so that float rounding at a bucket edge never pushes a value past 1 %.
RELATIVE_ACCURACY = 0.0099
GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
_LOG_GAMMA = math.log(GAMMA)
MIN_MS = 1e-3
MAX_MS = 1e8
_MIN_INDEX = math.ceil(math.log(MIN_MS) / _LOG_GAMMA)
_MAX_INDEX = math.ceil(math.log(MAX_MS) / _LOG_GAMMA)
NUM_BUCKETS = _MAX_INDEX - _MIN_INDEX + 1
# Representative value of each dense slot (slot j is bucket _MIN_INDEX + j).
_INDICES = np.arange(_MIN_INDEX, _MAX_INDEX + 1, dtype=np.float64)
_BUCKET_VALUES = 2.0 * GAMMA**_INDICES / (GAMMA + 1)
# Upper edge of each slot: every value in slot j is <= _BUCKET_UPPER[j].
_BUCKET_UPPER = GAMMA**_INDICES

# The one table of named quantiles. Every consumer takes its subset from here by name, so a
# key such as "p99_9" means the same quantile in stats.jsonl, the CSVs, thresholds and gates.
PERCENTILES: dict[str, float] = {
    "p50": 0.5,
    "p66": 0.66,
    "p75": 0.75,
    "p80": 0.8,
    "p90": 0.9,
    "p95": 0.95,
    "p98": 0.98,
    "p99": 0.99,
    "p99_9": 0.999,
    "p99_99": 0.9999,
    "p100": 1.0,
}


def percentiles(names: Iterable[str]) -> dict[str, float]:
    """The named entries of PERCENTILES, in the order given (KeyError for an unknown name)."""
    return {name: PERCENTILES[name] for name in names}


def percentiles_through(last: str) -> dict[str, float]:
    """PERCENTILES from p50 up to and including `last`."""
    names = list(PERCENTILES)
    return percentiles(names[: names.index(last) + 1])


def slot_of(value_ms: float) -> int:
    """Dense slot of one value; -1 means the zero bucket."""
    if not value_ms > MIN_MS:  # also catches NaN
        return -1
    if value_ms >= MAX_MS:
        return NUM_BUCKETS - 1
    return math.ceil(math.log(value_ms) / _LOG_GAMMA) - _MIN_INDEX


def slots_of(values_ms: np.ndarray) -> np.ndarray:
    """Vectorised slot_of: int64 slots, -1 for the zero bucket."""
    v = np.asarray(values_ms, dtype=np.float64)
    out = np.full(v.shape, -1, dtype=np.int64)
    positive = v > MIN_MS
    if positive.any():
        clipped = np.minimum(v[positive], MAX_MS)
        out[positive] = np.ceil(np.log(clipped) / _LOG_GAMMA).astype(np.int64) - _MIN_INDEX
        np.clip(out, -1, NUM_BUCKETS - 1, out=out)
    return out


def _rank(q: float, count: int) -> int:
    """1-based rank of the q-quantile: the smallest rank holding at least q of the samples."""
    return min(count, max(1, math.ceil(q * count - 1e-9)))


class LogHistogram:
    """A latency histogram in milliseconds with ≤ 1 % relative error at every quantile."""

    __slots__ = ("_counts", "count", "max", "min", "total", "zero")

    def __init__(self) -> None:
        self._counts = np.zeros(NUM_BUCKETS, dtype=np.int64)
        self.zero = 0
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = -math.inf

    def add(self, value_ms: float) -> None:
        slot = slot_of(value_ms)
        if slot < 0:
            self.zero += 1
        else:
            self._counts[slot] += 1
        self.count += 1
        self.total += value_ms
        if value_ms < self.min:
            self.min = value_ms
        if value_ms > self.max:
            self.max = value_ms

    def add_many(self, values_ms: Iterable[float] | np.ndarray) -> None:
        v = np.asarray(
            values_ms if isinstance(values_ms, np.ndarray) else list(values_ms), dtype=np.float64
        )
        if v.size == 0:
            return
        slots = slots_of(v)
        in_buckets = slots >= 0
        self.zero += int(v.size - np.count_nonzero(in_buckets))
        self._counts += np.bincount(slots[in_buckets], minlength=NUM_BUCKETS)
        self.count += int(v.size)
        self.total += float(v.sum())
        self.min = min(self.min, float(v.min()))
        self.max = max(self.max, float(v.max()))

    def add_sparse(self, part: SparseHistogram) -> None:
        zero, total, lo, hi = part.head()
        counts = part.counts
        n = zero + int(counts.sum())
        if n == 0:
            return
        # Sparse slots are unique, so plain fancy-index addition is exact (no np.add.at needed).
        self._counts[part.slots] += counts
        self.zero += zero
        self.count += n
        self.total += total
        self.min = min(self.min, lo)
        self.max = max(self.max, hi)

    def merge(self, other: LogHistogram) -> None:
        if other.count == 0:
            return
        self._counts += other._counts
        self.zero += other.zero
        self.count += other.count
        self.total += other.total
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)

    def subtract(self, other: LogHistogram) -> LogHistogram:
        """Counts of self minus other (other must be a sub-histogram); min/max stay self's."""
        out = self.copy()
        out._counts -= other._counts
        out.zero -= other.zero
        out.count -= other.count
        out.total -= other.total
        return out

    def copy(self) -> LogHistogram:
        out = LogHistogram.__new__(LogHistogram)
        out._counts = self._counts.copy()
        out.zero = self.zero
        out.count = self.count
        out.total = self.total
        out.min = self.min
        out.max = self.max
        return out

    def quantile(self, q: float) -> float:
        if self.count == 0:
            return 0.0
        if not 0.0 <= q <= 1.0:
            raise ValueError(f"quantile: q={q} is outside [0, 1]")
        rank = _rank(q, self.count)
        if rank == self.count:
            return self.max
        if rank == 1:
            return self.min
        if rank <= self.zero:
            return min(max(self.min, 0.0), self.max)
        cumulative = np.cumsum(self._counts)
        slot = int(np.searchsorted(cumulative, rank - self.zero, side="left"))
        value = float(_BUCKET_VALUES[slot])
        return min(max(value, self.min), self.max)

    def quantiles(self, qs: dict[str, float]) -> dict[str, float]:
        return {key: self.quantile(q) for key, q in qs.items()}

    def count_at_or_below(self, bound_ms: float) -> int:
        """Samples whose bucket lies wholly at or below bound_ms (for Prometheus `le` buckets)."""
        upto = int(np.searchsorted(_BUCKET_UPPER, bound_ms, side="right"))
        return self.zero + int(self._counts[:upto].sum())

    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LogHistogram):
            return NotImplemented
        return (
            self.count == other.count
            and self.zero == other.zero
            and bool(np.array_equal(self._counts, other._counts))
            and (self.count == 0 or (self.min == other.min and self.max == other.max))
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        p50, p99 = self.quantile(PERCENTILES["p50"]), self.quantile(PERCENTILES["p99"])
        top = self.max if self.count else 0.0
        return f"LogHistogram(count={self.count}, p50={p50:.3f}, p99={p99:.3f}, max={top:.3f})"

    def to_dict(self) -> dict[str, Any]:
        nz = np.flatnonzero(self._counts)
        return {
            "alpha": RELATIVE_ACCURACY,
            "min_index": _MIN_INDEX,
            "count": self.count,
            "zero": self.zero,
            "total": self.total,
            "min": self.min if self.count else 0.0,
            "max": self.max if self.count else 0.0,
            "slots": nz.tolist(),
            "counts": self._counts[nz].tolist(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LogHistogram:
        if d.get("alpha") != RELATIVE_ACCURACY or d.get("min_index") != _MIN_INDEX:
            raise ValueError(
                f"histogram layout alpha={d.get('alpha')} min_index={d.get('min_index')} "
                f"differs from this build's alpha={RELATIVE_ACCURACY} min_index={_MIN_INDEX}"
            )
        out = cls()
        slots = np.asarray(d["slots"], dtype=np.int64)
        counts = np.asarray(d["counts"], dtype=np.int64)
        if slots.size and (slots.min() < 0 or slots.max() >= NUM_BUCKETS):
            raise ValueError("histogram slots out of range")
        np.add.at(out._counts, slots, counts)
        out.zero = int(d["zero"])
        out.count = int(d["count"])
        if out.count != out.zero + int(counts.sum()):
            raise ValueError(f"histogram count {out.count} != sum of buckets")
        out.total = float(d["total"])
        if out.count:
            out.min = float(d["min"])
            out.max = float(d["max"])
        return out


def quantile_of_counts(
    counts: np.ndarray, slots: np.ndarray, q: float, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray:
    """LogHistogram.quantile for many histograms at once (a bootstrap's replicates): `counts`
    is (R, K + 1) with the zero bucket in column 0 and slot `slots[j]` in column j + 1; `lo`
    and `hi` each replicate's min and max. The same rank rule and clamping as quantile(), so
    an interval's ends and the figure itself come from one definition (0 for an empty one)."""
    counts = np.asarray(counts, dtype=np.int64)
    n = counts.sum(axis=1)
    rank = np.minimum(n, np.maximum(1, np.ceil(q * n - 1e-9).astype(np.int64)))
    cumulative = np.cumsum(counts, axis=1)
    column = (cumulative < rank[:, None]).sum(axis=1)
    column = np.minimum(column, counts.shape[1] - 1)
    values = np.where(
        column == 0,
        0.0,
        _BUCKET_VALUES[np.asarray(slots, dtype=np.int64)[np.maximum(column - 1, 0)]]
        if len(slots)
        else 0.0,
    )
    values = np.minimum(np.maximum(values, lo), hi)
    values = np.where(rank == 1, lo, values)
    values = np.where(rank == n, hi, values)
    return np.where(n == 0, 0.0, values)


# SparseHistogram's one buffer: zero (int64), total, min, max (float64), then the counts
# (int64, so they sit 8-aligned at 32) and the slots (int16).
_SPARSE_HEAD = struct.Struct("<qddd")
_HEAD = _SPARSE_HEAD.size


class SparseHistogram(bytes):
    """The compact form kept per second per row: only the non-empty buckets.

    The recorder keeps one per second per row and latency view for the whole run (docs/SPEC.md
    §5.4), so its size is what a long hold grows by. It is one bytes object (about 100 bytes
    for a second with a few buckets, where two numpy arrays and four Python numbers in a
    tuple took about 420; bench/RESULTS.md, fault soak): the head (zero, total, min, max),
    then the counts and the slots, which `counts` and `slots` view without copying."""

    __slots__ = ()

    def __new__(
        cls,
        slots: np.ndarray,
        counts: np.ndarray,
        zero: int,
        total: float,
        min: float,
        max: float,
    ) -> SparseHistogram:
        return super().__new__(
            cls,
            _SPARSE_HEAD.pack(int(zero), float(total), float(min), float(max))
            + np.asarray(counts, dtype=np.int64).tobytes()
            + np.asarray(slots, dtype=np.int16).tobytes(),
        )

    @property
    def size(self) -> int:
        """How many non-empty buckets."""
        return (len(self) - _HEAD) // 10

    @property
    def counts(self) -> np.ndarray:
        return np.frombuffer(self, dtype=np.int64, count=self.size, offset=_HEAD)

    @property
    def slots(self) -> np.ndarray:
        n = self.size
        return np.frombuffer(self, dtype=np.int16, count=n, offset=_HEAD + 8 * n)

    def head(self) -> tuple[int, float, float, float]:
        """(zero, total, min, max) in one read."""
        zero, total, lo, hi = _SPARSE_HEAD.unpack_from(self)
        return zero, total, lo, hi

    @property
    def zero(self) -> int:
        return self.head()[0]

    @property
    def total(self) -> float:
        return self.head()[1]

    @property
    def min(self) -> float:
        return self.head()[2]

    @property
    def max(self) -> float:
        return self.head()[3]

    # Shadows bytes.count on purpose: every histogram here answers .count with its samples.
    @property
    def count(self) -> int:  # type: ignore[override]
        return self.zero + int(self.counts.sum())

    def __repr__(self) -> str:
        zero, _, lo, hi = self.head()
        return f"SparseHistogram(count={self.count}, zero={zero}, min={lo}, max={hi})"

    def __reduce__(self) -> tuple[Any, ...]:  # pickled as its buffer (shards, Dask)
        return (_sparse_of_bytes, (bytes(self),))

    @classmethod
    def of_values(cls, values_ms: np.ndarray) -> SparseHistogram:
        v = np.asarray(values_ms, dtype=np.float64)
        if v.size == 0:
            return EMPTY_SPARSE
        slots = slots_of(v)
        positive = slots >= 0
        dense = np.bincount(slots[positive], minlength=NUM_BUCKETS)
        nz = np.flatnonzero(dense)
        return cls(
            nz,
            dense[nz],
            int(v.size - np.count_nonzero(positive)),
            float(v.sum()),
            float(v.min()),
            float(v.max()),
        )

    @classmethod
    def of_rows(cls, values_ms: np.ndarray) -> list[SparseHistogram]:
        """One sparse histogram per row of a 2-D array, bucketed in a single numpy pass."""
        v = np.asarray(values_ms, dtype=np.float64)
        k, n = v.shape
        if n == 0:
            return [EMPTY_SPARSE] * k
        slots = slots_of(v)
        positive = slots >= 0
        shifted = slots + (np.arange(k, dtype=np.int64) * NUM_BUCKETS)[:, None]
        dense = np.bincount(shifted[positive], minlength=k * NUM_BUCKETS).reshape(k, NUM_BUCKETS)
        zeros = n - np.count_nonzero(positive, axis=1)
        totals, mins, maxs = v.sum(axis=1), v.min(axis=1), v.max(axis=1)
        out = []
        for i in range(k):
            nz = np.flatnonzero(dense[i])
            out.append(
                cls(
                    nz,
                    dense[i, nz],
                    int(zeros[i]),
                    float(totals[i]),
                    float(mins[i]),
                    float(maxs[i]),
                )
            )
        return out

    def merged(self, other: SparseHistogram) -> SparseHistogram:
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        zero, total, lo, hi = self.head()
        zero2, total2, lo2, hi2 = other.head()
        both = np.concatenate((self.slots, other.slots))
        uniq, inverse = np.unique(both, return_inverse=True)
        counts = np.bincount(inverse, weights=np.concatenate((self.counts, other.counts)))
        return SparseHistogram(
            uniq, counts.astype(np.int64), zero + zero2, total + total2, min(lo, lo2), max(hi, hi2)
        )

    def to_histogram(self) -> LogHistogram:
        return merge_sparse((self,))


def _sparse_of_bytes(data: bytes) -> SparseHistogram:
    return bytes.__new__(SparseHistogram, data)


EMPTY_SPARSE = SparseHistogram(
    np.zeros(0, dtype=np.int16), np.zeros(0, dtype=np.int64), 0, 0.0, math.inf, -math.inf
)


def merge_sparse(parts: Iterable[SparseHistogram]) -> LogHistogram:
    """One dense histogram from many sparse ones (a window over many seconds) in one pass."""
    out = LogHistogram()
    slot_chunks: list[np.ndarray] = []
    count_chunks: list[np.ndarray] = []
    for part in parts:
        zero, total, lo, hi = part.head()
        if zero == 0 and part.size == 0:
            continue
        slot_chunks.append(part.slots)
        count_chunks.append(part.counts)
        out.zero += zero
        out.total += total
        out.min = min(out.min, lo)
        out.max = max(out.max, hi)
    if not slot_chunks:
        return out
    slots = np.concatenate(slot_chunks).astype(np.int64)
    counts = np.concatenate(count_chunks)
    out._counts += np.bincount(slots, weights=counts, minlength=NUM_BUCKETS).astype(np.int64)
    out.count = out.zero + int(counts.sum())
    return out
