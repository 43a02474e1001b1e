from orchestrator.experiments.leak import leak_check, leak_warnings


def test_it_finds_no_leak_in_a_flat_series():
    flat = [500.0 + (0.4 if i % 2 else -0.4) for i in range(40)]
    assert leak_check(flat)["leak"] is False


def test_it_finds_a_leak_in_a_steadily_growing_series():
    growing = [500.0 + 8.0 * i for i in range(20)]  # 8 MB per round, +30% over the window
    check = leak_check(growing)
    assert check["leak"] is True
    assert abs(check["slope_mb"] - 8.0) < 1e-9


def test_it_ignores_warmup_rounds_and_short_runs():
    warmup_then_flat = [100.0, 400.0, 600.0] + [700.0] * 12
    assert leak_check(warmup_then_flat)["leak"] is False
    assert leak_check([500.0 + 50 * i for i in range(12)])["leak"] is False  # 9 points after warm-up


def test_it_needs_both_slope_and_relative_growth():
    big_model_drift = [20_000.0 + 2.0 * i for i in range(30)]  # 2 MB/round but < 5% growth
    assert leak_check(big_model_drift)["leak"] is False
    small_but_relative = [10.0 + 0.5 * i for i in range(30)]  # +100% but only 0.5 MB/round
    assert leak_check(small_but_relative)["leak"] is False


def test_it_skips_missing_values_and_names_the_series():
    rounds = [{"rss_mb": 500.0 + 10 * i, "vram_peak_mb": None} for i in range(20)]
    warnings = leak_warnings(rounds)
    assert len(warnings) == 1 and warnings[0].startswith("Host RSS grows 10.0 MB per round")
