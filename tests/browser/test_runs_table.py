"""The runs table in real Chromium against real daphne (issue 33's acceptance): spec fields added as
columns from the picker, a filter typed with field-name completion, grouping by the client
algorithm with a group opened, sorting by rounds to target, a view saved, reloaded and opened by a
team member, and a run's tags and notes edited."""

from __future__ import annotations

import re

import pytest

from tests.browser.conftest import log_in, screenshot
from tests.runs.world import Runs

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.integration]


@pytest.fixture
def world(daphne, django_user_model) -> Runs:
    return Runs(django_user_model)  # users with the real password hasher: daphne checks their logins


def names(page) -> list[str]:
    return page.eval_on_selector_all("#experiments tbody td.run-name > a", "els => els.map(e => e.textContent)")


def column(page, name: str) -> list[str]:
    script = "(n) => [...document.querySelectorAll(`#experiments tbody tr[data-id] td[data-col='${n}']`)].map(td => td.textContent.trim())"  # noqa: E501
    return page.evaluate(script, name)


def pick_columns(page, *names: str) -> None:
    page.click("#column-picker > summary")
    for name in names:
        page.fill("#picker-filter", name)
        page.check(f"#column-picker label[data-name='{name}'] input")
    with page.expect_navigation():
        page.click("#apply-columns")


def test_columns_filter_grouping_and_sorting_on_the_server(page, daphne, world, artifacts):
    from playwright.sync_api import expect  # here: without playwright the browser fixture skips

    base = f"http://{daphne}"
    log_in(page, base, "alice", "pw")
    page.keyboard.press("/")
    assert page.evaluate("() => document.activeElement.id") == "q"  # "/" focuses the filter

    pick_columns(page, "local.lr", "algorithm.client.name")
    assert "local.lr" in page.url and column(page, "local.lr") == ["fast", "0.2", "0.01", "0.1", "0.1"]
    assert column(page, "algorithm.client.name") == ["–", "scaffold", "scaffold", "scaffold", "fedavg"]

    # The filter, typed with completion: Tab takes the highlighted field name.
    page.click("#q")
    page.keyboard.type("local.l")
    expect(page.locator("#q-suggest li.active b")).to_have_text("local.lr")
    page.keyboard.press("Tab")
    page.keyboard.type("> 0.05 and algorithm.client.na")
    expect(page.locator("#q-suggest li.active b")).to_have_text("algorithm.client.name")
    page.keyboard.press("Tab")
    page.keyboard.type("= scaffold")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.input_value("#q") == "local.lr > 0.05 and algorithm.client.name = scaffold"
    assert names(page) == ["bob shared", "scaffold lr0.1"] and "q=local.lr" in page.url  # the URL holds the view

    # A bad field name: the page says which, and the nearest one.
    page.fill("#q", "local.lrr > 0.05")
    with page.expect_navigation():
        page.click("#apply")
    expect(page.locator("#query-errors")).to_contain_text('unknown field "local.lrr"; did you mean "local.lr"?')
    assert page.errors == ["Failed to load resource: the server responded with a status of 400 (Bad Request)"]
    page.errors.clear()  # the page itself, answered 400 as a refused query is: the browser logs it

    # Grouped by the client algorithm: a row per group, its runs under it on a click.
    page.fill("#q", "")
    with page.expect_navigation():
        page.select_option("#group-1", "algorithm.client.name")
    groups = page.locator("tr.group")
    expect(groups).to_have_count(3)
    scaffold = page.locator("tr.group", has_text="scaffold")
    expect(scaffold.locator("td").nth(1)).to_have_text("2/3")  # completed of all: the means are over those
    assert "0.8600 ± 0.0566" in scaffold.inner_text()
    scaffold.locator(".open-group").click()
    expect(page.locator("tr.member")).to_have_count(3)
    assert sorted(page.locator("tr.member td.run-name > a").all_inner_texts()) == [
        "bob shared",
        "scaffold lr0.01",
        "scaffold lr0.1",
    ]  # noqa: E501
    screenshot(page, artifacts, "runs-grouped.png", full_page=True)

    # Sorted by rounds to target (0.8), on the server: fewest first, runs that never reached it last.
    with page.expect_navigation():
        page.select_option("#group-1", "")
    pick_columns(page, "rounds_to_target")
    with page.expect_navigation():
        page.click("th[data-col='rounds_to_target'] a.sort")
    assert names(page)[:3] == ["fedavg lr0.1", "scaffold lr0.1", "bob shared"]  # descending first
    with page.expect_navigation():
        page.click("th[data-col='rounds_to_target'] a.sort")
    assert names(page) == ["bob shared", "scaffold lr0.1", "fedavg lr0.1", "ext script", "scaffold lr0.01"]
    assert (
        column(page, "rounds_to_target")[:3] == ["1", "2", "3"]
        and column(page, "rounds_to_target")[4] == "– (best 0.4000)"
    )
    assert re.search(r"sort=rounds_to_target", page.url)
    screenshot(page, artifacts, "runs-table.png", full_page=True)
    assert page.errors == []


