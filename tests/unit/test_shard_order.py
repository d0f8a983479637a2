"""The side-by-side processes' claim order (tests/support/shards.py): a unit whose build or install
is still going waits for it behind the others, so no process sits on a compile while tests are left."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.support import shards


def _item(prepared_by: str | None = None):
    mark = SimpleNamespace(args=(prepared_by,)) if prepared_by else None
    return SimpleNamespace(get_closest_marker=lambda name: mark if name == "prepared_by" else None)


def _order(work, is_ready, taken=()):
    return [n for n, _ in shards.claim_order(work, is_ready, lambda n: n in taken)]


def test_every_unit_in_order_when_nothing_is_being_prepared():
    work = [[_item()], [_item("llama_server")], [_item()]]
    assert _order(work, lambda unit: True) == [0, 1, 2]


def test_a_unit_still_being_prepared_goes_after_the_rest():
    work = [[_item("llama_server")], [_item()], [_item("vllm_server")], [_item()]]
    assert _order(work, lambda unit: unit[0].get_closest_marker("prepared_by") is None) == [1, 3, 0, 2]


def test_a_deferred_unit_is_taken_first_once_its_preparation_ended():
    work = [[_item("llama_server")], [_item()], [_item()], [_item()]]
    done = {"llama_server": False}

    def is_ready(unit):
        mark = unit[0].get_closest_marker("prepared_by")
        return mark is None or done[mark.args[0]]

    order = shards.claim_order(work, is_ready, lambda n: False)
    assert next(order)[0] == 1
    done["llama_server"] = True
    assert [n for n, _ in order] == [0, 2, 3]


def test_a_unit_another_process_took_is_dropped_from_the_deferred():
    work = [[_item("llama_server")], [_item()]]
    assert _order(work, lambda unit: unit[0].get_closest_marker("prepared_by") is None, taken={0}) == [1]


def test_the_order_never_waits():
    """The loop asks for the next test before it runs the current one: a generator that slept until
    the build ended would hold the current test too. Nothing else left: the unit is tried anyway."""
    work = [[_item()], [_item("llama_server")]]
    assert _order(work, lambda unit: unit[0].get_closest_marker("prepared_by") is None) == [0, 1]


@pytest.mark.parametrize(("files", "ready"), [((), True), (("llama_server.pending",), False),
                                              (("llama_server.pending", "llama_server.done"), True),
                                              (("vllm_server.pending",), True)])
def test_ready_reads_the_suites_marks(tmp_path, monkeypatch, files, ready):
    for name in files:
        (tmp_path / name).touch()
    monkeypatch.setenv(shards.PREPARED_VAR, str(tmp_path))
    assert shards.ready([_item("llama_server")]) is ready
    assert shards.ready([_item()]) is True


def test_ready_outside_the_suite(monkeypatch):
    monkeypatch.delenv(shards.PREPARED_VAR, raising=False)
    assert shards.ready([_item("llama_server")]) is True
