"""SSE bodies in the shapes real servers send (trimmed to a few events each)."""

VLLM_CHAT = (
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    b'"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    b'"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}\n\n'
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    b'"delta":{"content":" \\"world\\""},"logprobs":null,"finish_reason":null}]}\n\n'
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    b'"delta":{"content":"!"},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}\n\n'
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":5,"total_tokens":9,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":0}}}\n\n'
    b"data: [DONE]\n\n"
)

VLLM_REASONING = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"r1","choices":[{"index":0,'
    b'"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"r1","choices":[{"index":0,'
    b'"delta":{"reasoning_content":"Let me think"},"logprobs":null,"finish_reason":null}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"r1","choices":[{"index":0,'
    b'"delta":{"reasoning_content":" more"},"logprobs":null,"finish_reason":null}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"r1","choices":[{"index":0,'
    b'"delta":{"content":"42"},"logprobs":null,"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)

VLLM_CONTINUOUS_USAGE = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    b'"delta":{"content":"ab"},"logprobs":null,"finish_reason":null}],'
    b'"usage":{"prompt_tokens":3,"total_tokens":5,"completion_tokens":2}}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    b'"delta":{"content":"cd"},"logprobs":null,"finish_reason":"length"}],'
    b'"usage":{"prompt_tokens":3,"total_tokens":7,"completion_tokens":4}}\n\n'
    b"data: [DONE]\n\n"
)

SGLANG_CHAT = (
    b'data: {"id":"s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":'
    b'{"role":"assistant","content":"","reasoning_content":null,"tool_calls":null},"logprobs":null,'
    b'"finish_reason":null,"matched_stop":null}],"usage":null}\n\n'
    b'data: {"id":"s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":'
    b'{"role":null,"content":"Hi","reasoning_content":null,"tool_calls":null},"logprobs":null,'
    b'"finish_reason":null,"matched_stop":null}],"usage":null}\n\n'
    b'data: {"id":"s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":'
    b'{"role":null,"content":" there","reasoning_content":null,"tool_calls":null},"logprobs":null,'
    b'"finish_reason":"stop","matched_stop":2}],"usage":null}\n\n'
    b'data: {"id":"s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":7,"total_tokens":9,"completion_tokens":2,"prompt_tokens_details":null}}\n\n'
    b"data: [DONE]\n\n"
)

# TGI's Messages API: "data:" without a space, role on every delta, CRLF line ends.
TGI_CHAT = (
    b'data:{"object":"chat.completion.chunk","id":"","created":1,"model":"m","system_fingerprint":"2.0.4",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"Hey"},"logprobs":null,"finish_reason":null}],'
    b'"usage":null}\r\n\r\n'
    b'data:{"object":"chat.completion.chunk","id":"","created":1,"model":"m","system_fingerprint":"2.0.4",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"!"},"logprobs":null,'
    b'"finish_reason":"eos_token"}],"usage":null}\r\n\r\n'
    b"data:[DONE]\r\n\r\n"
)

LLAMACPP_CHAT = (
    b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],'
    b'"created":1,"id":"chatcmpl-x","model":"m","system_fingerprint":"b1","object":"chat.completion.chunk"}\n\n'
    b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Yo"}}],"created":1,'
    b'"id":"chatcmpl-x","model":"m","system_fingerprint":"b1","object":"chat.completion.chunk"}\n\n'
    b'data: {"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"created":1,"id":"chatcmpl-x",'
    b'"model":"m","system_fingerprint":"b1","object":"chat.completion.chunk","usage":{"completion_tokens":1,'
    b'"prompt_tokens":4,"total_tokens":5},"timings":{"predicted_ms":10.0}}\n\n'
    b"data: [DONE]\n\n"
)

OPENAI_TOOL_CALLS = (
    b'data: {"id":"chatcmpl-o","object":"chat.completion.chunk","created":1,"model":"gpt-4o",'
    b'"service_tier":"default","system_fingerprint":"fp","choices":[{"index":0,"delta":{"role":"assistant",'
    b'"content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get",'
    b'"arguments":""}}],"refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'
    b'data: {"id":"chatcmpl-o","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,'
    b'"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"a\\":1}"}}]},"logprobs":null,'
    b'"finish_reason":null}],"usage":null}\n\n'
    b'data: {"id":"chatcmpl-o","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,'
    b'"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}\n\n'
    b'data: {"id":"chatcmpl-o","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],'
    b'"usage":{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29,'
    b'"prompt_tokens_details":{"cached_tokens":16,"audio_tokens":0}}}\n\n'
    b"data: [DONE]\n\n"
)

VLLM_COMPLETIONS = (
    b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,'
    b'"text":" Once","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'
    b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,'
    b'"text":" upon","logprobs":null,"finish_reason":"length","stop_reason":null}]}\n\n'
    b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[],'
    b'"usage":{"prompt_tokens":2,"total_tokens":4,"completion_tokens":2}}\n\n'
    b"data: [DONE]\n\n"
)

VLLM_STREAM_ERROR = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    b'"delta":{"content":"a"},"logprobs":null,"finish_reason":null}]}\n\n'
    b'data: {"error": {"object": "error", "message": "engine died", "type": "InternalServerError", '
    b'"param": null, "code": 500}}\n\n'
    b"data: [DONE]\n\n"
)
