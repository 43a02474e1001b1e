"""Per-client state on disk: rows round-trip, crashes at every step leave an exact round, a
checkpoint snapshot restores identical rows, memory stays flat and disk grows with clients seen."""

import json
import os

import numpy as np
import psutil
import pytest
import torch

from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import Spec
from fedweb_engine.state import client_rows as client_state
from fedweb_engine.state import sparse_files
from fedweb_engine.state.checkpoint import write_checkpoint
from fedweb_engine.state.client_rows import ClientStateStore, StateUnavailable
from fedweb_engine.state.client_state import ClientStates
from fedweb_engine.state.round_state import compact_state, complete_state
from tests.conftest import TINY_SPEC
from tests.engine import client_state_toy

CPU = torch.device("cpu")
N, W = 50, 8


def _rows(round_number: int, ids: list[int]) -> torch.Tensor:
    # A row's values say which round and client wrote it, so a stale row cannot pass for a new one.
    return torch.tensor([[round_number * 1000 + c + k / 10 for k in range(W)] for c in ids], dtype=torch.float32)


def _play(store: ClientStateStore, rounds: dict[int, list[int]]) -> None:
    for r, ids in rounds.items():
        store.scatter(torch.tensor(ids), _rows(r, ids))
        store.commit(r)


ROUNDS = {1: [1, 3, 5], 2: [3, 7], 3: [5, 9, 1]}
ALL = torch.arange(N)


def _expected(upto: int) -> torch.Tensor:
    want = torch.zeros(N, W)
    for r, ids in ROUNDS.items():
        if r <= upto:
            want[ids] = _rows(r, ids)
    return want


def test_it_round_trips_rows_and_reads_never_seen_clients_as_zeros(tmp_path):
    store = ClientStateStore(tmp_path, N, W)
    assert torch.equal(store.gather(torch.tensor([0, 49]), CPU), torch.zeros(2, W))

    store.scatter(torch.tensor([1, 3, 5]), _rows(1, [1, 3, 5]))
    assert torch.equal(store.gather(ALL, CPU), torch.zeros(N, W))  # staged: not visible before commit
    store.commit(1)
    store.commit(1)  # again, nothing staged since: nothing to do
    _play(store, {2: ROUNDS[2], 3: ROUNDS[3]})

    assert torch.equal(store.gather(ALL, CPU), _expected(3))
    assert torch.equal(store.gather(torch.tensor([9, 3, 9]), CPU), _expected(3)[[9, 3, 9]])  # any order, repeats
    again = ClientStateStore(tmp_path, N, W)  # another process, same folder
    again.at(3)
    assert torch.equal(again.gather(ALL, CPU), _expected(3))


def test_it_takes_disk_only_for_rows_written(tmp_path):
    store = ClientStateStore(tmp_path, 10_000, 1024)
    assert store.base_path.stat().st_size == 10_000 * 1024 * 4
    assert store.disk_bytes() < 64 * 1024  # a hole, and a small header
    for r, client in ((1, 5), (2, 6)):
        store.scatter(torch.tensor([client]), torch.ones(1, 1024))
        store.commit(r)
    assert store.disk_bytes() < 64 * 1024 + 2 * 1024 * 4 * 4  # two rows (and fs blocks), not 40 MB


def test_a_crash_after_scatter_before_commit_leaves_the_last_round(tmp_path):
    store = ClientStateStore(tmp_path, N, W)
    _play(store, {1: ROUNDS[1]})
    store.scatter(torch.tensor([3, 7]), _rows(2, [3, 7]))
    os.close(store._staged[2])  # kill -9: the temporary journal stays behind
    store._staged, store._fd = None, -1

    after = ClientStateStore(tmp_path, N, W)
    after.at(1)  # the round state the re-run of round 2 loads
    assert torch.equal(after.gather(ALL, CPU), _expected(1))
    assert not list(tmp_path.glob(".*.tmp"))
    _play(after, {2: ROUNDS[2], 3: ROUNDS[3]})
    assert torch.equal(after.gather(ALL, CPU), _expected(3))


