"""Group sends from sync code (orchestrator.live.events): in a server's sync thread they are handed to
the event loop without holding the thread, and go out in the order they were handed over; anywhere
else they are sent before the call returns. A failed send never raises."""

from __future__ import annotations

import asyncio

from asgiref.sync import async_to_sync, sync_to_async

from orchestrator.live import events


class GatedLayer:
    """A channel layer whose sends wait for ``gate``: a caller that waited for its send would hang."""

    def __init__(self, open_gate: bool = False) -> None:
        self.sent: list[tuple[str, str, list[int]]] = []
        self.gate = asyncio.Event()
        if open_gate:
            self.gate.set()

    async def group_send(self, group: str, payload: dict) -> None:
        await self.gate.wait()
        rounds = [r["round"] for r in payload.get("rounds", [payload])] if "round" in payload["type"] else []
        self.sent.append((group, payload["type"], rounds))


class BrokenLayer:
    async def group_send(self, group: str, payload: dict) -> None:
        raise ConnectionError("Redis is away")


def _rounds(*numbers: int, experiment: int = 1) -> list[dict]:
    return [{"type": "round", "experiment_id": experiment, "round": n} for n in numbers]


async def _wait_for(predicate, what: str) -> None:
    for _ in range(200):  # bounded: 2 s
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def _stop_draining() -> None:
    # This test's loop ends here (a server's lives as long as the process): end its drain task with it.
    events._queues[asyncio.get_running_loop()][1].cancel()


def test_it_hands_sends_to_the_loop_and_keeps_their_order():
    async def scenario() -> list:
        layer = GatedLayer()

        def view() -> str:  # what a sync view in daphne does: publish, then answer
            events._hand_over(layer, "experiment-1", _rounds(1, 2))
            events._hand_over(layer, "experiment-1", [{"type": "status"}])
            events._hand_over(layer, "experiment-2", _rounds(1, experiment=2))
            return "answered"

        assert await asyncio.wait_for(sync_to_async(view)(), 5) == "answered"  # never waited for the gate
        assert layer.sent == []
        layer.gate.set()
        await _wait_for(lambda: len(layer.sent) == 3, f"3 sends (sent: {layer.sent})")
        _stop_draining()
        return layer.sent

    assert async_to_sync(scenario)() == [
        ("experiment-1", "rounds", [1, 2]),  # one send for the batch
        ("experiment-1", "status", []),
        ("experiment-2", "round", [1]),
    ]


def test_it_sends_before_returning_outside_a_server_thread():
    layer = GatedLayer(open_gate=True)
    events._hand_over(layer, "experiment-1", _rounds(3, 4))
    assert layer.sent == [("experiment-1", "rounds", [3, 4])]


def test_consecutive_rounds_go_out_as_one_message_and_nothing_overtakes():
    status = {"type": "status", "experiment_id": 1}
    sent = events._rounds_together([*_rounds(1, 2), *_rounds(3), status, *_rounds(4)])
    assert [(e["type"], [r["round"] for r in e.get("rounds", [e])] if "round" in e["type"] else []) for e in sent] == [
        ("rounds", [1, 2, 3]),
        ("status", []),
        ("round", [4]),  # a lone round stays a plain round event
    ]
    assert sent[0]["experiment_id"] == 1


def test_what_waited_together_goes_out_per_group_in_the_order_handed_over():
    layer = object()
    waiting = [(layer, "experiment-1", _rounds(1)), (layer, "experiment-2", _rounds(7, experiment=2)),
               (layer, "experiment-1", _rounds(2))]  # fmt: skip
    assert [(g, [p["round"] for p in ps]) for _, g, ps in events._per_group(waiting)] == [
        ("experiment-1", [1, 2]),
        ("experiment-2", [7]),
    ]


def test_a_failed_send_is_logged_not_raised(caplog):
    events._hand_over(BrokenLayer(), "experiment-1", _rounds(1))  # here: sent in the call

    async def scenario() -> None:
        await sync_to_async(events._hand_over)(BrokenLayer(), "experiment-1", _rounds(2))  # queued on the loop
        await _wait_for(lambda: caplog.text.count("could not publish") == 2, "the second warning")
        _stop_draining()

    async_to_sync(scenario)()
    assert caplog.text.count("could not publish round event(s) to experiment-1") == 2
