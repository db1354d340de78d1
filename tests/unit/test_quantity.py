"""Kubernetes quantities and Go durations: every accepted form, every rejected one."""

import pytest

from agentsession_core.script.quantity import (
    QuantityError,
    format_duration,
    format_quantity,
    parse_duration,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        (1, 1),
        (1048576, 1048576),
        ("1", 1),
        ("4096", 4096),
        ("1k", 1000),
        ("2M", 2_000_000),
        ("3G", 3 * 10**9),
        ("1T", 10**12),
        ("1P", 10**15),
        ("1E", 10**18),
        ("1Ki", 1024),
        ("64Ki", 65536),
        ("32Mi", 32 * 2**20),
        ("1Gi", 2**30),
        ("2Ti", 2 * 2**40),
        ("1Pi", 2**50),
        ("1Ei", 2**60),
        ("98.5Mi", 103284736),
        ("0.5Ki", 512),
        (".5Ki", 512),
        ("1.Ki", 1024),
        ("1e6", 10**6),
        ("1E6", 10**6),
        ("1e+3", 1000),
        ("1.5e3", 1500),
        ("2000e-3", 2),
        ("+1Mi", 2**20),
        ("007", 7),
    ],
)
def test_quantity_forms(text, size):
    assert parse_quantity(text) == size


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0", "must be positive"),
        (0, "must be positive"),
        ("0Gi", "must be positive"),
        ("-1Gi", "must be positive"),
        (-5, "must be positive"),
        ("1.5", "not a whole number of bytes"),
        ("0.1Ki", "not a whole number of bytes"),
        ("1e-3", "not a whole number of bytes"),
        ("1m", "bad size"),  # milli-bytes: Kubernetes has it, bytes do not
        ("1KB", "bad size"),
        ("1kb", "bad size"),
        ("1 Gi", "bad size"),
        ("Gi", "bad size"),
        ("", "bad size"),
        ("1Gi ", "bad size"),
        ("0x10", "bad size"),
        ("1e", "bad size"),
        ("1e999999999", "out of range"),
        ("10E", "too large"),
        (1.5, "got float"),
        (1024.0, "got float"),
        (True, "got bool"),
        (None, "got NoneType"),
        ([1], "got list"),
    ],
)
def test_quantity_rejects(text, message):
    with pytest.raises(QuantityError, match=message):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (1, "1"),
        (1000, "1000"),
        (1023, "1023"),
        (1024, "1Ki"),
        (65536, "64Ki"),
        (103284736, "100864Ki"),
        (32 * 2**20, "32Mi"),
        (2**30, "1Gi"),
        (3 * 2**40, "3Ti"),
        (2**50, "1Pi"),
        (5 * 2**60, "5Ei"),
        (10**6, "1000000"),
    ],
)
def test_quantity_canonical_form(size, text):
    assert format_quantity(size) == text
    assert parse_quantity(text) == size


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("0", 0),
        ("1ns", 1),
        ("3us", 3000),
        ("3µs", 3000),  # micro sign
        ("3μs", 3000),  # Greek mu
        ("500ms", 500 * 10**6),
        ("2s", 2 * 10**9),
        ("1.5s", 1_500_000_000),
        (".5s", 500_000_000),
        ("1.s", 10**9),
        ("55m", 55 * 60 * 10**9),
        ("1h30m", 90 * 60 * 10**9),
        ("1h0m0s", 3600 * 10**9),
        ("1.5h", 90 * 60 * 10**9),
        ("1m30.25s", 90_250_000_000),
        ("2h45m10s500ms", ((2 * 60 + 45) * 60 + 10) * 10**9 + 500 * 10**6),
        ("+2s", 2 * 10**9),
        ("-2s", -2 * 10**9),
        ("-1.5h", -90 * 60 * 10**9),
    ],
)
def test_duration_forms(text, ns):
    assert parse_duration(text) == ns


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("-", "empty"),
        ("2", "missing unit"),
        ("1.5", "missing unit"),
        ("s", "expected a number"),
        (".s", "expected a number"),
        ("1d", "unknown unit 'd'"),
        ("1sec", "unknown unit 'sec'"),
        ("1 s", "unknown unit"),
        ("1S", "unknown unit 'S'"),
        ("1.5.5s", "missing unit"),
        ("0.5ns", "finer than one nanosecond"),
        ("3000000h", "too long"),
        (2, "got int"),
        (1.5, "got float"),
        (None, "got NoneType"),
    ],
)
def test_duration_rejects(text, message):
    with pytest.raises(QuantityError, match=message):
        parse_duration(text)


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0s"),
        (1, "1ns"),
        (1500, "1.5µs"),
        (500 * 10**6, "500ms"),
        (1_250_000, "1.25ms"),
        (2 * 10**9, "2s"),
        (1_500_000_000, "1.5s"),
        (90 * 10**9, "1m30s"),
        (55 * 60 * 10**9, "55m0s"),
        (3600 * 10**9, "1h0m0s"),
        (5400 * 10**9 + 1, "1h30m0.000000001s"),
        (-2 * 10**9, "-2s"),
    ],
)
def test_duration_go_form(ns, text):
    assert format_duration(ns) == text
    assert parse_duration(text) == ns
