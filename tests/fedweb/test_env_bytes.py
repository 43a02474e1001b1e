import pytest
from django.core.exceptions import ImproperlyConfigured

from fedweb import env


@pytest.mark.parametrize(
    "raw, expected",
    [("34359738368", 34359738368), ("512MB", 512 * 10**6), ("32gb", 32 * 10**9), ("1.5 TB", 1500 * 10**9),
     ("16GiB", 16 * 2**30), ("", 7)],
)  # fmt: skip
def test_it_reads_sizes_with_units(monkeypatch, raw, expected):
    monkeypatch.setenv("FEDWEB_MAX_DATASET", raw)
    assert env.env_bytes("FEDWEB_MAX_DATASET", 7) == expected


@pytest.mark.parametrize("raw", ["lots", "12XB", "-1GB", "0", "nanGB", "infTB", "GB"])
def test_it_rejects_bad_sizes_naming_the_variable(monkeypatch, raw):
    monkeypatch.setenv("FEDWEB_MAX_DATASET", raw)
    with pytest.raises(ImproperlyConfigured, match="^FEDWEB_MAX_DATASET must be a"):
        env.env_bytes("FEDWEB_MAX_DATASET", 7)
