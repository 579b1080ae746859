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
from urllib.parse import unquote, urlsplit

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


def password(target: str) -> str | None:
    """The password written in a URL (decoded), None when there is none: what `hide` takes out of any text."""
    if not is_url(target):
        return None
    try:
        found = urlsplit(target).password
    except ValueError:
        found = None
    query = _QUERY_PASSWORD.search(target)
    if found is None and query is not None:
        found = unquote(target[query.end(1) : query.end()])
    return found or None


def hide(text: str, target: str) -> str:
    """`text` (an error message, say) with the password of `target`, in every spelling, replaced by `***`."""
    secret = password(target)
    if not secret:
        return text
    for spelling in {secret, target.split("://", 1)[-1].split("@", 1)[0].partition(":")[2]}:
        if spelling:
            text = text.replace(spelling, HIDDEN)
    return text
