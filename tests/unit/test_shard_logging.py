"""Dask's "Batched Comm Closed" at a run's stop is one line, not a traceback (issue #11: a
person reads a traceback as a crash); a warning or an error from the same logger keeps its
traceback."""

from __future__ import annotations

import io
import logging

import agentsession_core.engine.shards.shard  # noqa: F401  (installs the filter)


def _logged(level: int) -> str:
    logger = logging.getLogger("distributed.batched")
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger.addHandler(handler)
    old_level, logger.level = logger.level, logging.DEBUG
    try:
        try:
            raise ConnectionResetError("closed under a write")
        except ConnectionResetError:
            logger.log(level, "Batched Comm Closed %r", "<TCP (closed)>", exc_info=True)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    return out.getvalue()


def test_an_info_line_about_a_closed_comm_keeps_its_text_and_loses_its_traceback() -> None:
    text = _logged(logging.INFO)
    assert "Batched Comm Closed '<TCP (closed)>'" in text
    assert "Traceback" not in text and "ConnectionResetError" not in text


def test_an_error_from_the_same_logger_keeps_its_traceback() -> None:
    text = _logged(logging.ERROR)
    assert "Traceback" in text and "ConnectionResetError: closed under a write" in text
