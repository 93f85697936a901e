"""An LLM judge's prompt and its verdict: the messages sent for one comparison in one
presentation order, the verdict read back, and the cache key of one call (docs/judges.md).

The default is MT-Bench's pairwise judge prompt (Zheng et al. 2023, "Judging LLM-as-a-judge
with MT-Bench and Chatbot Arena", Figure 5; FastChat's ``pair-v2``, Apache-2.0): the system
prompt asks for a short explanation and a final verdict ``[[A]]`` (the answer shown first is
better), ``[[B]]`` (the second) or ``[[C]]`` (a tie). Conversations and markdown are passed as
their text (a conversation's turns as ``role: content`` blocks, protocol.bundle.messages_text).
A rubric criterion gets the same prompt with the evaluation narrowed to its label.

A prompt of one's own is a JSON object with FastChat's keys: ``system_prompt`` and
``prompt_template`` (placeholders ``{question}``, ``{answer_a}``, ``{answer_b}`` and optionally
``{reference}`` and ``{criterion}``; both texts may hold ``{criterion}``), and optionally
``name``. Its verdict must follow the same ``[[A]]`` / ``[[B]]`` / ``[[C]]`` format.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

AB, BA = "AB", "BA"
ORDERS = (AB, BA)
PLACEHOLDERS = ("question", "answer_a", "answer_b", "reference", "criterion")
_PLACEHOLDER = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_VERDICT = re.compile(r"\[\[\s*([ABC])\s*\]\]")
# A = the answer shown first better, B = the second, C = a tie
_SHOWN = {"A": 1, "B": -1, "C": 0}

MT_BENCH_SYSTEM = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by two AI assistants "
    "to the user question displayed below. You should choose the assistant that follows the user's instructions "
    "and answers the user's question better. Your evaluation should consider factors such as the helpfulness, "
    "relevance, accuracy, depth, creativity, and level of detail of their responses. Begin your evaluation by "
    "comparing the two responses and provide a short explanation. Avoid any positional biases and ensure that "
    "the order in which the responses were presented does not influence your decision. Do not allow the length "
    "of the responses to influence your evaluation. Do not favor certain names of the assistants. Be as "
    "objective as possible. After providing your explanation, output your final verdict by strictly following "
    "this format: \"[[A]]\" if assistant A is better, \"[[B]]\" if assistant B is better, and \"[[C]]\" for a tie.")
MT_BENCH_TEMPLATE = (
    "[User Question]\n{question}\n\n[The Start of Assistant A's Answer]\n{answer_a}\n"
    "[The End of Assistant A's Answer]\n\n[The Start of Assistant B's Answer]\n{answer_b}\n"
    "[The End of Assistant B's Answer]")
_FACTORS = ("Your evaluation should consider factors such as the helpfulness, relevance, accuracy, depth, "
            "creativity, and level of detail of their responses.")
# A rubric's criterion: the same judge, asked about the criterion's label only.
MT_BENCH_CRITERION_SYSTEM = MT_BENCH_SYSTEM.replace(
    _FACTORS, "Your evaluation should consider one criterion only: {criterion}.")
assert MT_BENCH_CRITERION_SYSTEM != MT_BENCH_SYSTEM


@dataclass(frozen=True)
class JudgePrompt:
    """A pairwise judge prompt: a system prompt and a user message template."""
    name: str
    system: str
    template: str

    @property
    def digest(self) -> str:
        """The prompt's identity: sha256 of its two texts (12 hex digits)."""
        return hashlib.sha256(json.dumps([self.system, self.template]).encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        """What a verdict row names as its prompt: the name, else the digest."""
        return self.name or f"sha256:{self.digest}"

    def messages(self, *, question: str, answer_a: str, answer_b: str, reference: str = "",
                 criterion: str = "") -> list[dict[str, str]]:
        """The chat messages of one call: answer_a is the one shown first. Every placeholder is
        filled in one pass, so a text holding ``{answer_b}`` stays as it is."""
        values = {"question": question, "answer_a": answer_a, "answer_b": answer_b, "reference": reference,
                  "criterion": criterion}

        def fill(text: str) -> str:
            return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)

        return [{"role": "system", "content": fill(self.system)}, {"role": "user", "content": fill(self.template)}]


MT_BENCH = JudgePrompt("mt-bench-pair-v2", MT_BENCH_SYSTEM, MT_BENCH_TEMPLATE)
MT_BENCH_CRITERION = JudgePrompt("mt-bench-pair-v2-criterion", MT_BENCH_CRITERION_SYSTEM, MT_BENCH_TEMPLATE)


def default_prompt(*, rubric: bool) -> JudgePrompt:
    """MT-Bench's pairwise prompt; in a rubric study its per-criterion form."""
    return MT_BENCH_CRITERION if rubric else MT_BENCH


def prompt_from_json(text: str, *, fallback_name: str = "") -> JudgePrompt:
    """A prompt of one's own from its JSON (module doc); ValueError naming what is wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"the prompt file is not JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError("the prompt file must hold one JSON object with system_prompt and prompt_template")
    unknown = sorted(set(data) - {"name", "system_prompt", "prompt_template", "type", "description", "category",
                                  "output_format"})
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} in the prompt file")
    system, template = data.get("system_prompt"), data.get("prompt_template")
    if not isinstance(system, str) or not isinstance(template, str) or not template.strip():
        raise ValueError("the prompt file needs system_prompt and a non-empty prompt_template (strings)")
    for needed in ("{answer_a}", "{answer_b}"):
        if needed not in template:
            raise ValueError(f"prompt_template must contain {needed}")
    name = data.get("name", fallback_name)
    if not isinstance(name, str) or len(name) > 200:
        raise ValueError("the prompt's name must be a string of at most 200 characters")
    return JudgePrompt(name.strip(), system, template)


def parse_verdict(content: str | None) -> int | None:
    """The verdict of a judge's answer in the order shown: +1 the first answer (A) better, -1 the
    second (B), 0 a tie (C); None when it names none (unparsed: not a tie). An answer naming
    several takes the last (the prompt asks for the final verdict after the explanation)."""
    found = _VERDICT.findall(content or "")
    return _SHOWN[found[-1]] if found else None


def canonical_verdict(shown: int | None, order: str) -> int | None:
    """A verdict in the order shown as the pair's own: "AB" showed the pair's first system
    first, "BA" its second."""
    if shown is None:
        return None
    if order not in ORDERS:
        raise ValueError(f"order must be AB or BA, got {order!r}")
    return shown if order == AB else -shown


def combine_samples(values: Iterable[int | None]) -> int | None:
    """One verdict from several samples of one comparison in one order: the sign of the sum of
    the parsed ones (a majority; an even split is a tie); None when none parsed."""
    parsed = [v for v in values if v is not None]
    if not parsed:
        return None
    total = sum(parsed)
    return (total > 0) - (total < 0)


def single_order(item: str, first: str, second: str) -> str:
    """The one order a run judging each comparison once shows it in: AB or BA by a hash of the
    comparison (half of each), so that the first position is not always the same system."""
    return AB if hashlib.sha256(f"{item}\0{first}\0{second}".encode()).digest()[0] % 2 == 0 else BA


def call_key(*, model: str, messages: list[dict[str, str]], order: str, sample: int, temperature: float) -> str:
    """The cache key of one call: sha256 of the model, the messages (the prompt's text with the
    two texts in the order shown), the order, the sample and the temperature."""
    payload = json.dumps([model, messages, order, sample, temperature], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()
