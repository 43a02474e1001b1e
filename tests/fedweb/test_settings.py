from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from fedweb import env


def test_it_reads_booleans_and_rejects_typos(monkeypatch):
    monkeypatch.setenv("DEBUG", "yes")
    assert env.env_bool("DEBUG", False) is True
    monkeypatch.setenv("DEBUG", "Off")
    assert env.env_bool("DEBUG", True) is False
    monkeypatch.setenv("DEBUG", "ture")
    with pytest.raises(ImproperlyConfigured, match="DEBUG"):
        env.env_bool("DEBUG", False)


def test_it_rejects_bad_integers(monkeypatch):
    monkeypatch.setenv("CHECKPOINT_EVERY", "ten")
    with pytest.raises(ImproperlyConfigured, match="CHECKPOINT_EVERY must be an integer"):
        env.env_int("CHECKPOINT_EVERY", 10)
    monkeypatch.setenv("CHECKPOINT_EVERY", "0")
    with pytest.raises(ImproperlyConfigured, match="CHECKPOINT_EVERY must be >= 1"):
        env.env_int("CHECKPOINT_EVERY", 10, min_value=1)
    monkeypatch.setenv("CHECKPOINT_EVERY", "5")
    assert env.env_int("CHECKPOINT_EVERY", 10, min_value=1) == 5


def test_it_rejects_an_empty_list(monkeypatch):
    monkeypatch.setenv("FEDWEB_QUEUES", " , ")
    with pytest.raises(ImproperlyConfigured, match="FEDWEB_QUEUES"):
        env.env_list("FEDWEB_QUEUES", ["cpu"])
    monkeypatch.setenv("FEDWEB_QUEUES", "cpu, gpu")
    assert env.env_list("FEDWEB_QUEUES", []) == ["cpu", "gpu"]


@pytest.mark.parametrize(
    ("raw", "problem"),
    [("cpu,gpu", "'gpu' is not a device"), ("cuda:0,cpu", "mixes CPU and CUDA"), ("cuda:x", "'cuda:x'")],
)
def test_it_rejects_worker_devices_that_are_not_one_kind_of_device(monkeypatch, raw, problem):
    monkeypatch.setenv("FEDWEB_WORKER_DEVICES", raw)
    with pytest.raises(ImproperlyConfigured, match=f"FEDWEB_WORKER_DEVICES.*{problem}"):
        env.env_devices("FEDWEB_WORKER_DEVICES")
    monkeypatch.setenv("FEDWEB_WORKER_DEVICES", " cuda:0, cuda:1 ")
    assert env.env_devices("FEDWEB_WORKER_DEVICES") == ["cuda:0", "cuda:1"]
    monkeypatch.delenv("FEDWEB_WORKER_DEVICES")
    assert env.env_devices("FEDWEB_WORKER_DEVICES") == []


def test_it_defaults_to_sqlite_in_wal_mode(tmp_path):
    config = env.database_config("", tmp_path)
    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == str(tmp_path / "fedweb.sqlite3")
    assert "journal_mode=WAL" in config["OPTIONS"]["init_command"]
    assert config["OPTIONS"]["timeout"] >= 5


def test_it_parses_sqlite_and_postgres_urls(tmp_path):
    assert env.database_config("sqlite:////srv/fed.db", tmp_path)["NAME"] == "/srv/fed.db"
    pg = env.database_config("postgres://fed:p%40ss@db.local:5433/fedweb?sslmode=require", tmp_path)
    assert pg["ENGINE"] == "django.db.backends.postgresql"
    assert (pg["NAME"], pg["USER"], pg["PASSWORD"], pg["HOST"], pg["PORT"]) == (
        "fedweb",
        "fed",
        "p@ss",
        "db.local",
        5433,
    )
    assert pg["OPTIONS"] == {"sslmode": "require"} and pg["CONN_HEALTH_CHECKS"] is True


def test_it_keeps_sqlites_concurrency_options_for_a_sqlite_url(tmp_path):
    config = env.database_config(f"sqlite:///{tmp_path}/x.db", tmp_path)
    assert config["NAME"] == f"{tmp_path}/x.db" and config["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in config["OPTIONS"]["init_command"] and config["OPTIONS"]["timeout"] == 30


@pytest.mark.parametrize("url", ["mysql://x/y", "postgres://host:5432/", "postgres://host:port/db", "sqlite://"])
def test_it_rejects_bad_database_urls(url, tmp_path):
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        env.database_config(url, tmp_path)


def test_it_splits_one_redis_url_into_two_databases():
    assert env.redis_urls("redis://127.0.0.1:6379") == ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/1")
    assert env.redis_urls("redis://:pw@h:1/10") == ("redis://:pw@h:1/10", "redis://:pw@h:1/11")
    for bad in ("http://h/0", "redis://h/15", "redis://h/x"):
        with pytest.raises(ImproperlyConfigured, match="REDIS_URL"):
            env.redis_urls(bad)


def test_it_reads_the_secret_key_from_env_file_or_generated_file(monkeypatch, tmp_path):
    monkeypatch.delenv("SECRET_KEY", raising=False)
    monkeypatch.delenv("SECRET_KEY_FILE", raising=False)
    generated = tmp_path / "secret_key"
    key = env.secret_key(generated)
    assert len(key) > 40 and env.secret_key(generated) == key  # stable across restarts
    assert generated.stat().st_mode & 0o777 == 0o600

    secret = tmp_path / "docker-secret"
    secret.write_text("s" * 50 + "\n")
    monkeypatch.setenv("SECRET_KEY_FILE", str(secret))
    assert env.secret_key(generated) == "s" * 50
    monkeypatch.setenv("SECRET_KEY_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        env.secret_key(generated)
    monkeypatch.setenv("SECRET_KEY", "k" * 50)
    with pytest.raises(ImproperlyConfigured, match="not both"):
        env.secret_key(generated)
    monkeypatch.delenv("SECRET_KEY_FILE")
    monkeypatch.setenv("SECRET_KEY", "short")
    with pytest.raises(ImproperlyConfigured, match="16 characters"):
        env.secret_key(generated)


def test_it_fails_loudly_when_settings_are_loaded_with_a_bad_value(tmp_path):
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    env_vars = {**os.environ, "FEDWEB_DATA_DIR": str(tmp_path), "CHECKPOINT_KEEP": "many"}
    out = subprocess.run(
        [sys.executable, "-c", "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='fedweb.settings'; django.setup()"],
        cwd=root, env=env_vars, capture_output=True, text=True,
    )  # fmt: skip
    assert out.returncode != 0
    assert "CHECKPOINT_KEEP must be an integer" in out.stderr


def test_it_configures_celery_for_redelivery_and_a_large_channel_layer(settings):
    from fedweb.celery import app

    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1
    import fedweb.settings as configured  # the module, not the test's in-memory override

    assert configured.CHANNEL_LAYERS["default"]["CONFIG"]["capacity"] >= 1000
