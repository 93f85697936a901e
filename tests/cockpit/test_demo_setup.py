"""The demo command (README command one) imports every demo study under a name of its own and
prints each study's address and crowd link (issue 37)."""
import io
import re

import pytest
from django.core.management import call_command

from annotation.models import Study
from annotation import reports
from annotation.selectors.dashboard import dashboard_version
from annotation.selectors.serving import study_work_left

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def test_the_demo_prints_every_studys_dashboard_and_crowd_link_and_names_are_distinct():
    out = io.StringIO()
    call_command("demo_setup", stdout=out, stderr=io.StringIO())
    printed = out.getvalue()
    studies = list(Study.objects.all())
    assert len(studies) >= 6
    assert any(not study_work_left(study=s) for s in studies)  # the case below is exercised
    assert len({s.name for s in studies}) == len(studies)  # arena-ranking and arena-active were both "Synthetic arena: ..."
    for study in studies:
        # the links are printed in Prolific's form: a study without a code could not pay its workers
        assert study.completion_code, f"{study.slug} has no completion code"
        assert f"/s/{study.slug}/dashboard/" in printed
        # a crowd link only where the crowd has work: PandaLM's and the separability study's
        # bundles bring every human label, and their start links led to "This study has finished"
        has_work = study_work_left(study=study)
        assert (f"/s/{study.slug}/start/?PROLIFIC_PID=" in printed) == has_work, study.slug
        if not has_work:
            assert re.search(rf"{re.escape(study.name)}\n.*\n    no crowd link: .*judgements came with the bundle", printed), study.slug
        # a new user's first dashboard is a read, not "being computed" (the import leaves it to a job)
        cached = reports.DASHBOARD.read(study.pk)
        assert cached and cached[0] == dashboard_version(study=study), f"{study.slug}'s dashboard was not computed"
    assert re.search(r"admin\s+password: admin-demo-pass", printed)
