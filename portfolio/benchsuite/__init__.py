"""`portfolio bench run/report`: a benchmarking tool for planners, in the manner of downward-lab.

    suites.py   SUITE arguments -> TaskSpecs (folders of PDDL, pairs files, generator sweeps, typed scenarios)
    planners.py --planners names -> how each plans one task (cascade, delegates, driver:ALIAS, up:ENGINE)
    child.py    one run's process: plan, validate, report
    order.py    the interleaved order arms are timed in (repeat, task, arm), for the runner and benchmarks/
    runner.py   every run in its own process group under a hard budget; local pool or Dask; resume
    store.py    the JSON-lines results file (fsync per line; a torn last line is cut off and rerun)
    report.py   Markdown/HTML tables and PNG plots from a results folder
    measure.py  `portfolio bench latency`: the warm Planner's first plan, replan and coverage beside the raw
                driver, measured in one process (the old `portfolio bench` table)
    worlds/     `portfolio bench learning`: learned costs over generated worlds

Imports point down this list's dependencies, never back: suites and planners know nothing of each other; child
(a run's process) and measure use both; runner uses child's protocol, order, store and planners; report reads
results. There is one task lister (suites.py, also the latency instances and the (label, domain, problem) triples
measure.py and the micro-benchmarks iterate over) and one raw-driver runner (planners.run_driver; the
measurements call it through `solve_with_driver`).
"""
