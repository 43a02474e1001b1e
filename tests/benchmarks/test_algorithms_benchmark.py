"""The client-algorithm benchmark (issue 19): registered, left out of ``all``, and its runs are
the engine's on valid specs."""

from benchmarks.__main__ import BENCHMARKS, NOT_IN_ALL
from benchmarks.algorithms import CLIENT_ALGORITHMS, DATASETS, DITTO, rounds_to, simulate, spec
from fedweb_engine.results.round_result import RoundResult


def test_it_is_registered_but_left_out_of_all():
    assert "algorithms" in BENCHMARKS and "algorithms" in NOT_IN_ALL


def test_every_run_it_makes_is_a_valid_spec_on_the_shards_split():
    for dataset in DATASETS:
        for client in [*CLIENT_ALGORITHMS.values(), DITTO]:
            s = spec(dataset, client, seed=1, rounds=3, personal=client is DITTO)
            assert s.data.partition == "shards" and s.data.shards_per_client == 2
            assert s.algorithm.client.name == client["name"]


def test_it_counts_the_first_round_at_the_target():
    def result(n, acc):
        return RoundResult(n, 1, 1, 0, 0, None, None, acc, 0, 0, 0, 0.0, 0.0, 0, 0.0, 1, None, None, None, "cpu")

    results = [result(1, 0.5), result(2, None), result(3, 0.91), result(4, 0.95)]
    assert rounds_to(0.9, results) == 3 and rounds_to(0.99, results) is None


def test_a_scaffold_run_keeps_its_state_in_the_benchmark_store():
    results = simulate(spec("digits", CLIENT_ALGORITHMS["scaffold"], seed=0, rounds=2))
    assert [r.round for r in results] == [1, 2] and results[-1].test_accuracy > 0.1
