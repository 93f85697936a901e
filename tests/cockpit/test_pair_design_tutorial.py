"""docs/tutorials/add-a-pair-design.md, followed: the toy design of its step 1, read out of the
page and registered as the page says, runs a small study through the app (import, serving,
submits, round closes, the dashboard and the settings page). When the interface of
protocol.designs changes and the page does not, this fails."""
from __future__ import annotations

import re
import types
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from annotation.models import Assignment, PairState
from annotation.reports import study_dashboard_refresh
from annotation.services.studies import study_import
from protocol.designs import DESIGNS, register, unregister
from protocol.study_settings import SETTINGS
from tests.builders.annotating import answer_hits, workers_of
from tests.builders.bundles import RANKING_SYSTEMS, bundle_bytes, ranking_rows, ranking_truth

pytestmark = pytest.mark.django_db(transaction=True)

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorials" / "add-a-pair-design.md"
MODULE_PATH = "protocol/designs/baseline.py"


@pytest.fixture
def baseline_design():
    """The tutorial's module, as the page shows it, imported (which registers its design);
    taken out of the registry afterwards."""
    blocks = re.findall(r"```python\n(.*?)```", TUTORIAL.read_text(), flags=re.S)
    source = next(block for block in blocks if block.startswith(f"# {MODULE_PATH}\n"))
    module = types.ModuleType("protocol.designs.baseline")
    exec(compile(source, MODULE_PATH, "exec"), module.__dict__)
    yield module.BASELINE
    unregister(module.BASELINE.name)


def test_the_tutorials_design_registers_and_runs_a_study(baseline_design):
    assert DESIGNS["baseline"] is baseline_design and "baseline" in SETTINGS["pair_design"].values
    owner = User.objects.create_user("tutor", password="pw-tutor-123")
    rows = ranking_rows(items=6, pair_design="baseline", family_control="ebh")
    study = study_import(source=bundle_bytes(rows), slug="baseline", created_by=owner)
    assert study.design is baseline_design
    baseline = min(RANKING_SYSTEMS)
    against = {key for key in PairState.objects.filter(study=study).values_list("first__name", "second__name")
               if baseline in key}
    assert len(against) == len(RANKING_SYSTEMS) - 1

    made = answer_hits(study, workers_of(["w1", "w2", "w3"]), lambda a, b, _: ranking_truth(a, b))
    served = set(Assignment.objects.filter(comparison__study=study).values_list(
        "comparison__first__name", "comparison__second__name"))
    assert made > 0 and served == against
    parked = set(PairState.objects.filter(study=study, status="parked").values_list("first__name", "second__name"))
    assert parked and not parked & against

    client = Client()
    client.force_login(owner)
    study_dashboard_refresh(study_id=study.pk)
    assert client.get(f"/s/{study.slug}/dashboard/").status_code == 200
    settings_page = client.get(f"/s/{study.slug}/settings/").content.decode()
    assert "Against a baseline" in settings_page and "each system against the first by name" in settings_page


def test_a_design_name_is_registered_once(baseline_design):
    with pytest.raises(ValueError, match="registered already"):
        register(type(baseline_design)())
