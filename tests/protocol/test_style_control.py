"""The style-controlled leaderboard (protocol/style_control.py) against lmarena's own
``arena-rank`` package on the same votes, and what its covariates and intervals recover."""
import json
import subprocess
import sys

import numpy as np
import pytest

from protocol.style_control import (
    ARENA_SCALE,
    fit_style_leaderboard,
    strongly_connected,
    style_counts,
    style_differences,
)

# arena-rank runs in a child process: importing it switches jax to 64-bit for the whole
# process (jax_enable_x64), which would change the numpyro fits of other tests in this worker.
ARENA_RANK = r"""
import json, sys
import numpy as np, pandas as pd
from arena_rank.models.contextual_bradley_terry import ContextualBradleyTerry
from arena_rank.utils.data_utils import ContextualPairDataset
votes = json.load(sys.stdin)
df = pd.DataFrame({"model_a": votes["a"], "model_b": votes["b"], "winner": votes["winner"]})
names = [f"f{j}" for j in range(len(votes["features"][0]))]
for j, name in enumerate(names):
    df[name] = [row[j] for row in votes["features"]]
dataset = ContextualPairDataset.from_pandas(df, feature_cols=names, normalize_features=votes["normalize"])
model = ContextualBradleyTerry(n_competitors=len(dataset.competitors), n_features=len(names), reg=votes["reg"])
result = model.compute_ratings_and_cis(dataset, significance_level=0.05)
print(json.dumps({k: np.asarray(v).tolist() for k, v in result.items()}))
"""


