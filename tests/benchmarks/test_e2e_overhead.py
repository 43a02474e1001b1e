"""The end-to-end overhead benchmark: registered (out of ``all``: it starts workers), and its table."""

from benchmarks.__main__ import BENCHMARKS, NOT_IN_ALL
from benchmarks.e2e_overhead import SPEC, WAYS, format_table
from fedweb_engine.spec.schema import Spec


def test_it_is_registered_but_left_out_of_all():
    assert "e2e_overhead" in BENCHMARKS and "e2e_overhead" in NOT_IN_ALL


def test_its_spec_is_valid_and_runs_on_the_cpu():
    assert Spec.from_dict(SPEC).compute.device == "cpu"


def test_it_prints_each_way_with_its_overhead_over_the_cli():
    spread = {"min": 1.0, "median": 1.1, "max": 1.3}
    rows = {w: {"wall_per_round_s": spread, "engine_round_s": 0.9} for w in WAYS}
    overhead = {"worker": {"min": 0.01, "median": 0.04, "max": 0.2}, "2w3e": {"min": -0.1, "median": 0.0, "max": 0.1}}
    table = format_table(rows, overhead)
    assert "| cli | 1.10 (1.00-1.30) | 0.90 | - |" in table
    assert "| worker | 1.10 (1.00-1.30) | 0.90 | +4.0% (+1.0% to +20.0%) |" in table
