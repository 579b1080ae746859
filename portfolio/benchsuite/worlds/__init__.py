"""`portfolio bench learning`: do learned costs approach the oracle in every kind of world, not only the one they
were tuned on?

    family.py        the generated worlds: a type (`KINDS`) and a seed give a graph, vehicles and hidden faults
    tools.py         the hidden truth of the `tools` world (the evaluation world the model was first tuned on)
    route_search.py  an exact in-process delegate for the routes domain (microseconds a planning call)
    runner.py        one world's episodes under cost-blind, learned (per explore policy) and oracle arms; many
                     worlds in parallel processes
    report.py        the per-type report: success vs oracle and cost-blind, calibration, consistency, the new
                     bad-type object; learning-worlds.md / .json / .png

It lives in the package (not only in the checkout's `benchmarks/`) so that an installed `portfolio` can run it;
`python -m benchmarks.learning_worlds` is the same command with the checkout's results folder.
"""
