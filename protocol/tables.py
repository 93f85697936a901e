"""Study files as researchers have them, turned into study bundles (issue 37).

After generating answers a researcher has a table, not a bundle: one row per (prompt, system)
with the prompt, the model's name, its response and perhaps an id, a reference and scores, as
CSV, TSV, JSON Lines, a JSON list or Parquet; or what an evaluation tool wrote — AlpacaEval's
``model_outputs.json`` (one file per model), FastChat / MT-Bench / Arena-Hard answer files with
their question file, a Hugging Face dataset saved to disk. ``study_rows`` reads such files
into the rows of a study bundle (docs/bundle-format.md), which the bundle reader then checks
like any other: one way in, every rule applied once.

Columns are given roles (``ROLES``) by their names (``ALIASES``: ``prompt`` or ``input`` or
``question`` or ``instruction`` ...), or by a mapping (``--columns prompt=question,model=generator``);
the table's other columns whose every value is a number become metric scores. A cell may hold
a conversation (a list of ``{"role", "content"}`` messages, or that list as JSON text). A
``messages`` column holding whole chats (the Hugging Face chat format) is split at its last
assistant turn into the prompt and the response.

Every problem names its file, row and column ("answers.csv row 7, column 'score': 'n/a' is
not a number"), and all are reported at once (``BundleError``). Nothing here uses Django.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import math
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .bundle import GZIP_MAGIC, MESSAGE_ROLES, BundleError, BundleProblem, bundle_rows, read_bundle
from .computed_metrics import with_computed_metrics

ROLES = ("prompt", "model", "response", "id", "reference", "sample", "prompt_kind", "messages")
# A column's role from its name (lower case, spaces and dashes as _), first match wins.
ALIASES: dict[str, tuple[str, ...]] = {
    "prompt": ("prompt", "input", "question", "instruction", "query", "source", "src"),
    "model": ("model", "system", "generator", "model_id", "model_name", "system_name"),
    "response": ("response", "output", "answer", "completion", "generation", "prediction", "hypothesis",
                 "hyp", "text"),
    "id": ("id", "item", "item_id", "prompt_id", "question_id", "example_id", "uid", "doc_id", "segment_id"),
    "reference": ("reference", "references", "target", "gold", "ref", "label_text"),
    "sample": ("sample", "sample_id", "sample_index", "seed"),
    # the bundle's item field of that name (docs/ranking.md); a column of another name is mapped
    # (--columns prompt_kind=category): a category column is not always the prompt's kind
    "prompt_kind": ("prompt_kind",),
    "messages": ("messages", "conversation", "conversations", "chat"),
}
REQUIRED = ("prompt", "model", "response")
MAX_PROBLEMS = 200

TABLE = "table"
BUNDLE = "bundle"
FASTCHAT_QUESTIONS = "fastchat questions"
FASTCHAT_ANSWERS = "fastchat answers"

ARROW_STREAM = b"\xff\xff\xff\xff"   # an Arrow IPC stream's first message marker
ARROW_FILE = b"ARROW1"
SAVED_DATASET_METADATA = ("state.json", "dataset_info.json")  # beside a saved dataset's shards


@dataclass
class Records:
    """One file's records: ``rows`` as (where, record) pairs, ``where`` naming the file and row."""

    name: str
    form: str                    # "CSV", "TSV", "JSON Lines", "JSON list", "Parquet", "Arrow", "dataset"
    columns: list[str]
    rows: list[tuple[str, dict]]
    kind: str = TABLE            # TABLE, BUNDLE, FASTCHAT_QUESTIONS or FASTCHAT_ANSWERS


@dataclass(frozen=True)
class ColumnMap:
    """Which column plays which role; ``metrics``: the columns read as metric scores."""

    prompt: str | None = None
    model: str | None = None
    response: str | None = None
    id: str | None = None
    reference: str | None = None
    sample: str | None = None
    prompt_kind: str | None = None
    messages: str | None = None
    metrics: tuple[str, ...] = ()
    ignored: tuple[str, ...] = ()

    def role_of(self, column: str) -> str | None:
        for role in ROLES:
            if getattr(self, role) == column:
                return role
        return "metric" if column in self.metrics else None