def test_a_crash_after_the_journal_before_the_base_is_updated_recovers(tmp_path, monkeypatch):
    store = ClientStateStore(tmp_path, N, W)
    _play(store, {1: ROUNDS[1], 2: ROUNDS[2]})

    fold = ClientStateStore._apply_journals

    def killed(self, below):
        if below == 3:  # commit(3): journal 3 is in place, journal 2 not yet folded into the base
            raise SystemExit("kill -9")
        fold(self, below)

    monkeypatch.setattr(ClientStateStore, "_apply_journals", killed)
    with pytest.raises(SystemExit):
        _play(store, {3: ROUNDS[3]})
    monkeypatch.undo()
    assert (tmp_path / "state.journal-000003").exists() and (tmp_path / "state.journal-000002").exists()

    recorded = ClientStateStore(tmp_path, N, W)  # round 3 was recorded: round 4 loads state 3
    recorded.at(3)
    assert torch.equal(recorded.gather(ALL, CPU), _expected(3))

    store = ClientStateStore(tmp_path / "other", N, W)
    _play(store, {1: ROUNDS[1], 2: ROUNDS[2]})
    monkeypatch.setattr(ClientStateStore, "_apply_journals", killed)
    with pytest.raises(SystemExit):
        _play(store, {3: ROUNDS[3]})
    monkeypatch.undo()
    rerun = ClientStateStore(tmp_path / "other", N, W)  # round 3 was not recorded: its re-run loads state 2
    rerun.at(2)
    assert torch.equal(rerun.gather(ALL, CPU), _expected(2))
    assert not (tmp_path / "other" / "state.journal-000003").exists()


def test_a_crash_halfway_through_folding_a_journal_is_folded_again(tmp_path, monkeypatch):
    store = ClientStateStore(tmp_path, N, W)
    _play(store, {1: ROUNDS[1], 2: ROUNDS[2]})
    writes = []

    def pwrite_then_die(fd, data, offset):
        if fd == store._fd and writes:
            raise SystemExit("kill -9")  # one row of journal 2 reached the base, the other did not
        writes.append(offset)
        return real_pwrite(fd, data, offset)

    real_pwrite = os.pwrite
    store.scatter(torch.tensor(ROUNDS[3]), _rows(3, ROUNDS[3]))
    monkeypatch.setattr(client_state.os, "pwrite", pwrite_then_die)
    with pytest.raises(SystemExit):
        store.commit(3)
    monkeypatch.undo()
    assert json.loads(store.header_path.read_text())["applying"] == 2

    after = ClientStateStore(tmp_path, N, W)
    after.at(3)
    assert torch.equal(after.gather(ALL, CPU), _expected(3))
    with pytest.raises(StateUnavailable, match="past round 1"):
        ClientStateStore(tmp_path, N, W).at(1)  # rows of round 2 are in the base: round 1 is gone


def test_a_round_older_than_the_base_or_a_torn_journal_is_unavailable_and_round_0_starts_over(tmp_path):
    store = ClientStateStore(tmp_path, N, W)
    _play(store, ROUNDS)  # base at round 2, journal 3 on top
    with pytest.raises(StateUnavailable, match="past round 1"):
        store.at(1)
    store.at(0)
    assert torch.equal(store.gather(ALL, CPU), torch.zeros(N, W)) and store.round == 0

    _play(store, ROUNDS)
    journal = tmp_path / "state.journal-000003"
    journal.write_bytes(journal.read_bytes()[:-5])  # a power cut tore it
    with pytest.raises(StateUnavailable, match="journal of round 3 missing or torn"):
        ClientStateStore(tmp_path, N, W).at(3)


def test_a_snapshot_restores_identical_rows(tmp_path):
    store = ClientStateStore(tmp_path / "live", N, W)
    _play(store, {1: ROUNDS[1], 2: ROUNDS[2]})
    store.save_snapshot(tmp_path / "round-000002.clients")
    _play(store, {3: ROUNDS[3], 4: [0, 1, 2]})

    store.load_snapshot(tmp_path / "round-000002.clients", 2)
    assert torch.equal(store.gather(ALL, CPU), _expected(2)) and store.round == 2
    assert list((tmp_path / "live").glob("state.journal-*")) == []
    _play(store, {3: ROUNDS[3]})  # and it goes on from there
    assert torch.equal(store.gather(ALL, CPU), _expected(3))
    with pytest.raises(StateUnavailable, match="of round 2, not 3"):
        store.load_snapshot(tmp_path / "round-000002.clients", 3)


