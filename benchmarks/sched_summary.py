"""The scheduling simulation over several seeds: each metric's median (and each ratio's min, median and
max) per switch-cost model and policy, and the Markdown tables printed and put in the README."""

from __future__ import annotations

import statistics
from typing import Any

METRICS = (
    "mean_completion_s", "p95_completion_s", "makespan_s", "utilisation", "work_per_device_s", "jain_user",
    "jain_team", "switches", "rebuilds", "replayed_rounds", "switch_seconds",
)  # fmt: skip


def _spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def summarise_seeds(runs: dict[str, dict[int, dict[str, dict[str, float]]]]) -> dict[str, Any]:
    """``{switching: {seed: {policy: metrics}}}`` -> ``{switching: {policy: {metric: spread, vs_fifo: spread}}}``;
    ``vs_fifo`` is the policy's mean completion over fifo's on the same seed."""
    out: dict[str, Any] = {}
    for switching, seeds in runs.items():
        policies = next(iter(seeds.values())).keys()
        out[switching] = {}
        for p in policies:
            # The real runs have no work_per_device_s (a simulation-only figure): nan there.
            row = {m: _spread([seeds[s][p].get(m, float("nan")) for s in seeds]) for m in METRICS}
            row["vs_fifo"] = _spread(
                [seeds[s][p]["mean_completion_s"] / seeds[s]["fifo"]["mean_completion_s"] for s in seeds]
            )
            out[switching][p] = row
    return out


def _ratio(spread: dict[str, float]) -> str:
    return f"{spread['median']:.2f}x ({spread['min']:.2f}-{spread['max']:.2f})"


def format_summary(summary: dict[str, Any], switching: str = "state", models: bool = True) -> str:
    """The policy table under ``switching`` (medians over seeds; the ratio with its min-max), then (with
    ``models``) how each switch-cost model changes every policy's ratio to fifo."""
    lines = [
        "| policy | mean completion s | vs fifo (min-max) | p95 completion s | makespan s | utilisation "
        "| Jain user | Jain team | switches | rebuilds | replayed rounds | switch s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p, r in summary[switching].items():
        med = {m: r[m]["median"] for m in METRICS}
        lines.append(
            f"| {p} | {med['mean_completion_s']:,.1f} | {_ratio(r['vs_fifo'])} | {med['p95_completion_s']:,.1f} "
            f"| {med['makespan_s']:,.1f} | {med['utilisation']:.1%} | {med['jain_user']:.3f} | {med['jain_team']:.3f} "
            f"| {med['switches']:.0f} | {med['rebuilds']:.0f} | {med['replayed_rounds']:.0f} "
            f"| {med['switch_seconds']:.1f} |"
        )
    if not models:
        return "\n".join(lines)
    policies = list(summary[switching])
    lines += ["", "| switch cost | " + " | ".join(f"{p} vs fifo" for p in policies) + " | fifo switch s |"]
    lines.append("|---|" + "---:|" * (len(policies) + 1))
    for model, rows in summary.items():
        ratios = " | ".join(_ratio(rows[p]["vs_fifo"]) for p in policies)
        lines.append(f"| {model} | {ratios} | {rows['fifo']['switch_seconds']['median']:.1f} |")
    return "\n".join(lines)


def readme_figures(measured: list[dict[str, float]]) -> dict[str, str]:
    """The measured switch costs and round times as the README quotes them (same rounding)."""
    out = {}
    for m in measured:
        for key in ("data_load_s", "build_s", "mean_seconds"):
            out[f"{m['base']}.{key}"] = f"{m[key]:.2f}" if key != "mean_seconds" else f"{m[key]:.1f}"
        out[f"{m['base']}.state_load_s"] = (
            f"{m['state_load_s']:.2f}" if m["state_load_s"] >= 0.01 else f"{m['state_load_s']:.4f}"
        )
    return out
