"""protocol.bundle reads a bundle as a stream within BundleLimits (issue 21, finding 5): every
limit is refused with its line, before the file is held in memory."""
import gzip
import io
import json

import pytest

from protocol.bundle import BundleError, BundleLimits, read_bundle

STUDY = {"kind": "study", "name": "Toy"}
ITEM = {"kind": "item", "id": "d1", "input": "A source text."}
OUT_A = {"kind": "output", "item": "d1", "system": "A", "text": "a"}
OUT_B = {"kind": "output", "item": "d1", "system": "B", "text": "b"}


def lines(*rows) -> bytes:
    return ("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n").encode()


def refused(data: bytes, **limits) -> str:
    with pytest.raises(BundleError) as info:
        read_bundle(data, limits=BundleLimits(**limits))
    assert len(info.value.problems) == 1, info.value.problems
    return str(info.value.problems[0])


@pytest.mark.parametrize("packed", [bytes, gzip.compress], ids=["plain", "gzip"])
def test_each_limit_is_refused_with_its_line(packed):
    valid = lines(STUDY, ITEM, OUT_A, OUT_B)
    assert read_bundle(packed(valid), limits=BundleLimits(max_lines=4, max_rows=4, max_line_bytes=80)).items
    long_item = {**ITEM, "input": "x" * 100}
    assert refused(packed(lines(STUDY, long_item, OUT_A)), max_line_bytes=80) == \
        "line 2: file too large: line longer than 80 bytes"
    assert refused(packed(lines(STUDY, ITEM, OUT_A, OUT_B, OUT_B)), max_lines=4) == \
        "line 5: file too large: more than 4 lines"
    # Blank lines are lines but not rows.
    assert refused(packed(lines(STUDY, "", "", ITEM, OUT_A, OUT_B)), max_rows=3) == \
        "line 6: file too large: more than 3 rows"
    # Plain: the raw file is over the limit; gzip: its decompressed bytes are, at line 4.
    assert f"file too large: more than {len(valid) - 10} bytes" in refused(packed(valid), max_bytes=len(valid) - 10)


def test_deep_nesting_is_refused_before_json_parses_it():
    """200,000 levels made json.loads raise RecursionError (a 500 in the app)."""
    deep = '{"kind": "item", "id": "d1", "input": ' + "[" * 200_000 + "]" * 200_000 + "}"
    assert refused(lines(STUDY, deep)) == "line 2: JSON nested deeper than 8 levels (bundle rows are flat objects)"
    # Brackets inside strings are text, not nesting.
    bracketed = {**ITEM, "input": "[[[[[[[[[[{{{{{{{{{{ \" ]]]"}
    assert read_bundle(lines(STUDY, bracketed, OUT_A, OUT_B)).items[0].input == bracketed["input"]


def test_an_integer_python_cannot_convert_is_a_problem_with_its_line():
    with pytest.raises(BundleError) as info:
        read_bundle(lines(STUDY, ITEM, OUT_A, OUT_B, '{"kind": "metric_score", "item": "d1", "system": "A", '
                                                     '"metric": "m", "score": ' + "9" * 5000 + "}"))
    problems = [str(p) for p in info.value.problems]
    assert len(problems) == 1 and problems[0].startswith("line 5: not valid JSON"), problems


def test_the_compressed_file_is_limited_too():
    """A gzip larger than max_bytes is refused while it is read, not after."""
    noise = gzip.compress(bytes(range(256)) * 4096, compresslevel=0)
    assert refused(noise, max_bytes=10_000).startswith("file too large: more than 10000 bytes")


def test_a_line_is_split_only_at_newlines():
    """U+2028 inside a string is part of its line (str.splitlines split it)."""
    item = {**ITEM, "input": "before\u2028after"}
    data = (json.dumps(STUDY) + "\n" + json.dumps(item, ensure_ascii=False) + "\n"
            + json.dumps(OUT_A) + "\n" + json.dumps(OUT_B) + "\n").encode()
    assert read_bundle(data).items[0].input == "before\u2028after"


@pytest.mark.parametrize("escape,what", [("\\u0000", "a NUL character (\\u0000), which no text can store"),
                                         ("\\udfff", "a lone surrogate (\\udfff), which is not Unicode text")])
def test_nul_and_lone_surrogates_are_refused_in_any_string_with_the_line(escape, what):
    """PostgreSQL stores no NUL and no database a lone surrogate: each was a 500 at import
    (issue 36, finding 4). Every string is checked: values at any depth and field names; a
    surrogate pair (an emoji written as two escapes) is one character and is fine."""
    character = escape.encode().decode("unicode_escape")
    chat = {**ITEM, "id": "d2", "input": [{"role": "user", "content": f"hi{character}"}]}  # json.dumps escapes it
    rows = [STUDY, '{"kind": "item", "id": "d1", "input": "a' + escape + 'b"}', chat,
            '{"kind": "output", "item": "d1", "system": "A", "text": "a", "' + escape + '": 1}',
            '{"kind": "output", "item": "d1", "system": "B", "text": "\\ud83d\\ude00 \\\\u0000"}']
    with pytest.raises(BundleError) as info:
        read_bundle(lines(*rows))
    assert [str(p) for p in info.value.problems] == [
        f"line 2: field 'input' holds {what}; remove it",
        f"line 3: field 'input' holds {what}; remove it",
        f"line 4: a field name ({json.dumps(character)}) holds {what}; remove it"]
    bundle = read_bundle(lines(STUDY, ITEM, OUT_A, rows[4]))
    assert bundle.outputs[1].text == "\U0001F600 \\u0000"


class _Pipe(io.RawIOBase):
    """A stream that cannot be rewound (a pipe)."""

    def __init__(self, data: bytes) -> None:
        self._data = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, buffer) -> int:
        chunk = self._data.read(len(buffer))
        buffer[:len(chunk)] = chunk
        return len(chunk)


@pytest.mark.parametrize("packed", [bytes, gzip.compress], ids=["plain", "gzip"])
def test_a_file_is_read_from_where_it_stands_and_a_pipe_is_checked_as_it_is_parsed(packed):
    """A seekable file is read twice (the limits first, then the rows) from its position; a
    stream that cannot be rewound is read once, its limits checked as it is parsed."""
    valid = packed(lines(STUDY, ITEM, OUT_A, OUT_B))
    upload = io.BytesIO(b"already read" + valid)
    upload.seek(len(b"already read"))
    assert read_bundle(upload).items[0].id == "d1"
    assert read_bundle(_Pipe(valid)).outputs[1].system == "B"
    with pytest.raises(BundleError, match="line 3: file too large: more than 2 rows"):
        read_bundle(_Pipe(valid), limits=BundleLimits(max_rows=2))
