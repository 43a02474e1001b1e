"""The list, the dashboard and the New experiment form at a desktop's 1440 px and a phone's 390 px,
in real Chromium: nothing scrolls the page sideways at 390 px, the navigation wraps between links,
the Rounds and Event log blocks stack, and a table wider than the screen scrolls in its own box with
a line under it saying so. The screenshots go to docs/ (FEDWEB_UPDATE_SCREENSHOT=1)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from orchestrator.models import Experiment, LogEntry
from tests.browser.conftest import log_in, screenshot
from tests.conftest import TINY_SPEC
from tests.web.conftest import make_experiment

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.integration]

PAGES = {"list": "/", "dashboard": "/experiments/{pk}/", "form": "/experiments/new/?preset=quickstart"}
WIDER = "() => [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > innerWidth + 1)" \
        ".filter(e => !e.closest('.scroll-x')).slice(0, 5).map(e => `${e.tagName}#${e.id}.${e.className}`)"  # fmt: skip


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


def _finished_run(owner) -> Experiment:
    spec = {**TINY_SPEC, "rounds": 12}
    e = make_experiment(owner, rounds=12, name="fedavg on digits, a finished run with a long name to wrap", spec=spec)
    now = timezone.now()
    Experiment.objects.filter(pk=e.pk).update(
        status="completed", worker="w1@a-worker-host", started=now - timedelta(seconds=75), finished=now
    )
    for message in ("Queued on 'cpu' by alice", "Running round 1 on w1@a-worker-host", "Completed 12 rounds"):
        LogEntry.objects.create(experiment=e, message=message)
    return e


def _fits(page) -> tuple[int, int, list[str]]:
    width = page.evaluate("() => document.documentElement.scrollWidth")
    return width, page.evaluate("() => innerWidth"), page.evaluate(WIDER)


def test_the_list_the_dashboard_and_the_form_fit_a_phone_and_a_desktop(browser, alice, daphne, artifacts):
    run = _finished_run(alice)
    for n in range(4):
        make_experiment(alice, rounds=3, name=f"another run {n}", tags=["baseline"])
    base = f"http://{daphne}"
    for width in (1440, 390):
        context = browser.new_context(viewport={"width": width, "height": 900 if width > 400 else 844})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e, out=errors: out.append(str(e)))
        try:
            log_in(page, base, "alice", "alice-password")
            for name, path in PAGES.items():
                page.goto(base + path.format(pk=run.pk))
                if name == "dashboard":
                    page.wait_for_function("() => document.querySelectorAll('#chart-loss .main-svg').length > 0")
                if name == "form":
                    page.wait_for_function("() => document.getElementById('res-params').textContent !== '–'")
                page.wait_for_timeout(300)  # plotly's responsive resize before the picture
                scroll_width, viewport, wider = _fits(page)
                assert scroll_width == viewport == width, (name, width, scroll_width, wider)
                screenshot(page, artifacts, f"screen-{name}-{width}.png")  # the first screen, as one opens it
            if width == 390:
                _phone_layout(page, base, run)
        finally:
            context.close()
        assert errors == []


def _phone_layout(page, base: str, run: Experiment) -> None:
    # The navigation wraps between links, never inside one ("API" above "token").
    heights = page.evaluate(
        "() => [...document.querySelectorAll('header.top nav a')].map(a => a.getClientRects().length)"
    )
    assert heights and set(heights) == {1}
    # The rounds table scrolls in its box, says so, and the Rounds and Event log blocks stack.
    page.goto(f"{base}/experiments/{run.pk}/")
    box = page.locator("#rounds-table").locator("xpath=..")
    assert page.evaluate("(b) => b.scrollWidth > b.clientWidth", box.element_handle())
    cue = box.locator("xpath=following-sibling::div[@class='scroll-cue']")
    assert cue.is_visible() and "Scroll sideways" in cue.inner_text()
    box.evaluate("(b) => b.scrollTo(b.scrollWidth, 0)")
    page.wait_for_function("(b) => b.nextElementSibling.hidden", arg=box.element_handle())  # at the end: no cue
    rounds, log = page.locator("h2:text('Rounds')").bounding_box(), page.locator("#log").bounding_box()
    assert log["y"] > rounds["y"] + 40 and abs(log["x"] - rounds["x"]) < 2  # one above the other
    page.goto(f"{base}/")
    listing = page.locator("#experiments").locator("xpath=..")
    assert page.evaluate("(b) => b.scrollWidth > b.clientWidth", listing.element_handle())
    assert listing.locator("xpath=following-sibling::div[@class='scroll-cue']").is_visible()
