"""The embeddings API (``POST /v1/embeddings``), pure: the request body, and what a response must be
for the request to count: one vector per input, every index once, each of the right dimension
(``dimensions`` when asked for, else all of one length), floats or base64 of little-endian float32
as ``encoding_format`` asked; the prompt's tokens from ``usage``.

Usage::

    body = embeddings_body("bge-m3", ["a text", "another"], encoding_format="float", dimensions=256)
    check = check_embeddings(response_bytes, inputs=2, dimensions=256, encoding_format="float")
    check.error          # None, or what is wrong ("2 inputs, 1 vector")
    check.prompt_tokens  # usage.prompt_tokens, or None
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

from llmload.wire.usage import UsageError, checked_count

ENCODING_FORMATS = ("float", "base64")
_FLOAT32 = 4
# The fast path's patterns (see _fast_check). A key "embedding" is followed by ":", the value
# "embedding" (of "object") by "," or "}"; a model named text-embedding-3 has no quote before it.
_EMBEDDING_KEY = b'"embedding"'
_INDEX = re.compile(rb'\s*:\s*(\d+)\s*[,}]')  # after "index" (matched at a found key: no scan of the body)
_PROMPT_TOKENS_KEY = b'"prompt_tokens"'
_NOT_IN_NUMBERS = (b'"', b"n", b"u", b"l", b"a", b"N", b"I", b"{")  # strings, null/true/false, NaN, Infinity
_BASE64_BYTES = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="
# The compact path's keys (see _compact_check): the vector's key with its opener, and "index":k per k
_FLOAT_KEY = b'"embedding":['
_B64_KEY = b'"embedding":"'
_INDEX_KEYS: list[bytes] = []


def embeddings_body(model: str, inputs: list[str], encoding_format: str = "float", dimensions: int | None = None,
                    extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The body of one ``/v1/embeddings`` request: a batch of ``inputs``."""
    body: dict[str, Any] = {"model": model, "input": inputs, "encoding_format": encoding_format}
    if dimensions is not None:
        body["dimensions"] = dimensions
    if extra:
        body.update(extra)
    return body


@dataclass(frozen=True, slots=True)
class EmbeddingsCheck:
    """What a response said: ``error`` (None when every input got its vector) and the usage's prompt tokens."""

    error: str | None
    prompt_tokens: int | None = None
    dimension: int | None = None


