"""The Anthropic Messages API: `locust -f locustfiles/messages.py --host http://127.0.0.1:8000`.

Streams `/v1/messages` with the key in `x-api-key` and `anthropic-version` sent (`--endpoint messages`
does the same for any locustfile); `--input-tokens`/`--output-tokens` set the lengths."""

from llmload import LLMUser


class MessagesUser(LLMUser):
    endpoint = "messages"
