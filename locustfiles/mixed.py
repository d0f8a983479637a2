"""The product mix of scenarios/mixed.yaml, one Locust user class per workload (weighted):
`locust -f locustfiles/mixed.py --host http://127.0.0.1:8000`."""

from llmload import users_from_scenario

globals().update(users_from_scenario("scenarios/mixed.yaml"))
