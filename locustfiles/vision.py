"""Image prompts (and JSON replies) from scenarios/vision.yaml, one user class per workload:
`locust -f locustfiles/vision.py --host http://127.0.0.1:8000`."""

from llmload import users_from_scenario

globals().update(users_from_scenario("scenarios/vision.yaml"))
