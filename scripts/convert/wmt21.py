"""Convert WMT21 newstest2021 en-de MQM into the study bundle ``wmt21_ende.jsonl.gz``.

    python scripts/convert/wmt21.py [--source DIR] [--out data/bundles/wmt21_ende.jsonl.gz]

- systems: the 8 MT systems (Facebook-AI, HuaweiTSC, Nemo, Online-W, UEdin, VolcTrans-AT,
  VolcTrans-GLAT, eTranslation). The human references ref-A/B/C/D and metricsystem1-5 (which
  are MQM-rated "systems" too, but have no text in newstest2021) are excluded;
- items: segments with an MQM score and a non-empty hypothesis for all 8 systems, id
  ``seg-<seg_id>`` (seg_id = 1-based line of newstest2021.en-de); input = the English source,
  reference = ref-C, the standard en-de reference of mt-metrics-eval for wmt21.news (ref-A is
  rated clearly worse by MQM, below two MT systems);
- outputs: the hypothesis texts;
- human_score: the per-segment MQM average over raters, negated (0 = no errors, higher is
  better), annotator ``mqm_avg``;
- metric_score ``sentence_bleu`` and ``sentence_chrf``: the sacreBLEU 2.6.0 sentence scores
  against ref-C from ``sentence_bleu_chrf_computed.jsonl.gz`` (computed for this project, not
  official WMT21 scores).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from scripts.convert.bundle_io import read_jsonl, write_bundle  # noqa: E402

DEFAULT_SOURCE = Path("/work/shared/data/wmt21_mqm")
LP = "en-de"
REFERENCE = "ref-C"
MT_SYSTEMS = ("Facebook-AI", "HuaweiTSC", "Nemo", "Online-W", "UEdin", "VolcTrans-AT",
              "VolcTrans-GLAT", "eTranslation")
METRICS = {"sentence_bleu": f"sentBLEU-{REFERENCE}", "sentence_chrf": f"chrF-{REFERENCE}"}
INSTRUCTIONS = (
    "Read the English source sentence, then the two German translations (a reference "
    "translation is shown for help, but it may itself be imperfect). Choose the translation "
    "that is better overall: first accuracy (meaning added, omitted or mistranslated, wrong "
    "terminology, untranslated text), then fluency (grammar, spelling, punctuation, "
    "register, naturalness). A single serious meaning error outweighs several minor slips. "
    "Choose a tie only if both are equally good or contain equally serious errors."
)


def build(source: Path) -> tuple[dict, list[dict], dict]:
    sources = {int(r["seg_id"]): r for r in read_jsonl(source / "newstest2021_ende_sources.jsonl.gz")
               if r["lp"] == LP}
    seg: dict[int, dict[str, dict]] = defaultdict(dict)
    all_systems: set[str] = set()
    for r in read_jsonl(source / "newstest2021_ende_mqm_seg.jsonl.gz"):
        if r["lp"] != LP:
            continue
        all_systems.add(r["system"])
        if r["system"] in MT_SYSTEMS:
            if r["system"] in seg[int(r["seg_id"])]:
                raise ValueError(f"duplicate row {r['system']} seg {r['seg_id']}")
            seg[int(r["seg_id"])][r["system"]] = r
    missing = set(MT_SYSTEMS) - all_systems
    if missing:
        raise ValueError(f"systems not in the source: {sorted(missing)}")
    metrics: dict[tuple[int, str], dict] = {}
    for r in read_jsonl(source / "sentence_bleu_chrf_computed.jsonl.gz"):
        if r["testset"] == "newstest2021" and r["lp"] == LP and r["system"] in MT_SYSTEMS:
            metrics[(int(r["seg_id"]), r["system"])] = r
    notes: Counter = Counter()
    notes["systems_excluded"] = ", ".join(sorted(all_systems - set(MT_SYSTEMS)))
    rows: list[dict] = []
    for seg_id in sorted(seg):
        by_sys = seg[seg_id]
        rated = [s for s in MT_SYSTEMS if s in by_sys and by_sys[s]["mqm"] is not None]
        if not rated:
            notes["segments_unrated"] += 1
            continue
        ok = len(rated) == len(MT_SYSTEMS) and all(
            isinstance(by_sys[s]["hyp"], str) and by_sys[s]["hyp"].strip() for s in MT_SYSTEMS)
        src = sources.get(seg_id) or {}
        ref = (src.get(REFERENCE) or "").strip()
        if not ok or not (src.get("source") or "").strip() or not ref:
            notes["segments_rated_but_incomplete"] += 1
            continue
        item = f"seg-{seg_id}"
        rows.append({"kind": "item", "id": item, "input": src["source"].strip(), "reference": ref})
        for s in MT_SYSTEMS:
            r = by_sys[s]
            mqm = float(r["mqm"])
            if not math.isfinite(mqm):
                raise ValueError(f"non-finite MQM {s} seg {seg_id}")
            rows.append({"kind": "output", "item": item, "system": s, "text": r["hyp"].strip(), "sample": 0})
            rows.append({"kind": "human_score", "item": item, "system": s, "score": mqm,
                         "annotator": "mqm_avg"})
            m = metrics.get((seg_id, s))
            for name, column in METRICS.items():
                value = None if m is None else m.get(column)
                if value is None or not math.isfinite(float(value)):
                    notes[f"{name}_missing"] += 1
                    continue
                rows.append({"kind": "metric_score", "item": item, "system": s, "metric": name,
                             "score": float(value)})
        notes["segments_kept"] += 1
    study = {"kind": "study", "name": "WMT21 newstest2021 English-German",
             "criterion": "translation quality", "instructions": INSTRUCTIONS}
    return study, rows, dict(sorted(notes.items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--out", type=Path, default=ROOT / "data" / "bundles" / "wmt21_ende.jsonl.gz")
    args = ap.parse_args(argv)
    study, rows, notes = build(args.source)
    summary = write_bundle(args.out, study, rows)
    print(json.dumps({**summary, "notes": notes}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
