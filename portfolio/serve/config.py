"""`ServiceConfig`: what a server is started with (`portfolio serve`'s options), validated by pydantic. The
planner workers get their part of it as a `portfolio.serve.worker.WorkerConfig` (`worker_config`, here rather than
in `portfolio.serve.service` because it is a translation between the two configurations, nothing the service
does)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from learning.objective import DEFAULT_RETRIES, DEFAULT_SIDE_EFFECT_WEIGHT, Objective
from portfolio.serve.models import ExplorePolicy, Quality
from portfolio.serve.pool import default_workers
from portfolio.serve.worker import WorkerConfig


class ServiceConfig(BaseModel):
    workers: int = Field(ge=1)
    queue: int = Field(ge=0)
    # finite: inf reached the workers' JSON configuration as null, and every worker died at birth, again and again
    budget_s: float = Field(gt=0, allow_inf_nan=False)
    max_budget_s: float = Field(gt=0, allow_inf_nan=False)
    decomposer_budget_s: float = Field(gt=0, allow_inf_nan=False)
    delegates: list[str]
    traces: str | None = None
    llm_url: str | None = None
    llm_model: str | None = None
    memory_limit_mb: int = Field(gt=0)
    # The pool already plans one request per core; a worker that also raced several searches per request would
    # put two searches on each core. Default: the cores each worker has to itself, at least one.
    fd_workers: int | None = Field(default=None, ge=1)
    cache_dir: str | None = None  # the on-disk translation cache the workers share (None: the user's default)
    translation_cache: bool = True
    explore: ExplorePolicy | None = None  # a request's own `explore` wins; None: the default
    quality: Quality | None = None  # likewise `quality` and `weight`
    weight: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    objective: Objective | None = None  # likewise; the time objective's parameters are the server's alone
    side_effect_weight: float = Field(default=DEFAULT_SIDE_EFFECT_WEIGHT, ge=0, allow_inf_nan=False)
    replan_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # None: learned from the traces
    max_retries: int = Field(default=DEFAULT_RETRIES, ge=0)
    carry_over: bool = True  # Fast Downward's work goes on past its share, until the request's last deadline
    # Validation runs in processes of its own (`portfolio.serve.validator`) under this deadline and the memory cap.
    validate_budget_s: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    validators: int | None = Field(default=None, ge=1)  # None: as many as planner workers
    pool_learning: bool = False  # one failure model of every tenant's steps, not one per tenant
    poison_guard: bool = True  # retrains hold back one principal's departing batches (`learning.guard`)


def worker_config(config: ServiceConfig) -> WorkerConfig:
    """The part of `config` each planner worker is started with (`Service.start`). Without `fd_workers`, a
    worker races as many searches as the cores it has to itself, at least one."""
    return WorkerConfig(
        delegates=config.delegates,
        budget_s=config.budget_s,
        decomposer_budget_s=config.decomposer_budget_s,
        traces=config.traces,
        llm_url=config.llm_url,
        llm_model=config.llm_model,
        memory_limit_mb=config.memory_limit_mb,
        fd_workers=config.fd_workers or max(1, default_workers() // config.workers),
        cache_dir=config.cache_dir,
        translation_cache=config.translation_cache,
        explore=config.explore,
        quality=config.quality,
        weight=config.weight,
        objective=config.objective,
        side_effect_weight=config.side_effect_weight,
        replan_ms=config.replan_ms,
        max_retries=config.max_retries,
        carry_over=config.carry_over,
        pool_learning=config.pool_learning,
    )
