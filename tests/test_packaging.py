"""The package metadata in pyproject.toml follows the current packaging standards: the
license is an SPDX expression (PEP 639), not the `{text = ...}` table setuptools deprecated, with a
setuptools new enough to read it. Read with tomllib: the venv's setuptools is older
than the isolated build environment `pip install -e .` makes, so building here would test the wrong one."""

from __future__ import annotations

import re
import tomllib

from support import REPO


def test_the_license_is_an_spdx_string_and_setuptools_reads_it():
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert data["project"]["license"] == "MIT"
    assert not any(c.startswith("License ::") for c in data["project"].get("classifiers", []))  # PEP 639: not both
    [setuptools] = [r for r in data["build-system"]["requires"] if r.startswith("setuptools")]
    assert int(re.search(r">=(\d+)", setuptools).group(1)) >= 77  # the first to read an SPDX license string