def test_a_saved_view_shared_with_a_team_member_and_a_run_s_words(page, browser, daphne, world, artifacts):
    from playwright.sync_api import expect

    base = f"http://{daphne}"
    log_in(page, base, "alice", "pw")
    page.goto(f"{base}/?q=tag:baseline or owner = bob&columns=local.lr,best_accuracy&sort=-best_accuracy")
    assert names(page) == ["bob shared", "fedavg lr0.1"]
    page.click("#views-menu > summary")
    page.fill("#view-name", "baselines")
    page.select_option("#view-team", label="shared with Vision")
    with page.expect_navigation():
        page.click("#view-save")
    expect(page.locator(".messages")).to_contain_text("Saved the view “baselines”, shared with Vision.")
    page.reload()
    expect(page.locator("#views-menu > summary")).to_contain_text("Views: baselines")
    assert names(page) == ["bob shared", "fedavg lr0.1"] and page.input_value("#q") == "tag:baseline or owner = bob"

    # Bob, a member of Vision, opens it from his menu: the same view, over the runs *he* may read.
    bob = browser.new_context(viewport={"width": 1360, "height": 1000}).new_page()
    log_in(bob, base, "bob", "pw")
    bob.click("#views-menu > summary")
    with bob.expect_navigation():
        bob.click("#views-menu a[data-view='baselines']")
    assert names(bob) == ["bob private", "bob shared"]  # not alice's private run; his own private one
    assert bob.input_value("#q") == "tag:baseline or owner = bob" and column(bob, "local.lr") == ["0.3", "0.2"]
    bob.context.close()

    # A run's tags and notes, edited on its dashboard; the notes' Markdown rendered, raw HTML not run.
    page.goto(f"{base}/experiments/{world.r2.pk}/")
    page.click("#edit-words > summary")
    page.fill("#id_tags", "scaffold, keeper")
    page.fill("#id_notes", "## Verdict\n**Keep** it: lr 0.1 beats 0.01.\n\n<script>window.pwned = 1</script>")
    with page.expect_navigation():
        page.click("#save-words")
    expect(page.locator("#tags")).to_contain_text("keeper")
    expect(page.locator("#notes h2")).to_have_text("Verdict")
    expect(page.locator("#notes strong")).to_have_text("Keep")
    assert page.evaluate("() => window.pwned") is None and "<script>" in page.inner_text("#notes")
    page.click("#edit-history > summary")
    expect(page.locator("#edit-history")).to_contain_text("alice changed tags: scaffold → scaffold, keeper")
    screenshot(page, artifacts, "run-notes.png")  # the notes and who edited what, in one screen
    page.goto(f"{base}/?q=tag:keeper")
    assert names(page) == ["scaffold lr0.1"]
    assert page.errors == []
