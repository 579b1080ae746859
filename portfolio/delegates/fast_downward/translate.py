"""Fast Downward's translator, run in a warm worker process exactly as its own `translate.main` runs it.

`fast_downward.translate.main.main()` parses the two files, normalises the task (`normalize.normalize`: it
compiles away universal conditions, disjunctions, derived predicates' negations, quantified and conditional
effects, which `pddl_to_sas` asserts on: "Condition not normalized"), runs `pddl_to_sas` and writes the SAS file.
This module runs the same three steps on PDDL texts in a long-lived worker (`portfolio.engine.workers`), so a
planning call pays neither interpreter start-up nor imports.

Entry points:
- `translate(domain_pddl, problem_pddl, options=())` -> `TranslatorResult` (the SAS text, and whether the
  translator proved the task unsolvable). Raises the translator's own errors (e.g. `ParseError`) on input it
  refuses, and `TranslatorOptionsError` on options outside `ALLOWED_FLAGS` / `ALLOWED_VALUED`.
- `translate_message(...)`: the same, as the worker answers it (a plain dict; `TRANSLATE_OP`, `PRELOAD`).
- `check_options(arguments)`, `reset_translator_state(arguments)`, `collector_paused()`, `proved_unsolvable(task)`.

Each task is translated as a first one would be: the translator's global state (its parsed options, two
statistics counters in `main`, the warnings already printed) is reset before every task, so the SAS text equals
the driver's `--translate` output (checked on every domain of `../shared/ipc` and `../shared/ipc-more` by
`benchmarks/sas_compare.py`, and on an ADL / axioms / costs subset in the tests).

Options: translator flags that skip work (`--keep-unreachable-facts`, `--skip-variable-reordering`, ...) apply to
one call only; without flags the output is the driver's. The learned selection (`learning.selection`) chooses
them per domain (why per domain, and what they cost: `docs/decisions/translator-flags.md`).

Translation runs with Python's cyclic garbage collector paused (`collector_paused`): the output is unchanged and
translation takes less CPU (`docs/decisions/translator-collector.md`).

Unsolvability is read from the translator's result, not from what it prints: `pddl_to_sas` answers a task it
proved unsolvable (goal not relaxed-reachable, trivially false goal) with a task that has no operators, no
axioms and a goal its initial state does not satisfy (`proved_unsolvable`). Such a task has no plan whatever
produced it.

    result = translate(domain_text, problem_text, ["--keep-unreachable-facts"])
    if not result.unsolvable:
        task = parse_sas(result.sas)  # portfolio.delegates.fast_downward.sas"""

from __future__ import annotations

import contextlib
import copy
import gc
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

# Parsed translator options per argument tuple (the empty tuple: the driver's defaults).
_PARSED_OPTIONS: dict[tuple[str, ...], Any] = {}
# Translator flags a caller may pass: those that change how much work the translator does, never the file names,
# the output's meaning (`--relaxed`) or what it prints (`--dump-task`).
ALLOWED_FLAGS = frozenset(
    {
        "--keep-unreachable-facts",
        "--skip-variable-reordering",
        "--keep-unimportant-variables",
        "--full-encoding",
        "--add-implied-preconditions",
    }
)
ALLOWED_VALUED = frozenset({"--invariant-generation-max-candidates", "--invariant-generation-max-time"})


class TranslatorOptionsError(ValueError):
    """Translator options this pipeline does not pass on."""


@dataclass(frozen=True)
class TranslatorResult:
    """What one translation produced: the SAS text, and whether the translator proved the task unsolvable."""

    sas: str
    unsolvable: bool
    log: str  # what the translator printed (timings, warnings): for diagnosis only, never parsed

    def as_dict(self) -> dict[str, Any]:
        return {"sas": self.sas, "unsolvable": self.unsolvable, "log": self.log}


