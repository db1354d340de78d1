"""What live control takes from a hostile user (issue #29), in the fast tier: the API's body
parser against nesting and NaN, the command's levels and token files, and the command line's
unknown flags named without their values. The end-to-end rows are
tests/integration/test_control_hostile.py."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from agentsession_core.cli import main, unrecognized
from agentsession_core.cli.control import (
    MAX_TOKEN_FILE,
    change_of,
    checked_token,
    read_token_file,
)
from agentsession_core.errors import UsageError
from agentsession_core.run.control_api import BadBody, parse_change


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 2000 + b"]" * 2000,
        b'{"level": ' + b"[" * 1900 + b"]" * 1900 + b"}",
        b'{"paused": ' + b"[" * 1000 + b"]" * 1000 + b"}",
        b'{"stopped": ' + b"{" * 5 + b"}" * 5 + b"}",
        b'{"level": NaN}',
        b'{"level": 1e400}',
    ],
)
def test_a_hostile_body_is_one_line_naming_its_field(body: bytes) -> None:
    with pytest.raises(BadBody) as info:
        parse_change(body)
    line = str(info.value)
    assert line.startswith(("body:", "level:", "paused:", "stopped:")), line
    assert "\n" not in line and len(line) < 300, line


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "0", "1000.5", "1e400"])
def test_a_level_that_is_no_level_is_refused_before_anything_is_sent(value: str) -> None:
    with pytest.raises(UsageError) as info:
        change_of("level", value)
    assert str(info.value) == f"level: {value} must be > 0 and at most 1000"
    assert change_of("level", "1000") == {"level": 1000.0}


def test_a_token_file_is_bounded_and_its_contents_never_said(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, says in (
        ("/dev/zero", "not a regular file (a character device)"),
        (str(fifo), "not a regular file (a FIFO)"),
        (str(tmp_path), "not a regular file (a directory)"),
        (str(tmp_path / "missing"), "No such file or directory"),
    ):
        with pytest.raises(UsageError, match="^" + re.escape(f"--token-file {path}: {says}")):
            read_token_file(path)
    big = tmp_path / "big"
    big.write_bytes(b"x" * (MAX_TOKEN_FILE + 1))
    with pytest.raises(UsageError, match=r"bytes; a token file holds at most 64 KiB"):
        read_token_file(str(big))
    good = tmp_path / "good"
    good.write_text(" the-token \n")
    assert checked_token(read_token_file(str(good)), "f") == "the-token"
    for text, says in (
        ("secret-a\nsecret-b\n", "f: holds 2 lines; a token is one line"),
        ("secret a", "f: holds a character a bearer token cannot have"),
        ("secret\x00", "f: holds a character a bearer token cannot have"),
    ):
        with pytest.raises(UsageError) as info:
            checked_token(text, "f")
        assert str(info.value).startswith(says) and "secret" not in str(info.value)
    assert checked_token("  \n", "f") is None


def test_an_unknown_flag_is_named_without_its_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert unrecognized(["--toke=s3cret"]) == (
        "unrecognized arguments: --toke; 1 value not shown (a value may be a secret)"
    )
    assert unrecognized(["--tok", "s3cret", "x"]).startswith("unrecognized arguments: --tok; 2")
    assert unrecognized(["--verbose"]) == "unrecognized arguments: --verbose"
    for argv in (
        ["control", "http://h:1", "status", "--toke=s3cret"],
        ["run", "--toke=s3cret"],
    ):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
        assert "s3cret" not in capsys.readouterr().err
    # `--token` is a flag of its own, refused by name.
    assert main(["control", "http://h:1", "status", "--token", "s3cret"]) == 2
    err = capsys.readouterr().err
    assert "--token: a token on the command line" in err and "s3cret" not in err
