"""Group sends from sync code (orchestrator.live.events): sent before the call returns, in order, with
consecutive rounds as one message. A failed send never raises."""

from __future__ import annotations

import asyncio

from asgiref.sync import async_to_sync, sync_to_async

from orchestrator.live import events


class GatedLayer:
    """A channel layer whose sends wait for ``gate``: a caller that waited for its send would hang."""

    def __init__(self, open_gate: bool = False) -> None:
        self.sent: list[tuple[str, str, list[int]]] = []
        self.started = 0  # sends that reached the gate
        self.gate = asyncio.Event()
        if open_gate:
            self.gate.set()

    async def group_send(self, group: str, payload: dict) -> None:
        self.started += 1
        await self.gate.wait()
        rounds = [r["round"] for r in payload.get("rounds", [payload])] if "round" in payload["type"] else []
        self.sent.append((group, payload["type"], rounds))


class BrokenLayer:
    async def group_send(self, group: str, payload: dict) -> None:
        raise ConnectionError("Redis is away")


def _rounds(*numbers: int, experiment: int = 1) -> list[dict]:
    return [{"type": "round", "experiment_id": experiment, "round": n} for n in numbers]


def test_it_sends_before_returning_even_in_a_server_thread(monkeypatch):
    # A sync view in daphne: the report is answered only once its rounds are sent, so the client's next
    # report (maybe taken by another web process) cannot be published before them.
    layer = GatedLayer(open_gate=True)
    monkeypatch.setattr(events, "get_channel_layer", lambda: layer)

    def view() -> list:
        events._send_all("experiment-1", _rounds(1, 2))
        events._send_all("experiment-1", [{"type": "status"}])
        return list(layer.sent)  # what had gone out when the view answered

    async def scenario() -> list:
        return await sync_to_async(view)()

    assert async_to_sync(scenario)() == [("experiment-1", "rounds", [1, 2]), ("experiment-1", "status", [])]


def test_consecutive_rounds_go_out_as_one_message_and_nothing_overtakes():
    status = {"type": "status", "experiment_id": 1}
    sent = events._rounds_together([*_rounds(1, 2), *_rounds(3), status, *_rounds(4)])
    assert [(e["type"], [r["round"] for r in e.get("rounds", [e])] if "round" in e["type"] else []) for e in sent] == [
        ("rounds", [1, 2, 3]),
        ("status", []),
        ("round", [4]),  # a lone round stays a plain round event
    ]
    assert sent[0]["experiment_id"] == 1


def test_a_failed_send_is_logged_not_raised(caplog, monkeypatch):
    monkeypatch.setattr(events, "get_channel_layer", BrokenLayer)
    events._send_all("experiment-1", _rounds(1))
    assert caplog.text.count("could not publish round event(s) to experiment-1") == 1


def test_a_batch_without_memory_numbers_reads_no_leak_verdict(monkeypatch):
    # An external run that reports no memory: its rounds cannot change the verdict, so the batch
    # carries None (the page keeps its badge) and costs no query; one with memory reads it once.
    layer = GatedLayer(open_gate=True)
    payloads: list[dict] = []
    sent = layer.group_send

    async def keep(group: str, payload: dict) -> None:
        payloads.append(payload)
        await sent(group, payload)

    monkeypatch.setattr(layer, "group_send", keep)
    monkeypatch.setattr(events, "get_channel_layer", lambda: layer)
    monkeypatch.setattr(events, "latest_leak_warnings", lambda pk: ["grows"])
    events.publish_rounds(1, [{"round": 1, "rss_mb": None}, {"round": 2}])
    events.publish_rounds(1, [{"round": 3, "rss_mb": 100.0}, {"round": 4, "rss_mb": 101.0}])
    verdicts = [[r["leak_warnings"] for r in p["rounds"]] for p in payloads]
    assert verdicts == [[None, None], [None, ["grows"]]]


def test_a_send_whose_request_is_cancelled_still_goes_out(monkeypatch):
    # A report's client hung up mid-send: Django cancels the request, asgiref the send it waits for. The
    # rows are committed; the resend will find them recorded and announce nothing, so this send must go.
    layer = GatedLayer()
    monkeypatch.setattr(events, "get_channel_layer", lambda: layer)

    async def scenario() -> None:
        request = asyncio.ensure_future(sync_to_async(events.publish_rounds)(1, _rounds(5)))
        for _ in range(1000):  # bounded: until the send waits at the gate (no sleep-and-hope)
            if layer.started:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the send never started")
        request.cancel()
        layer.gate.set()
        for _ in range(1000):
            if layer.sent:
                break
            await asyncio.sleep(0.01)
        assert layer.sent == [("experiment-1", "round", [5])]

    asyncio.run(scenario())
