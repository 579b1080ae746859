"""Runs namespaced by tenant, at the service's boundary: a client names its runs as it likes, the service core and
the trace store see one stored run id per (tenant, client run id), and no tenant can name another's run.

    stored_run_id("acme", "r1")    -> "@acme/r1"
    client_run_id("acme", "@acme/r1") -> "r1"
    stored_run_id("default", "r1") -> "r1"      (the default tenant keeps its ids as they are)

The default tenant (the server's --token, --insecure, the stdio MCP server, and keys added with --tenant
default) keeps its run ids unchanged, so the runs recorded without a key, by `portfolio plan --traces`
and by the Python API, stay its own; it may not use a run id starting with `@`, which is where the other tenants
live. Every request's run ids go through `stored_run_id` where it enters (HTTP routes, MCP tools) and every
answer's through `client_run_id` where it leaves; the service core treats run ids as opaque strings.

A stored id is at most `traces.records.MAX_RUN_ID` (256) characters, so a tenant's client run ids are at most
256 - len("@tenant/") characters: longer ones are refused with the limit (`run_id_limit`).
"""

from __future__ import annotations

from typing import Any

from portfolio.serve.keys import DEFAULT_TENANT
from portfolio.serve.models import BadRequest, PlanBody, ReplanBody, StepsBody, StepsResponse, one_idempotency_key
from traces.records import MAX_RUN_ID
from traces.tenants import RESERVED as RESERVED
from traces.tenants import run_prefix


def prefix(tenant: str) -> str:
    """What the tenant's stored run ids start with ("" for the default tenant; `traces.tenants`)."""
    return run_prefix(tenant)


def run_id_limit(tenant: str) -> int:
    """The longest client run id the tenant may use."""
    return MAX_RUN_ID - len(prefix(tenant))


def stored_run_id(tenant: str, run_id: str) -> str:
    """The run id the store keeps for the tenant's `run_id`; BadRequest when it is too long for the tenant's
    namespace, holds a NUL character, or (default tenant) starts with the reserved `@`."""
    if len(run_id) > run_id_limit(tenant):
        raise BadRequest(
            f"run_id: {len(run_id)} characters; run ids of tenant {tenant!r} are 1 to {run_id_limit(tenant)} "
            f"characters (the store keeps {MAX_RUN_ID}, the tenant's prefix included)",
            "SchemaError",
        )
    if "\x00" in run_id:  # the store's lookup of recorded steps misses such ids: a retried post would be a 500
        raise BadRequest("run_id: contains the NUL character; expected text without it", "SchemaError")
    if tenant == DEFAULT_TENANT and run_id.startswith(RESERVED):
        raise BadRequest(
            f"run_id {run_id[:40]!r}: run ids starting with {RESERVED!r} are reserved for the tenants of API keys",
            "SchemaError",
        )
    return prefix(tenant) + run_id


def client_run_id(tenant: str, stored: str) -> str:
    """The tenant's own name for a stored run id (`stored_run_id` undone)."""
    return stored[len(prefix(tenant)) :] if stored.startswith(prefix(tenant)) else stored


def owns(tenant: str, stored: str) -> bool:
    """Whether a stored run id is in the tenant's namespace."""
    if tenant == DEFAULT_TENANT:
        return not stored.startswith(RESERVED)
    return stored.startswith(prefix(tenant))


def stats_filter(tenant: str) -> dict[str, str]:
    """`TraceStore.stats` arguments selecting the tenant's steps."""
    return {"exclude_prefix": RESERVED} if tenant == DEFAULT_TENANT else {"run_prefix": prefix(tenant)}


# -- requests in ------------------------------------------------------------------------------------------------
def plan_in(tenant: str, body: PlanBody) -> PlanBody:
    """The plan request with its run id (if any) in the tenant's namespace. Without one the service makes a
    fresh id, which `plan_out` hands back; for a tenant it is made here, so that it lands in the namespace."""
    import uuid

    run_id = body.run_id if body.run_id is not None else (None if tenant == DEFAULT_TENANT else uuid.uuid4().hex)
    if run_id is None:
        return body
    return body.model_copy(update={"run_id": stored_run_id(tenant, run_id)})


