"""What a newcomer meets on the New experiment and New sweep forms, in real Chromium: every bad field
shown beside it on the first submit, labels that say which select is which, FedProx only where its
μ is, a client test split filled in for per-client evaluation with the side panel still answering,
and a client algorithm's extras apart from the model in the bandwidth box."""

from __future__ import annotations

from contextlib import ExitStack, contextmanager

import pytest

from orchestrator.models import Experiment, Sweep
from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.integration]

# 10⁸ rounds, no clients per round, a negative learning rate: three fields out of range at once.
THREE_BAD = {"rounds": "100000000", "participation__clients_per_round": "0", "local__lr": "-0.1"}


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


def _errors_beside(page, fields) -> dict[str, str]:
    return {
        f: page.inner_text(f"#field-{f} .errorlist") for f in fields if page.locator(f"#field-{f} .errorlist").count()
    }


def _answered(page, element_id: str) -> str:
    page.wait_for_function(f"() => !['–', ''].includes(document.getElementById('{element_id}').textContent)")
    return page.text_content(f"#{element_id}")


@contextmanager
def _answers(page, *query_parts: str):
    """The answers of the Resources, Bandwidth and Privacy boxes to a query holding ``query_parts``:
    what the boxes show after the change made inside this block."""
    with ExitStack() as stack:
        waits = [
            stack.enter_context(
                page.expect_response(
                    lambda r, box=box: f"/{box}.json?" in r.url and all(p in r.url for p in query_parts)
                )
            )
            for box in ("resources", "bandwidth", "privacy")
        ]
        yield waits


def test_the_form_shows_every_bad_field_beside_it_on_the_first_submit(page, alice, daphne):
    base = f"http://{daphne}"
    log_in(page, base, "alice", "alice-password")
    page.goto(f"{base}/experiments/new/")
    page.fill("#id_name", "three at once")
    for field, value in THREE_BAD.items():
        page.fill(f"#id_{field}", value)
    page.click("#submit")
    page.wait_for_load_state()

    errors = _errors_beside(page, THREE_BAD)
    assert set(errors) == set(THREE_BAD), errors
    assert "rounds must be <=" in errors["rounds"] and "local.lr must be > 0" in errors["local__lr"]
    assert "participation.clients_per_round must be >= 1" in errors["participation__clients_per_round"]
    assert not Experiment.objects.exists()

    page.goto(f"{base}/sweeps/new/")
    page.fill("#id_name", "three at once")
    page.fill("#id_axes", "seed: 0, 1")
    for field, value in THREE_BAD.items():
        page.fill(f"#id_{field}", value)
    page.click("#submit-sweep")
    page.wait_for_load_state()
    assert set(_errors_beside(page, THREE_BAD)) == set(THREE_BAD)
    assert not Sweep.objects.exists()
    assert all("400" in e for e in page.errors)  # the side panel's boxes answering 400 for these values


def test_the_form_says_which_select_is_which_and_where_fedprox_and_its_mu_are(page, alice, daphne):
    base = f"http://{daphne}"
    log_in(page, base, "alice", "alice-password")
    page.goto(f"{base}/experiments/new/")
    labels = {f: page.text_content(f"label[for=id_{f}]") for f in ("algorithm__name", "algorithm__client__name",
              "communication__uplink__name", "communication__downlink__name")}  # fmt: skip
    assert labels == {
        "algorithm__name": "Server strategy",
        "algorithm__client__name": "Client algorithm",
        "communication__uplink__name": "Uplink codec",
        "communication__downlink__name": "Downlink codec",
    }
    servers = page.evaluate("() => [...document.getElementById('id_algorithm__name').options].map(o => o.value)")
    assert "fedprox" not in servers and "fedavg" in servers
    page.select_option("#id_algorithm__client__name", "fedprox")
    assert page.is_visible("#field-algorithm__client__options__fedprox__mu")  # FedProx comes with its μ

    # SCAFFOLD with fp16 links: the model and update in fp16, the control variates beside them in fp32.
    page.select_option("#id_algorithm__client__name", "scaffold")
    page.select_option("#id_communication__uplink__name", "fp16")
    page.select_option("#id_communication__downlink__name", "fp16")
    page.wait_for_function("() => document.getElementById('bw-up-client').textContent.includes('scaffold (fp32)')")
    assert "(fp16) +" in page.text_content("#bw-up-client") and "(fp16) +" in page.text_content("#bw-down-client")
    assert page.errors == [] or all("400" in e for e in page.errors)


def test_per_client_evaluation_gets_a_client_test_split_and_the_side_panel_keeps_answering(page, alice, daphne):
    base = f"http://{daphne}"
    log_in(page, base, "alice", "alice-password")
    page.goto(f"{base}/experiments/new/?preset=quickstart")
    _answered(page, "res-params")
    assert page.input_value("#id_data__client_test_fraction") in ("0", "0.0")

    with _answers(page, "evaluation__clients=sampled", "data__client_test_fraction=0.2&") as answers:
        page.select_option("#id_evaluation__clients", "sampled")
    assert float(page.input_value("#id_data__client_test_fraction")) == 0.2  # filled in: sampled needs one
    assert [a.value.status for a in answers] == [200, 200, 200]

    with _answers(page, "evaluation__clients=sampled", "data__client_test_fraction=0&") as answers:
        page.fill("#id_data__client_test_fraction", "0")  # invalid with sampled, and read by none of these boxes
    assert [a.value.status for a in answers] == [200, 200, 200]
    for box, element_id in (("resources", "res-params"), ("bandwidth", "bw-total"), ("privacy", "dp-epsilon")):
        page.wait_for_function(f"() => document.getElementById('{box}-error').hidden")
        assert _answered(page, element_id) != "–", box
    page.click("#submit")  # and the form itself names the field
    page.wait_for_load_state()
    assert "client_test_fraction must be > 0" in page.inner_text("#field-data__client_test_fraction .errorlist")
