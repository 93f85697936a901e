"""Fixtures of the protocol's tests."""
import pytest


@pytest.fixture
def solver_iterations(monkeypatch):
    """Counts the iterations of choix's ILSR (one LSR step each) that the fits run."""
    from choix import lsr

    calls = []
    step = lsr.lsr_pairwise_dense

    def counted(*args, **kwargs):
        calls.append(1)
        return step(*args, **kwargs)

    monkeypatch.setattr(lsr, "lsr_pairwise_dense", counted)
    return calls
