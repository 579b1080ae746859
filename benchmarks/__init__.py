"""The checkout's benchmarks (not installed with the package).

    bench_*.py     micro-benchmarks for pytest-benchmark: `make bench` = `pytest benchmarks --benchmark-only`;
                   most also run as `python -m benchmarks.bench_NAME` for one table
    experiments/   longer experiments and their harnesses, `python -m benchmarks.experiments.NAME` from the
                   repo root, over `portfolio.benchsuite` where it runs the thing measured

Both are packages so that tests and experiments import them by name (`pythonpath = ["."]` in pyproject.toml for
pytest, the repo root as the working directory for `python -m`), with no `sys.path` edits.
"""
