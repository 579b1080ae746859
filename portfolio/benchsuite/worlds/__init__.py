"""`portfolio bench learning`: do learned costs approach the oracle in every kind of world, not only the one they
were tuned on?

    model.py         what a world is made of (`Episode`, `WorldData`, the ring road graph), shared by the types
    family.py        the generated worlds: a type (`KINDS`) and a seed give a graph, vehicles and hidden faults
    delivery.py      the delivery worlds (`detours`, `vehicle-roads`): trucks, packages, load/drive/unload
    tools.py         the hidden truth of the `tools` and `agent-tools` worlds (the bundled tools domain)
    changing.py      the changing worlds (`outage`, `degradation`, `flapping`): one road turns bad and good again
    few_observations.py  the `few-observations` worlds: an agent's tools, 1-3 per action, tens of calls each
    route_search.py  an exact in-process delegate for the routes domain (the oracle's search there)
    exact.py         the yardsticks: optimal plans under given costs (RouteSearch, or Fast Downward A* with
                     LM-cut), and the costs a Planner planned with
    runner.py        one world's episodes under cost-blind and learned (per explore policy) arms planned by the
                     default cascade, and the exact oracle; plan quality per learned call; many worlds in
                     parallel processes; each learned arm's trace store in memory or kept in a folder
    latency.py       warm latency after a world (`--latency-rounds`): no trace store, recording without a
                     model, learned costs, interleaved; its summary and the report's table
    bundled.py       plan quality with learned costs on the bundled domains' tasks (`--bundled-episodes`)
    adapt.py         how an arm follows a changing truth (leave, return) and the calibration of predicted plan
                     success (ECE, Brier): pure functions over a WorldRun
    report_changes.py  the report's sections on both, and the reliability diagram of plan success
    report.py        the per-type report: success vs oracle and cost-blind, calibration, consistency, the new
                     bad-type object, the bundled tasks' section; learning-worlds.md / .json / .png

It lives in the package (not only in the checkout's `benchmarks/`) so that an installed `portfolio` can run it;
`python -m benchmarks.experiments.learning_worlds` is the same command with the checkout's results folder.
"""