def _length(vector: Any, encoding_format: str, where: str) -> int:
    """The dimension of one vector as sent; raises ValueError saying what is wrong with it."""
    if encoding_format == "base64":
        if not isinstance(vector, str):
            raise ValueError(f"{where}: expected a base64 string (encoding_format base64), got "
                             f"{type(vector).__name__}")
        try:
            raw = base64.b64decode(vector, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{where}: not valid base64") from None
        if len(raw) % _FLOAT32:
            raise ValueError(f"{where}: {len(raw)} bytes is not a whole number of float32 values")
        return len(raw) // _FLOAT32
    if not isinstance(vector, list):
        raise ValueError(f"{where}: expected a list of numbers, got {type(vector).__name__}")
    # A garbled vector (strings, nulls, lists) must not pass for a short one: sum() in C refuses them
    # (~30x cheaper than a type test per value in Python, which cost ~40 µs per 384-value vector);
    # only JSON true/false would pass, as 1 and 0.
    try:
        sum(vector, 0.0)
    except TypeError:
        bad = next(x for x in vector if type(x) is not float and type(x) is not int)
        raise ValueError(f"{where}: expected numbers, got {json.dumps(bad)[:40]}") from None
    return len(vector)


def _vectors(b: bytes) -> list[tuple[int, int]] | None:
    """Where each ``"embedding": VALUE``'s value is (``[...]`` or ``"..."``), found with ``bytes.find``
    (a regex over the body cost 3x more); None when one is neither."""
    out = []
    i = b.find(_EMBEDDING_KEY)
    while i >= 0:
        j = i + len(_EMBEDDING_KEY)
        while b[j:j + 1] in (b" ", b"\n", b"\r", b"\t"):
            j += 1
        if b[j:j + 1] == b":":  # the key, not the value "embedding" of "object"
            j += 1
            while b[j:j + 1] in (b" ", b"\n", b"\r", b"\t"):
                j += 1
            opener = b[j:j + 1]
            end = b.find(b"]" if opener == b"[" else b'"', j + 1) if opener in (b"[", b'"') else -1
            if end < 0:
                return None
            out.append((j, end + 1))
            j = end + 1
        i = b.find(_EMBEDDING_KEY, j)
    return out


def _skeleton(b: bytes, spans: list[tuple[int, int]]) -> Any:
    """The body with every vector replaced by 0, parsed: small (no numbers of the vectors), so
    ``json.loads`` is cheap, and every structural question (items, indices, usage) is answered exactly."""
    parts, prev = [], 0
    for s, e in spans:
        parts.append(b[prev:s])
        parts.append(b"0")
        prev = e
    parts.append(b[prev:])
    try:
        return json.loads(b"".join(parts))
    except (ValueError, UnicodeDecodeError):
        return None


def _fast_check(body: bytes, inputs: int, dimensions: int | None, encoding_format: str) -> EmbeddingsCheck | None:
    """The common answer, passed from its bytes (no ``json.loads``, which costs ~200 µs for eight
    384-value vectors, more than a whole request of Locust's FastHttpUser): an object with one vector
    per input, each a bracketed list of number characters with its commas counting the right dimension
    (or a base64 string of the right length), the indices 0..inputs-1 once each, and usage's
    prompt_tokens. None whenever anything is unusual: the full check then decides and says what is wrong."""
    b = body.strip()
    if b[:1] != b"{" or b[-1:] != b"}":
        return None
    spans = _vectors(b)
    if spans is None or len(spans) != inputs:
        return None
    vectors = [b[s:e] for s, e in spans]
    width = dimensions
    for v in vectors:
        if encoding_format == "base64":
            if v[:1] != b'"' or v[1:-1].translate(None, _BASE64_BYTES) or len(v) < 6 or (len(v) - 2) % 4:
                return None
            n = (len(v) - 2) // 4 * 3 - v[-3:-1].count(b"=")
            if n % _FLOAT32:
                return None
            n //= _FLOAT32
        else:  # "[...]" of numbers: commas + 1 values. No empty first or last value; an empty one inside
            # ("1,,2") is not looked for: a two-byte search starting with "," costs 5x all the rest
            if len(v) < 3 or v.lstrip(b"[ \n\r\t")[:1] in (b",", b"]") or v.rstrip(b"] \n\r\t")[-1:] == b",":
                return None
            n = v.count(b",") + 1
        if width is None:
            width = n
        if n != width:
            return None
    if encoding_format != "base64":
        # Not a string, null, true, false, NaN, Infinity or a nested list in any vector: one memchr-fast
        # search over them all per byte that only those contain (bytes.translate per vector cost 10x more)
        joined = b"".join(v[1:] for v in vectors)
        if b"[" in joined or any(c in joined for c in _NOT_IN_NUMBERS):
            return None
    obj = _skeleton(b, spans)
    data = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(data, list) or len(data) != inputs:
        return None
    if any(not isinstance(item, dict) or item.get("embedding") != 0 for item in data):
        return None
    indices = [item.get("index", i) for i, item in enumerate(data)]
    if any(type(k) is not int for k in indices) or sorted(indices) != list(range(inputs)):
        return None
    usage = obj.get("usage")
    prompt_tokens = None
    if isinstance(usage, dict):
        try:
            prompt_tokens = checked_count(usage.get("prompt_tokens"), "prompt_tokens")
        except UsageError:
            return None
    return EmbeddingsCheck(None, prompt_tokens, width)


def _index_keys(n: int) -> list[bytes]:
    """``b'"index":0'`` .. ``b'"index":n-1'``, made once per process (a format per vector cost more than its search)."""
    keys = _INDEX_KEYS
    while len(keys) < n:
        keys.append(b'"index":%d' % len(keys))
    return keys


def _compact_check(b: bytes, inputs: int, dimensions: int | None, encoding_format: str) -> EmbeddingsCheck | None:
    """The answer as vLLM, SGLang, TEI, llama.cpp and the mock write it (compact JSON, vectors in
    index order, the index before or after its vector), passed with a few C-speed searches per
    vector and no copy of the body: ~4x cheaper than :func:`_fast_check`, which it leaves everything
    else to (whitespace, another order). Per vector: its ``"embedding":`` key, its end, its values
    counted by their commas (or its base64 length), its object's ``"index":k``; then one search per
    byte that no number has over all vectors together, and usage's prompt_tokens. None when anything
    differs: the slower checks then decide."""
    if b[:1] != b"{" or b[-1:] != b"}":
        return None
    b64 = encoding_format == "base64"
    key, close = (_B64_KEY, b'"') if b64 else (_FLOAT_KEY, b"]")
    skip = len(key)
    find, rfind, count = b.find, b.rfind, b.count
    idx = _index_keys(inputs)
    width = dimensions
    spans = []
    pos = 0
    first = -1
    for k in range(inputs):
        i = find(key, pos)
        if i < 0:
            return None
        if first < 0:
            first = i
        s = i + skip
        e = find(close, s)
        if e <= s:  # none, or an empty vector
            return None
        if b64:
            size = e - s
            if size % 4:
                return None
            n = size // 4 * 3 - (b[e - 1] == 61) - (b[e - 2] == 61)  # "=" padding
            if n % _FLOAT32:
                return None
            n //= _FLOAT32
        else:
            if b[s] == 44 or b[e - 1] == 44:  # "[,1" or "1,]": an empty value
                return None
            n = count(b",", s, e) + 1
        if width is None:
            width = n
        elif n != width:
            return None
        # its object: from the "{" before the key to the first "}" after the vector (an item holds no
        # nested object); its index inside it, and not the start of a longer number ("index":1 of 12)
        o = rfind(b"{", pos, i)
        c = find(b"}", e)
        key_k = idx[k]
        j = find(key_k, o, c) if o >= 0 and c > 0 else -1
        if j < 0 or b[j + len(key_k)] not in (44, 125):
            return None
        # the items follow one another ("[{...},{...}]"): nothing else in data between or after them
        if b[o - 1:o] != (b"," if k else b"[") or (k and o != pos + 1):
            return None
        spans.append((s, e))
        pos = c + 1
    if b[pos:pos + 1] != b"]" or find(b'"embedding":', pos) >= 0:
        return None  # more items than vectors, or than inputs (or one written otherwise): the full check counts them
    if b64:
        for s, e in spans:  # the alphabet: a C pass per vector (strings are short: 4/3 byte per value)
            if b[s:e].translate(None, _BASE64_BYTES):
                return None
    else:
        # Not a string, null, true, false, NaN, Infinity, an object or a nested list in any vector: one
        # memchr-fast search over them all per byte that only those contain
        joined = b"".join([b[s:e] for s, e in spans])
        for byte in _NOT_IN_NUMBERS:
            if byte in joined:
                return None
        if b"[" in joined:
            return None
    t = find(_PROMPT_TOKENS_KEY, pos)
    if t < 0:
        if find(_PROMPT_TOKENS_KEY, 0, first) >= 0:
            return None  # usage before the data: the general path reads it
        return EmbeddingsCheck(None, None, width)
    m = _INDEX.match(b, t + len(_PROMPT_TOKENS_KEY))
    if m is None or find(_PROMPT_TOKENS_KEY, m.end()) >= 0:
        return None
    try:
        prompt_tokens = checked_count(int(m.group(1)), "prompt_tokens")
    except UsageError:
        return None
    return EmbeddingsCheck(None, prompt_tokens, width)


def check_embeddings(body: bytes, inputs: int, dimensions: int | None = None,
                     encoding_format: str = "float") -> EmbeddingsCheck:
    """Hold a response's body to the request: ``inputs`` vectors with indices 0..inputs-1, each of
    ``dimensions`` values (or all of one non-zero length when no dimension was asked for)."""
    fast = _compact_check(body, inputs, dimensions, encoding_format)
    if fast is not None:
        return fast
    fast = _fast_check(body, inputs, dimensions, encoding_format)
    if fast is not None:
        return fast
    return full_check(body, inputs, dimensions, encoding_format)


def full_check(body: bytes, inputs: int, dimensions: int | None = None,
               encoding_format: str = "float") -> EmbeddingsCheck:
    """:func:`check_embeddings` with the body parsed: the same verdicts, and the message of what is wrong."""
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        return EmbeddingsCheck(f"the body is not JSON: {e.__class__.__name__}: {e}"[:200])
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        return EmbeddingsCheck("expected a JSON object with a data list")
    prompt_tokens = None
    usage = obj.get("usage")
    if isinstance(usage, dict):
        try:
            prompt_tokens = checked_count(usage.get("prompt_tokens"), "prompt_tokens")
        except UsageError as e:
            return EmbeddingsCheck(str(e))
    data = obj["data"]
    if len(data) != inputs:
        return EmbeddingsCheck(f"{inputs} inputs, {len(data)} vectors", prompt_tokens)
    seen: set[int] = set()
    width = dimensions
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            return EmbeddingsCheck(f"data[{i}]: expected an object", prompt_tokens)
        index = item.get("index", i)
        if type(index) is not int or not 0 <= index < inputs or index in seen:
            return EmbeddingsCheck(f"data[{i}].index: {json.dumps(index)[:40]} is not a new index in 0..{inputs - 1}",
                                   prompt_tokens)
        seen.add(index)
        try:
            n = _length(item.get("embedding"), encoding_format, f"data[{i}].embedding")
        except ValueError as e:
            return EmbeddingsCheck(str(e), prompt_tokens)
        if n == 0:
            return EmbeddingsCheck(f"data[{i}].embedding: an empty vector", prompt_tokens)
        if width is None:
            width = n
        if n != width:
            want = f"{width} (dimensions)" if dimensions is not None else f"{width}, as data[0]'s"
            return EmbeddingsCheck(f"data[{i}].embedding: {n} values, expected {want}", prompt_tokens)
    return EmbeddingsCheck(None, prompt_tokens, width)
