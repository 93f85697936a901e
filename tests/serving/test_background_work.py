"""Background work: one backend class per mode (annotation/jobs.py), picked by the setting
named for what it governs, EVALAPP_BACKGROUND_WORK; its old name EVALAPP_ROUND_CLOSE still
works, with a deprecation warning (issue 40)."""
from __future__ import annotations

import pytest

from annotation import jobs
from evalapp.settings.base import BACKGROUND_WORK_BACKENDS, background_work_from


def test_the_setting_names_one_backend_class_each():
    assert tuple(sorted(jobs.BACKENDS)) == tuple(sorted(BACKGROUND_WORK_BACKENDS))
    assert {type(b) for b in jobs.BACKENDS.values()} == {jobs.InlineBackend, jobs.CeleryBackend, jobs.ThreadBackend}


def test_the_old_name_still_works_and_says_it_is_deprecated():
    with pytest.warns(DeprecationWarning, match="EVALAPP_ROUND_CLOSE is deprecated"):
        assert background_work_from({"EVALAPP_ROUND_CLOSE": "celery"}, "thread") == "celery"
    assert background_work_from({"EVALAPP_BACKGROUND_WORK": "inline", "EVALAPP_ROUND_CLOSE": "celery"},
                                "thread") == "inline"
    assert background_work_from({}, "thread") == "thread"
    with pytest.raises(ValueError, match="EVALAPP_BACKGROUND_WORK must be celery, thread, inline, not 'later'"):
        background_work_from({"EVALAPP_BACKGROUND_WORK": "later"}, "thread")


@pytest.mark.parametrize("name", BACKGROUND_WORK_BACKENDS)
def test_jobs_run_on_the_backend_the_setting_names(settings, name):
    settings.EVALAPP_BACKGROUND_WORK = name
    assert jobs.backend() is jobs.BACKENDS[name] and jobs.backend().name == name
