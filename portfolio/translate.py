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

Unsolvability is read from the translator's result, not from what it prints: `pddl_to_sas` answers a task it
proved unsolvable (goal not relaxed-reachable, trivially false goal) with a task that has no operators and no
axioms and whose goal its initial state does not satisfy. Such a task has no plan whatever produced it.
"""

from __future__ import annotations

import contextlib
import copy
import io
from dataclasses import dataclass
from typing import Any

_DEFAULT_OPTIONS: Any = None


@dataclass(frozen=True)
class TranslatorResult:
    """What one translation produced: the SAS text, and whether the translator proved the task unsolvable."""

    sas: str
    unsolvable: bool
    log: str  # what the translator printed (timings, warnings): for diagnosis only, never parsed

    def as_dict(self) -> dict[str, Any]:
        return {"sas": self.sas, "unsolvable": self.unsolvable, "log": self.log}


def reset_translator_state() -> None:
    """Put the translator's module-level state back to how a fresh `python -m fast_downward.translate` has it."""
    global _DEFAULT_OPTIONS
    from fast_downward.translate import main as translator
    from fast_downward.translate import options
    from fast_downward.translate.pddl_parser import warning

    if _DEFAULT_OPTIONS is None:
        # The file names are never opened (the texts are parsed from memory); the rest are the driver's defaults.
        _DEFAULT_OPTIONS = options.parse_args(["domain.pddl", "problem.pddl"])
    options.options = copy.copy(_DEFAULT_OPTIONS)
    translator.simplified_effect_condition_counter = 0
    translator.added_implied_precondition_counter = 0
    warning.printed_warnings.clear()


def proved_unsolvable(sas_task: Any) -> bool:
    """True for a SAS task with no operators and no axioms whose initial state misses its goal: nothing can
    ever change the state, so no plan exists. This is the shape of the translator's `unsolvable_sas_task`."""
    if sas_task.operators or sas_task.axioms:
        return False
    init = sas_task.init.values
    return any(init[var] != value for var, value in sas_task.goal.pairs)


def translate(domain_pddl: str, problem_pddl: str) -> TranslatorResult:
    """PDDL texts -> SAS text, by Fast Downward's parse -> normalize -> pddl_to_sas. Raises the translator's
    own exceptions (e.g. `ParseError`) on input it refuses."""
    from fast_downward.translate import main as translator
    from fast_downward.translate import normalize
    from fast_downward.translate.pddl_parser import lisp_parser, parsing_functions

    reset_translator_state()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        task = parsing_functions.parse_task(
            lisp_parser.parse_nested_list(io.StringIO(domain_pddl)),
            lisp_parser.parse_nested_list(io.StringIO(problem_pddl)),
        )
        normalize.normalize(task)
        sas_task = translator.pddl_to_sas(task)
    out = io.StringIO()
    sas_task.output(out)
    return TranslatorResult(out.getvalue(), proved_unsolvable(sas_task), printed.getvalue())