def replan_in(tenant: str, body: ReplanBody) -> ReplanBody:
    return body.model_copy(update={"run_id": stored_run_id(tenant, body.run_id)})


def steps_in(tenant: str, body: StepsBody, header_key: str | None = None) -> StepsBody:
    """The step batch with its run ids and its idempotency key (the body's, or HTTP's `Idempotency-Key` header
    given as `header_key`: `models.one_idempotency_key`) in the tenant's namespace, so that two tenants' keys
    never meet; the default tenant's key may not start with the reserved `@`, as its run ids. The batch's list
    of steps is rewritten in place, each step replaced by its namespaced copy: a copy of the list held the
    batch twice (a 23 MB batch is ~280 MB of records)."""
    key = one_idempotency_key(body.idempotency_key, header_key)
    if key is not None and tenant == DEFAULT_TENANT and key.startswith(RESERVED):
        raise BadRequest(f"idempotency key: keys starting with {RESERVED!r} are reserved for the tenants of API keys")
    if tenant == DEFAULT_TENANT:
        for step in body.steps:
            stored_run_id(tenant, step.run_id)  # the reserved prefix is refused
        return body.model_copy(update={"idempotency_key": key})
    steps = body.steps
    for index, step in enumerate(steps):
        steps[index] = step.model_copy(update={"run_id": stored_run_id(tenant, step.run_id)})
    namespaced = None if key is None else prefix(tenant) + key
    return body.model_copy(update={"steps": steps, "idempotency_key": namespaced})


# -- answers out ------------------------------------------------------------------------------------------------
def plan_out(tenant: str, answer: Any) -> Any:
    """A plan answer (`PlanResponse`, or a job's result dict) with the client's run id."""
    if isinstance(answer, dict):
        return answer | {"run_id": client_run_id(tenant, answer["run_id"])} if answer.get("run_id") else answer
    if answer.run_id is None:
        return answer
    return answer.model_copy(update={"run_id": client_run_id(tenant, answer.run_id)})


def steps_out(tenant: str, answer: StepsResponse) -> StepsResponse:
    conflicts = [
        c.model_copy(
            update={
                "run_id": client_run_id(tenant, c.run_id),
                "message": c.message.replace(repr(c.run_id), repr(client_run_id(tenant, c.run_id))),
            }
        )
        for c in answer.conflicts
    ]
    return answer.model_copy(update={"conflicts": conflicts})


def retrain_out(tenant: str, result: dict[str, Any], learning: str) -> dict[str, Any]:
    """A retrain's result (every tenant's new model, `PlannerWorker.retrain`) as `tenant` sees it: the model its
    costs come from (`learning`: its own, or the pooled one) with the batches of its own principals that the
    poison guard held back, and the selection model; no other tenant's model or principals. `version` None: the
    tenant has recorded no steps to learn from yet."""
    info = result.get("models", {}).get(learning)
    selection = {"selection": result["selection"]} if "selection" in result else {}
    if info is None:
        return {"version": None, "tenant": learning, "n_steps": 0, "held": [], **selection}
    return info | {"held": [batch for batch in info.get("held", []) if batch.get("tenant") == tenant], **selection}


def not_found_out(tenant: str, message: str, stored: str, client: str) -> str:
    """An error message about a stored run id, as the tenant names the run."""
    return message.replace(repr(stored), repr(client))


class JobOwners:
    """Which tenants may read each job (`GET /v1/jobs/{id}`): the one that started it, and every tenant whose
    retrain call joined it. The newest `max_jobs`, as the service keeps its jobs."""

    def __init__(self, max_jobs: int = 1024) -> None:
        from collections import OrderedDict

        self.max_jobs = max_jobs
        self._owners: OrderedDict[str, set[str]] = OrderedDict()

    def add(self, job_id: str, tenant: str) -> None:
        self._owners.setdefault(job_id, set()).add(tenant)
        self._owners.move_to_end(job_id)
        while len(self._owners) > self.max_jobs:
            self._owners.popitem(last=False)

    def owns(self, job_id: str, tenant: str) -> bool:
        return tenant in self._owners.get(job_id, ())
