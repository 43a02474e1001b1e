"""Real Chromium through Playwright. ``playwright install`` cannot download here, so the tests
drive the Debian ``chromium`` package (``make test`` installs it when run as root)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import live

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
DOCS = Path(__file__).resolve().parents[2] / "docs"


# Module scope, not session: Playwright's event loop must be gone before later modules run sync
# code that refuses to run inside one (AsyncToSync, the in-memory channel layer).
@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        live.skip_for_missing_service(
            "Chromium", f"none at {CHROMIUM}: install the Debian 'chromium' package (make test does, as root)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        live.skip_for_missing_service("Chromium", "the playwright Python package is not installed")
    # Playwright's sync API keeps an event loop running in this thread; the tests' own ORM calls
    # (and the test database set-up) are still plain synchronous code, so Django's async-safety
    # guard is switched off while the browser is up.
    with pytest.MonkeyPatch.context() as mp, sync_playwright() as p:
        mp.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1360, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.errors = []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and page.errors.append(m.text))
    yield page
    context.close()


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


def screenshot(target, artifacts: Path, name: str, **kwargs) -> Path:
    """Save a screenshot of ``target`` (a page or a locator) as test-artifacts/<name>; with
    FEDWEB_UPDATE_SCREENSHOT=1 also as docs/<name>, the picture README/docs show (so a run
    refreshes them on purpose, not on every test run)."""
    path = artifacts / name
    target.screenshot(path=str(path), **kwargs)
    if os.environ.get("FEDWEB_UPDATE_SCREENSHOT") == "1":
        (DOCS / name).write_bytes(path.read_bytes())
    return path


def log_in(page, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")


def trace_xs(page, chart_id: str) -> list[list[int]]:
    """The x arrays of every plotly trace drawn in ``chart_id``."""
    return page.evaluate(f"() => (document.getElementById('{chart_id}').data || []).map(t => Array.from(t.x))")


def drawn(page, chart_id: str) -> list[tuple[str, bool, list, list]]:
    """(name, visible, x, y) of every plotly trace drawn in ``chart_id``."""
    script = "(id) => document.getElementById(id).data.map(t => [t.name, t.visible, Array.from(t.x), Array.from(t.y)])"
    return [tuple(t) for t in page.evaluate(script, chart_id)]


def points(page, chart_id: str) -> int:
    return page.evaluate(f"() => ((document.getElementById('{chart_id}').data || [])[0] || {{x: []}}).x.length")


def start_daphne(env: dict, logdir: Path, port: int):
    """A daphne server on ``port`` (for tests that stop and restart it); waits until it answers."""
    from tests import live

    return live.start_daphne(env, logdir, port, wait=True)
