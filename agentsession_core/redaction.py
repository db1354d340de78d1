"""Credentials kept out of what a run writes and shows: campaign.json's parameters, the
server figures' source URLs, `--print-params`. Below every layer: the engine, the run's files
and the CLI all redact the same way."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "***"
# Parameter names that hold credentials. Deliberately not plain "key": script ops have keys.
_SECRET_NAME = re.compile(
    r"(token|secret|passw|credential|auth|api[_-]?key|access[_-]?key|private[_-]?key|"
    r"session[_-]?key|signing[_-]?key|bearer|cookie)",
    re.IGNORECASE,
)


def redact(params: Any) -> Any:
    """A copy with credential-like values replaced by "***", recursively; URLs lose their
    credentials (a password, a token-as-username, secret-named query parameters)."""
    if isinstance(params, dict):
        out = {}
        for key, value in params.items():
            if isinstance(key, str) and _SECRET_NAME.search(key) and value not in (None, ""):
                out[key] = REDACTED
            else:
                out[key] = redact(value)
        return out
    if isinstance(params, list | tuple):
        return [redact(v) for v in params]
    if isinstance(params, str) and "://" in params:
        return _redact_url(params)
    return params


def _redact_url(text: str) -> str:
    try:
        parts = urlsplit(text)
    except ValueError:
        return text
    netloc, query = parts.netloc, parts.query
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        # user:password keeps the user; a lone userinfo is a token (https://TOKEN@host).
        netloc = f"{user}:{REDACTED}@{host}" if colon else f"{REDACTED}@{host}"
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_SECRET_NAME.search(k) and v for k, v in pairs):
            safe = [(k, REDACTED if _SECRET_NAME.search(k) and v else v) for k, v in pairs]
            query = urlencode(safe, safe="*")
    if (netloc, query) == (parts.netloc, parts.query):
        return text
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
