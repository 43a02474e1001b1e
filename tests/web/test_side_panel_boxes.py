"""The New experiment form's side panel with per-client evaluation: the client test split it needs is
filled in, and a split left at 0 blanks no box that does not read it."""

from __future__ import annotations

import pytest

from fedweb_engine.spec.schema import Spec, SpecError, spec_fields
from tests.web.test_forms import form_data

pytestmark = pytest.mark.django_db

SAMPLED_WITHOUT_SPLIT = {"evaluation__clients": "sampled", "data__client_test_fraction": "0"}


def test_the_engine_fills_in_a_client_test_split_when_per_client_evaluation_is_asked_for():
    assert Spec.from_dict({"evaluation": {"clients": "sampled"}}).data.client_test_fraction == 0.2
    assert Spec.from_dict({"evaluation": {"clients": "cohort"}}).data.client_test_fraction == 0.2
    assert Spec.from_dict({}).data.client_test_fraction == 0.0  # off: no split
    given = {"evaluation": {"clients": "sampled"}, "data": {"client_test_fraction": 0.1}}
    assert Spec.from_dict(given).data.client_test_fraction == 0.1  # what the writer gave stays
    with pytest.raises(SpecError) as e:
        Spec.from_dict({"evaluation": {"clients": "sampled"}, "data": {"client_test_fraction": 0}})
    assert e.value.field == "data.client_test_fraction" and e.value.related == ("evaluation.clients",)
    assert spec_fields()["data.client_test_fraction"]["applied_default"] == 0.2  # the form's page script fills it too


def test_the_form_carries_the_filled_in_value_for_its_page_script(alice_client):
    html = alice_client.get("/experiments/new/").content.decode()
    assert 'id="field-data__client_test_fraction" data-applies-when=' in html
    assert 'data-applied-default="0.2"' in html


@pytest.mark.parametrize("box", ["resources", "bandwidth", "privacy", "partition"])
def test_a_client_test_split_of_zero_blanks_no_box_that_does_not_read_it(alice_client, box):
    response = alice_client.get(f"/experiments/new/{box}.json", form_data(**SAMPLED_WITHOUT_SPLIT))

    assert response.status_code == 200, response.json()
