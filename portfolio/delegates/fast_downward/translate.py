"""Fast Downward's translator, run in-process exactly as its own `translate.main` runs it.

`fast_downward.translate.main.main()` does: parse the two files, `normalize.normalize(task)`, `pddl_to_sas(task)`,
write the SAS file. Normalisation is not optional: it compiles away universal conditions, disjunctions, derived
predicates' negations, quantified and conditional effects into what `pddl_to_sas` asserts on ("Condition not
normalized"). This module runs the same three steps on PDDL texts, in a warm worker process, so a planning call
pays neither interpreter start-up nor imports.

The translator keeps global state between runs: the parsed command-line options (`options.options`), two
statistics counters in `main`, and the set of warnings already printed. Each task starts from a fresh copy of
the default options and zeroed counters, so the n-th task is translated exactly as a first one would be: its SAS
text equals the driver's `--translate` output (checked on every domain of `../shared/ipc` and
`../shared/ipc-more` by `benchmarks/sas_compare.py`, and on an ADL / axioms / costs subset in the tests).

Options. A call may pass translator flags that skip work (`ALLOWED_FLAGS`: `--keep-unreachable-facts` skips
`filter_unreachable_propositions`, `--skip-variable-reordering` the causal-graph ordering, ...); they apply to
that call only (the next starts from the defaults again). Without flags the output is the driver's. The learned
selection (`learning.selection`) chooses flags per domain where recorded runs were faster with them. Measured
before the collector pause below (`benchmarks/bench_translate_options.py`, 8 problems per domain of
`../shared/ipc`, translation + search with the fixed race): `--keep-unreachable-facts --skip-variable-reordering`
took 0.60-1.0x the defaults' translation time (satellite 0.61x, elevators 0.84x, parking 0.97x wall under load;
parking's CPU 0.85x with the first flag alone) and changed search both ways (depot 0.67x, driverlog 1.06x);
`--keep-unimportant-variables` doubled rovers' and assembly's variables.

The garbage collector. Translation runs with Python's cyclic collector paused (`collector_paused`): the
translator builds millions of small objects that all live until the task is written, so the collector's
passes rescan them again and again and free nothing. Output is unchanged (`benchmarks/sas_compare.py`: every
domain still byte-identical to the driver's); translation CPU time fell to 0.61x on `../shared/ipc` and 0.66x
on `../shared/ipc-more` (`python -m benchmarks.bench_translate_options --collector`, alternating paused / on;
per domain 0.58x (parking, transport) to ~1.0x on tasks translated in milliseconds; labyrinth-sat23 p01, a
228 MB SAS file, 158 -> 107 s CPU), peak memory unchanged
(150 MB on parking, 3.9 GB on labyrinth p01 either way; the collection afterwards ~15 ms on parking).

Unsolvability is read from the translator's result, not from what it prints: `pddl_to_sas` answers a task it
proved unsolvable (goal not relaxed-reachable, trivially false goal) with a task that has no operators and no
axioms and whose goal its initial state does not satisfy. Such a task has no plan whatever produced it.
"""

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