@dataclass
class _Problems:
    found: list[str] = field(default_factory=list)
    total: int = 0

    def add(self, message: str) -> None:
        self.total += 1
        if len(self.found) < MAX_PROBLEMS:
            self.found.append(message)

    def raise_if_any(self) -> None:
        if self.total:
            raise BundleError([BundleProblem(0, m) for m in self.found], total=self.total)


def _normal(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", str(name).strip().lower())


# --- Reading files ------------------------------------------------------------------------

def _bytes_of(source) -> bytes:
    if isinstance(source, (bytes, bytearray)):
        data = bytes(source)
    elif hasattr(source, "read"):
        if hasattr(source, "seek"):
            source.seek(0)
        data = source.read()
    else:
        data = Path(source).read_bytes()
    return gzip.decompress(data) if data[:2] == GZIP_MAGIC else data


def _head(source, size: int = 65536) -> bytes:
    """The first bytes of ``source`` (decompressed), without reading the rest."""
    if isinstance(source, (bytes, bytearray)):
        raw = io.BytesIO(source)
    elif hasattr(source, "read"):
        if hasattr(source, "seek"):
            source.seek(0)
        raw = source
    else:
        if Path(source).is_dir():
            return b""
        raw = open(source, "rb")  # noqa: SIM115 — closed below when ours
    try:
        start = raw.read(2)
        rest = raw.read(size)
        data = start + rest
        if start == GZIP_MAGIC:
            try:
                data = gzip.GzipFile(fileobj=io.BytesIO(data)).read1(size)
            except (OSError, EOFError):
                return b""
        return data
    finally:
        if hasattr(raw, "seek"):
            raw.seek(0)
        if raw is not source and not isinstance(source, (bytes, bytearray)):
            raw.close()


def is_bundle(source) -> bool:
    """Whether ``source`` (a path, bytes or a binary file) is a study bundle: its first line is a
    JSON object with a ``kind``. Reads only the file's head."""
    line = _head(source).lstrip().split(b"\n", 1)[0]
    if not line.startswith(b"{"):
        return False
    try:
        return "kind" in json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return b'"kind"' in line[:200]


def _text(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BundleError([BundleProblem(0, f"{name}: not UTF-8 text (byte {exc.start}); save it as UTF-8")]) \
            from None


def read_records(name: str, source) -> Records:
    """One file's records, whatever its form (detected from the content, then the name).
    BundleError, naming the file, for anything that cannot be read (a file from outside: a
    truncated gzip or a broken Parquet file is a problem of the file, not of the app)."""
    try:
        if isinstance(source, (str, os.PathLike)) and Path(source).is_dir():
            return _dataset_records(name, Path(source))
        data = _bytes_of(source)
        if data[:4] == b"PAR1":
            return _parquet_records(name, data)
        if data[:4] == ARROW_STREAM or data[:6] == ARROW_FILE:
            return _arrow_records(name, data)
        text = _text(name, data)
        head = text.lstrip()[:1]
        if head == "[":
            return _json_list_records(name, text)
        if head == "{":
            return _jsonl_records(name, text)
        return _csv_records(name, text)
    except BundleError:
        raise
    except (ValueError, OSError, EOFError, zlib.error, TypeError) as exc:
        raise BundleError([BundleProblem(0, f"{name}: cannot be read ({type(exc).__name__}: {exc})")]) from None


def _json_list_records(name: str, text: str) -> Records:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BundleError([BundleProblem(0, f"{name}: not valid JSON ({exc.msg} at line {exc.lineno})")]) from None
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise BundleError([BundleProblem(0, f"{name}: a JSON list must hold one object per row")])
    columns = list(dict.fromkeys(k for row in value for k in row))
    return Records(name, "JSON list", columns, [(f"{name} entry {n}", row) for n, row in enumerate(value, 1)])


def _jsonl_records(name: str, text: str) -> Records:
    rows, problems = [], _Problems()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.add(f"{name} line {number}: not valid JSON ({exc.msg} at column {exc.colno})")
            continue
        if not isinstance(value, dict):
            problems.add(f"{name} line {number}: expected a JSON object, got {type(value).__name__}")
            continue
        rows.append((f"{name} line {number}", value))
    problems.raise_if_any()
    columns = list(dict.fromkeys(k for _, row in rows for k in row))
    kind = TABLE
    if "kind" in columns:
        kind = BUNDLE
    elif {"question_id", "model_id", "choices"} <= set(columns):
        kind = FASTCHAT_ANSWERS
    elif {"question_id", "turns"} <= set(columns) and "model_id" not in columns:
        kind = FASTCHAT_QUESTIONS
    return Records(name, "JSON Lines", columns, rows, kind)


def _csv_records(name: str, text: str) -> Records:
    sample = text[:65536]
    if name.lower().endswith((".tsv", ".tsv.gz", ".tab")):
        delimiter = "\t"
    else:
        try:
            delimiter = csv.Sniffer().sniff(sample.split("\n", 1)[0], delimiters=",\t;|").delimiter
        except csv.Error:
            delimiter = ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        header = next(reader)
    except StopIteration:
        raise BundleError([BundleProblem(0, f"{name}: the file is empty")]) from None
    except csv.Error as exc:
        raise BundleError([BundleProblem(0, f"{name} row 1: {exc}")]) from None
    columns = [c.strip() for c in header]
    if len(set(columns)) != len(columns):
        twice = sorted({c for c in columns if columns.count(c) > 1})
        raise BundleError([BundleProblem(0, f"{name} row 1: column {twice[0]!r} appears twice in the header")])
    rows, problems = [], _Problems()
    number = 1
    try:
        for number, cells in enumerate(reader, 2):
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(columns):
                problems.add(f"{name} row {number}: {len(cells)} cells, the header has {len(columns)} columns")
                continue
            rows.append((f"{name} row {number}", dict(zip(columns, cells))))
    except csv.Error as exc:
        problems.add(f"{name} row {number + 1}: {exc}")
    problems.raise_if_any()
    return Records(name, "TSV" if delimiter == "\t" else "CSV", columns, rows)


def _parquet_records(name: str, data: bytes) -> Records:
    import pyarrow.parquet as pq  # noqa: PLC0415 — optional: only a Parquet file needs it

    table = pq.read_table(io.BytesIO(data))
    return Records(name, "Parquet", list(table.column_names),
                   [(f"{name} row {n}", row) for n, row in enumerate(table.to_pylist(), 1)])


def _arrow_records(name: str, data: bytes) -> Records:
    """An Arrow file or stream: the shards (``data-00000-of-00001.arrow``) of a Hugging Face
    dataset saved with ``save_to_disk``, which is how such a dataset reaches the upload page."""
    import pyarrow.ipc  # noqa: PLC0415 — optional: only an Arrow file needs it

    table = (pyarrow.ipc.open_file if data[:6] == ARROW_FILE else pyarrow.ipc.open_stream)(io.BytesIO(data)).read_all()
    return Records(name, "Arrow", list(table.column_names),
                   [(f"{name} row {n}", row) for n, row in enumerate(table.to_pylist(), 1)])


def _dataset_records(name: str, path: Path) -> Records:
    """A Hugging Face dataset saved with ``save_to_disk`` (its "train" split, or its only one)."""
    import datasets  # noqa: PLC0415 — optional: only a saved dataset needs it

    try:
        loaded = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as exc:
        raise BundleError([BundleProblem(0, f"{name}: not a dataset saved with save_to_disk ({exc})")]) from None
    if isinstance(loaded, datasets.DatasetDict):
        splits = list(loaded)
        split = "train" if "train" in splits else splits[0] if len(splits) == 1 else None
        if split is None:
            raise BundleError([BundleProblem(0, f"{name}: a dataset of several splits ({', '.join(splits)}) and "
                                                "none is 'train': save the split to import")])
        loaded = loaded[split]
    return Records(name, "dataset", list(loaded.column_names),
                   [(f"{name} row {n}", row) for n, row in enumerate(loaded, 1)])


# --- Columns ------------------------------------------------------------------------------

def parse_columns(text: str) -> dict[str, str | list[str]]:
    """``prompt=question,model=generator,metrics=score+bleu,ignore=notes`` as a mapping; a role
    given an empty column (``reference=``) is unmapped.

    >>> parse_columns("prompt=question,model=generator,metrics=score+bleu,reference=")
    {'prompt': 'question', 'model': 'generator', 'metrics': ['score', 'bleu'], 'reference': ''}
    """
    mapping: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        role, sep, column = part.partition("=")
        role = role.strip().lower()
        if not sep or role not in (*ROLES, "metrics", "ignore"):
            raise ValueError(f"--columns: {part!r} must be ROLE=COLUMN with ROLE one of "
                             f"{', '.join((*ROLES, 'metrics', 'ignore'))}")
        mapping[role] = [c for c in column.split("+") if c] if role in ("metrics", "ignore") else column.strip()
    return mapping


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value.strip():
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _empty(value) -> bool:
    return value is None or (isinstance(value, str) and not value.strip()) or \
        (isinstance(value, float) and math.isnan(value))


def detect_columns(records: Records, mapping: dict | None = None) -> ColumnMap:
    """The role of each column: ``mapping`` first (roles to columns, ``metrics``, ``ignore``),
    then the names in ALIASES, then every other column whose values are all numbers is a
    metric. BundleError names a mapped column the table lacks and a role nobody plays."""
    mapping = dict(mapping or {})
    columns = records.columns
    by_normal = {_normal(c): c for c in columns}
    problems = _Problems()
    chosen: dict[str, str | None] = {}
    for role in ROLES:
        if role in mapping:
            column = mapping[role] or None
            if column is not None and column not in columns:
                problems.add(f"{records.name}: no column {column!r} for the {role} (its columns: "
                             f"{', '.join(columns)})")
            chosen[role] = column
    taken = {c for c in chosen.values() if c}
    for role in ROLES:
        if role in chosen:
            continue
        found = next((by_normal[a] for a in ALIASES[role] if a in by_normal and by_normal[a] not in taken), None)
        chosen[role] = found
        if found:
            taken.add(found)
    # A chat column stands for the prompt and the response: when it is mapped, or when it is
    # found and they are not; otherwise it is one more column.
    chat = bool(chosen.get("messages")) and ("messages" in mapping or not (chosen.get("prompt")
                                                                         and chosen.get("response")))
    if chat:
        for role in ("prompt", "response"):
            if role not in mapping and chosen.get(role):
                taken.discard(chosen[role])
            chosen[role] = None
    elif chosen.get("messages"):
        taken.discard(chosen["messages"])
        chosen["messages"] = None
    ignored = tuple(mapping.get("ignore", ()))
    for column in ignored:
        if column not in columns:
            problems.add(f"{records.name}: no column {column!r} to ignore")
    if "metrics" in mapping:
        metrics = tuple(mapping["metrics"])
        for column in metrics:
            if column not in columns:
                problems.add(f"{records.name}: no column {column!r} for a metric (its columns: {', '.join(columns)})")
    else:
        metrics = tuple(c for c in columns if c not in taken and c not in ignored and _numeric_column(records, c))
    if not chat:
        for role in REQUIRED:
            if not chosen.get(role):
                names = " or ".join(repr(a) for a in ALIASES[role][:4])
                problems.add(f"{records.name}: no column for the {role} (a column named {names}, or map one: "
                             f"--columns {role}=COLUMN); its columns: {', '.join(columns)}")
    problems.raise_if_any()
    rest = tuple(c for c in columns if c not in taken and c not in metrics and c not in ignored)
    return ColumnMap(**{role: chosen.get(role) for role in ROLES}, metrics=metrics, ignored=ignored + rest)


def _numeric_column(records: Records, column: str) -> bool:
    """A metric column: most of its values are numbers (the others are then reported, row by
    row, by ``table_rows``: a stray "n/a" in a score column is an error, not a silent skip)."""
    numbers = texts = 0
    for _, row in records.rows:
        value = row.get(column)
        if _empty(value):
            continue
        if _number(value) is None:
            texts += 1
        else:
            numbers += 1
    return numbers > 0 and numbers >= texts


# --- Conversion ---------------------------------------------------------------------------

def _conversation(value) -> list[dict] | None:
    """A cell's conversation: a list of {"role", "content"} messages, or that list as JSON text."""
    if isinstance(value, str) and value.lstrip().startswith("[") and '"role"' in value:
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m for m in value):
        return [{"role": str(m["role"]), "content": m.get("content") if isinstance(m.get("content"), str)
                 else json.dumps(m.get("content"), ensure_ascii=False)} for m in value]
    return None


def _cell_text(value) -> str | list[dict]:
    conversation = _conversation(value)
    if conversation is not None:
        return conversation
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n\n".join(value)  # e.g. a list of turns or references: one text
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _split_chat(messages: list[dict]) -> tuple[list[dict], list[dict]]:
    """A whole chat as (prompt turns, response turns): the response is the last assistant turn."""
    last = max((n for n, m in enumerate(messages) if m["role"] == "assistant"), default=None)
    if last is None:
        return messages, []
    return messages[:last], messages[last:]


def table_rows(records: list[Records], columns: ColumnMap, *, name: str, text_format: str | None = None) -> list[dict]:
    """The bundle rows of tables read with ``columns``: items in order of first appearance
    (keyed by the id column, else by the prompt), one output per (item, model[, sample]),
    a metric score per output and metric column. BundleError lists every problem with its
    file, row and column."""
    problems = _Problems()
    items: dict[str, dict] = {}
    item_of_prompt: dict[str, str] = {}
    seen_output: dict[tuple, str] = {}
    outputs, scores = [], []
    for table in records:
        for where, row in table.rows:
            prompt, response = _prompt_and_response(row, columns, where, problems)
            if prompt is None:
                continue
            model = row.get(columns.model) if columns.model else None
            if _empty(model):
                problems.add(f"{where}, column {columns.model!r}: no model name")
                continue
            model = str(model).strip()
            key_text = json.dumps(prompt, ensure_ascii=False, sort_keys=True)
            if columns.id and not _empty(row.get(columns.id)):
                item_id = str(row[columns.id]).strip()
            elif columns.id:
                problems.add(f"{where}, column {columns.id!r}: no id")
                continue
            else:
                item_id = item_of_prompt.setdefault(key_text, f"p{len(item_of_prompt) + 1:05d}")
            reference = _cell_text(row.get(columns.reference)) if columns.reference else ""
            if isinstance(reference, list):
                reference = "\n\n".join(m["content"] for m in reference)
            kind = _prompt_kind_cell(row, columns, where, problems)
            item = items.get(item_id)
            if item is None:
                items[item_id] = {"kind": "item", "id": item_id, "input": prompt, "_where": where, "_key": key_text}
                if reference:
                    items[item_id]["reference"] = reference
                if kind:
                    items[item_id]["prompt_kind"] = kind
            else:
                if kind and item.get("prompt_kind", kind) != kind:
                    problems.add(f"{where}, column {columns.prompt_kind!r}: item {item_id!r} is of kind {kind!r} here "
                                 f"and {item.get('prompt_kind')!r} in {item['_where']}")
                if item["_key"] != key_text:
                    problems.add(f"{where}, column {columns.id!r}: item {item_id!r} has another prompt here than "
                                 f"in {item['_where']}")
                if reference and item.get("reference", reference) != reference:
                    problems.add(f"{where}, column {columns.reference!r}: item {item_id!r} has another reference "
                                 f"here than in {item['_where']}")
                elif reference:
                    item["reference"] = reference
            sample = 0
            if columns.sample and not _empty(row.get(columns.sample)):
                number = _number(row[columns.sample])
                if number is None or number < 0 or number != int(number):
                    problems.add(f"{where}, column {columns.sample!r}: {row[columns.sample]!r} is not a sample "
                                 "number (0, 1, 2, ...)")
                    continue
                sample = int(number)
            key = (item_id, model, sample)
            if key in seen_output:
                problems.add(f"{where}: model {model!r} answers item {item_id!r} a second time (first in "
                             f"{seen_output[key]}); keep one row per prompt and model"
                             + (" or give each a sample number" if not columns.sample else ""))
                continue
            seen_output[key] = where
            output = {"kind": "output", "item": item_id, "system": model, "text": response}
            if sample:
                output["sample"] = sample
            outputs.append(output)
            if sample:
                continue  # scores rate the output shown: the lowest sample
            for metric in columns.metrics:
                value = row.get(metric)
                number = _number(value)
                if number is None or not math.isfinite(number):
                    shown = "empty" if _empty(value) else f"{value!r} is not a number"
                    problems.add(f"{where}, column {metric!r}: {shown} (a metric needs a number for every row; "
                                 f"leave the column out with --columns ignore={metric})")
                    continue
                scores.append({"kind": "metric_score", "item": item_id, "system": model, "metric": metric,
                               "score": number})
    if not outputs and not problems.total:
        problems.add(f"{', '.join(t.name for t in records)}: no rows")
    problems.raise_if_any()
    study = {"kind": "study", "name": name}
    fmt = text_format or ("markdown" if _looks_like_markdown(outputs) else "plain")
    if fmt != "plain":
        study["text_format"] = fmt
    item_rows = [{k: v for k, v in item.items() if not k.startswith("_")} for item in items.values()]
    return [study, *item_rows, *outputs, *scores]


def _prompt_kind_cell(row: dict, columns: ColumnMap, where: str, problems: _Problems) -> str:
    """The row's kind of prompt ("" without a prompt_kind column); an empty cell is a problem
    (every item names its kind or none does: protocol.bundle)."""
    if not columns.prompt_kind:
        return ""
    value = row.get(columns.prompt_kind)
    if _empty(value):
        problems.add(f"{where}, column {columns.prompt_kind!r}: no kind of prompt (every row needs one when the "
                     f"column is mapped)")
        return ""
    return str(value).strip()


def _prompt_and_response(row: dict, columns: ColumnMap, where: str, problems: _Problems):
    if columns.messages:
        chat = _conversation(row.get(columns.messages))
        if chat is None:
            problems.add(f"{where}, column {columns.messages!r}: not a list of {{\"role\", \"content\"}} messages")
            return None, None
        prompt, response = _split_chat(chat)
        if not prompt:
            problems.add(f"{where}, column {columns.messages!r}: no turn before the last assistant answer")
            return None, None
        return prompt, response
    prompt = _cell_text(row.get(columns.prompt))
    if not prompt or (isinstance(prompt, str) and not prompt.strip()):
        problems.add(f"{where}, column {columns.prompt!r}: empty prompt")
        return None, None
    response = _cell_text(row.get(columns.response))
    if isinstance(prompt, list):
        bad = sorted({m["role"] for m in prompt} - set(MESSAGE_ROLES))
        if bad:
            problems.add(f"{where}, column {columns.prompt!r}: role {bad[0]!r} (roles: {', '.join(MESSAGE_ROLES)})")
            return None, None
    if isinstance(response, str) and isinstance(prompt, list):
        response = [{"role": "assistant", "content": response}]  # a chat prompt: the answer is its next turn
    return prompt, response


_MARKDOWN = re.compile(r"(^|\n)(#{1,6} |[-*] |\d+\. |```|\|.*\|)")


def _looks_like_markdown(outputs: list[dict]) -> bool:
    """Whether the answers are markdown (LLM answers mostly are): a fifth of them has a heading,
    a list, a fence or a table line."""
    texts = [o["text"] if isinstance(o["text"], str) else "\n".join(m["content"] for m in o["text"])
             for o in outputs[:500]]
    return bool(texts) and sum(bool(_MARKDOWN.search(t)) for t in texts) * 5 >= len(texts)


def fastchat_rows(questions: Records, answers: list[Records], *, name: str) -> list[dict]:
    """MT-Bench / Arena-Hard (FastChat) files as bundle rows: each question an item whose input
    is its first user turn; each answer an output holding every assistant turn, with the later
    user turns between them (a multi-turn continuation). The question's ``reference`` answers,
    when present, become the item's reference, its ``category`` (MT-Bench's writing, coding,
    math, ...) the item's kind of prompt (``prompt_kind``; the bundle reader asks every
    question for one when any has one)."""
    problems = _Problems()
    items: dict[str, dict] = {}
    turns_of: dict[str, list[str]] = {}
    for where, row in questions.rows:
        qid = str(row.get("question_id", "")).strip()
        turns = row.get("turns")
        if not qid or not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
            problems.add(f"{where}: a question needs a question_id and its turns (a list of strings)")
            continue
        if qid in items:
            problems.add(f"{where}: question {qid!r} appears twice")
            continue
        item = {"kind": "item", "id": qid, "input": [{"role": "user", "content": turns[0]}]}
        reference = row.get("reference")
        if isinstance(reference, list) and reference:
            item["reference"] = "\n\n".join(str(r) for r in reference)
        category = row.get("category")
        if isinstance(category, str) and category.strip():
            item["prompt_kind"] = category.strip()  # MT-Bench's writing, coding, math, ...
        items[qid] = item
        turns_of[qid] = turns
    outputs, seen = [], {}
    for table in answers:
        for where, row in table.rows:
            qid, model = str(row.get("question_id", "")).strip(), str(row.get("model_id", "")).strip()
            choices = row.get("choices")
            if qid not in items:
                problems.add(f"{where}: question {qid!r} is not in {questions.name}")
                continue
            if not model:
                problems.add(f"{where}: no model_id")
                continue
            if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict) \
                    or not isinstance(choices[0].get("turns"), list):
                problems.add(f"{where}: 'choices' must be a list whose first entry has 'turns'")
                continue
            answer_turns = [t if isinstance(t, str) else (t.get("content", "") if isinstance(t, dict) else str(t))
                            for t in choices[0]["turns"]]
            if (qid, model) in seen:
                problems.add(f"{where}: model {model!r} answers question {qid!r} a second time (first in "
                             f"{seen[(qid, model)]})")
                continue
            seen[(qid, model)] = where
            continuation = []
            for n, answer in enumerate(answer_turns):
                if n:
                    user_turns = turns_of[qid]
                    if n >= len(user_turns):
                        break
                    continuation.append({"role": "user", "content": user_turns[n]})
                continuation.append({"role": "assistant", "content": answer})
            outputs.append({"kind": "output", "item": qid, "system": model, "text": continuation})
    problems.raise_if_any()
    used = {o["item"] for o in outputs}
    study = {"kind": "study", "name": name, "text_format": "markdown"}
    return [study, *(i for q, i in items.items() if q in used), *outputs]


