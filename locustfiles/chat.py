"""Chat completions with random prompts: `locust -f locustfiles/chat.py --host http://127.0.0.1:8000`."""

from llmload import LLMUser


class ChatUser(LLMUser):
    scenario = "chat"
    input_tokens = "200-400"
    output_tokens = 128
