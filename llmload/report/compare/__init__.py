"""Runs against runs: ``llmload compare`` (``compare_runs``, its noise verdicts ``compare_noise`` over
the pure statistics of ``noise``, and its files ``compare_render``) and the archive of runs that
``report``, ``sweep``, ``history`` and ``compare --baseline`` share (``archive``).

May import, of the report: anything (it stands on a whole report); nothing of the report imports it.
"""