@dataclass(frozen=True)
class Sniffed:
    """What a set of files is, for a page or a message: ``kind`` (BUNDLE, TABLE, or FASTCHAT),
    the first file's form, its columns with their detected roles and its first rows."""

    kind: str
    form: str
    columns: tuple[tuple[str, str | None], ...] = ()
    first_rows: tuple[dict, ...] = ()
    rows: int = 0

    def describe(self) -> str:
        if self.kind == BUNDLE:
            return "a study bundle"
        if self.kind == "fastchat":
            return "FastChat / MT-Bench answer files with their questions"
        roles = ", ".join(f"{c} → {r}" for c, r in self.columns if r)
        article = "an" if self.form[0] in "AEIOU" else "a"
        return f"{article} {self.form} table of {self.rows} rows ({roles or 'no column recognised'})"


def read_files(files: Iterable[tuple[str, str | os.PathLike | bytes]]) -> list[Records]:
    """Each file's records. Of a saved dataset's folder given file by file (a browser uploads
    files, not folders), the Arrow shards are the table: its metadata files are passed over."""
    files = list(files)
    if any(Path(name).suffix == ".arrow" for name, _ in files):
        files = [(name, source) for name, source in files if Path(name).name not in SAVED_DATASET_METADATA]
    return [read_records(name, source) for name, source in files]


