"""`Service`: what the HTTP routes and the MCP tools call. One pool of planner workers, one trace store, the
runs replanning needs and the background jobs; no HTTP in here.

Trace-store writes from the server (executed steps) go through one connection behind one lock, on a thread,
and commit before the answer is sent: a step acknowledged is in the store even if the server is killed the next
moment. Plans are recorded by the workers on their own connections (SQLite serialises writers across
processes). Retraining runs on a worker too (it is as CPU-heavy as planning): it fits a model per tenant (one
pooled model with `pool_learning`) and bumps `model_version`, which every later plan call carries, so each worker
checks the model of the call's tenant before planning (`portfolio.serve.tenant_models`).

The store's health (`portfolio.serve.store_health`) is probed by the watch loop and noted from every store call
and every worker's recording; a plan the client gave no run id is answered even when its recording fails
(planning needs no disk). No answer names the store's file (`hide_paths`): it is logged on the server instead.

Runs for /v1/replan are remembered in memory (the task source of recent plans, one copy per task, and which
worker planned it, since that worker's translation cache already holds the task) and, with a trace store, in
the store too (`traces.task_sources`): a run planned before a restart, or by another server sharing the file,
can still be replanned. Without a trace store, after a restart, plan again. The service follows each run: the
plan it last handed out and, with a trace store, that plan and the steps recorded for the run since are in the
store (`traces.run_plans`), so a replan keeps what is still valid of the plan after the steps that ran, and never
a step that ran (`replan`), across restarts too. A run id is one opaque string throughout.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
from pydantic import BaseModel

from portfolio.engine.wire_model import WireModel
from portfolio.serve.config import ServiceConfig, worker_config
from portfolio.serve.metrics import Metrics
from portfolio.serve.models import (
    ActionInfo,
    ActionsResponse,
    BadRequest,
    CostsBody,
    CostsResponse,
    HealthResponse,
    Job,
    PlanBody,
    PlanOptions,
    PlanResponse,
    ReplanArgs,
    ReplanBody,
    RetrainBody,
    StepsBody,
    StepsResponse,
    ValidateBody,
    Verdict,
)
from portfolio.serve.pool import CallOutOfMemory, CallTimedOut, PlannerPool, QueueFull
from portfolio.serve.runs import MAX_RUNS, MAX_SOURCES, RunMemory, steps_to_keep, store_run, stored_run
from portfolio.serve.store_health import StoreHealth, StorePaths, StoreUnreachableError, store_error
from portfolio.serve.tenant_models import TenantModels
from traces.errors import IdempotencyKeyReused, TraceStoreError
from traces.recording import RecordReport
from traces.task_sources import task_source
from traces.tenants import DEFAULT_TENANT, POOLED, tenant_of

log = logging.getLogger(__name__)

MAX_JOBS = 1024
CALL_GRACE_S = 15.0  # parsing, validation and recording on top of the planning budgets


class NotFound(Exception):
    pass


class Unavailable(Exception):
    """The service cannot plan until an operator acts (a stored model it cannot read): answered 503."""

    def __init__(self, message: str, kind: str = "Unavailable") -> None:
        super().__init__(message)
        self.kind = kind


class Service:
    def __init__(self, config: ServiceConfig) -> None:
        self.config = config
        self.metrics = Metrics()
        self.store = None
        self._store_lock = threading.Lock()
        self.store_health = StoreHealth()
        self.paths = StorePaths(config.traces)
        self.model_version: int | None = None  # the newest model's, of any tenant
        self._models: TenantModels | None = None  # each tenant's, for /v1/actions
        if config.traces:
            from traces.store import TraceStore
            from traces.versions import latest_version

            self.store = TraceStore(config.traces)
            self.store_health.opened(config.traces)  # which file it is: the probe checks the path still leads there
            self.model_version = latest_version(self.store)  # the number only: a bad row is the workers' to report
            self._models = TenantModels(self.store)
        self.pool: PlannerPool | None = None
        self.memory = RunMemory()  # each run's task, worker and current plan (`portfolio.serve.runs`)
        self.jobs: collections.OrderedDict[str, Job] = collections.OrderedDict()
        self._tasks: set[asyncio.Task] = set()
        self._job_tasks: dict[str, asyncio.Task] = {}  # running jobs' tasks, for `finished`
        # Trace-store reads and writes only: nothing else may take these threads, so no computation (a
        # validation that blows up, say) can starve the store. Each holds `_store_lock` for one short query.
        self._store_threads = anyio.CapacityLimiter(4)
        self.validators: PlannerPool | None = None
        # why the workers cannot use a tenant's stored model: that tenant's plans are 503s, and health says so
        self.model_errors: dict[str, str] = {}
        self._retrain_job: str | None = None

    # -- lifecycle ------------------------------------------------------------------------------------------
    def start(self) -> None:
        from portfolio.engine.search_pool import sweep_stale_dirs

        sweep_stale_dirs()  # what a server or worker killed earlier left behind (each worker sweeps too)
        # The memory cap travels in the workers' configuration: each applies it in its own process, so
        # the server's environment (a test's, say) is left alone.
        worker = worker_config(self.config)
        pool = self.pool = PlannerPool(
            worker,
            self.config.workers,
            self.config.queue,
            on_restart=lambda reason: self.metrics.worker_restarts.labels(reason).inc(),
        )
        self.metrics.queue_depth.set_function(lambda: pool.queued)  # read when scraped
        self.metrics.busy_workers.set_function(lambda: pool.busy)
        from portfolio.serve.validator import ValidatorConfig, ValidatorWorker

        validators = self.config.validators or self.config.workers
        # Validations queue per caller and take turns; one caller holds all validators but one at most, so
        # another caller's check starts at once however many of its own the first has sent (`PlannerPool`).
        self.validators = PlannerPool(
            ValidatorConfig(memory_limit_mb=self.config.memory_limit_mb),
            validators,
            self.config.queue,
            on_restart=lambda reason: self.metrics.worker_restarts.labels(reason).inc(),
            worker_class=ValidatorWorker,
            name="validator",
            owner_limit=max(1, validators - 1),
        )

    async def watch(self, period_s: float = 1.0) -> None:
        """Warm the workers up; then, every `period_s`, replace workers that died while idle and notice a model
        trained elsewhere (`portfolio retrain` on the same store), which the workers then load."""
        assert self.pool is not None and self.validators is not None
        if self.store is not None:  # before the workers are warm: health knows the store from the start
            await anyio.to_thread.run_sync(self._check_store, limiter=self._store_threads)
        answers: list[Any]
        answers, _ = await asyncio.gather(self.pool.warm_up(), self.validators.warm_up())
        for answer in answers:
            if isinstance(answer, dict) and answer.get("model_error"):  # a worker starts on the default tenant's
                self.model_errors[DEFAULT_TENANT] = answer["model_error"]
        while True:
            await asyncio.sleep(period_s)
            for pool in (self.pool, self.validators):
                if pool is not None and not pool.closed:
                    pool.replace_dead_idle()
            if self.store is not None:
                version = await anyio.to_thread.run_sync(self._check_store, limiter=self._store_threads)
                if version is not None and version != self.model_version:
                    self.model_version = version

    def _check_store(self) -> int | None:
        """Probe the store's health, and read the newest model version (one indexed query, no model read); None
        when it cannot be read (the probe says why)."""
        assert self.store is not None
        with self._store_lock:
            self.store_health.probe(self.store)
            if self.store_health.unreachable() is not None:  # not the store's retries on every watch tick
                return None
            try:
                return self.store.latest_model_version()
            except Exception:  # the database's own error: the probe has named it
                return None

    def _store_call(self, call: Callable[..., Any], *args: Any, write: bool = False) -> Any:
        """`call(store, *args)` holding the store's lock; its failure (or, with `write`, its success) is noted for
        health. Only with a store; off the event loop."""
        store = self.store
        assert store is not None
        self.need_reachable_store()
        with self._store_lock:
            try:
                value = call(store, *args)
            except TraceStoreError as error:
                self.store_health.failed(error)
                raise
        if write:
            self.store_health.wrote()
        return value

    def need_reachable_store(self) -> None:
        """`StoreUnreachableError` (503) while the last probe found the store out of reach
        (`StoreHealth.unreachable`): nothing is read from or written to a file the fleet no longer shares."""
        why = self.store_health.unreachable()
        if why is not None:
            raise StoreUnreachableError(why)

    def hide_paths(self, text: str) -> str:
        """`text` as a client may read it: without the trace store's location (`StorePaths`)."""
        return self.paths.hide(text)

    def close(self, grace_s: float = 1.0) -> None:
        for task in self._tasks:
            task.cancel()
        if self.validators is not None:
            self.validators.close(min(grace_s, 0.2))  # a validator keeps nothing worth waiting for
        if self.pool is not None:
            self.pool.close(grace_s)
        if self.store is not None:
            with self._store_lock:
                self.store.close()

    # -- planning -------------------------------------------------------------------------------------------
    async def plan(
        self, body: PlanBody, prefer: int | None = None, previous: tuple[list[str], str | None] | None = None
    ) -> PlanResponse:
        """Plan `body` on a worker (`prefer`: the one whose caches know the task). `previous`: the steps a replan
        may keep and their cost model (`previous_plan`), kept where still valid (`Planner.plan(previous_plan=)`).
        The plan answered is the run's plan from now on, in memory and in the trace store."""
        assert self.pool is not None
        budget = min(body.budget or self.config.budget_s, self.config.max_budget_s)
        run_id = body.run_id or uuid.uuid4().hex
        payload = body.model_dump(exclude={"wait"}) | {"budget": budget, "run_id": run_id}
        timeout = budget + self.config.decomposer_budget_s + CALL_GRACE_S
        reuse: dict[str, Any] = {"previous_plan": previous[0], "previous_cost_model": previous[1]} if previous else {}
        # with the client's run id the run must be recorded; without, planning goes on when the store fails
        must_record = body.run_id is not None
        if must_record and self.store is not None:
            self.need_reachable_store()  # the worker would record the run where no other server looks
        index, answer = await self.pool.call(
            "plan", timeout, prefer=prefer, body=payload, model_version=self.model_version, must_record=must_record,
            **reuse,
        )  # fmt: skip
        if "store_failed" in answer:  # the client's run could not be recorded: nothing was planned
            self.store_health.failed(answer["store_failed"]["kind"])
            raise store_error(answer["store_failed"]["kind"], answer["store_failed"]["error"])
        tenant = tenant_of(run_id)
        if "unavailable" in answer:  # the tenant's stored model is unreadable: every worker would say the same
            self.model_errors[tenant] = answer["unavailable"]["error"]
            raise Unavailable(answer["unavailable"]["error"], answer["unavailable"]["kind"])
        self.model_errors.pop(tenant, None)
        if "bad_input" in answer:
            raise BadRequest(answer["bad_input"]["error"], answer["bad_input"]["kind"])
        self.metrics.observe_plan(answer["result"])
        if answer.get("store_error"):
            self._store_write_failed(answer["store_error"]["kind"])
        elif self.store is not None:
            self.store_health.wrote()  # the worker recorded the plan
        plan, cost_model = answer["result"].get("plan"), answer["result"].get("cost_model")
        if plan is not None:
            self.memory.keep_plan(run_id, plan, cost_model)
        source = self.memory.remember(run_id, body.model_dump(include={"domain", "problem", "task"}), index)
        if self.store is not None:
            await self._keep_run(run_id, source, plan, cost_model, must_record)
        return PlanResponse.model_validate(answer["result"])

    async def _in_store(self, call: Callable[..., Any], *args: Any, write: bool = False) -> Any:
        """`call(store, *args)` on a store thread, holding the store's lock; only with a store. Its failure (or,
        with `write`, its success) is noted for health."""
        return await anyio.to_thread.run_sync(
            lambda: self._store_call(call, *args, write=write), limiter=self._store_threads
        )

    async def _keep_run(
        self,
        run_id: str,
        source: dict[str, Any] | None,
        plan: list[str] | None,
        cost_model: str | None,
        must_record: bool,
    ) -> None:
        """Keep the run's task and plan in the store (`runs.store_run`). A run the client named must be kept
        whole, so a failure is the call's; else the plan is answered anyway (the run's task and plan stay in
        memory until a restart), the failure counted, noted for health and logged."""
        try:
            await self._in_store(store_run, run_id, source, plan, cost_model, write=True)
        except TraceStoreError as error:
            if must_record:
                raise
            self._store_write_failed(type(error).__name__)
            log.warning(
                "run %s is not kept in the trace store (a replan after a restart will not find it): %s", run_id, error
            )

    def _store_write_failed(self, kind: str) -> None:
        """A write to the store failed and the call went on without it: counted, and noted for health."""
        self.metrics.store_write_failures.labels(kind).inc()
        self.store_health.failed(kind)

    async def run_source(self, run_id: str) -> tuple[dict[str, Any], int | None]:
        """The task source of a run, and the worker that planned it (None when it came from the trace store:
        planned before a restart or by another server on the same file); NotFound if unknown."""
        known = self.memory.task(run_id)
        if known is not None:
            return known
        if self.store is not None:
            stored = await self._in_store(task_source, run_id)
            if stored is not None:
                return stored, None
            # no path: the trace store's location is the server's business, not a client's
            raise NotFound(
                f"unknown run {run_id!r}: no plan of this server or of its trace store has that run "
                "id (or its task was pruned); send the task to /v1/plan"
            )
        raise NotFound(
            f"unknown run {run_id!r}: this server (no trace store) remembers the tasks of its "
            f"{MAX_RUNS} most recent plans (of {MAX_SOURCES} tasks) since it started; send the task to "
            "/v1/plan again, or start the server with --traces to keep them across restarts"
        )

    async def replan(self, body: ReplanBody) -> PlanResponse:
        """Plan the run's task again from the observed state, keeping what is still valid of the plan being
        executed (`previous_plan`)."""
        source, worker = await self.run_source(body.run_id)
        previous = await self.previous_plan(body)
        options = {name: getattr(body, name) for name in PlanOptions.model_fields}  # as the replan says them
        request = PlanBody(**source, **options, init=body.state, run_id=body.run_id)
        return await self.plan(request, prefer=worker, previous=previous)

    async def previous_plan(self, body: ReplanArgs) -> tuple[list[str], str | None] | None:
        """The steps a replan may keep and their cost model (`runs.steps_to_keep`): of the client's
        `previous_plan`, else of the run's plan as this service last handed it out (from the trace store, which
        outlives a restart, with the steps recorded for the run since; from memory without one)."""
        if body.previous_plan is not None:
            kept, steps = None, []
        elif self.store is not None:
            kept, steps = await self._in_store(stored_run, body.run_id)
        else:
            kept, steps = self.memory.plan(body.run_id), []
        return steps_to_keep(body, kept, steps)

    def learning_tenant(self, tenant: str) -> str:
        """Whose model prices the actions of `tenant`: its own, or with `pool_learning` the pooled one."""
        return POOLED if self.config.pool_learning else tenant

    async def costs(self, body: CostsBody, tenant: str = DEFAULT_TENANT) -> CostsResponse:
        """The learned cost of every grounded action of a task, from a planner worker (the tenant's model)."""
        assert self.pool is not None
        timeout = self.config.max_budget_s + CALL_GRACE_S
        _, answer = await self.pool.call(
            "costs", timeout, body=body.model_dump(), model_version=self.model_version, tenant=tenant
        )
        if "unavailable" in answer:
            raise Unavailable(answer["unavailable"]["error"], answer["unavailable"]["kind"])
        if "bad_input" in answer:
            raise BadRequest(answer["bad_input"]["error"], answer["bad_input"]["kind"])
        return CostsResponse.model_validate(answer["result"])

    # -- traces ---------------------------------------------------------------------------------------------
    def need_store(self):
        if self.store is None:
            raise BadRequest("this server has no trace store: start it with --traces PATH")
        return self.store

    async def record_steps(self, body: StepsBody, provenance: tuple[str, str] | None = None) -> StepsResponse:
        """Record the executed steps of `body` (each once: `traces.recording`). With the body's `idempotency_key`
        (HTTP's `Idempotency-Key` header is put there, in the tenant's namespace, by `tenancy.steps_in`), the
        batch is recorded once and a retry answered as the first time, across restarts; other steps under a used
        key are a 422 `IdempotencyKeyReused`. The key is one opaque string here.
        `provenance`: the (tenant, principal) posting them, kept for each step recorded (`traces.provenance`),
        in the transaction that records the steps."""
        self.need_store()
        key = body.idempotency_key

        def write(store: Any) -> RecordReport:
            return store.record_steps(body.steps, idempotency_key=key, provenance=provenance)

        try:
            report = await self._in_store(write, write=True)
        except IdempotencyKeyReused as error:
            raise BadRequest(str(error), "IdempotencyKeyReused", status=422) from None
        if not report.replayed:
            self.metrics.steps_recorded.inc(report.recorded)
        return StepsResponse.of(report)

    async def actions(
        self, run_prefix: str | None = None, exclude_prefix: str | None = None, tenant: str = DEFAULT_TENANT
    ) -> ActionsResponse:
        """Per action name, the recorded steps' statistics (of the runs `TraceStore.stats` selects with
        `run_prefix` / `exclude_prefix`) and p_fail under the tenant's latest model."""
        self.need_store()
        models = self._models
        assert models is not None

        def read() -> ActionsResponse:
            from domains.model import GroundAction

            def stats_and_model(store: Any) -> tuple[list, int | None, Any]:
                stats = store.stats(run_prefix=run_prefix, exclude_prefix=exclude_prefix)
                version, model = models.get(self.learning_tenant(tenant), self.model_version)
                return stats, version, model

            stats, version, model = self._store_call(stats_and_model)
            p_fail: list[float | None] = [None] * len(stats)
            if model is not None and stats:
                p_fail = [float(p) for p in model.predict_proba([GroundAction(s.action, ()) for s in stats])]
            return ActionsResponse(
                model_version=version, actions=[ActionInfo(**s.model_dump(), p_fail=p) for s, p in zip(stats, p_fail)]
            )

        return await anyio.to_thread.run_sync(read, limiter=self._store_threads)

    async def retrain(self, body: RetrainBody) -> dict[str, Any]:
        """Fit every tenant's next model (or the pooled one) on a worker; the result holds them all, keyed by
        tenant (`PlannerWorker.retrain`): each tenant sees its own (`portfolio.serve.tenancy.retrain_out`)."""
        assert self.pool is not None
        self.need_store()
        self.need_reachable_store()
        # the same parameters as `portfolio retrain` (learning.FailureModel's own names)
        params: dict[str, Any] = dict(
            prior_mean=body.prior_mean, prior_strength=body.prior_strength, half_life_steps=body.half_life,
            guard=self.config.poison_guard, include_held=body.include_held,
        )  # fmt: skip
        _, answer = await self.pool.call("retrain", 3600.0, **params)
        if "busy" in answer:  # another server (or `portfolio retrain`) took the store's lock first
            raise BadRequest(answer["busy"]["error"], answer["busy"]["kind"], status=409)
        if "bad_input" in answer:
            raise BadRequest(answer["bad_input"]["error"], answer["bad_input"]["kind"])
        self.model_version = max(info["version"] for info in answer["result"]["models"].values())
        # the retraining worker loaded the default tenant's model, or says why not; the others' are checked again
        # at their tenants' next calls (the model version moved)
        self.model_errors = {DEFAULT_TENANT: answer["model_error"]} if answer.get("model_error") else {}
        for info in answer["result"]["models"].values():  # the worker has logged each batch held
            self.metrics.held_steps.inc(sum(held["steps"] for held in info["held"]))
        return answer["result"]

    # -- validation -----------------------------------------------------------------------------------------
    async def validate(self, body: ValidateBody, caller: str | None = None) -> Verdict:
        """The verdict from a validator process (see `portfolio.serve.validator`), in `caller`'s turn (a
        principal's name: each caller's validations queue on their own and callers take turns): BadRequest for
        bad input, a 422 `ValidationTooCostly` when its worst case cannot finish within the deadline or the
        memory cap (refused before it starts) or it outgrows them, QueueFull when the validators are busy and
        the caller's queue is full. Cancelling it (the client went away) stops the check and replaces the
        validator."""
        assert self.validators is not None
        budget = self.config.validate_budget_s
        try:
            _, answer = await self.validators.call(
                "validate",
                budget,
                owner=caller,
                stop_when_cancelled=True,
                body=body.model_dump(),
                budget_s=budget,
                memory_limit_mb=self.config.memory_limit_mb,
            )
        except CallTimedOut:
            raise BadRequest(
                f"validation did not finish within the server's {budget:g} s (--validate-budget): "
                "the task's quantifiers or size make it too costly to check",
                "ValidationTooCostly",
                status=422,
            ) from None
        except CallOutOfMemory:
            raise BadRequest(
                f"validation went over the server's memory cap ({self.config.memory_limit_mb} MB): "
                "the task is too large to check",
                "ValidationTooCostly",
                status=422,
            ) from None
        if "bad_input" in answer:
            raise BadRequest(answer["bad_input"]["error"], answer["bad_input"]["kind"])
        if "too_costly" in answer:
            raise BadRequest(answer["too_costly"]["error"], "ValidationTooCostly", status=422)
        return Verdict.model_validate(answer["result"])

    # -- jobs -----------------------------------------------------------------------------------------------
    def submit(
        self, kind: Literal["plan", "replan", "retrain"], work: Callable[[], Awaitable[BaseModel | WireModel | dict]]
    ) -> Job:
        """Run `work` in the background as a job; refused at once (QueueFull) when it could only queue
        beyond the limit, like a request that waits."""
        assert self.pool is not None
        if self.pool.busy >= self.pool.size and self.pool.queued >= self.pool.queue_limit:
            raise QueueFull(f"all {self.pool.size} planner workers are busy and {self.pool.queued} requests are queued")
        job = Job(id=uuid.uuid4().hex, kind=kind, status="running", created=time.time())
        self.jobs[job.id] = job
        while len(self.jobs) > MAX_JOBS:
            self.jobs.popitem(last=False)

        async def run() -> None:
            try:
                value = await work()
                job.result = value.model_dump(mode="json") if isinstance(value, BaseModel | WireModel) else value
                job.status = "done"
            except asyncio.CancelledError:
                job.status, job.error = "failed", "cancelled: the server is shutting down"
                raise
            except Exception as error:
                message = f"{getattr(error, 'kind', type(error).__name__)}: {error}"
                job.status, job.error = "failed", self.hide_paths(message)
                log.warning("%s job %s failed: %s", kind, job.id, message)
            finally:
                job.finished = time.time()

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        self._job_tasks[job.id] = task
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: self._job_tasks.pop(job.id, None))
        return job

    async def finished(self, job: Job) -> Job:
        """`job` once it has finished (waiting does not cancel it: another caller may be waiting too)."""
        task = self._job_tasks.get(job.id)
        if task is not None:
            await asyncio.shield(task)
        return job

    def submit_retrain(self, body: RetrainBody) -> Job:
        """A retrain job; while one is still running, that one (202 with its id): retrains of one store are
        redundant, and each holds a worker for seconds, so a client (or a fuzzer) sending them in a loop
        would otherwise queue up work that starves every plan behind it. A retrain that releases the held
        batches (`include_held`, an admin's) is its own job, refused (409 `RetrainRunning`) while another holds
        the store's retrain lock (`traces.fleet_lock`), this server's own included."""
        running = self.running_retrain()
        if running is not None and not body.include_held:
            return running
        job = self.submit("retrain", lambda: self.retrain(body))
        self._retrain_job = job.id
        return job

    async def check_retrain_elsewhere(self) -> None:
        """A 409 `RetrainRunning` when another process (a worker of this server or of another sharing the store,
        `portfolio retrain`) holds the store's retrain lock (`traces.fleet_lock`), so a client is told at once
        rather than by a failed job. A retrain that starts between this look and the job's is still refused, by
        the job (a 409 in its error)."""
        from portfolio.serve.worker import RETRAIN_RUNNING
        from traces.fleet_lock import FleetBusy, fleet_lock

        def look(store: Any) -> bool:
            try:
                with fleet_lock(store, "retrain"):
                    return False
            except FleetBusy:
                return True

        if await self._in_store(look):
            raise BadRequest(RETRAIN_RUNNING, "RetrainRunning", status=409)

    def running_retrain(self) -> Job | None:
        """The retrain job still running, if any (which `submit_retrain` answers instead of a new one)."""
        running = self.jobs.get(self._retrain_job or "")
        return running if running is not None and running.status == "running" else None

    def job(self, job_id: str) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise NotFound(f"unknown job {job_id!r}")
        return job

    def health(self) -> HealthResponse:
        """`degraded`, with the reasons, when no planner worker is ready, the workers cannot use the model, or
        the trace store cannot be written or read (as last probed or met); no reason names the store's file."""
        assert self.pool is not None
        reasons = []
        if self.pool.ready == 0:
            last = self.pool.last_failure
            reasons.append("no planner worker is ready" + (f"; last: {last}" if last else " (starting)"))
        for tenant, error in sorted(self.model_errors.items()):
            whose = "" if tenant == DEFAULT_TENANT else " of a tenant"  # health needs no token: no tenant named
            reasons.append(f"plans{whose} are refused (503): {error}")
        if self.store is not None:
            reasons += self.store_health.reasons()
        return HealthResponse(
            status="degraded" if reasons else "ok",
            reasons=[self.hide_paths(reason) for reason in reasons],
            workers=self.pool.size,
            ready=self.pool.ready,
            busy=self.pool.busy,
            queued=self.pool.queued,
            traces=self.store is not None,
        )
