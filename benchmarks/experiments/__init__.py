"""Experiments: scripts that run for minutes to hours and write tables (`benchmarks/results/`), as opposed to
the micro-benchmarks beside this folder. Each is `python -m benchmarks.experiments.NAME --help`.

    learning_worlds      `portfolio bench learning` with the checkout's results folder (every world type, the
                         bundled tools world the failure model was tuned on among them: `--kinds tools`)
    learning_gap, ideal_learner   why single worlds miss the learning target: the loss split by cause, and a
                         learner told the world's structure (what the target asks of an estimator)
    time_objective       the time objective against risk and an exact oracle (timed worlds)
    translator_memory    the translator's address-space peak, per task
    cost_search          plans under learned costs, against the optimum
    ippc                 the IPPC 2008 probabilistic domains, determinized
    store_soak, hostile_service   the trace store and the service under faults and hostile clients
    sas_compare, up_differential, near_misses, shares_coverage   translator and cascade cross-checks
"""
