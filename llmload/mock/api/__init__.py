"""What each endpoint of the mock accepts and answers, one module per endpoint family: the OpenAI chat
and completions shapes (``openai_api``), Responses (``responses_api``), Messages (``messages_api``),
embeddings (``embeddings_api``), rerank and score (``rerank_api``), audio transcriptions
(``audio_api``), tokenize (``tokenize_api``), the admin calls (``admin_api``) and structured replies
(``structured``); and what an endpoint's handler is (``handler``: the kinds
:data:`llmload.wire.endpoints.ENDPOINTS` names).

May import, of the mock: nothing (it stands on ``wire``); ``front`` and the server import it.
"""
