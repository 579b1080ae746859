"""One planner worker of the service: `python -m portfolio.serve.worker CONFIG_JSON`.

Each worker is a process with its own warm `Planner` (cascade, translator worker, pre-started searches,
translation cache) and its own connection to the trace store, answering one request at a time over the same
length-prefixed pickle channel and request loop as `portfolio.engine.worker_main`. Parsing and planning happen
here, not in the server, so a task that explodes takes down (and costs the memory of) one worker, which the pool
replaces.

Learned costs come from the failure model of the request's tenant (`tenant`, `traces.tenants`; every tenant's
is the pooled model with `pool_learning`), loaded on first use and kept for the tenants used last
(`portfolio.serve.tenant_models`). A stored model this release cannot read (hand-edited, damaged, nested past
the parser: `learning.storage.ModelFormatError`, naming the file, table and row), or one that fails to load for
any other reason, does not kill the worker, which would only be restarted into the same row: the worker stays
up, logs why once, answers every plan of that tenant with {"unavailable": {error, kind}} (503 with the reason;
other tenants' plans go on under their own models) and every ping with the reason, and tries the store again at
each call of that tenant until a model it can read is there. A selection model it cannot read is passed over by
the planner (the fixed order, `Planner`), not refused.

A trace store that cannot be written (a full disk, a read-only file) does not stop planning: the plan's
recording is best-effort (`Planner(record_errors="log")`), and a plan whose recording failed carries
"store_error": {kind} for the server to count and report. With `must_record` (the client named the run) the run
is started, or found, before planning, and a store that fails there answers {"store_failed": {error, kind}}.

Ops: `plan` (a `PlanBody` as a dict -> {"result": PlanResult + run_id} or {"bad_input": {error, kind}}),
`retrain` (fit and store the next failure model of every tenant, or the pooled one, and the configuration
selection, holding the store's fleet-wide retrain lock, `traces.fleet_lock`: {"busy": {error, kind}} while
another server or `portfolio retrain` holds it), `ping`. The server sends the store's latest model version with
every plan; a worker behind it checks the tenant's model (and reloads the selection) first, so a retrain reaches
every worker without a broadcast.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import sys
from typing import Any

from pydantic import BaseModel

from portfolio.engine import limits
from portfolio.engine.worker_main import open_channel, serve
from portfolio.serve.tenant_models import TenantModels
from traces.tenants import DEFAULT_TENANT, POOLED, tenant_of

log = logging.getLogger(__name__)

# What a worker needs on top of the planner's own libraries, in MB of address space (measured: ~450 MB mapped
# by a warm worker with numpy and scikit-learn loaded, most of it never touched).
WORKER_HEADROOM_MB = 1024
RETRAIN_RUNNING = (
    "a retrain is running on this trace store (on this server, another server sharing the store, or `portfolio "
    "retrain`): its models reach every server within a second or so of its end; ask again then for a newer one"
)


class WorkerConfig(BaseModel):
    delegates: list[str]
    budget_s: float
    decomposer_budget_s: float
    traces: str | None = None
    llm_url: str | None = None
    llm_model: str | None = None
    memory_limit_mb: int
    fd_workers: int = 1
    cache_dir: str | None = None
    translation_cache: bool = True
    explore: str | None = None  # the server's default policy; a request's `explore` overrides it per call
    quality: str | None = None  # likewise the server's default quality and weight
    weight: float | None = None
    objective: str | None = None  # and objective; the time objective's parameters are the server's alone
    side_effect_weight: float = 1.0
    replan_ms: float | None = None
    max_retries: int = 2
    carry_over: bool = True
    pool_learning: bool = False  # one model of every tenant's steps, rather than one per tenant


PRELOAD = ("learning.costs", "learning.model", "learning.retrain", "learning.selection", "traces.store")


class PlannerWorker:
    """The worker's state: the planner, the tenants' models it has loaded and the store's model version it
    last saw."""

    def __init__(self, config: WorkerConfig) -> None:
        from learning.objective import TimeParams
        from portfolio.delegates.registry import build_stages
        from portfolio.planner import Planner

        self.config = config
        from portfolio.delegates.fast_downward.sas_cache import SasCache

        # Workers share the on-disk translation cache: a task one worker translated, any other reads.
        cache = SasCache(config.cache_dir) if config.translation_cache else None
        stages = build_stages(
            config.delegates,
            budget_s=config.budget_s,
            llm_url=config.llm_url,
            llm_model=config.llm_model,
            decomposer_budget_s=config.decomposer_budget_s,
            fd_workers=config.fd_workers,
            translation_cache=cache,
        )
        # A request's deadline is its classical budget plus the decomposer tier's: the cascade computes it per
        # call from the tiers' budgets (`_budget` sets the request's own), and carried-over work dies there.
        weight: dict[str, Any] = {} if config.weight is None else {"cost_weight": config.weight}
        self.planner = Planner(
            stages,
            traces=config.traces,
            carry_over=config.carry_over,
            explore=config.explore,
            quality=config.quality,
            load_model=False,
            objective=config.objective,
            time=TimeParams(config.max_retries, config.replan_ms, config.side_effect_weight),
            record_errors="log",  # planning needs no disk: a failed recording is reported (`plan`), not fatal
            **weight,
        )
        self.model_error: str | None = None
        self.model_error_kind = "ModelFormatError"
        self.models = TenantModels(self.planner.store) if self.planner.store is not None else None
        self.model_version = self._stored_version()
        self.tenant_version: int | None = None  # the version of the model in use (its tenant's)
        self.planner.reload_selection()
        self._load_model(DEFAULT_TENANT)
        # the options a request hands the planner by name; the plan to keep comes from the service, by name too
        taken = {"task", "init", "run_id", "previous_plan", "previous_cost_model"}
        self.plan_options = set(inspect.signature(self.planner.plan).parameters) - taken

    def learning_tenant(self, tenant: str) -> str:
        """Whose model prices a request of `tenant`: its own, or the pooled one."""
        return POOLED if self.config.pool_learning else tenant

    def _load_model(self, tenant: str) -> None:
        """Put the tenant's model in the planner; one that cannot be loaded leaves `model_error` (module
        docstring), logged when the reason is new. `TenantModels` keeps no failed load, so the next call of the
        tenant reads the store again."""
        if self.models is None:
            return
        try:
            version, model = self.models.get(self.learning_tenant(tenant), self.model_version)
        except Exception as error:  # whatever it is, dying here would only restart the worker into it again
            from traces.errors import BadRowError

            readable = isinstance(error, BadRowError)  # the row is named; anything else wants its traceback
            message = str(error) if readable else f"the stored model cannot be loaded ({type(error).__name__}: {error})"
            if message != self.model_error:
                log.error("cannot use the stored model: %s", message, exc_info=None if readable else error)
            self.model_error = message
            self.model_error_kind = "ModelFormatError" if readable else type(error).__name__
            return
        self.planner.use_model(model, version)
        self.tenant_version = version
        self.model_error = None

    def ping(self) -> dict[str, Any]:
        return {"pong": os.getpid(), "model_error": self.model_error}

    def _stored_version(self) -> int | None:
        """The newest stored model's version, read without the model (which may be the bad row)."""
        from traces.versions import latest_version

        store = self.planner.store
        return latest_version(store) if store is not None else None

    def plan(
        self,
        body: dict[str, Any],
        model_version: int | None = None,
        previous_plan: list[str] | None = None,
        previous_cost_model: str | None = None,
        must_record: bool = True,
    ) -> dict[str, Any]:
        """One plan request (`Service.plan`); `previous_plan` (with the cost model it was made under) is the run's
        current plan, kept where still valid (`plan-reuse`, as `Planner.plan` does in Python). `must_record`:
        the run must be in the store before planning (the client named it), else the store's failure is only
        reported (module docstring)."""
        from domains.errors import TaskInputError
        from portfolio.serve.models import BadRequest, PlanBody
        from traces.errors import TraceStoreError

        request = PlanBody.model_validate(body)
        unavailable = self._with_model(model_version, tenant_of(request.run_id or ""))
        if unavailable is not None:
            return unavailable
        try:
            task, init = self._task_and_init(request)
            unrecorded: Exception | None = None
            try:
                run_id = self._run(task, request.run_id)
            except TraceStoreError as error:
                if must_record:
                    return {"store_failed": {"error": str(error), "kind": type(error).__name__}}
                unrecorded, run_id = error, request.run_id
            failures = self.planner.record_failures
            options = {k: v for k, v in request.model_dump().items() if k in self.plan_options and v is not None}
            with self._budget(request.budget):  # the planner reads `excluded` & co. too: bad spellings are 400s
                result = self.planner.plan(
                    task,
                    init=init,
                    run_id=run_id,
                    previous_plan=previous_plan or (),
                    previous_cost_model=previous_cost_model,
                    **options,
                )
        except (TaskInputError, BadRequest) as error:
            return {"bad_input": {"error": str(error), "kind": getattr(error, "kind", type(error).__name__)}}
        answer: dict[str, Any] = {"result": {**result.model_dump(mode="json"), "run_id": request.run_id}}
        if self.planner.record_failures > failures:
            unrecorded = self.planner.last_record_error
        if unrecorded is not None:
            answer["store_error"] = {"kind": type(unrecorded).__name__}
        return answer

    def _with_model(self, model_version: int | None, tenant: str) -> dict[str, Any] | None:
        """Put the tenant's newest model in the planner, checked again when the server's `model_version` (the
        store's newest) is not the one last seen (the selection model reloaded then too), and read again while
        the tenant's stored model cannot be used; the `unavailable` answer when it still cannot, else None."""
        if model_version is not None and model_version != self.model_version:
            self.model_version = model_version
            self.planner.reload_selection()
        self._load_model(tenant)
        if self.model_error is not None:
            return {"unavailable": {"error": self.model_error, "kind": self.model_error_kind}}
        return None

    @staticmethod
    def _task_and_init(request: Any) -> tuple[Any, Any]:
        """The request's task and its `init` state (None: the task's own), parsed; TaskInputError for bad input."""
        from domains.literals import parse_ground_atoms
        from portfolio.serve.models import load_task

        task = load_task(request)
        return task, parse_ground_atoms(task, request.init) if request.init is not None else None

    def _run(self, task, run_id: str | None) -> str | None:
        """The run the plan is recorded under: created with the server's id on first use."""
        store = self.planner.store
        if store is None or run_id is None:
            return None
        if store.get_run(run_id) is None:
            from domains.pddl_writer import formula_to_pddl

            store.start_run(
                task.fingerprint, formula_to_pddl(task.problem.goal), run_id=run_id, domain=task.domain_fingerprint
            )
        return run_id

    def _budget(self, budget: float | None):
        """The classical tier's budget for one call (the server has already capped it)."""
        from contextlib import contextmanager

        from portfolio.engine.tiers import Tier

        @contextmanager
        def scope():
            tiers = [s for s in self.planner.cascade.delegates if isinstance(s, Tier) and s.name == "classical"]
            saved = [t.budget_s for t in tiers]
            if budget is not None:
                for tier in tiers:
                    tier.budget_s = budget
            try:
                yield
            finally:
                for tier, value in zip(tiers, saved):
                    tier.budget_s = value

        return scope()

    def retrain(self, guard: bool = True, include_held: bool = False, **params: Any) -> dict[str, Any]:
        """Fit the next failure model of every tenant with steps (`learning.tenant_models`; the pooled model with
        `pool_learning`), each reviewed by the poison guard unless `guard` is False, and, as `portfolio retrain`
        does, the configuration selection (per domain with enough recorded tasks); the workers load them with
        the next model version. The result: {"models": {tenant: ModelInfo}, "selection": ...}, which the server
        shows each tenant its part of (`portfolio.serve.tenancy.retrain_out`)."""
        from learning.selection import retrain_selection
        from learning.tenant_models import retrain_tenants
        from traces.fleet_lock import FleetBusy, fleet_lock

        store = self.planner.store
        if store is None:
            return {
                "bad_input": {
                    "error": "this server has no trace store: start it with --traces PATH",
                    "kind": "BadRequest",
                }
            }
        try:
            with fleet_lock(store, "retrain"):  # one fit of the store at a time, across every server sharing it
                infos = retrain_tenants(
                    store, pooled=self.config.pool_learning, guard=guard, include_held=include_held, **params
                )
                selection = retrain_selection(store)
        except FleetBusy:
            return {"busy": {"error": RETRAIN_RUNNING, "kind": "RetrainRunning"}}
        self.model_version = self._stored_version()
        self.planner.reload_selection()
        self._load_model(DEFAULT_TENANT)  # what the worker plans with first; each tenant's is checked at its call
        models = {tenant: info.model_dump(mode="json") for tenant, info in infos.items()}
        result = {"models": models, "selection": selection.model_dump(mode="json")}
        return {"result": result, "model_error": self.model_error}

    def costs(
        self, body: dict[str, Any], model_version: int | None = None, tenant: str = DEFAULT_TENANT
    ) -> dict[str, Any]:
        """The learned cost of every grounded action of a task (`Planner.learned_costs`, as `portfolio costs`),
        under the tenant's model."""
        from domains.errors import TaskInputError
        from learning.costs import cost_rows
        from portfolio.serve.models import BadRequest, CostsBody

        unavailable = self._with_model(model_version, tenant)
        if unavailable is not None:
            return unavailable
        request = CostsBody.model_validate(body)
        try:
            task, init = self._task_and_init(request)
            costs = self.planner.learned_costs(
                task, init=init, features=request.features, weight=request.weight, objective=request.objective
            )
        except (TaskInputError, BadRequest) as error:
            return {"bad_input": {"error": str(error), "kind": getattr(error, "kind", type(error).__name__)}}
        rows = cost_rows(costs)
        return {"result": {"model_version": self.tenant_version if costs else None, "costs": rows}}

    def handlers(self) -> dict[str, Any]:
        return {"plan": self.plan, "costs": self.costs, "retrain": self.retrain, "ping": self.ping}


