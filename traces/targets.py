"""What a `--traces` value (or `$PORTFOLIO_TRACES`) names: an SQLite file by its path, or a PostgreSQL database by
its URL (`postgresql://user@host:5432/db`, or `postgres://...`), and how to show that without its password.

    is_url("postgresql://planner@db/traces")      -> True      (anything else is a path)
    redact("postgresql://planner:s3cret@db/traces") -> "postgresql://planner:***@db/traces"

The URL is handed to libpq as it is, so libpq's own ways to give what it leaves out work: `PGPASSWORD`,
`~/.pgpass`, `PGHOST`, `PGUSER`, query parameters such as `?sslmode=require`. A password written in the URL is
never shown: `TraceStore.path`, its `repr`, every error and log line carry the redacted form.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote

SCHEMES = ("postgresql://", "postgres://")
HIDDEN = "***"
# the password in a query string (`?password=...`), which libpq accepts as well as `user:password@`
_QUERY_PASSWORD = re.compile(r"(?i)([?&]password=)[^&#]*")


def is_url(target: str | os.PathLike[str] | None) -> bool:
    """Whether `target` is a PostgreSQL URL (by its scheme, case-insensitively) rather than an SQLite path."""
    return isinstance(target, str) and target.lower().startswith(SCHEMES)


def redact(target: str) -> str:
    """`target` with the password of a URL (after `user:` or as `password=` in the query) replaced by `***`;
    a path is returned as it is."""
    if not is_url(target):
        return target
    scheme, _, rest = target.partition("://")
    authority, slash, tail = rest.partition("/")
    if "@" in authority:
        credentials, _, host = authority.rpartition("@")
        if ":" in credentials:
            credentials = credentials.split(":", 1)[0] + ":" + HIDDEN
        authority = f"{credentials}@{host}"
    return _QUERY_PASSWORD.sub(lambda m: m[1] + HIDDEN, f"{scheme}://{authority}{slash}{tail}")


def _raw_password(target: str) -> str | None:
    """The password as written in the URL (percent-encoded as it may be), None when there is none."""
    if not is_url(target):
        return None
    authority = target.partition("://")[2].partition("/")[0]
    credentials = authority.rpartition("@")[0] if "@" in authority else ""
    if ":" in credentials:
        return credentials.split(":", 1)[1] or None
    query = _QUERY_PASSWORD.search(target)
    return target[query.end(1) : query.end()] or None if query is not None else None


def password(target: str) -> str | None:
    """The password written in a URL (percent-decoded, as libpq reads it), None when there is none."""
    raw = _raw_password(target)
    return None if raw is None else unquote(raw)


def hide(text: str, target: str) -> str:
    """`text` (an error message, say) with the password of `target`, as written or decoded, replaced by `***`."""
    raw = _raw_password(target)
    if raw is None:
        return text
    for spelling in sorted({raw, unquote(raw)}, key=len, reverse=True):
        text = text.replace(spelling, HIDDEN)
    return text


def split_password(target: str) -> tuple[str, str | None]:
    """`target` without the password written in it, and that password (None when there is none): a child
    process is given the URL in its arguments, which anyone on the machine may read (`ps`), and the password in
    its environment as libpq's `PGPASSWORD`, which only its user may."""
    secret = password(target)
    if secret is None:
        return target, None
    scheme, _, rest = target.partition("://")
    authority, slash, tail = rest.partition("/")
    if "@" in authority:
        credentials, _, host = authority.rpartition("@")
        authority = f"{credentials.split(':', 1)[0]}@{host}"
    tail = re.sub(r"[?&]password=[^&#]*", "", tail, flags=re.IGNORECASE)
    if "&" in tail and "?" not in tail:
        tail = tail.replace("&", "?", 1)
    return f"{scheme}://{authority}{slash}{tail}", secret
