"""Open-loop chat (scenarios/open_loop.yaml) under a ladder of arrival rates: 16 senders while the
rate climbs, each rate for --step-seconds, then the run ends.

    locust -f locustfiles/rate_ladder.py --headless --host http://127.0.0.1:8000 --csv runs/ladder \
           --rate-steps 2,4,8 --step-seconds 30
"""

from llmload import LLMUser, RateLadderShape


class OpenChatUser(LLMUser):
    scenario = "scenarios/open_loop.yaml"


class Ladder(RateLadderShape):
    users = 16
    rate_steps = (2, 4, 8)
    step_seconds = 30
