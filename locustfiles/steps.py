"""Chat users under a step load that ends by itself (what `make demo` runs).

    locust -f locustfiles/steps.py --headless --host http://127.0.0.1:8000 --steps 4,8,16,32 --step-seconds 30
"""

from llmload import LLMUser, StepLoadShape


class ChatUser(LLMUser):
    scenario = "chat"
    input_tokens = "200-400"
    output_tokens = 128


class Steps(StepLoadShape):
    steps = (4, 8, 16, 32)
    step_seconds = 30
