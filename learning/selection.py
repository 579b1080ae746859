"""Which Fast Downward configurations to race on a task, learned per domain from the recorded attempts.

The anchors are the IPC portfolios that select planners per task (IBaCoP 2014, Delfi 2018). This estimator is
much smaller and can be read off its data: for each domain (the hash of the domain text, `Task.domain_fingerprint`)
it keeps, per recorded task, the task's size after translation (SAS operators) and, per configuration, the time
to its first plan or the time by which it had none (killed when another won, timed out, exhausted). For a new
task of that domain it builds a race greedily, as Fast Downward's Stone Soup portfolios were built: first the
configuration with the least weighted mean time over the recorded tasks, then the one that most lowers the mean
of the pair's faster time, and so on. A task no configuration in the set solved counts `unsolved_factor` times
the longest time recorded on it. Recorded tasks weigh by their size's closeness to the new task's (the weight
halves per `size_halving` doublings of the operator count apart), so a domain whose big tasks want another
search than its small ones gets both right.

Domains with fewer than `min_tasks` recorded tasks have no entry: the delegate keeps its fixed order. A
configuration never tried on a task counts as unsolved there, so a ranking leans to what was seen working;
to learn about every configuration, record with all of them racing (`fd_workers=4`) or one at a time
(`fd_alias=X, fd_workers=1`), as `benchmarks/bench_selection.py` does.

The translation is chosen too, before it runs: Fast Downward's translator has flags that skip work
(`--keep-unreachable-facts`, `--skip-variable-reordering`, ...; `portfolio.delegates.fast_downward.translate`), and
attempts record the
flags they were translated with (`details["translator"]`, none: the driver's defaults). Records are kept per
task and per flag set ("variant"); `predict_translator` compares each variant with the defaults on the tasks
recorded under both, each with its own best race of `race_size` (the greedy order above, over that variant's
records), and picks the variant with the least mean time when it is at most `translator_margin` times the
defaults' (a margin, so measurement noise on domains where translation costs nothing leaves the driver's
translation alone). Without records of a variant the defaults stay: the SAS text then equals the driver's.

Stored as JSON data, never pickled (as `learning.storage`), and checked on load against pydantic models of the
document (`_Stored*`): a hand-edited or damaged one is a `SelectionFormatError` naming the file, table, row and
field, which the planner meets by keeping its fixed order (`Planner`), and which the next `retrain` replaces even
when no domain has enough records for a new ranking. Depends on `traces`, never on `portfolio`: the
attempt fields it reads (`details["searches"]`, `details["search"]`, `details["sas"]`, `details["translator"]`)
are plain JSON, declared in `traces.attempt_details`.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from learning.params import Params
from traces.attempt_details import details_of
from traces.errors import BadRowError
from traces.stored_json import describe

FORMAT_NAME = "portfolio-planner/selection-model"
FORMAT_VERSION = 2  # 2: records per translator variant (version 1 documents are read as the defaults' records)
DELEGATE = "fast-downward"
DEFAULTS = ""  # the variant name of the driver's default translation


class SelectionFormatError(BadRowError):
    """A stored selection model this release cannot read."""


# The stored document, checked on load. Strict: "5" is not 5, and nothing unknown is passed over.
_STRICT = ConfigDict(strict=True, extra="forbid")
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class _StoredRecord(BaseModel):
    model_config = _STRICT
    operators: Annotated[int, Field(ge=0)] | None = None
    times: dict[str, tuple[Seconds, bool]] = Field(default_factory=dict)


class _StoredParams(BaseModel):
    """`SelectionModel`'s parameters in the ranges `fit` accepts; an absent one takes `SelectionModel`'s default."""

    model_config = _STRICT
    min_tasks: Annotated[int, Field(ge=1)] = 3
    unsolved_factor: Annotated[float, Field(ge=1, allow_inf_nan=False)] = 2.0
    size_halving: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = 2.0
    translator_margin: Annotated[float, Field(gt=0, le=1)] = 0.95


class _StoredV1(BaseModel):
    """Format 1: per domain, one record per task (the defaults' translation)."""

    model_config = _STRICT
    format: Literal["portfolio-planner/selection-model"]
    format_version: Literal[1]
    params: _StoredParams
    domains: dict[str, list[_StoredRecord]]


class _StoredV2(BaseModel):
    """Format 2: per domain, per task, one record per translator variant."""

    model_config = _STRICT
    format: Literal["portfolio-planner/selection-model"]
    format_version: Literal[2]
    params: _StoredParams
    domains: dict[str, list[dict[str, _StoredRecord]]]


_DOCUMENT: TypeAdapter[_StoredV1 | _StoredV2] = TypeAdapter(
    Annotated[_StoredV1 | _StoredV2, Field(discriminator="format_version")]
)


@dataclass
class TaskRecord:
    """What is known about one task: its SAS operator count (None if never translated) and per configuration
    `(seconds, solved)`: the time to its plan, or the longest time it ran without one."""

    operators: int | None = None
    times: dict[str, tuple[float, bool]] = field(default_factory=dict)

    def add(self, config: str, seconds: float, solved: bool) -> None:
        old = self.times.get(config)
        if (
            old is None
            or (solved and (not old[1] or seconds < old[0]))
            or (not solved and not old[1] and seconds > old[0])
        ):
            self.times[config] = (seconds, solved)


def variant_name(options: Iterable[str] | None) -> str:
    """The name a translator flag set is recorded under: the flags joined by spaces ("" for the defaults)."""
    return " ".join(options or ())


def observations(plans: Iterable[Any]) -> dict[str, dict[str, dict[str, TaskRecord]]]:
    """domain -> task fingerprint -> translator variant (`variant_name`) -> `TaskRecord`, from recorded plans
    (`traces.selection.DomainPlan`). Reads the Fast Downward attempts that raced configurations: the winner
    solved at the attempt's time, the others had no plan by then. Attempts without a race (in-process replans,
    translation failures) and those of tasks with action costs (which always race the cost-aware pair, never
    a selection) say nothing."""
    found: dict[str, dict[str, dict[str, TaskRecord]]] = {}
    for plan in plans:
        for attempt in plan.attempts:
            details = details_of(attempt)
            searches = details.get("searches")
            if (
                attempt.get("delegate") != DELEGATE
                or not isinstance(searches, dict)
                or not searches
                or details.get("costs")
            ):
                continue
            seconds = float(attempt.get("elapsed_ms") or 0.0) / 1000.0
            winner = details.get("search") if attempt.get("status") == "solved" else None
            variants = found.setdefault(plan.domain, {}).setdefault(plan.fingerprint or "", {})
            record = variants.setdefault(variant_name(details.get("translator")), TaskRecord())
            sas = details.get("sas")
            if sas and isinstance(sas.get("operators"), int):
                record.operators = sas["operators"]
            for config in searches:
                record.add(str(config), seconds, config == winner)
    return found


def _weight(operators: int | None, target: int | None, halving: float | None) -> float:
    if not halving or not operators or not target:
        return 1.0
    return 0.5 ** (abs(math.log2(operators / target)) / halving)


def _set_time(record: TaskRecord, chosen: Sequence[str], unsolved_factor: float) -> float:
    solved = [record.times[c][0] for c in chosen if c in record.times and record.times[c][1]]
    if solved:
        return min(solved)
    longest = max((seconds for seconds, _ in record.times.values()), default=1.0)
    return unsolved_factor * longest


def greedy_order(
    records: Sequence[TaskRecord], configs: Sequence[str], weights: Sequence[float], unsolved_factor: float
) -> list[str]:
    """Configurations in the order a greedy race-builder adds them (module docstring). Ties (common once one
    configuration solved everything first) go to the better configuration on its own, then to `configs`' order:
    the second of a race is then the best stand-in for the first, should it stall on the next task."""
    total = sum(weights) or 1.0

    def cost(chosen: Sequence[str]) -> float:
        return sum(w * _set_time(r, chosen, unsolved_factor) for r, w in zip(records, weights)) / total

    order: list[str] = []
    while len(order) < len(configs):
        order.append(min((c for c in configs if c not in order), key=lambda c: (cost([*order, c]), cost([c]))))
    return order


def variant_cost(records: Sequence[TaskRecord], race_size: int, unsolved_factor: float) -> float:
    """Mean time of the best race of `race_size` configurations (greedy order, all tasks alike) on `records`."""
    configs = list(dict.fromkeys(c for r in records for c in r.times))
    race = greedy_order(records, configs, [1.0] * len(records), unsolved_factor)[:race_size]
    return statistics.mean(_set_time(r, race, unsolved_factor) for r in records)


class SelectionModel(Params):
    """Per-domain configuration ranking and translator variant (module docstring), scikit-learn style:
    parameters in `__init__`, `fit` on recorded plans, `predict` / `predict_translator` for one task.
    `min_tasks`: recorded tasks a domain (and a variant) needs before it gets a ranking; `unsolved_factor`: the
    penalty multiple for a task a set left unsolved; `size_halving`: doublings of the operator count apart at
    which a recorded task weighs half (None: all weigh alike); `translator_margin`: how much faster than the
    defaults a translator variant must have been to be chosen."""

    def __init__(
        self,
        min_tasks: int = 3,
        unsolved_factor: float = 2.0,
        size_halving: float | None = 2.0,
        translator_margin: float = 0.95,
    ) -> None:
        self.min_tasks = min_tasks
        self.unsolved_factor = unsolved_factor
        self.size_halving = size_halving
        self.translator_margin = translator_margin

    def fit(self, plans: Iterable[Any]) -> SelectionModel:
        """Learn from recorded plans (`traces.selection.domain_plans`)."""
        if (
            self.min_tasks < 1
            or self.unsolved_factor < 1
            or (self.size_halving is not None and self.size_halving <= 0)
            or not 0 < self.translator_margin <= 1
        ):
            raise ValueError(
                "min_tasks must be >= 1, unsolved_factor >= 1, size_halving positive or None and "
                "translator_margin in (0, 1]"
            )
        self.domains_ = {
            domain: list(tasks.values())
            for domain, tasks in observations(plans).items()
            if len(tasks) >= self.min_tasks
        }
        self.__dict__.pop("_memo", None)
        return self

    def _memoised(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """`compute()` once per key for this fit: the planner asks on every call (the translator variant before
        each translation, the ranking after), and the answer depends only on the fitted records and `key`."""
        memo = self.__dict__.setdefault("_memo", {})
        if key not in memo:
            if len(memo) > 10_000:
                memo.clear()
            memo[key] = compute()
        return memo[key]

    def _check_fitted(self) -> None:
        if not hasattr(self, "domains_"):
            raise ValueError("this SelectionModel is not fitted yet; call fit() first")

    def _records(self, domain: str, variant: str) -> list[TaskRecord]:
        return [task[variant] for task in self.domains_.get(domain, ()) if variant in task]

    def predict(self, domain: str, operators: int | None = None, translator: Sequence[str] = ()) -> list[str] | None:
        """The configurations to race on a task of `domain` with `operators` SAS operators, translated with the
        `translator` flags, best first; None when the domain has too few records of that translation (the
        caller keeps its fixed order)."""
        self._check_fitted()
        translator = tuple(translator)
        ranking = self._memoised(
            ("rank", domain, operators, translator), lambda: self._rank(domain, operators, translator)
        )
        return None if ranking is None else list(ranking)  # the caller's own copy: the memo keeps its answer

    def _rank(self, domain: str, operators: int | None, translator: tuple[str, ...]) -> list[str] | None:
        records = self._records(domain, variant_name(translator))
        if len(records) < self.min_tasks:
            return None
        configs = list(dict.fromkeys(c for r in records for c in r.times))
        weights = [_weight(r.operators, operators, self.size_halving) for r in records]
        return greedy_order(records, configs, weights, self.unsolved_factor)

    def predict_translator(self, domain: str, race_size: int = 2) -> tuple[str, ...]:
        """The translator flags for the next task of `domain` (module docstring); () for the defaults."""
        self._check_fitted()
        return self._memoised(("translator", domain, race_size), lambda: self._translator(domain, race_size))

    def _translator(self, domain: str, race_size: int) -> tuple[str, ...]:
        tasks = self.domains_.get(domain, ())
        best, best_ratio = DEFAULTS, self.translator_margin
        for variant in sorted({v for task in tasks for v in task} - {DEFAULTS}):
            both = [task for task in tasks if variant in task and DEFAULTS in task]
            if len(both) < self.min_tasks:
                continue
            ratio = variant_cost([t[variant] for t in both], race_size, self.unsolved_factor) / max(
                1e-9, variant_cost([t[DEFAULTS] for t in both], race_size, self.unsolved_factor)
            )
            if ratio <= best_ratio:
                best, best_ratio = variant, ratio
        return tuple(best.split())

    def explain(self) -> dict[str, dict[str, Any]]:
        """Per domain: tasks recorded, the translator variant chosen, the ranking for a task of median size,
        and per configuration how many tasks it solved and its median time on those (with that variant)."""
        self._check_fitted()
        out = {}
        for domain, tasks in self.domains_.items():
            translator = self.predict_translator(domain)
            records = self._records(domain, variant_name(translator))
            sizes = [r.operators for r in records if r.operators]
            configs: dict[str, dict[str, Any]] = {}
            for config in dict.fromkeys(c for r in records for c in r.times):
                solved = [r.times[config][0] for r in records if r.times.get(config, (0, False))[1]]
                configs[config] = {
                    "solved": len(solved),
                    "median_s": round(statistics.median(solved), 3) if solved else None,
                }
            out[domain] = {
                "tasks": len(tasks),
                "translator": list(translator),
                "variants": {
                    v or "defaults": sum(v in t for t in tasks) for v in dict.fromkeys(v for t in tasks for v in t)
                },
                "ranking": self.predict(domain, int(statistics.median(sizes)) if sizes else None, translator),
                "configs": configs,
            }
        return out

    # -- storage --------------------------------------------------------------------------------------------------
    def to_json(self) -> str:
        self._check_fitted()
        domains = {
            domain: [
                {
                    variant: {"operators": r.operators, "times": {c: list(t) for c, t in r.times.items()}}
                    for variant, r in task.items()
                }
                for task in tasks
            ]
            for domain, tasks in self.domains_.items()
        }
        return json.dumps(
            {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "params": self.get_params(), "domains": domains},
            separators=(",", ":"),
            allow_nan=False,
        )

    @classmethod
    def from_json(cls, text: str, where: str = "selection model") -> SelectionModel:
        """The model `to_json` wrote (format 1 or 2); `SelectionFormatError` naming `where` and the fields
        for anything else."""
        try:
            stored = _DOCUMENT.validate_json(text)
        except ValidationError as error:
            raise SelectionFormatError(
                f"{where} is not a {FORMAT_NAME} document this release reads ({describe(error)}); "
                "run `portfolio retrain`."
            ) from None
        model = cls(**stored.params.model_dump(exclude_unset=True))

        def record(r: _StoredRecord) -> TaskRecord:
            return TaskRecord(r.operators, dict(r.times))

        if isinstance(stored, _StoredV1):
            model.domains_ = {d: [{DEFAULTS: record(t)} for t in tasks] for d, tasks in stored.domains.items()}
        else:
            model.domains_ = {
                domain: [{variant: record(r) for variant, r in task.items()} for task in tasks]
                for domain, tasks in stored.domains.items()
            }
        return model


class SelectionInfo(BaseModel):
    version: int | None = Field(default=None, description="stored version; None when nothing was stored")
    domains: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="per domain fingerprint: tasks, ranking, configs"
    )
    skipped_domains: int = Field(0, description="domains with too few recorded tasks (fixed order kept)")
    hyperparameters: dict[str, Any] = Field(default_factory=dict)


def retrain_selection(store: Any, **params: Any) -> SelectionInfo:
    """Fit a `SelectionModel(**params)` on every plan recorded with its domain in `store` and save it as the
    next selection version. Nothing is saved when no domain has enough records, unless the newest stored
    selection cannot be read: the fit (with no domains: the fixed order) then replaces it, so a retrain is the
    remedy for a damaged one, as for a damaged failure model."""
    from traces.selection import domain_plans, save_selection_model

    model = SelectionModel(**params)
    plans = list(domain_plans(store))
    model.fit(plans)
    seen = {plan.domain for plan in plans}
    info = SelectionInfo(
        domains=model.explain(), skipped_domains=len(seen - set(model.domains_)), hyperparameters=model.get_params()
    )
    if model.domains_ or not _readable(store):
        info.version = save_selection_model(
            store, model.to_json(), {"format": FORMAT_NAME, "domains": len(model.domains_)}
        )
    return info


def _readable(store: Any) -> bool:
    """Whether the newest stored selection model (if any) loads."""
    try:
        load_selection(store)
    except BadRowError:
        return False
    return True


def load_selection(store: Any) -> SelectionModel | None:
    """The newest stored selection model, or None before the first one. `BadRowError` (a `SelectionFormatError`
    for the model itself) naming the file, table and row when it cannot be read."""
    from traces.selection import latest_selection_model
    from traces.stored_json import row_name

    stored = latest_selection_model(store)
    if stored is None:
        return None
    where = row_name(store.path, "selection_models", f"version {stored.version}", "model")
    return SelectionModel.from_json(stored.model, where)