def sniff(records: list[Records], mapping: dict | None = None) -> Sniffed:
    """What ``records`` are and how their columns would be read (for the upload's mapping step)."""
    first = records[0]
    if first.kind == BUNDLE:
        return Sniffed(BUNDLE, first.form)
    if any(r.kind in (FASTCHAT_QUESTIONS, FASTCHAT_ANSWERS) for r in records):
        return Sniffed("fastchat", first.form, rows=sum(len(r.rows) for r in records))
    try:
        columns = detect_columns(first, mapping)
        roles = tuple((c, columns.role_of(c)) for c in first.columns)
    except BundleError:
        roles = tuple((c, None) for c in first.columns)
    shown = tuple({c: _preview(row.get(c)) for c in first.columns} for _, row in first.rows[:5])
    return Sniffed(TABLE, first.form, roles, shown, sum(len(r.rows) for r in records))


def _preview(value, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def study_rows(records: list[Records], *, name: str | None = None, columns: dict | None = None,
               text_format: str | None = None) -> list[dict]:
    """The bundle rows of ``records`` (files read with ``read_files``): tables (CSV, TSV,
    JSON Lines, JSON lists, Parquet, saved datasets — AlpacaEval's outputs are JSON lists of
    instruction / output / generator) with ``columns`` (``parse_columns``), or FastChat /
    MT-Bench / Arena-Hard answer files with their question file. A bundle is not a table:
    BundleError says so."""
    if not records:
        raise BundleError([BundleProblem(0, "no file given")])
    name = name or Path(records[0].name).name.split(".")[0] or "Imported study"
    if any(r.kind == BUNDLE for r in records):
        raise BundleError([BundleProblem(0, "a study bundle is imported on its own (it needs no column mapping)")])
    questions = [r for r in records if r.kind == FASTCHAT_QUESTIONS]
    answers = [r for r in records if r.kind == FASTCHAT_ANSWERS]
    if questions or answers:
        if len(questions) != 1 or not answers or len(questions) + len(answers) != len(records):
            raise BundleError([BundleProblem(0, "FastChat / MT-Bench files: give one question file (question_id, "
                                                "turns) and one or more answer files (question_id, model_id, "
                                                f"choices); got {len(questions)} question and {len(answers)} "
                                                "answer files")])
        return fastchat_rows(questions[0], answers, name=name)
    mapping = detect_columns(records[0], columns)
    for other in records[1:]:
        missing = [c for c in (mapping.prompt, mapping.model, mapping.response, mapping.messages, *mapping.metrics)
                   if c and c not in other.columns]
        if missing:
            raise BundleError([BundleProblem(0, f"{other.name}: no column {missing[0]!r}, which {records[0].name} "
                                                "has (tables imported together share their columns)")])
    return table_rows(records, mapping, name=name, text_format=text_format)


def import_source(files: list[tuple[str, Any]], *, columns: dict | None = None, name: str | None = None,
                  text_format: str | None = None, compute: Iterable[str] = ()):
    """What the import reads for ``files`` (name, path / bytes / binary file): one bundle with
    nothing to compute is passed on as it is (read as a stream, within the import's limits);
    anything else becomes the bytes of the bundle it makes: tables (``study_rows``) or a bundle
    with metrics computed (protocol.computed_metrics)."""
    compute = tuple(compute)
    if len(files) == 1 and is_bundle(files[0][1]):
        if columns:
            raise BundleError([BundleProblem(0, f"{files[0][0]} is a study bundle: it needs no column mapping")])
        if not compute:
            return files[0][1]
        rows = list(bundle_rows(read_bundle(files[0][1])))
    else:
        rows = study_rows(read_files(files), name=name, columns=columns, text_format=text_format)
    return rows_bytes(with_computed_metrics(rows, compute))


def rows_bytes(rows: Iterable[dict]) -> bytes:
    """Bundle rows as the bytes of a bundle (JSON Lines) for the bundle reader."""
    return b"".join(json.dumps(row, ensure_ascii=False, allow_nan=False).encode() + b"\n" for row in rows)


def what_it_looks_like(name: str, source: str | os.PathLike | bytes) -> str:
    """For a file the bundle reader refused at its first line: what it is, when it is a table
    or a tool's output ("this is a CSV table: map its columns"), else ""."""
    try:
        records = [read_records(name, source)]
    except (BundleError, ValueError, OSError, ImportError):
        return ""
    if records[0].kind == BUNDLE or not records[0].rows:
        return ""
    described = sniff(records).describe()
    return (f"{name} is {described}, not a study bundle: import it as a table (the upload's column step, "
            "`import_study FILE --columns ...`, or the API's `columns` field)")


def iter_problems(error: BundleError) -> Iterator[str]:
    yield from (str(p) for p in error.problems)