def arena_votes(seed=1, n=3000, systems=6, ties=0.1):
    """Votes of ``systems`` systems with a word-count effect (+0.4 log-odds per 100 words), a
    position effect (+0.1 for the left answer), a null covariate, and a share ``ties`` of ties."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, systems, n)
    b = (a + rng.integers(1, systems, n)) % systems
    features = np.c_[rng.normal(0, 150, n), rng.integers(-3, 4, n), rng.choice([-1.0, 1.0], n)]
    strength = np.linspace(-1, 1, systems)
    p = 1 / (1 + np.exp(-(strength[a] - strength[b] + 0.004 * features[:, 0] + 0.1 * features[:, 2])))
    u = rng.random(n)
    outcome = np.where(u < (1 - ties) * p, 1.0, np.where(u > 1 - (1 - ties) * (1 - p), 0.0, 0.5))
    return [f"s{k}" for k in range(systems)], a, b, outcome, features


def arena_rank_fit(names, a, b, outcome, features, reg, normalize=True):
    winner = np.where(outcome == 1, "model_a", np.where(outcome == 0, "model_b", "tie")).tolist()
    votes = {"a": [names[k] for k in a], "b": [names[k] for k in b], "winner": winner,
             "features": features.tolist(), "reg": reg, "normalize": normalize}
    done = subprocess.run([sys.executable, "-c", ARENA_RANK], input=json.dumps(votes), capture_output=True,
                          text=True, check=True, timeout=300)
    return {k: np.asarray(v) if k != "competitors" else v for k, v in json.loads(done.stdout).items()}


@pytest.mark.parametrize("reg", [1.0, 1.0 / 3000])
def test_scores_effects_and_intervals_match_arena_rank(reg):
    """Same votes, same settings (arena-rank's defaults: pair reweighting, standardised
    covariates, per-vote sandwich at 95 %; its default reg = 1 and the app's reg = 1/n): the
    scores agree within 0.01 Arena points, the effects within 1e-4 and every interval's width
    within 1 % (measured: 1.4e-4 points, 1e-7, 4e-7 relative; the issue asks 0.01 and 10 %)."""
    names, a, b, outcome, features = arena_votes()
    theirs = arena_rank_fit(names, a, b, outcome, features, reg)
    ours = fit_style_leaderboard(names, a, b, outcome, features, ["words", "headers", "position"], reg=reg)
    assert theirs["competitors"] == names
    np.testing.assert_allclose(ours.rating, theirs["ratings"], atol=0.01, rtol=0)
    np.testing.assert_allclose(ours.coef, theirs["coeffs"], atol=1e-4, rtol=0)
    np.testing.assert_allclose(ours.rating_high - ours.rating_low, theirs["rating_upper"] - theirs["rating_lower"],
                               rtol=0.01)
    np.testing.assert_allclose(ours.rating_low, theirs["rating_lower"], atol=0.05, rtol=0)
    assert abs(ours.log_strength.sum()) < 1e-9


def test_the_apps_uncentred_fit_is_arena_ranks_model_on_covariates_scaled_alike():
    """The app's settings (reg = 1/n, covariates scaled by their root mean square, not centred;
    votes in canonical order, every first system writing longer answers): arena-rank given the
    same scaled covariates without its own normalisation finds the same scores and intervals."""
    names, a, b, outcome, features = arena_votes(seed=7)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    swapped = a != lo
    features = np.where(swapped[:, None], -features, features) + np.array([40.0, 0.0, 0.0])
    outcome = np.where(swapped, 1 - outcome, outcome)
    scaled = features / np.sqrt((features ** 2).mean(axis=0))
    theirs = arena_rank_fit(names, lo, hi, outcome, scaled, 1 / 3000, normalize=False)
    ours = fit_style_leaderboard(names, lo, hi, outcome, features, ["words", "headers", "position"], reg=1 / 3000,
                                 center=False)
    np.testing.assert_allclose(ours.rating, theirs["ratings"], atol=0.01, rtol=0)
    np.testing.assert_allclose(ours.coef, theirs["coeffs"], atol=1e-4, rtol=0)
    np.testing.assert_allclose(ours.rating_high - ours.rating_low, theirs["rating_upper"] - theirs["rating_lower"],
                               rtol=0.01)


def test_the_word_and_position_effects_are_recovered_per_unit():
    """With the app's reg = 1/n the effect per 100 words covers the true +0.4 log-odds and the
    position effect the true +0.1 (votes without ties: the model's own); the null covariate's interval covers 0. arena-rank's
    default reg = 1 on its mean loss shrinks them about six-fold (why the app does not use it)."""
    names, a, b, outcome, features = arena_votes(seed=3, n=6000, ties=0.0)
    fit = fit_style_leaderboard(names, a, b, outcome, features, ["words", "headers", "position"],
                                units=[100, 1, 1], reg=1 / 6000)
    assert fit.per_unit_low[0] < 0.4 < fit.per_unit_high[0]
    assert fit.per_unit_low[1] < 0 < fit.per_unit_high[1]
    assert fit.per_unit_low[2] < 0.1 < fit.per_unit_high[2]
    shrunk = fit_style_leaderboard(names, a, b, outcome, features, ["words", "headers", "position"],
                                   units=[100, 1, 1], reg=1.0)
    assert shrunk.per_unit[0] < 0.3 * fit.per_unit[0]
    # the log-strengths are the truth's (linspace(-1, 1), mean 0)
    np.testing.assert_allclose(fit.log_strength, np.linspace(-1, 1, 6), atol=0.15)
    assert list(fit.order) == [5, 4, 3, 2, 1, 0]


def test_clustering_by_prompt_widens_the_intervals_when_prompts_differ():
    """Systems strong on some prompts and weak on others (a system × prompt effect, sd 1.5):
    votes on one prompt depend on each other, the per-vote sandwich is too narrow and the
    prompt-clustered one is wider; without prompt effects the two agree within 15 %."""
    rng = np.random.default_rng(5)
    systems, prompts, per_prompt = 5, 100, 30
    a = rng.integers(0, systems, prompts * per_prompt)
    b = (a + rng.integers(1, systems, len(a))) % systems
    prompt = np.repeat(np.arange(prompts), per_prompt)
    features = rng.normal(0, 1, (len(a), 1))
    widths = {}
    for spread in (0.0, 1.5):
        effect = rng.normal(0, spread, (prompts, systems))
        logit = effect[prompt, a] - effect[prompt, b] + 0.3 * (a - b)
        outcome = (rng.random(len(a)) < 1 / (1 + np.exp(-logit))).astype(float)
        names = [f"s{k}" for k in range(systems)]
        vote = fit_style_leaderboard(names, a, b, outcome, features, ["x"], reg=1 / len(a))
        clustered = fit_style_leaderboard(names, a, b, outcome, features, ["x"], reg=1 / len(a), clusters=prompt)
        assert clustered.clusters == prompts and vote.clusters == len(a)
        widths[spread] = (clustered.rating_high - clustered.rating_low) / (vote.rating_high - vote.rating_low)
    np.testing.assert_allclose(widths[0.0], 1.0, atol=0.15)
    assert widths[1.5].min() > 1.5, widths[1.5]


def test_markdown_counts_and_differences():
    text = ("# Title\n\nSome **bold** words and __more bold__.\n\n## Part\n- one\n- two\n* three\n"
            "1. first\n2) second\n#notaheader\n**not closed\n")
    assert style_counts(text) == (len(text.split()), 2, 5, 2)
    assert style_counts("") == (0, 0, 0, 0)
    words, headers, items, bold, position = style_differences(text, "short answer", shown_first_left=False)
    assert (words, headers, items, bold, position) == (len(text.split()) - 2, 2, 5, 2, -1.0)
    assert style_differences("a", "b", None)[-1] == 0.0


def test_a_system_that_wins_every_vote_is_not_estimable():
    """Bradley–Terry scores are finite only when the win graph is strongly connected."""
    assert strongly_connected(3, [0, 1, 2], [1, 2, 0], [1.0, 1.0, 1.0])
    assert not strongly_connected(3, [0, 1, 0], [1, 2, 2], [1.0, 1.0, 1.0])
    assert strongly_connected(3, [0, 1, 0], [1, 2, 2], [1.0, 1.0, 0.5])  # the tie closes 2 -> 0
    assert strongly_connected(2, [0], [1], [0.5])
    with pytest.raises(FloatingPointError):
        fit_style_leaderboard(["a", "b"], [0] * 20, [1] * 20, [1.0] * 20, np.zeros((20, 1)), ["x"], reg=0.05)


def test_arena_scale():
    assert ARENA_SCALE == pytest.approx(173.7178, abs=1e-4)


def test_without_centring_the_fit_does_not_depend_on_which_side_is_first():
    """Votes in a canonical order (the app's): every pair's first system writes longer answers.
    Centred covariates (arena-rank's preparation, right for the Arena's random sides) turn that
    average into a bonus of the canonical first system and the scores move when the sides of
    some votes are swapped; uncentred they do not, and they recover the truth."""
    rng = np.random.default_rng(4)
    n, names = 4000, ["s0", "s1", "s2"]
    a = rng.integers(0, 2, n)
    b = a + 1 + (rng.random(n) < 0.5) * (a == 0)
    words = rng.normal(80, 60, n)  # the first (lower index) writes longer answers
    truth = np.array([0.3, 0.0, -0.3])
    outcome = (rng.random(n) < 1 / (1 + np.exp(-(truth[a] - truth[b] + words / 100)))).astype(float)
    swap = rng.random(n) < 0.5
    flipped = (np.where(swap, b, a), np.where(swap, a, b), np.where(swap, 1 - outcome, outcome),
               np.where(swap, -words, words)[:, None])
    canonical = fit_style_leaderboard(names, a, b, outcome, words[:, None], ["words"], reg=1 / n, center=False)
    mixed = fit_style_leaderboard(names, *flipped, ["words"], reg=1 / n, center=False)
    np.testing.assert_allclose(canonical.rating, mixed.rating, atol=0.05)
    np.testing.assert_allclose(canonical.log_strength, truth, atol=0.15)
    centred = fit_style_leaderboard(names, a, b, outcome, words[:, None], ["words"], reg=1 / n)
    assert np.max(np.abs(centred.log_strength - truth)) > 0.3
