"""The package's one logger, and the one call that shows its lines on stderr.

Every module logs to `agentsession`; a run also writes the same lines to its logs.txt.
Nothing is printed unless the user asks, so a library user's own logging stays theirs.
"""

from __future__ import annotations

import logging
import sys

LOGGER_NAME = "agentsession"
_FORMAT = "%(asctime)s %(levelname)s %(message)s"


def log_to_stderr(level: int = logging.INFO) -> logging.Handler:
    """Show the package's log lines at `level` and above on stderr; returns the handler so
    the caller can remove it again."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter(_FORMAT, "%H:%M:%S"))
    logger = logging.getLogger(LOGGER_NAME)
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > level:
        logger.setLevel(level)
    return handler
