"""`--features KEY=VALUE ...` and `--features-json FILE`: the situation learned costs depend on, for `plan` and
`costs` (the same `features` a runtime reports with its steps, so the costs a plan uses match what was learned).

Values read as JSON scalars when they parse as one (`3`, `0.5`, `true`, `null`), else as strings (`peak`);
`--features` pairs override keys of `--features-json`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

FeatureValue = str | int | float | bool | None


class FeaturesError(ValueError):
    """A malformed --features pair or --features-json file (the message says which and what was expected)."""


def add_features_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--features",
        nargs="+",
        default=[],
        metavar="KEY=VALUE",
        help="the situation, e.g. --features hour=peak region=eu (learned costs depend on it)",
    )
    parser.add_argument(
        "--features-json",
        default=None,
        metavar="FILE",
        help='the situation as a JSON object file, e.g. {"hour": "peak", "load": 0.7}',
    )


def _scalar(text: str) -> FeatureValue:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return value if value is None or isinstance(value, (str, int, float, bool)) else text


def parse_features(pairs: list[str], json_file: str | None = None) -> dict[str, FeatureValue]:
    """The features the two options give; `FeaturesError` for bad input."""
    features: dict[str, Any] = {}
    if json_file is not None:
        try:
            loaded = json.loads(Path(json_file).read_text())
        except OSError as error:
            raise FeaturesError(f"--features-json {json_file}: cannot read ({error.strerror})") from error
        except json.JSONDecodeError as error:
            raise FeaturesError(f"--features-json {json_file}:{error.lineno}: not JSON ({error.msg})") from error
        if not isinstance(loaded, dict):
            raise FeaturesError(f"--features-json {json_file}: expected a JSON object of feature names to values")
        for key, value in loaded.items():
            if value is not None and not isinstance(value, (str, int, float, bool)):
                raise FeaturesError(
                    f"--features-json {json_file}: feature {key!r} must be a string, number, "
                    f"boolean or null, not {type(value).__name__}"
                )
            features[key] = value
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise FeaturesError(f"--features {pair!r}: expected KEY=VALUE, e.g. hour=peak")
        features[key.strip()] = _scalar(value.strip())
    return features
