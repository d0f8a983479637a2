"""The endpoint registry (llmload/wire/endpoints.py): every endpoint declared once, every part it names
there to be found, and the code that differed by endpoint reading it."""

from __future__ import annotations

import pytest

from llmload.metrics import catalog
from llmload.metrics.record import CSV_COLUMNS
from llmload.mock.api.handler import BodyApi, PlainApi, StreamApi
from llmload.wire import endpoints as E
from llmload.wire.endpoints import BODY, ENDPOINTS, STREAM, UPLOAD, by_path, end_event_for, endpoint, names, part
from llmload.workload.file.body_section import ALLOWED, BODY_KEYS
from llmload.workload.file.scenario import parse_scenario


def test_names_and_paths_are_declared_once():
    assert len(set(names())) == len(ENDPOINTS)
    assert len({e.path for e in ENDPOINTS}) == len(ENDPOINTS)
    assert all(e.answer in E.ANSWERS for e in ENDPOINTS)
    assert names(STREAM) == ("chat", "completions", "responses", "messages")
    assert {"embeddings", "rerank", "score"} <= set(names(BODY)) and names(UPLOAD) == ("audio",)


def test_every_part_an_endpoint_names_is_there_and_of_its_kind():
    for e in ENDPOINTS:
        handler = part(e.mock)
        if e.answer == STREAM:
            assert e.takes in ("messages", "prompt") and callable(part(e.body)), e.name
            assert isinstance(handler, StreamApi), e.name
        else:
            assert callable(part(e.check)) and not e.body, e.name
            assert isinstance(handler, BodyApi | PlainApi), e.name
        if e.answer == BODY:
            assert callable(part(e.workload)) and e.keys, e.name


def test_an_endpoints_metrics_and_row_fields_are_the_catalogs_and_the_csvs():
    known = {m.name for m in catalog.METRICS} | {r.name for r in catalog.RATES} | {catalog.REQUEST_RTFX.name}
    for e in ENDPOINTS:
        assert e.metrics and set(e.metrics) <= known, (e.name, set(e.metrics) - known)
        assert set(e.row_fields) <= set(CSV_COLUMNS), e.name
    faults = [f for e in ENDPOINTS for f in e.faults]
    assert len(faults) == len(set(faults))


def test_lookups_name_what_they_know():
    assert endpoint("rerank").path == "/v1/rerank" and by_path("/v1/rerank/").name == "rerank"
    assert by_path("/v1/nothing") is None
    with pytest.raises(KeyError, match="no endpoint 'chats': expected one of chat, completions"):
        endpoint("chats")
    assert end_event_for("/v1/messages") == "message_stop" and end_event_for("/proxy/v1/messages?beta=1")
    assert end_event_for("/v1/chat/completions") is None and end_event_for("/v1/embeddings") is None


def test_the_scenario_keys_of_a_whole_body_workload_are_its_declarations():
    for e in ENDPOINTS:
        if e.answer == BODY:
            assert set(e.keys) | {"weight", "endpoint", "model", "slo", "headers"} == ALLOWED[e.name]
    assert "input_tokens" not in BODY_KEYS and {"batch_size", "documents", "pipeline"} <= BODY_KEYS
    spec = parse_scenario("workloads:\n  e: {endpoint: embeddings, batch_size: 4}\n", "s.yaml")
    body = spec.workloads[0].body
    assert body.batch_size.mean == 4 and body.input_tokens.mean == 128 and body.encoding_format == "float"


def test_the_mock_serves_every_declared_path():
    import argparse

    from llmload.mock.options import add_mock_arguments, config_from_args
    from llmload.mock.server import MockServer

    p = argparse.ArgumentParser()
    add_mock_arguments(p)
    server = MockServer(config_from_args(p.parse_args([])), port=0)  # not started: no socket is bound
    assert set(server.handlers) == {e.path for e in ENDPOINTS}


def test_a_request_body_is_built_by_its_endpoints_builder():
    from llmload.workload.request import LLMRequest

    r = LLMRequest("s", 8, messages=[{"role": "system", "content": "be"}, {"role": "user", "content": "hi"}],
                   model="m")
    assert r.body("chat")["messages"][0]["role"] == "system" and r.body("chat")["stream_options"]
    assert r.body("responses")["input"][1]["content"] == "hi" and r.body("responses")["max_output_tokens"] == 8
    assert r.body("messages")["system"] == "be" and r.body("messages")["messages"] == [{"role": "user",
                                                                                         "content": "hi"}]
    assert "messages" in r.body("completions")  # messages to a prompt endpoint go as chat, as before
    assert LLMRequest("s", 8, prompt="hi", model="m").body("chat")["prompt"] == "hi"