def tree_processes(config: WorkerConfig) -> int:
    """The processes of one worker that hold a request's task at once: the worker itself (it parses), Fast
    Downward's translator worker and its raced searches, the pyperplan worker (`portfolio.engine.limits`)."""
    fast_downward = 0
    if "fast-downward" in config.delegates:
        fast_downward = 1 + config.fd_workers
    return 1 + fast_downward + ("pyperplan" in config.delegates)


def main() -> None:
    requests, responses = open_channel()  # stray prints go to stderr, never into the channel
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s worker %(process)d %(name)s: %(message)s")
    config = WorkerConfig.model_validate_json(sys.argv[1])
    limits.die_with_parent()  # a killed server leaves no worker behind (and the worker's children follow it)
    share = limits.tree_share_mb(config.memory_limit_mb, tree_processes(config))  # one budget per request
    limits.configure(share, kill_with_parent=True)
    limits.apply_to_self(share + WORKER_HEADROOM_MB)
    # A worker serves many requests: what the packages load on first use (numpy, scipy, the model and the store's
    # modules) is imported now, not inside the first request's planning budget.
    for module in PRELOAD:
        importlib.import_module(module)
    worker = PlannerWorker(config)
    try:
        serve(requests, responses, worker.handlers())
    finally:
        worker.planner.close()


if __name__ == "__main__":
    main()
