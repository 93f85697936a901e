"""A chat study of long markdown answers, for the benchmarks (issue 36): what LLM studies bring.

    python scripts/bench/long_chat.py --systems 4 --prompts 100 --words 800 2000 --out var/long_chat.jsonl.gz

Every prompt is a one-turn conversation; every answer an assistant turn of ``--words`` words
(uniform in the range) of markdown as LLMs write it: headings, paragraphs with **bold**,
*emphasis*, `inline code` and links, bullet and numbered lists, a fenced code block in a
language Pygments colours, and a table. The answers of one prompt share about a third of
their paragraphs (LLM answers to one question overlap), so the word diff of two answers has
long equal runs and long changed ones, as real pairs do. A metric ``judge_score`` per output
(a noisy function of the system) lets the study run with a metric.

Deterministic: the same arguments write a byte-identical file (a seeded
``random.Random``; gzip with mtime 0, rows sorted as scripts/convert/bundle_io.py writes them).
"""
from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from protocol.bundle import read_bundle  # noqa: E402

METRIC = "judge_score"
WORDS = (
    "model data answer system value result method approach question example function request "
    "server client cache memory latency throughput batch stream token context window prompt "
    "evaluation metric judge human label annotator budget decision error rate level interval "
    "estimate variance bias sample item pair order rank score test check feature option setting "
    "process thread queue worker lock row table index query plan cost time step round close "
    "simple careful robust clear fast slow large small common rare first second final useful "
    "important different similar exact approximate reliable stable typical specific general "
    "improves reduces measures compares returns handles keeps stores reads writes builds runs "
    "explains shows chooses avoids needs gives takes makes uses finds checks counts ranks fits"
).split()
LANGUAGES = ("python", "javascript", "sql", "bash", "json")


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 18))]
    styled = rng.random()
    if styled < 0.15:
        k = rng.randrange(len(words))
        words[k] = f"**{words[k]}**"
    elif styled < 0.25:
        k = rng.randrange(len(words))
        words[k] = f"*{words[k]}*"
    elif styled < 0.33:
        k = rng.randrange(len(words))
        words[k] = f"`{words[k]}()`"
    elif styled < 0.36:
        k = rng.randrange(len(words))
        words[k] = f"[{words[k]}](https://example.org/{words[k]})"
    return " ".join(words).capitalize() + "."


def _paragraph(rng: random.Random) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(3, 6)))


def _bullets(rng: random.Random) -> str:
    numbered = rng.random() < 0.4
    return "\n".join(f"{n}. {_sentence(rng)}" if numbered else f"- {_sentence(rng)}"
                     for n in range(1, rng.randint(3, 7) + 1))


def _code(rng: random.Random) -> str:
    language = rng.choice(LANGUAGES)
    lines = []
    for n in range(rng.randint(8, 24)):
        a, b = rng.choice(WORDS), rng.choice(WORDS)
        if language == "python":
            lines.append(f"{'    ' * (n % 3)}{a}_{n} = {b}({n}, key=\"{a}\")  # {rng.choice(WORDS)}")
        elif language == "javascript":
            lines.append(f"{'  ' * (n % 3)}const {a}{n} = await {b}({n}, {{ key: '{a}' }});")
        elif language == "sql":
            lines.append(f"SELECT {a}, COUNT(*) FROM {b} WHERE {a}_id = {n} GROUP BY {a};")
        elif language == "bash":
            lines.append(f"{a} --{b} {n} | grep -c '{rng.choice(WORDS)}'")
        else:
            lines.append(f'  "{a}_{n}": {{"{b}": {n}, "ok": {str(n % 2 == 0).lower()}}},')
    return f"```{language}\n" + "\n".join(lines) + "\n```"


def _table(rng: random.Random) -> str:
    columns = rng.randint(3, 5)
    head = [rng.choice(WORDS).capitalize() for _ in range(columns)]
    rows = [[rng.choice(WORDS) if c == 0 else f"{rng.uniform(0, 100):.1f}" for c in range(columns)]
            for _ in range(rng.randint(3, 8))]
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * columns,
                      *("| " + " | ".join(row) + " |" for row in rows)])


