"""``POST /tokenize`` as the mock serves it, in the shape of the request: vLLM's (``prompt`` or
``messages``; the answer ``count``, ``max_model_len``, ``tokens``, ``token_strs`` when
``return_token_strs``) or llama.cpp's (``content``; the answer ``tokens``, ``{id, piece}`` objects
with ``with_pieces``). The API server answers it at once, without the engine (vLLM tokenizes in its
API process). A token is a whitespace-separated word, as for chat; its id a hash of the word.

Fault (``X-Mock-Fault`` or ``--fault``): ``wrong_count``: vLLM's answer counts one token more than it
lists; llama.cpp's has a token that is no id.

Usage::

    req = parse_tokenize_body(body_bytes, "mock")
    answer, outcome = tokenize_answer(req, "", max_model_len=4096)
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass

from llmload.mock.api.handler import PlainApi
from llmload.mock.api.openai_api import BadRequest, json_object, parse_body

VOCAB_SIZE = 151_936  # ids in the range of a Qwen tokenizer's


@dataclass(frozen=True, slots=True)
class TokenizeRequest:
    model: str
    words: list[str]
    llamacpp: bool  # content (llama.cpp's shape), not prompt or messages (vLLM's)
    pieces: bool  # return_token_strs (vLLM) or with_pieces (llama.cpp)

    @property
    def tokens(self) -> int:
        return len(self.words)


def parse_tokenize_body(body_bytes: bytes, default_model: str) -> TokenizeRequest:
    body = json_object(body_bytes)
    model = str(body.get("model") or default_model)
    if "content" in body:
        if not isinstance(body["content"], str):
            raise BadRequest("content: expected a string")
        return TokenizeRequest(model, body["content"].split(), True, bool(body.get("with_pieces")))
    if "prompt" in body:
        if not isinstance(body["prompt"], str):
            raise BadRequest("prompt: expected a string")
        return TokenizeRequest(model, body["prompt"].split(), False, bool(body.get("return_token_strs")))
    if "messages" in body:  # vLLM's TokenizeChatRequest: the words chat would count
        return TokenizeRequest(model, parse_body(body_bytes, True, default_model).prompt_words, False,
                               bool(body.get("return_token_strs")))
    raise BadRequest("expected prompt or messages (vLLM's /tokenize) or content (llama.cpp's)")


def _id(word: str) -> int:
    return zlib.crc32(word.encode()) % VOCAB_SIZE


def tokenize_answer(req: TokenizeRequest, fault: str, max_model_len: int) -> tuple[bytes, str]:
    ids = [_id(w) for w in req.words]
    wrong = fault == "wrong_count"
    if req.llamacpp:
        tokens: list = [{"id": i, "piece": w} for i, w in zip(ids, req.words, strict=True)] if req.pieces else ids
        if wrong and tokens:
            tokens[-1] = "?"
        answer = {"tokens": tokens}
    else:
        answer = {"count": len(ids) + wrong, "max_model_len": max_model_len, "tokens": ids,
                  "token_strs": req.words if req.pieces else None}
    return json.dumps(answer, separators=(",", ":")).encode(), "fault:wrong_count" if wrong else "completed"


HANDLER = PlainApi(parse=parse_tokenize_body, answer=tokenize_answer)
