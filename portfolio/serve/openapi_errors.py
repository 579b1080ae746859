"""The error answers each operation of the OpenAPI document lists: every status it can answer, each with the
`ErrorBody` schema and, for 429 and 503, the Retry-After header.

Which statuses an operation can answer follows from where it is refused (`portfolio.serve.guard.Guard`) and what
it does (the routes in `portfolio.serve.http`):

- every operation: 403 (a foreign Origin), 421 (a Host the server does not answer for), 500;
- behind a key (all but /v1/health): 401 (no key, or a wrong one), 403 (a key without the operation's scope
  too), 429 (over the key's quotas, with Retry-After) and 503 (the server cannot read its keys just now, with
  Retry-After);
- taking a body (`BODY`): 400 (not JSON, or not the schema), 413 (over --max-body, or more than the server's
  memory holds: `portfolio.serve.body_budget`) and 415 (not `application/json`); a large body may be refused
  with 503 `BusyWithLargeBodies`;
- and what the operation itself answers: 404 an unknown run or job, 409 a retrain while another process holds
  the store's retrain lock (`traces.fleet_lock`), 422 a validation too costly to check or an
  idempotency key reused for other steps, 503 a full queue, a locked trace store, a trace store out of reach (its
  file moved, its PostgreSQL server down) or a model that cannot be read.

FastAPI adds a 422 "Validation Error" to every operation with parameters; this service answers a request that
does not fit its schema 400 `SchemaError` instead (`portfolio.serve.errors`), so `without_unused_422` takes those
out of the document, which then lists a 422 only where one is answered.
"""

from __future__ import annotations

from typing import Any

from portfolio.serve.models import ErrorBody

RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}}

ERROR_RESPONSES: dict[int, dict[str, Any]] = {
    400: {"description": "bad input: the message says what was expected (`kind` names the error)"},
    401: {"description": "no API key, or one the server does not hold (revoked, mistyped)"},
    403: {"description": "the key lacks the scope this operation needs, or the request came from a foreign Origin"},
    404: {"description": "no such run (or job) of the key's tenant"},
    409: {"description": "a retrain is running on the trace store elsewhere (another server sharing it, or the CLI)"},
    413: {"description": "a request body over the server's --max-body, or more than its memory holds (BodyTooLarge)"},
    415: {"description": "a request body that is not `application/json` (UnsupportedMediaType)"},
    421: {"description": "a Host the server does not answer for (MisdirectedRequest)"},
    422: {"description": "well-formed input the server will not handle (the message says what and the limit)"},
    429: {"description": "over the key's quota; retry after Retry-After seconds", "headers": RETRY_AFTER},
    500: {"description": "a planner worker died or hung (it was replaced), or an internal error"},
    503: {
        "description": "busy (a full queue, a locked trace store, a trace store out of reach such as a "
        "PostgreSQL server restarting, too many large bodies, the keys unreadable just now: Retry-After says when "
        "to retry), or unable to plan until an operator acts (a stored model it cannot read)",
        "headers": RETRY_AFTER,
    },
}

EVERY = (403, 421, 500)  # the Guard's Origin and Host checks, and an internal error, on any operation
KEYED = (401, 403, 429, 503)  # an operation behind an API key
BODY = (400, 413, 415, 503)  # an operation that takes a request body (503: too many large bodies in flight)


def errors(*codes: int, keyed: bool = True, body: bool = False) -> dict[int | str, dict[str, Any]]:
    """The `responses=` of an operation: `EVERY`, `KEYED` when it needs a key, `BODY` when it takes a body, and
    `codes`, each as `ERROR_RESPONSES` describes it with the `ErrorBody` schema."""
    wanted = set(EVERY) | set(codes) | (set(KEYED) if keyed else set()) | (set(BODY) if body else set())
    return {code: {"model": ErrorBody, **ERROR_RESPONSES[code]} for code in sorted(wanted)}


def without_unused_422(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` without the 422 "Validation Error" answers FastAPI documents on its own (this service answers
    those 400), and without their schemas once nothing refers to them."""
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            answer = operation.get("responses", {}).get("422", {})
            refers = answer.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref", "")
            if refers.endswith("/HTTPValidationError"):
                del operation["responses"]["422"]
    components = schema.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):  # the second is referred to by the first only
        others = {key: value for key, value in components.items() if key != name}
        if name in components and f"/{name}'" not in repr((schema.get("paths", {}), others)):
            del components[name]
    return schema
