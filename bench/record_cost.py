"""Cost of booking one request sample: Row.ok on the hot path plus its share of the flush.

Prints one JSON line. Run: .venv/bin/python bench/record_cost.py [samples]
"""

from __future__ import annotations

import json
import sys
import time

from agentsession_core.measure.recorder import NS_PER_S, Recorder


def main(samples: int = 200_000, rows: int = 10) -> dict:
    fake_now = [10**12]
    recorder = Recorder(clock_ns=lambda: fake_now[0], wall_clock=lambda: 1_700_000_000.0)
    handles = [recorder.row("http", f"Step_{i:02d}") for i in range(rows)]
    per_second = 2_000  # the offered rate: 2,000 req/s
    # Pre-build timestamps so the loop measures booking, not arithmetic.
    stamps = [(fake_now[0] + i * (NS_PER_S // per_second)) for i in range(samples)]
    record_ns = 0
    flush_ns = 0
    for chunk_start in range(0, samples, per_second):
        chunk = stamps[chunk_start : chunk_start + per_second]
        t0 = time.perf_counter_ns()
        for i, t in enumerate(chunk):
            handles[i % rows].ok(t, t + 50_000, t + 3_000_000 + (i % 977) * 10_000, 512)
        t1 = time.perf_counter_ns()
        fake_now[0] = chunk[-1] + NS_PER_S
        recorder.flush()
        t2 = time.perf_counter_ns()
        record_ns += t1 - t0
        flush_ns += t2 - t1
    total = recorder.totals().aggregate().count
    assert total == samples, (total, samples)
    return {
        "bench": "record_cost",
        "samples": samples,
        "rows": rows,
        "record_ns_per_sample": round(record_ns / samples, 1),
        "flush_ns_per_sample": round(flush_ns / samples, 1),
        "total_ns_per_sample": round((record_ns + flush_ns) / samples, 1),
        "python": sys.version.split()[0],
    }


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    print(json.dumps(main(n)))
