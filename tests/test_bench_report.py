"""`portfolio bench report`: the numbers in the tables, the plots, and the HTML as headless Chromium renders it.

Chromium is driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: no port, no extra library):
console errors, uncaught exceptions and failed loads (a missing plot) are collected while the page loads, then
a screenshot is taken. A page with a broken image and a console.error is checked too, so the check can fail.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from portfolio.benchsuite import report, runner, suites
from portfolio.benchsuite.store import read_runs, runs_path
from portfolio.cli import main

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--window-size=1200,1600",
]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench-report")
    tasks = suites.read_suites(["gen:gripper:sizes=1..3", "typed:research"])
    specs = runner.plan_runs(tasks, ["classical", "typed-search"], repeat=2, budget_s=5.0)
    runner.run_experiment(specs, out, jobs=2, progress=False)
    (out / report.EXPERIMENT_FILE).write_text(json.dumps({"planners": ["classical", "typed-search"]}))
    return out


def test_tables_count_tasks_over_repeats_and_ratios_per_task(results):
    records = read_runs(runs_path(results))
    assert len(records) == 16
    assert report.coverage(records) == {
        "gen-gripper": {"classical": (3, 3), "typed-search": (3, 3)},
        "typed-research": {"classical": (1, 1), "typed-search": (1, 1)},
    }
    rows = {r.planner: r for r in report.latency(records, "classical", ["classical", "typed-search"])}
    assert rows["classical"].ratio == 1.0 and rows["typed-search"].common == 4
    per_task = report.task_results(records)
    expected = sorted(
        per_task[("typed-search", t)].time / per_task[("classical", t)].time for t in {r["task"] for r in records}
    )
    assert rows["typed-search"].ratio == pytest.approx((expected[1] + expected[2]) / 2)
    times = sorted(r.time for (p, _), r in per_task.items() if p == "classical")
    assert rows["classical"].p95_s == pytest.approx(times[2] + 0.85 * (times[3] - times[2]))


def test_a_task_is_solved_when_most_of_its_runs_are():
    records = [
        {"planner": "p", "task": "t", "domain": "d", "status": s, "valid": True, "time_s": 1.0}
        for s in ("solved", "timeout", "timeout")
    ]
    assert report.coverage(records) == {"d": {"p": (0, 1)}}
    records[1]["status"] = "solved"
    assert report.coverage(records) == {"d": {"p": (1, 1)}}
    records[0]["valid"] = records[1]["valid"] = False  # rejected plans are not solutions
    assert report.coverage(records) == {"d": {"p": (0, 1)}}


def test_report_files(results, capsys):
    assert main(["bench", "report", str(results), "--baseline", "classical"]) == 0
    printed = capsys.readouterr().out
    for name in ("report.md", "report.html", "cactus.png", "latency-size.png", "scatter-typed-search-vs-classical.png"):
        assert name in printed and (results / name).stat().st_size > 500, name
    import matplotlib.image

    assert matplotlib.image.imread(results / "cactus.png").shape[2] in (3, 4)
    text = (results / "report.md").read_text()
    assert "| gen-gripper | 3/3 | 3/3 |" in text and "| **total** | 4/4 | 4/4 |" in text
    assert "![cactus](cactus.png)" in text
    solvers = report.solved_by(read_runs(runs_path(results)))
    assert solvers["typed-search"] == {"typed-search": 8} and sum(solvers["classical"].values()) == 8
    assert "## Solved runs by delegate" in text
    assert main(["bench", "report", str(results), "--baseline", "nope"]) == 2
    assert "baseline 'nope' has no runs here" in capsys.readouterr().err


# -- headless Chromium ---------------------------------------------------------------------------------------------


def chromium() -> str:
    found = shutil.which("chromium")
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("CI=true but chromium is not installed (.ci/run installs it with apt-get)")
    pytest.skip("chromium is not installed (apt-get install -y chromium); CI installs it and runs this test")


class DevTools:
    """Chrome DevTools protocol over --remote-debugging-pipe: NUL-terminated JSON, we write fd 3, read fd 4."""

    def __init__(self, binary: str, timeout: float = 60.0) -> None:
        self.profile = tempfile.mkdtemp(prefix="bench-chromium-")
        to_r, self._to_w = os.pipe()
        self._from_r, from_w = os.pipe()

        def wire() -> None:
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)

        self.process = subprocess.Popen(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-pipe", "about:blank"],
            pass_fds=(3, 4),
            preexec_fn=wire,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(to_r)
        os.close(from_w)
        self.deadline = time.monotonic() + timeout
        self.events: list[dict] = []
        self._buffer = b""
        self._id = 0

    def _next(self, wanted) -> dict:
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if "method" in message:
                    self.events.append(message)
                if wanted(message):
                    return message
            remaining = self.deadline - time.monotonic()
            assert remaining > 0, "chromium did not answer in time"
            if select.select([self._from_r], [], [], remaining)[0]:
                chunk = os.read(self._from_r, 1 << 20)
                assert chunk, "chromium closed the DevTools pipe"
                self._buffer += chunk

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_w, json.dumps(message).encode() + b"\0")
        reply = self._next(lambda m, i=self._id: m.get("id") == i)
        assert "error" not in reply, (method, reply)
        return reply["result"]

    def render(self, url: str, screenshot: Path) -> list[str]:
        """Load `url`, save a screenshot; the console errors, exceptions and failed loads seen meanwhile."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable", session=session)
        self.call("Page.navigate", {"url": url}, session=session)
        self._next(lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == session)
        shot = self.call("Page.captureScreenshot", {"format": "png"}, session=session)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        return [problem for event in self.events if (problem := _problem(event))]

    def close(self) -> None:
        try:
            self.call("Browser.close")
            self.process.wait(timeout=10)
        except (AssertionError, OSError, subprocess.TimeoutExpired):
            pass
        finally:
            try:
                os.killpg(self.process.pid, 9)
            except ProcessLookupError:
                pass
            self.process.wait()
            os.close(self._to_w)
            os.close(self._from_r)
            shutil.rmtree(self.profile, ignore_errors=True)


def _problem(event: dict) -> str | None:
    params = event.get("params", {})
    if event["method"] == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        return "console.error: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
    if event["method"] == "Runtime.exceptionThrown":
        return "exception: " + params["exceptionDetails"].get("text", "")
    if event["method"] == "Log.entryAdded" and params["entry"].get("level") == "error":
        return f"{params['entry'].get('text', '')} {params['entry'].get('url', '')}"
    return None


@pytest.fixture
def browser():
    devtools = DevTools(chromium())
    yield devtools
    devtools.close()


def test_html_report_renders_in_headless_chromium(results, browser, tmp_path):
    report.write_report(results, "classical")
    screenshot = tmp_path / "report.png"
    assert browser.render((results / "report.html").as_uri(), screenshot) == []
    import matplotlib.image

    pixels = matplotlib.image.imread(screenshot)
    assert pixels.shape[0] >= 1000 and pixels.shape[1] == 1200
    assert pixels.std() > 0.05  # not a blank page: tables and plots drew something


def test_the_render_check_sees_console_errors_and_missing_plots(results, browser, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(results, broken)
    (broken / "cactus.png").unlink()
    with open(broken / "report.html", "a") as page:
        page.write('<script>console.error("boom")</script>\n')
    problems = browser.render((broken / "report.html").as_uri(), tmp_path / "broken.png")
    assert any("boom" in p for p in problems) and any("cactus.png" in p for p in problems), problems
