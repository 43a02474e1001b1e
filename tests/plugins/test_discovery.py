"""Plugins are found at start-up in every process, for real: subprocesses with their own
environment, a module that is missing or raises, and an installed distribution's entry point."""

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.live import ROOT

PY = sys.executable


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("FEDWEB_PLUGINS", "PYTHONPATH")}
    return {**env, "DJANGO_SETTINGS_MODULE": "fedweb.settings", **extra}


def _run(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _broken_plugin(tmp_path: Path) -> Path:
    (tmp_path / "fedweb_broken_plugin.py").write_text("raise RuntimeError('the plugin is broken on purpose')\n")
    return tmp_path


def test_the_web_process_stops_at_start_up_naming_a_plugin_that_is_not_there():
    done = _run([PY, "manage.py", "check"], _env(FEDWEB_PLUGINS="no_such_module"))
    assert done.returncode != 0
    assert "FEDWEB_PLUGINS: module 'no_such_module' failed to import: ModuleNotFoundError" in done.stderr


def test_the_web_process_stops_at_start_up_naming_a_plugin_that_raises_on_import(tmp_path):
    env = _env(FEDWEB_PLUGINS="fedweb_broken_plugin", PYTHONPATH=str(_broken_plugin(tmp_path)))
    done = _run([PY, "manage.py", "check"], env)
    assert done.returncode != 0
    assert (
        "module 'fedweb_broken_plugin' failed to import: RuntimeError: the plugin is broken on purpose" in done.stderr
    )


def test_the_web_process_starts_with_a_plugin_that_imports():
    env = _env(FEDWEB_PLUGINS="fedweb_test_plugin", PYTHONPATH=str(ROOT / "tests" / "plugins_fixture"))
    done = _run([PY, "manage.py", "check"], env)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("plugin", ["no_such_module", "fedweb_broken_plugin"])
def test_a_celery_worker_stops_at_start_up_naming_a_plugin_that_fails(tmp_path, plugin):
    env = _env(FEDWEB_PLUGINS=plugin, PYTHONPATH=str(_broken_plugin(tmp_path)))
    args = [PY, "-m", "celery", "-A", "fedweb", "worker", "-P", "solo", "-Q", "fedweb-test-never-served",
            "--without-gossip", "--without-mingle"]  # fmt: skip
    done = _run(args, env)
    assert done.returncode != 0
    assert f"module '{plugin}' failed to import" in done.stderr + done.stdout


def _installed_distribution(site: Path) -> Path:
    """A package installed the way pip leaves it: the module and its ``*.dist-info`` (METADATA,
    entry_points.txt in the ``fedweb.plugins`` group, top_level.txt)."""
    module = site / "fedweb_ep_plugin.py"
    module.write_text(
        textwrap.dedent(
            """
            from fedweb_engine.components import registry

            @registry.codec("ep_identity", codec_id=201)
            def ep_identity(layout, options):
                from fedweb_engine.communication.codecs import Codec
                return Codec
            """
        )
    )
    info = site / "fedweb_ep_plugin-1.2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fedweb-ep-plugin\nVersion: 1.2.0\n")
    (info / "entry_points.txt").write_text("[fedweb.plugins]\nep = fedweb_ep_plugin\n")
    (info / "top_level.txt").write_text("fedweb_ep_plugin\n")
    return module


def test_an_installed_entry_point_registers_its_components_with_the_version_from_its_metadata_and_a_hash(tmp_path):
    module = _installed_distribution(tmp_path)
    script = (
        "import json; from fedweb_engine.components import plugins, registry; plugins.load_plugins();"
        "print(json.dumps({'codecs': registry.names('codec'), 'installed': registry.installed_plugins(),"
        " 'used': registry.spec_plugins({'codec': 'ep_identity'})}))"
    )
    done = _run([PY, "-c", script], _env(PYTHONPATH=str(tmp_path)))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    expected_hash = hashlib.sha256(b"fedweb_ep_plugin.py\0" + module.read_bytes() + b"\0").hexdigest()[:16]
    assert "ep_identity" in out["codecs"]
    assert out["installed"] == [
        {"name": "fedweb_ep_plugin", "version": "1.2.0", "hash": expected_hash, "components": ["codec:ep_identity"]}
    ]
    assert out["used"] == [
        {
            "kind": "codec",
            "name": "ep_identity",
            "plugin": "fedweb_ep_plugin",
            "version": "1.2.0",
            "hash": expected_hash,
        }
    ]


def test_a_process_without_the_entry_point_knows_nothing_of_it(tmp_path):
    _installed_distribution(tmp_path)
    script = "from fedweb_engine.components import plugins, registry; plugins.load_plugins(); print(registry.installed_plugins())"
    done = _run([PY, "-c", script], _env())
    assert done.returncode == 0, done.stderr
    assert "fedweb_ep_plugin" not in done.stdout
