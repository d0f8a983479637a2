"""Chat completions (scenarios/chat.yaml): `locust -f locustfiles/chat.py --host http://127.0.0.1:8000`.

`--input-tokens`/`--output-tokens` override the scenario's lengths for quick runs."""

from llmload import LLMUser


class ChatUser(LLMUser):
    scenario = "scenarios/chat.yaml"
