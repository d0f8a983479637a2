"""What a greenlet that stalled the event loop was doing, named for what a user can act on (a user
class, the web UI, llmload's or Locust's own work), not an internal function. The stall watch
(:mod:`llmload.health.stalls`) names each culprit with :func:`greenlet_name`.

Usage::

    greenlet_name(g, g._run, g.args)    # "user ChatUser", WEB_UI, "llmload's own work (...)"
"""

from __future__ import annotations

from typing import Any

WEB_UI = "web UI requests (a browser polling Locust's stats, llmload's tabs or dashboard)"
# What llmload's own greenlets do, by the module their function lives in: a stall names the job,
# not an internal function (what a user can act on, or report).
LLMLOAD_WORK = {
    "llmload.plugin.wiring": "sampling the live history",
    "llmload.plugin.cluster.role": "ending the run",
    "llmload.plugin.cluster.roles": "writing request rows",
    "llmload.plugin.cluster.links": "messages between master and workers",
    "llmload.plugin.cluster.master_link": "messages between master and workers",
    "llmload.plugin.cluster.worker_role": "a worker's reports to its master",
    "llmload.plugin.cluster.ingest_queue": "the master's intake of the workers' rows",
    "llmload.plugin.users.graph_loop": "a call graph's calls",
    "llmload.plugin.run.server_hooks": "the server hooks (cache reset, profiler)",
    "llmload.plugin.output.run_manifest": "PREFIX_run.json (the server's /v1/models)",
    "llmload.server_metrics.scrape": "the server-metrics scraper",
    "llmload.transport.reader": "the request timeout checker",
    "llmload.transport.sdk": "the openai transport's timeout watch",
    "llmload.health.sampler": "its own health sampler",
    "llmload.workload.arrival": "open-loop arrivals",
}


def greenlet_name(g: Any, run: Any, args: tuple) -> str:
    """What a greenlet runs, named for what a user can act on: ``user ChatUser`` (a user class and
    its tasks), :data:`WEB_UI` (gevent's server handling a web UI request), ``llmload's own work
    (the server-metrics scraper)``, ``Locust's own work (...)``, else the function or
    ``Class.method`` (the user's own code). ``run``, ``args``: the greenlet's, taken while it lived
    (gevent drops them when it ends)."""
    if run is None:
        return type(g).__name__
    if getattr(run, "__name__", "") == "run_user" and args:  # Locust's user greenlets
        return f"user {type(args[0]).__name__}"
    owner = getattr(run, "__self__", None)
    name = (f"{type(owner).__name__}.{getattr(run, '__name__', '?')}" if owner is not None
            else getattr(run, "__qualname__", None) or repr(run))
    module = (type(owner).__module__ if owner is not None else getattr(run, "__module__", None)) or ""
    if module == "gevent.baseserver" or module.startswith("gevent.pywsgi"):
        return WEB_UI  # one greenlet per connection of Locust's web server (pywsgi)
    if module.startswith("llmload."):
        return f"llmload's own work ({LLMLOAD_WORK.get(module, name)})"
    if module.startswith("locust."):
        return f"Locust's own work ({name})"
    return name