def test_the_stores_of_a_simulation_move_together_and_snapshot_atomically(tmp_path):
    states = ClientStates(tmp_path / "live")
    control, personal = states.open("control", N, W), states.open("personal", N, 3)
    for r, ids in ROUNDS.items():
        control.scatter(torch.tensor(ids), _rows(r, ids))
        personal.scatter(torch.tensor(ids[:1]), torch.full((1, 3), float(r)))
        states.commit(r)
    assert states.save_snapshot(tmp_path / "ck.clients")
    assert sorted(p.name for p in (tmp_path / "ck.clients").iterdir()) == [
        "control.f32", "control.json", "personal.f32", "personal.json"]  # fmt: skip
    described = states.describe()
    assert described == {"round": 3, "stores": {"control": [N, W], "personal": [N, 3]}}

    moved = ClientStates(tmp_path / "elsewhere")  # a worker restoring the checkpoint
    moved.restore(3, described, snapshot=tmp_path / "ck.clients")
    assert torch.equal(moved.open("control", N, W).gather(ALL, CPU), _expected(3))
    assert moved.open("personal", N, 3).gather(torch.tensor([5]), CPU).tolist() == [[3.0] * 3]
    assert not ClientStates(tmp_path / "none").save_snapshot(tmp_path / "nothing.clients")
    assert not (tmp_path / "nothing.clients").exists()


def test_a_width_or_population_that_does_not_match_names_the_field(tmp_path):
    ClientStateStore(tmp_path, N, W)
    with pytest.raises(ValueError, match="width is 9, but .*state.json holds width 8"):
        ClientStateStore(tmp_path, N, 9)
    with pytest.raises(ValueError, match="num_clients is 51"):
        ClientStateStore(tmp_path, 51, W)
    store = ClientStateStore(tmp_path, N, W)
    with pytest.raises(ValueError, match=r"rows must be \[G, width=8\], got \[2, 7\]"):
        store.scatter(torch.tensor([1, 2]), torch.zeros(2, 7))
    with pytest.raises(ValueError, match=r"client_ids \[50\] outside 0..49"):
        store.gather(torch.tensor([50]), CPU)
    with pytest.raises(ValueError, match="round_number must be 1"):
        store.commit(2)
    states = ClientStates(tmp_path / "s")
    states.open("c", N, W)
    with pytest.raises(ValueError, match="client state 'c': width is 8, asked for 4"):
        states.open("c", N, 4)


def test_resident_memory_stays_flat_over_10000_clients_and_disk_grows_with_clients_seen(tmp_path):
    """10,000 clients x 20,000 floats is 800 MB if resident; 40 rounds of cohorts of 100 keep RSS
    flat (the rows go through pread/pwrite, not a mapping), and the files hold only clients seen."""
    num_clients, width, cohort = 10_000, 20_000, 100
    store = ClientStateStore(tmp_path, num_clients, width)
    rng = np.random.default_rng(0)
    process, rss, seen, counts = psutil.Process(), [], set(), torch.zeros(num_clients)
    for r in range(1, 41):
        ids = torch.from_numpy(rng.choice(num_clients, cohort, replace=False))
        for group in ids.split(32):  # gathered and scattered group by group, as the trainer does
            rows = store.gather(group, CPU)
            store.scatter(group, rows + 1.0)
        store.commit(r)
        seen.update(ids.tolist())
        counts[ids] += 1
        rss.append(process.memory_info().rss)
    slope = np.polyfit(np.arange(10, 40), np.asarray(rss[10:]) / 2**20, 1)[0]
    assert abs(slope) < 0.5, f"RSS grew {slope:.2f} MB per round: {[round(x / 2**20) for x in rss]}"
    row_bytes, block = width * 4, 4096  # a row spans parts of up to two more file-system blocks
    assert len(seen) * row_bytes <= store.disk_bytes() <= (len(seen) + cohort) * (row_bytes + 2 * block) + (1 << 20)
    assert store.disk_bytes() < 0.4 * num_clients * row_bytes  # 3,000-odd clients seen of 10,000
    probe = torch.tensor(sorted(seen)[:20] + [c for c in range(num_clients) if c not in seen][:5])
    rows = store.gather(probe, CPU)  # each row counts the rounds its client was in
    assert torch.equal(rows, counts[probe].unsqueeze(1).expand(-1, width))


