"""What every service does alike (HackSoft's ``model_update``)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from django.db import models

Model = TypeVar("Model", bound=models.Model)


def model_update(*, instance: Model, data: Mapping[str, Any]) -> Model:
    """Set ``data`` (field name -> value) on ``instance``, validate it whole (``full_clean``:
    ValidationError names a bad value) and save those fields alone.

    Saving only the named fields leaves a column that another process writes meanwhile (a
    study's closer hold, say) as that process left it; a full ``save()`` of an instance read
    before would put back the value it read.
    """
    for field, value in data.items():
        setattr(instance, field, value)
    instance.full_clean()
    instance.save(update_fields=list(data))
    return instance
