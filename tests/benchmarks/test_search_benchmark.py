"""The search benchmark (issue 31): registered, left out of ``all``; its ways are real sweeps whose
rounds the round task's own function runs, and a search's rounds equal the grid's same rounds (a
stopped run paused and a promoted one resumed change nothing), with fewer rounds trained."""

import pytest

from benchmarks import search_ways
from benchmarks.__main__ import BENCHMARKS, NOT_IN_ALL
from benchmarks.search import DATA, GOAL_POINTS, SIZES, base_spec, record

pytestmark = pytest.mark.django_db


def test_it_is_registered_but_left_out_of_all():
    assert "search" in BENCHMARKS and "search" in NOT_IN_ALL


def test_a_search_trains_fewer_rounds_than_the_grid_and_each_of_them_as_the_grid_did(user, monkeypatch, settings):
    settings.CHECKPOINT_EVERY = 100
    monkeypatch.setattr(search_ways, "LRS", [0.2, 0.01])
    monkeypatch.setattr(search_ways, "CLIENTS", ["fedavg", "scaffold"])  # SCAFFOLD: per-client state resumed too
    plan = {"grid": ("none", None), "asha": ("asha", {"first_rung": 1, "eta": 2, "last_k": 2})}
    table = search_ways.compare(user, "digits", base_spec("digits", 6), [0], plan)
    grid, asha = table["ways"]["grid"], table["ways"]["asha"]
    assert grid["rounds"] == 4 * 6 and grid["configurations_in_full"] == 4
    assert asha["rounds"] < grid["rounds"] and asha["rounds_ratio"] == asha["rounds"] / 24
    assert asha["stopped_runs"] >= 1 and asha["promotions"] >= 1 and asha["replayed"] == 0
    assert asha["max_round_difference"] == 0.0  # every round of a paused and resumed run as the grid's
    assert asha["pick_label"] in grid["final_accuracy"] and asha["gap_points"] >= 0.0
    assert table["reference"]["final_accuracy"] == max(grid["final_accuracy"].values())


def test_the_record_says_whether_the_goal_was_met():
    way = {"rounds_ratio": 0.3, "gap_points": 0.2, "wall_seconds": 1.0}
    table = {d: {"ways": {"grid": way, "asha": way, "median": way}} for d in DATA}
    assert record(table, SIZES["small"])["goal_met"] is True
    table["synthetic"]["ways"]["asha"] = {**way, "gap_points": GOAL_POINTS + 0.01}
    assert record(table, SIZES["small"])["goal_met"] is False