def _words(text: str) -> int:
    return len(text.split())


def answer(prompt_rng_seed: int, system: int, words: int, shared: list[str]) -> str:
    """One system's answer to one prompt: about ``words`` words of markdown, about a third of
    its paragraphs taken from the prompt's ``shared`` pool."""
    rng = random.Random(prompt_rng_seed * 1_000_003 + system)
    blocks = [f"## {rng.choice(WORDS).capitalize()} {rng.choice(WORDS)}", _paragraph(rng)]
    has_code = has_table = False
    while sum(_words(b) for b in blocks) < words:
        roll = rng.random()
        if roll < 0.33 and shared:
            blocks.append(rng.choice(shared))
        elif roll < 0.45:
            blocks.append(_bullets(rng))
        elif roll < 0.52 and not has_code:
            blocks.append(_code(rng))
            has_code = True
        elif roll < 0.57 and not has_table:
            blocks.append(_table(rng))
            has_table = True
        elif roll < 0.62:
            blocks.append(f"### {rng.choice(WORDS).capitalize()} {rng.choice(WORDS)}")
        else:
            blocks.append(_paragraph(rng))
    return "\n\n".join(blocks)


def bundle_rows(*, systems: int, prompts: int, words: tuple[int, int], seed: int) -> list[dict]:
    rng = random.Random(seed)
    names = [f"llm-{n:02d}" for n in range(1, systems + 1)]
    strength = {name: rng.gauss(0, 1) for name in names}
    rows: list[dict] = [{"kind": "study", "name": f"Long answers ({words[0]}-{words[1]} words)",
                         "criterion": "overall quality", "text_format": "markdown", "metric": METRIC,
                         "instructions": "Read the question and the two answers, then choose the better "
                                         "answer: correct, complete and clear. Do not prefer an answer "
                                         "just because it is longer."}]
    for p in range(prompts):
        item = f"q{p:04d}"
        prompt_rng = random.Random(seed * 7_919 + p)
        question = " ".join(_sentence(prompt_rng) for _ in range(prompt_rng.randint(2, 4)))
        rows.append({"kind": "item", "id": item, "input": [{"role": "user", "content": question}]})
        shared = [_paragraph(prompt_rng) for _ in range(6)]
        for s, name in enumerate(names):
            length = prompt_rng.randint(*words)
            rows.append({"kind": "output", "item": item, "system": name,
                         "text": [{"role": "assistant", "content": answer(seed * 7_919 + p, s, length, shared)}]})
            rows.append({"kind": "metric_score", "item": item, "system": name, "metric": METRIC,
                         "score": round(strength[name] + prompt_rng.gauss(0, 1), 4)})
    return rows


def write(rows: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
        for row in rows:
            kind = row["kind"]
            out.write((json.dumps({"kind": kind, **{k: v for k, v in row.items() if k != "kind"}},
                                  ensure_ascii=False, separators=(",", ":")) + "\n").encode())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=100)
    parser.add_argument("--words", type=int, nargs=2, default=(800, 2000), metavar=("MIN", "MAX"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.systems < 2 or args.prompts < 1 or not 1 <= args.words[0] <= args.words[1]:
        parser.error("need --systems >= 2, --prompts >= 1 and 1 <= MIN <= MAX words")
    rows = bundle_rows(systems=args.systems, prompts=args.prompts, words=tuple(args.words), seed=args.seed)
    write(rows, args.out)
    bundle = read_bundle(args.out)
    lengths = sorted(_words(o.text) for o in bundle.outputs)
    print(json.dumps({"out": str(args.out), "items": len(bundle.items), "outputs": len(bundle.outputs),
                      "words_min": lengths[0], "words_median": lengths[len(lengths) // 2],
                      "words_max": lengths[-1]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
