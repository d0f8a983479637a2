"""Two priority classes of scenarios/priority.yaml, one Locust user class per workload (weighted):
`locust -f locustfiles/priority.py --host http://127.0.0.1:8000` (add `--isolation` to run each
class alone, then together; docs/priority.md)."""

from llmload import users_from_scenario

globals().update(users_from_scenario("scenarios/priority.yaml"))
