"""Mutations of a valid document, driven by a ``random.Random`` (so a case is its seed).

Byte-level (flip, overwrite with bytes that are not UTF-8, insert, delete, duplicate,
truncate), token-level (numbers replaced by extreme values, strings by huge or odd
ones, lines dropped, doubled or swapped, deep nesting) and, for JSON formats,
structural (a field replaced by a value of another type, removed, an unknown one
added). Each case applies one to three of them.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from typing import Any

# Values that have broken readers: out of range, non-finite, huge, of the wrong type.
EXTREME_NUMBERS = [
    "0", "-1", "1", "-0", "2147483648", "9223372036854775808", "18446744073709551616",
    "1e308", "1e400", "-1e400", "1e-400", "5e-324", "NaN", "Infinity", "nan", "inf",
    "9" * 5000, "1" + "0" * 400, "0.5", "1e999999999", "0x7fffffff", "1_000", "true",
]  # fmt: skip
EXTREME_STRINGS = [
    '""', '"x"', '"' + "a" * 100_000 + '"', '"\\u0000"', '"\\ud800"', '"é中\U0001f600"',
    '"1e400 Hz"', '"1e999999999 Hz"', '"-5 GB/s"', '"12 Gb/s"', '"1 cycle"', '"nan B"',
    "null", "[]", "{}", "[[[[[[]]]]]]",
]  # fmt: skip
_NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*"')


def _span(rng: random.Random, n: int) -> tuple[int, int]:
    a = rng.randrange(n + 1)
    return a, min(n, a + rng.choice((1, 2, 4, 16, 64, 256)))


def flip_bit(rng: random.Random, b: bytes) -> bytes:
    if not b:
        return b
    i = rng.randrange(len(b))
    return b[:i] + bytes([b[i] ^ (1 << rng.randrange(8))]) + b[i + 1 :]


def bad_byte(rng: random.Random, b: bytes) -> bytes:
    i = rng.randrange(len(b) + 1)
    return b[:i] + bytes([rng.choice((0x00, 0x80, 0xC3, 0xFE, 0xFF, 0xED))]) + b[i:]


def insert_bytes(rng: random.Random, b: bytes) -> bytes:
    i = rng.randrange(len(b) + 1)
    junk = rng.choice([b"{", b"}", b"[", b"]", b",", b'"', b"=", b"\n", b"%", b"#", b"\\", b":"])
    return b[:i] + junk * rng.choice((1, 1, 2, 50)) + b[i:]


def delete_span(rng: random.Random, b: bytes) -> bytes:
    a, z = _span(rng, len(b))
    return b[:a] + b[z:]


def duplicate_span(rng: random.Random, b: bytes) -> bytes:
    a, z = _span(rng, len(b))
    i = rng.randrange(len(b) + 1)
    return b[:i] + b[a:z] + b[i:]


def truncate(rng: random.Random, b: bytes) -> bytes:
    return b[: rng.randrange(len(b) + 1)]


def _replace_match(rng: random.Random, b: bytes, pattern: re.Pattern[bytes], new: str) -> bytes:
    found = list(pattern.finditer(b))
    if not found:
        return b
    m = rng.choice(found)
    return b[: m.start()] + new.encode() + b[m.end() :]


def extreme_number(rng: random.Random, b: bytes) -> bytes:
    return _replace_match(rng, b, _NUMBER, rng.choice(EXTREME_NUMBERS))


def odd_string(rng: random.Random, b: bytes) -> bytes:
    return _replace_match(rng, b, _STRING, rng.choice(EXTREME_STRINGS))


def shuffle_lines(rng: random.Random, b: bytes) -> bytes:
    lines = b.split(b"\n")
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    what = rng.randrange(3)
    if what == 0:
        lines[i], lines[j] = lines[j], lines[i]
    elif what == 1:
        lines.insert(i, lines[j])
    else:
        del lines[i]
    return b"\n".join(lines)


def deep_nesting(rng: random.Random, b: bytes) -> bytes:
    depth = rng.choice((50, 101, 1000, 5000))
    i = rng.randrange(len(b) + 1)
    return b[:i] + b"[" * depth + b"1" + b"]" * depth + b[i:]


BYTE_MUTATIONS: list[Callable[[random.Random, bytes], bytes]] = [
    flip_bit, bad_byte, insert_bytes, delete_span, duplicate_span, truncate,
    extreme_number, extreme_number, odd_string, shuffle_lines, deep_nesting,
]  # fmt: skip


# --- JSON structure --------------------------------------------------------------------------

_ODD_VALUES: list[Any] = [
    None, True, 0, -1, 2**63, 2**64, 10**30, 1.5, 1e308, -0.0, "", "x" * 1000,
    [], {}, [1, [2, [3]]], {"float": [1]}, {"float": "inf"}, ["a", None], {"x": {}},
]  # fmt: skip


def _nodes(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _nodes(v, (*path, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:50]):
            out += _nodes(v, (*path, i))
    return out


def mutate_json(rng: random.Random, b: bytes) -> bytes:
    try:
        doc = json.loads(b)
    except ValueError:
        return b
    if isinstance(doc, dict) and "plan" in doc and rng.random() < 0.3:
        # the bundle's wafer TOML is a string: mutate it as TOML
        toml = doc.get("wafer_toml")
        if isinstance(toml, str):
            doc["wafer_toml"] = mutate_bytes(rng, toml.encode(), 1).decode("utf-8", "replace")
            return json.dumps(doc).encode()
    paths = _nodes(doc)
    path = rng.choice(paths[1:] or paths)
    parent: Any = doc
    for step in path[:-1]:
        parent = parent[step]
    if not path:
        return json.dumps(rng.choice(_ODD_VALUES)).encode()
    key = path[-1]
    what = rng.randrange(4)
    if what == 0:
        parent[key] = rng.choice(_ODD_VALUES)
    elif what == 1 and isinstance(parent, dict):
        del parent[key]
    elif what == 1:
        parent.pop(key)
    elif what == 2 and isinstance(parent, dict):
        parent[rng.choice(("extra", "pla", "notes", "routes", "0"))] = rng.choice(_ODD_VALUES)
    elif what == 2:
        parent.append(parent[key])
    else:
        parent[key] = [parent[key]] if rng.random() < 0.5 else {"v": parent[key]}
    return json.dumps(doc).encode()


def mutate_bytes(rng: random.Random, data: bytes, count: int | None = None) -> bytes:
    for _ in range(count if count is not None else rng.choice((1, 1, 2, 3))):
        data = rng.choice(BYTE_MUTATIONS)(rng, data)
    return data


def mutate(rng: random.Random, seed: bytes, structural: bool) -> bytes:
    """One fuzz case from a valid ``seed``."""
    if structural and rng.random() < 0.5:
        data = mutate_json(rng, seed)
        return mutate_bytes(rng, data, 1) if rng.random() < 0.2 else data
    return mutate_bytes(rng, seed)
