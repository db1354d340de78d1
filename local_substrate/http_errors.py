"""A request aiohttp's own parser refuses (a request line or a header past
MAX_REQUEST_LINE, bytes that are not HTTP) never reaches a handler: aiohttp answers a
plain-text 400 itself and logs the parser's exception with its traceback, once per request
(issue 38: a drain of a 10 KB worker name printed a LineTooLong traceback). The substrate's
HTTP server logs through this logger instead, which says such a refusal in one line; an
error of a handler keeps its traceback (it is a bug of ours)."""

from __future__ import annotations

import logging

from aiohttp.http_exceptions import HttpProcessingError

# Longer than any name or header the wires use (names are at most 253 characters) by far:
# what fits reaches the handlers, which refuse an over-long name with the wire's JSON 400.
MAX_REQUEST_LINE = 64 * 1024


class _OneLine(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.msg = f"{record.getMessage()}: refused by the HTTP parser ({exc.code}): "
            record.msg += " ".join(str(exc.message).split())[:200]
            record.args = None
            record.exc_info = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def logger() -> logging.Logger:
    """aiohttp's server logger, its parser's refusals said in one line."""
    log = logging.getLogger("local_substrate.http")
    if not any(isinstance(f, _OneLine) for f in log.filters):
        log.addFilter(_OneLine())
    return log


__all__ = ["MAX_REQUEST_LINE", "logger"]