# -- in a simulation: published with the round state, copied into checkpoints ------------------


def _spec():
    return Spec.from_dict({**TINY_SPEC, "rounds": 4})


def test_a_simulation_loading_a_published_state_continues_its_client_state_exactly(tmp_path, monkeypatch):
    client_state_toy.install(monkeypatch)
    alone = Simulation(_spec(), client_state_dir=tmp_path / "alone")
    alone.run()

    first = Simulation(_spec(), client_state_dir=tmp_path / "moved")
    first.run(2)
    first.next_round()  # round 3 trained and committed, then the worker died before recording it
    tensors, meta = compact_state(first)
    assert meta["client_state"] == {"round": 3, "stores": {"toy": [20, client_state_toy.WIDTH]}}
    write_checkpoint(tmp_path / "state-3.safetensors", tensors, meta)
    del first  # no close: kill -9

    rerun = Simulation(_spec(), client_state_dir=tmp_path / "moved")
    rerun.load_state_dict(*_state_of_round_2(tmp_path))
    rerun.run()
    assert torch.equal(rerun.global_flat, alone.global_flat)
    assert torch.equal(client_state_toy.rows(rerun), client_state_toy.rows(alone))
    assert client_state_toy.rows(alone).abs().sum() > 0


def _state_of_round_2(tmp_path):
    # The state round 2 published, from a run alone up to there (the engine is deterministic).
    sim = Simulation(_spec(), client_state_dir=tmp_path / "scratch")
    sim.run(2)
    tensors, meta = compact_state(sim)
    return complete_state({k: v.clone() for k, v in tensors.items()}), meta


def test_a_checkpoint_restores_the_client_state_in_another_folder_and_process(tmp_path, monkeypatch):
    client_state_toy.install(monkeypatch)
    monkeypatch.setenv("FEDWEB_DATA_DIR", str(tmp_path / "data"))
    sim = Simulation(_spec())  # no folder: a temporary one, as the engine CLI runs
    sim.run(2)
    sim.save_checkpoint(tmp_path / "round-000002.safetensors")
    assert (tmp_path / "round-000002.clients" / "toy.f32").exists()
    sim.run()

    resumed = Simulation.from_checkpoint(tmp_path / "round-000002.safetensors")
    assert torch.equal(client_state_toy.rows(resumed), _rows_after(2))
    resumed.run()
    assert torch.equal(resumed.global_flat, sim.global_flat)
    assert torch.equal(client_state_toy.rows(resumed), client_state_toy.rows(sim))
    folder = resumed.client_states.folder
    assert folder.parent == tmp_path / "data"  # under FEDWEB_DATA_DIR, not /tmp (which may be memory)
    resumed.close()
    assert not folder.exists()  # the temporary folder goes with the simulation


def _rows_after(rounds: int) -> torch.Tensor:
    sim = Simulation(_spec())
    sim.run(rounds)
    return client_state_toy.rows(sim)


def test_a_run_without_client_state_writes_no_client_state_files(tmp_path):
    sim = Simulation(_spec(), client_state_dir=tmp_path / "cs")
    sim.run(2)
    sim.save_checkpoint(tmp_path / "round-000002.safetensors")
    assert not (tmp_path / "cs").exists() and not (tmp_path / "round-000002.clients").exists()
    assert sim.state_dict()[1]["client_state"] == {"round": 2, "stores": {}}


def test_the_header_is_rewritten_in_place_whole_and_a_long_one_by_rename(tmp_path):
    # One write of a fixed length, no rename over the file (ext4 would flush it before the rename).
    path = tmp_path / "state.json"
    sparse_files.write_json(path, {"round": 1})
    inode = path.stat().st_ino

    sparse_files.rewrite_json(path, {"round": 2, "applying": 3})

    assert path.stat().st_ino == inode and path.stat().st_size == sparse_files.JSON_BYTES
    assert json.loads(path.read_text()) == {"round": 2, "applying": 3}
    for value in ({"round": 4, "note": "y" * sparse_files.JSON_BYTES}, {"round": 5}):
        sparse_files.rewrite_json(path, value)  # too long for one write (then back from a long file)
        assert json.loads(path.read_text()) == value
