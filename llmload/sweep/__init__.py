"""``llmload sweep``: which deployment meets the SLO cheapest. A plan (``plan``) expands into cells
(``cells``: deployments × params × workloads × repeats); each cell starts its server (``server``),
runs an ordinary headless Locust step load and its report (``cell_run``); the cells' steps make a
priced Pareto frontier and an answer (``frontier``, pure), written as sweep.md/html/json
(``report``); ``command`` runs it all, stops cleanly on a signal and resumes.

Usage::

    from llmload.sweep.command import SweepSettings, run_sweep
    run_sweep(SweepSettings("sweep.yaml", out="runs/sweep"))
"""
