"""`portfolio bench run/report`: a benchmarking tool for planners, in the manner of downward-lab.

    suites.py   SUITE arguments -> TaskSpecs (folders of PDDL, pairs files, generator sweeps, typed scenarios)
    planners.py --planners names -> how each plans one task (cascade, delegates, driver:ALIAS, up:ENGINE)
    child.py    one run's process: plan, validate, report
    runner.py   every run in its own process group under a hard budget; local pool or Dask; resume
    store.py    the JSON-lines results file (fsync per line; a torn last line is cut off and rerun)
    report.py   Markdown/HTML tables and PNG plots from a results folder

The old `portfolio bench` latency/coverage table (portfolio/bench.py) stays as `portfolio bench latency`.
"""