def check_options(arguments: Sequence[str]) -> tuple[str, ...]:
    """`arguments` as a tuple, after checking each is a flag in `ALLOWED_FLAGS` or a flag in `ALLOWED_VALUED`
    followed by a non-negative integer; raises `TranslatorOptionsError` naming the first one that is not."""
    arguments = tuple(arguments)
    index = 0
    while index < len(arguments):
        flag = arguments[index]
        if flag in ALLOWED_VALUED:
            value = arguments[index + 1] if index + 1 < len(arguments) else ""
            if not value.isdigit():
                raise TranslatorOptionsError(f"translator option {flag} needs a non-negative integer, got {value!r}")
            index += 2
            continue
        if flag not in ALLOWED_FLAGS:
            known = ", ".join(sorted(ALLOWED_FLAGS | ALLOWED_VALUED))
            raise TranslatorOptionsError(f"unsupported translator option {flag!r}; supported: {known}")
        index += 1
    return arguments


def reset_translator_state(arguments: Sequence[str] = ()) -> None:
    """Put the translator's module-level state back to how a fresh `python -m fast_downward.translate` has it,
    given `arguments` (translator flags, `check_options`) besides the two file names."""
    from fast_downward.translate import main as translator
    from fast_downward.translate import options
    from fast_downward.translate.pddl_parser import warning

    key = check_options(arguments)
    if key not in _PARSED_OPTIONS:
        # The file names are never opened (the texts are parsed from memory); the rest are the driver's defaults.
        _PARSED_OPTIONS[key] = options.parse_args(["domain.pddl", "problem.pddl", *key])
    options.options = copy.copy(_PARSED_OPTIONS[key])
    translator.simplified_effect_condition_counter = 0
    translator.added_implied_precondition_counter = 0
    warning.printed_warnings.clear()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block (back to its previous state after). The translator
    allocates millions of small objects that live until the task is written, so the collector's generational
    passes rescan them again and again without freeing anything; reference counting still frees the rest."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def proved_unsolvable(sas_task: Any) -> bool:
    """True for a SAS task with no operators and no axioms whose initial state misses its goal: nothing can
    ever change the state, so no plan exists. This is the shape of the translator's `unsolvable_sas_task`."""
    if sas_task.operators or sas_task.axioms:
        return False
    init = sas_task.init.values
    return any(init[var] != value for var, value in sas_task.goal.pairs)


def translate(domain_pddl: str, problem_pddl: str, options: Sequence[str] = ()) -> TranslatorResult:
    """PDDL texts -> SAS text, by Fast Downward's parse -> normalize -> pddl_to_sas, with the translator's
    `options` (default: none, the driver's defaults). Raises the translator's own exceptions (e.g.
    `ParseError`) on input it refuses."""
    from fast_downward.translate import main as translator
    from fast_downward.translate import normalize
    from fast_downward.translate.pddl_parser import lisp_parser, parsing_functions

    reset_translator_state(options)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), collector_paused():
        task = parsing_functions.parse_task(
            lisp_parser.parse_nested_list(io.StringIO(domain_pddl)),
            lisp_parser.parse_nested_list(io.StringIO(problem_pddl)),
        )
        normalize.normalize(task)
        sas_task = translator.pddl_to_sas(task)
    out = io.StringIO()
    sas_task.output(out)
    return TranslatorResult(out.getvalue(), proved_unsolvable(sas_task), printed.getvalue())


TRANSLATE_OP = "portfolio.delegates.fast_downward.translate:translate_message"
PRELOAD = (
    "fast_downward.translate.main",
    "fast_downward.translate.normalize",
    "portfolio.delegates.fast_downward.translate",
)


def translate_message(domain_pddl: str, problem_pddl: str, options: Sequence[str] = ()) -> dict[str, Any]:
    """`translate` as a worker process answers it (`portfolio.engine.worker_main`): a plain dict."""
    return translate(domain_pddl, problem_pddl, options).as_dict()
