"""Validations whose clients give up, against `portfolio serve --workers 2 --token T` on loopback.

One caller (the token) sends `--hostile` validate requests at once, each client giving up (closing its
connection) after `--give-up` seconds: half a forall over 7 variables of 50 objects (7.8e11 bindings: refused
at once by the cost estimate), half a forall over 5 variables of 30 objects (2.4e7: under the estimate's limit
for the 30 s --validate-budget used here, yet minutes of checking). Then a trivial validate and a one-step
/v1/steps are sent, by the same caller and by another (an API key of its own), and timed; so is the 422 of the
7-variable forall alone. The server is `portfolio serve` in its own process, as it is run.

    PYTHONPATH=. python -m benchmarks.experiments.validation_flood --hostile 20 --give-up 2

Bounded: every request has a client timeout, the server is stopped (SIGKILL after 15 s) whatever happens.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.bench_service import launch, terminate

REPO = Path(__file__).resolve().parents[2]
BLOCKS = REPO / "tests" / "data" / "ipc" / "blocks"
STEP = {"run_id": "r", "step": 0, "action": "(pick-up b)", "outcome": "success"}


def wedge(variables: int, objects: int) -> dict:
    """A plan of one step whose precondition is a forall over `variables` variables of `objects` objects:
    objects^variables conditions to check. (7, 50): 7.8e11, never finishes; (5, 30): 2.4e7, under the
    estimate's limit for a 60 s budget, yet minutes of work on the 2-core CI machine (~3e5 a second). Also
    `hostile_service`'s and tests/test_service_validate_load.py's."""
    names = " ".join(f"?x{i}" for i in range(1, variables + 1))
    domain = f"""(define (domain wedge) (:requirements :adl :typing) (:types obj)
  (:predicates (p ?x - obj) (done))
  (:action go :parameters () :precondition (forall ({names} - obj) (not (p ?x1))) :effect (done)))"""
    listed = " ".join(f"o{i}" for i in range(objects))
    problem = f"(define (problem w) (:domain wedge) (:objects {listed} - obj) (:init) (:goal (done)))"
    return {"domain": domain, "problem": problem, "plan": ["(go)"]}


def trivial() -> dict:
    return {
        "domain": (BLOCKS / "domain.pddl").read_text(),
        "problem": (BLOCKS / "probBLOCKS-4-0.pddl").read_text(),
        "plan": ["(pick-up b)"],
    }


def add_key(db: str, name: str) -> str:
    """An API key of its own tenant with the scopes used here (`portfolio keys add`)."""
    command = [sys.executable, "-m", "portfolio.cli", "keys", "add", name, "--tenant", name]
    command += ["--scopes", "plan,steps:write", "--traces", db]
    return subprocess.run(command, check=True, capture_output=True, text=True, cwd=REPO).stdout.strip()


def timed(client: httpx.Client, path: str, body: dict, key: str) -> dict:
    began = time.monotonic()
    answer = client.post(path, json=body, headers={"Authorization": f"Bearer {key}"})
    return {"status": answer.status_code, "seconds": round(time.monotonic() - began, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hostile", type=int, default=20, help="validate requests whose clients give up")
    parser.add_argument("--give-up", type=float, default=2.0, metavar="S", help="each client's timeout")
    parser.add_argument("--validate-budget", type=float, default=30.0, metavar="S")
    args = parser.parse_args()
    db = os.path.join(tempfile.mkdtemp(prefix="validation-flood-"), "t.db")
    other = add_key(db, "other")
    process, url = launch(
        ["--workers", "2", "--token", "T", "--traces", db, "--validate-budget", str(args.validate_budget)]
        + ["--delegates", "fast-downward"]
    )
    try:
        time.sleep(1.0)  # the validators' warm-up pings come after the planner workers'
        with httpx.Client(base_url=url, timeout=120) as client:
            refused = timed(client, "/v1/validate", wedge(7, 50), "T")

        def give_up(body: dict) -> str:
            try:
                answer = httpx.post(
                    url + "/v1/validate", json=body, headers={"Authorization": "Bearer T"}, timeout=args.give_up
                )
                return str(answer.status_code)
            except httpx.TimeoutException:
                return "gave up"

        bodies = [wedge(7, 50) if i % 2 == 0 else wedge(5, 30) for i in range(args.hostile)]
        began = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(args.hostile) as pool:
            outcomes = list(pool.map(give_up, bodies))
        hostile_s = time.monotonic() - began
        with httpx.Client(base_url=url, timeout=120) as client:
            after = {
                "validate_same_caller": timed(client, "/v1/validate", trivial(), "T"),
                "steps_same_caller": timed(client, "/v1/steps", {"steps": [STEP]}, "T"),
                "validate_other_caller": timed(client, "/v1/validate", trivial(), other),
                "steps_other_caller": timed(client, "/v1/steps", {"steps": [{**STEP, "step": 1}]}, other),
            }
        result = {
            "hostile": args.hostile,
            "give_up_s": args.give_up,
            "hostile_outcomes": {o: outcomes.count(o) for o in sorted(set(outcomes))},
            "hostile_seconds": round(hostile_s, 2),
            "seven_variable_forall_alone": refused,
            **after,
        }
        print(json.dumps(result, indent=1))
    finally:
        terminate(process)


if __name__ == "__main__":
    main()
