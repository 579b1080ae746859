"""`portfolio serve`'s options are checked before anything starts: a wrong value is exit 2 with a message that
names the option as the user typed it, never a traceback and never a value quietly replaced."""

from __future__ import annotations

import pytest

from portfolio.cli import build_parser, main
from portfolio.commands.serve_cmd import service_config


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_a_port_out_of_range_is_bad_input(capsys, port):
    """It used to start the planner workers, then end in socket's OverflowError traceback (exit 1)."""
    assert main(["serve", "--workers", "1", "--port", port]) == 2
    err = capsys.readouterr().err
    assert f"--port {port}: expected a port number from 0 to 65535" in err and "Traceback" not in err


def test_a_memory_limit_of_zero_is_refused_not_replaced_by_the_default():
    with pytest.raises(ValueError, match="--memory-limit: "):
        service_config(build_parser().parse_args(["serve", "--workers", "1", "--memory-limit", "0"]))


def test_the_message_names_the_option_as_typed():
    """`--fd-workers 0` was reported as `--fd_workers`, an option that does not exist."""
    with pytest.raises(ValueError, match="^--fd-workers: "):
        service_config(build_parser().parse_args(["serve", "--workers", "1", "--fd-workers", "0"]))


@pytest.mark.parametrize("field", ["budget_s", "max_budget_s", "decomposer_budget_s", "validate_budget_s"])
def test_an_embedded_service_config_refuses_an_infinite_budget(field):
    """inf reached the planner workers' JSON configuration as null, and every worker died at birth, again and
    again; `portfolio serve` refuses it at the option, a `ServiceConfig` built in Python now too."""
    from pydantic import ValidationError

    from portfolio.serve.config import ServiceConfig

    given = {"workers": 1, "queue": 1, "budget_s": 1.0, "max_budget_s": 30.0, "decomposer_budget_s": 30.0}
    with pytest.raises(ValidationError, match="finite number"):
        ServiceConfig(**(given | {field: float("inf")}), delegates=["fast-downward"], memory_limit_mb=1024)
