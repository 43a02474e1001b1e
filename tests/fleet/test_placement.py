"""placement.place as a pure function: affinity to the worker that ran the previous round, the shared
queue otherwise, plugins and pack (issue 17). Sends and reservations are recorded, not performed."""

from orchestrator.fleet.placement import Fleet, WorkerRoom, place
from tests.fleet.test_policies import cand, view


def _room(hostname: str, busy: int = 0, slots: int = 1, capacity_mb: float = 0.0, plugins=()) -> WorkerRoom:
    return WorkerRoom(hostname, slots, capacity_mb, 0, [100.0] * busy, list(plugins))


def _place(policy, ready, fleet, reserve=lambda room: True) -> list[tuple[int, str]]:
    sends: list[tuple[int, str]] = []

    def send(c, to):
        sends.append((c.experiment_id, to))
        return True

    place(policy, ready, fleet, view(), send, reserve)
    return sends


def test_it_sends_the_next_round_to_the_worker_that_ran_the_previous_one():
    fleet = Fleet(rooms=[_room("a@h"), _room("b@h")], room=2, holders={1: "b@h"})
    assert _place("fifo", [cand(1)], fleet) == [(1, "b@h")]


def test_it_sends_to_the_shared_queue_when_the_holder_is_busy_dead_or_unknown():
    fleet = Fleet(rooms=[_room("a@h"), _room("b@h", busy=1)], room=1, holders={1: "b@h", 2: "gone@h"})
    assert _place("fifo", [cand(1)], fleet) == [(1, "")]  # b has no free slot
    fleet = Fleet(rooms=[_room("a@h")], room=1, holders={2: "gone@h"})
    assert _place("fifo", [cand(2)], fleet) == [(2, "")]  # its holder is not live
    assert _place("fifo", [cand(3)], Fleet(rooms=[_room("a@h")], room=1, holders={})) == [(3, "")]  # first round


def test_it_counts_an_affine_send_against_the_holders_slot_and_the_queues_room():
    fleet = Fleet(rooms=[_room("a@h"), _room("b@h")], room=2, holders={1: "a@h", 2: "a@h"})
    assert _place("fifo", [cand(1), cand(2)], fleet) == [(1, "a@h"), (2, "")]
    fleet = Fleet(rooms=[_room("a@h"), _room("b@h")], room=1, holders={1: "a@h", 2: "b@h"})
    assert _place("fifo", [cand(1), cand(2)], fleet) == [(1, "a@h")]  # the queue's room is spent


def test_it_falls_back_to_the_shared_queue_when_another_scheduler_reserved_the_holder():
    fleet = Fleet(rooms=[_room("a@h")], room=1, holders={1: "a@h"})
    assert _place("fifo", [cand(1)], fleet, reserve=lambda room: False) == [(1, "")]


def test_it_stops_when_another_scheduler_sent_the_first_round_since_its_view_was_read():
    # Two schedulers read the same ready list and room (a worker after its round, another's heartbeat).
    # The other one sent experiment 1 first: this pass must not spend that same room on experiment 2.
    fleet = Fleet(rooms=[_room("a@h")], room=1, holders={})
    tried: list[int] = []

    def send(c, to):
        tried.append(c.experiment_id)
        return False  # the conditional dispatch found the round already sent

    assert place("fifo", [cand(1), cand(2)], fleet, view(), send, lambda room: True) == []
    assert tried == [1]


def test_a_plugin_run_goes_to_its_holder_only_when_the_holder_has_the_plugin():
    recorded = [{"kind": "model", "name": "m", "plugin": "p", "version": "1", "hash": "x"}]
    installed = [{"name": "p", "version": "1", "hash": "x", "components": ["model:m"]}]
    fleet = Fleet(
        rooms=[_room("a@h"), _room("b@h", plugins=installed)], room=2, holders={1: "a@h"}, plugins={1: recorded}
    )
    assert _place("srtf", [cand(1)], fleet) == [(1, "b@h")]


def test_pack_prefers_the_holder_among_equally_busy_workers_and_still_spreads_to_idle_ones():
    m = {"round_seconds": 1.0, "peak_mem_mb": 100.0}
    fleet = Fleet(rooms=[_room("a@h", slots=2, capacity_mb=1000), _room("b@h", slots=2, capacity_mb=1000)],
                  room=0, holders={1: "b@h", 2: "b@h"})  # fmt: skip
    assert _place("pack", [cand(1, **m), cand(2, **m)], fleet) == [(1, "b@h"), (2, "a@h")]
