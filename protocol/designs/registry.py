"""The registry of pair designs: name -> PairDesign (protocol.designs). It imports nothing, so
the table of study settings can offer its names (``design_choices``) without importing the
designs' machinery."""
from __future__ import annotations

# The Study field that stores a design's name is this wide (annotation/models.py).
MAX_NAME_LENGTH = 10

# Design name -> PairDesign, in the order they were registered.
DESIGNS: dict = {}


def register(design):
    """Add a design (a protocol.designs.PairDesign) to the registry; a name may be registered once.
    Returns the design."""
    problems = [why for why, bad in (
        ("it has no name", not design.name),
        (f"its name is longer than {MAX_NAME_LENGTH} characters", len(design.name) > MAX_NAME_LENGTH),
        ("it has no label", not design.label),
        ("a design of that name is registered already", design.name in DESIGNS),
        ("it starts from no order but caps labels per comparison", design.caps_labels and not design.orders_systems),
    ) if bad]
    if problems:
        raise ValueError(f"pair design {design.name!r}: " + "; ".join(problems))
    DESIGNS[design.name] = design
    return design


def unregister(name: str) -> None:
    """Take a design out of the registry (a test's own design, after the test)."""
    del DESIGNS[name]


def design_of(name: str):
    """The registered design of that name (KeyError naming the known ones)."""
    try:
        return DESIGNS[name]
    except KeyError:
        raise KeyError(f"unknown pair design {name!r}; known: {', '.join(DESIGNS)}") from None


def design_choices() -> list[tuple[str, str]]:
    """The registered designs as (name, label) choices, read afresh at each call: the study
    setting, the model field and the forms list a design registered after they were made."""
    return [(design.name, design.label) for design in DESIGNS.values()]
