"""The input files of an experiment: weights, data and labels in the format of §5.

Every file the host scripts name (``input_file:``) is described by an ``InputFile``
(what it holds and the shape of the STORE that receives it) and written by
``write_input_files``: decimal numbers, one innermost row per line (a W-row of an
image, one k x k kernel, one FC weight row, one label vector), each value
left-aligned in a 10-character column, zero-padded up to a multiple of 32 values
(32 - n mod 32 zeros: the correct padding, not the authors' n mod 32).

Values follow the authors' distributions, deterministically from a seed: weights
(k - 10) / 100 for k uniform in 0..20; a data value is +u where (w mod classes)
equals the sample's class and -u elsewhere, u uniform in 0..10; labels one-hot.
A layer's weights, the batch and the labels are generated whole and then cut
(weight slices: contiguous output-channel ranges; data and labels: contiguous
sample ranges per replica or micro-batch), so every slice agrees with the whole.

Formatting goes through a table of fixed-width cells and numpy, so the seed CNN's
1.6 M-value ``data.txt`` takes a fraction of a second.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import numpy as np

from waferflow.backend_amcoda.program import (
    FLOATS_PER_PACKAGE,
    AluOp,
    Entry,
    Experiment,
    OperandKind,
)
from waferflow.errors import PlanError

COLUMN = 10  # characters per value, left-aligned (the authors' setw(10) << left)
_NAME = re.compile(r"^(?:(weight)(\d+)|(data)|(label))(?:_(\d+))?\.txt$")
# value codes: a file holds integers k, written as k / denominator
_WEIGHT_DEN = 100
_WEIGHT_RANGE = 10  # weights (k) / 100, k in -10..10
_DATA_RANGE = 10  # data values -10..10


class FileKind(Enum):
    WEIGHT = "weight"
    DATA = "data"
    LABEL = "label"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class InputFile:
    """One host input file: its kind, layer / part from the authors' naming, and the
    4-D shape of what the receiving entry stores (its para1..para4)."""

    name: str
    kind: FileKind
    shape: tuple[int, int, int, int]
    layer: int = 0  # L of weight<L>[_q].txt
    part: int = 0  # the _<q> suffix (1-based); 0 for a whole tensor

    @property
    def floats(self) -> int:
        return math.prod(self.shape)

    @property
    def padded(self) -> int:
        """Values in the file: the next multiple of 32."""
        return -(-self.floats // FLOATS_PER_PACKAGE) * FLOATS_PER_PACKAGE

    @property
    def row(self) -> int:
        """Values per line: one k x k kernel for a conv weight (Cout, Cin, k, k), one row
        of an FC weight (1, 1, M, N), one W-row of an image, one label vector."""
        b, c, h, w = self.shape
        if self.kind is FileKind.WEIGHT and not (b == 1 and c == 1):
            return h * w
        return w


def _operand_shape(e: Entry, floats: int) -> tuple[int, int, int, int]:
    p = e.op.params
    if e.op.alu in (AluOp.STORE, AluOp.ADD, AluOp.LOSS) and len(e.inp.operands) == 1:
        return (p[0], p[1], p[2], p[3])
    return (1, 1, 1, floats)  # a share of a gather, or an op's operand: flat


def plan_input_files(exp: Experiment) -> list[InputFile]:
    """Every input file the scripts name, once, sorted by name. Raises ``PlanError``
    if one name is sent with two different sizes."""
    files: dict[str, InputFile] = {}
    for p in exp.programs:
        inputs = iter(p.host_inputs)
        for e in p.entries:
            for o in e.inp.operands:
                if o.kind is not OperandKind.HOST:
                    continue
                t = next(inputs, None)
                if t is None:
                    raise PlanError(
                        f"actor {p.actor}: more host operands than host inputs in its program"
                    )
                shape = _operand_shape(e, t.floats)
                if math.prod(shape) != t.floats:
                    shape = (1, 1, 1, t.floats)
                f = _classify(t.name, shape)
                old = files.get(t.name)
                if old is not None and old.floats != f.floats:
                    raise PlanError(
                        f"input file {t.name} is sent with {old.floats} values and with "
                        f"{f.floats} (actor {p.actor}); one file name must hold one tensor"
                    )
                files.setdefault(t.name, f)
    return [files[n] for n in sorted(files)]


def _classify(name: str, shape: tuple[int, int, int, int]) -> InputFile:
    m = _NAME.match(name)
    if m is None:
        return InputFile(name, FileKind.OTHER, shape)
    part = int(m.group(5)) if m.group(5) else 0
    if m.group(1):
        return InputFile(name, FileKind.WEIGHT, shape, int(m.group(2)), part)
    kind = FileKind.DATA if m.group(3) else FileKind.LABEL
    return InputFile(name, kind, shape, 0, part)


# -- values -------------------------------------------------------------------------------


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng([seed, *key])


def _parts_offsets(files: list[InputFile], per: int) -> dict[str, int]:
    """Offsets (in units of ``per`` values) of the numbered parts, in part order."""
    offsets: dict[str, int] = {}
    at = 0
    for f in sorted((f for f in files if f.part), key=lambda f: f.part):
        offsets[f.name] = at
        at += f.floats // per
    return offsets


def _extent(files: list[InputFile], per: int) -> int:
    """Units of ``per`` values the whole tensor needs: the whole file, or the parts' sum."""
    whole = max((f.floats // per for f in files if not f.part), default=0)
    parts = sum(f.floats // per for f in files if f.part)
    return max(whole, parts)


def file_values(files: list[InputFile], seed: int = 0) -> dict[str, np.ndarray]:
    """The integer codes of every file (values are code / ``denominator(kind)``),
    before padding. Deterministic in ``seed``."""
    out: dict[str, np.ndarray] = {}
    by_layer: dict[int, list[InputFile]] = {}
    for f in files:
        if f.kind is FileKind.WEIGHT:
            by_layer.setdefault(f.layer, []).append(f)
    for layer, group in sorted(by_layer.items()):
        full = _rng(seed, 1, layer).integers(
            -_WEIGHT_RANGE, _WEIGHT_RANGE + 1, _extent(group, 1), dtype=np.int64
        )
        offsets = _parts_offsets(group, 1)
        for f in group:
            at = offsets.get(f.name, 0)
            out[f.name] = full[at : at + f.floats]

    data = [f for f in files if f.kind is FileKind.DATA]
    labels = [f for f in files if f.kind is FileKind.LABEL]
    classes = max((f.shape[3] for f in labels), default=1)
    sample = data[0].floats // data[0].shape[0] if data else 0
    n_data = _extent(data, sample) if data else 0
    n_label = _extent(labels, classes) if labels else 0
    cls = _rng(seed, 2).integers(0, classes, max(n_data, n_label, 1))
    if data:
        _, c, h, w = data[0].shape
        mag = _rng(seed, 3).integers(0, _DATA_RANGE + 1, (n_data, c, h, w), dtype=np.int64)
        hit = (np.arange(w) % classes)[None, None, None, :] == cls[:n_data, None, None, None]
        full = np.where(hit, mag, -mag).reshape(-1)
        offsets = _parts_offsets(data, sample)
        for f in data:
            at = offsets.get(f.name, 0) * sample
            out[f.name] = full[at : at + f.floats]
    if labels:
        onehot = np.zeros((n_label, classes), dtype=np.int64)
        onehot[np.arange(n_label), cls[:n_label]] = _WEIGHT_DEN  # 1.0 in hundredths
        full = onehot.reshape(-1)
        offsets = _parts_offsets(labels, classes)
        for f in labels:
            at = offsets.get(f.name, 0) * classes
            out[f.name] = full[at : at + f.floats]
    for f in files:
        if f.kind is FileKind.OTHER:
            out[f.name] = _rng(seed, 4, _stable_hash(f.name)).integers(
                -_WEIGHT_RANGE, _WEIGHT_RANGE + 1, f.floats, dtype=np.int64
            )
    return out


def _stable_hash(text: str) -> int:
    return int.from_bytes(text.encode()[:8].ljust(8, b"\0"), "little") % (1 << 31)


def denominator(kind: FileKind) -> int:
    """Codes are hundredths for weights, labels and other files; whole numbers for data."""
    return 1 if kind is FileKind.DATA else _WEIGHT_DEN


def split_tensor(full: np.ndarray, parts: int, index: int, *, by: str) -> np.ndarray:
    """Part ``index`` (0-based) of a B x C x H x W tensor cut into ``parts`` (§5):
    ``by="batch"`` gives samples index*B/parts ... (``div=1``, replicas and micro-batches),
    ``by="channel"`` gives, for every sample, channels index*C/parts ... (``div=2``)."""
    if full.ndim != 4:
        raise ValueError(f"split_tensor takes a 4-D tensor, got shape {full.shape}")
    axis = {"batch": 0, "channel": 1}[by]
    n = full.shape[axis]
    if n % parts:
        raise ValueError(f"{parts} parts do not divide dimension {axis} of size {n}")
    step = n // parts
    return full.take(range(index * step, (index + 1) * step), axis=axis)


# -- text ---------------------------------------------------------------------------------


def _cells(codes: np.ndarray, den: int) -> np.ndarray:
    """Fixed-width cells (uint8, n x 10) for the codes, through a lookup table."""
    lo, hi = (int(codes.min()), int(codes.max())) if codes.size else (0, 0)
    lo, hi = min(lo, 0), max(hi, 0)
    table = np.array(
        [_number(k, den).ljust(COLUMN).encode() for k in range(lo, hi + 1)], dtype=f"S{COLUMN}"
    )
    return table[codes - lo].view(np.uint8).reshape(-1, COLUMN)


def _number(k: int, den: int) -> str:
    text = f"{k / den:g}" if den != 1 else str(k)
    if len(text) >= COLUMN:
        raise ValueError(f"value {text} does not fit a {COLUMN}-character column")
    return text


def _lines(cells: np.ndarray, row: int) -> bytes:
    n = cells.shape[0]
    if n == 0:
        return b""
    full = n // row
    chunks = []
    if full:
        body = np.empty((full, row * COLUMN + 1), dtype=np.uint8)
        body[:, :-1] = cells[: full * row].reshape(full, row * COLUMN)
        body[:, -1] = ord("\n")
        chunks.append(body.tobytes())
    if n % row:
        chunks.append(cells[full * row :].tobytes() + b"\n")
    return b"".join(chunks)


def format_file(f: InputFile, codes: np.ndarray) -> bytes:
    """The text of one input file: rows of ``f.row`` values, then the padding zeros on
    a line of their own."""
    if codes.size != f.floats:
        raise ValueError(f"{f.name}: {codes.size} values for a file of {f.floats}")
    den = denominator(f.kind)
    body = _lines(_cells(codes, den), f.row)
    pad = f.padded - f.floats
    if pad:
        body += _lines(_cells(np.zeros(pad, dtype=np.int64), den), pad)
    return body


def write_input_files(exp: Experiment, script_dir: str | Path, seed: int = 0) -> list[Path]:
    """Write every input file the experiment's scripts name into ``script_dir``."""
    files = plan_input_files(exp)
    values = file_values(files, seed)
    root = Path(script_dir)
    root.mkdir(parents=True, exist_ok=True)
    written = []
    for f in files:
        path = root / f.name
        path.write_bytes(format_file(f, values[f.name]))
        written.append(path)
    return written


def read_numbers(path: str | Path) -> np.ndarray:
    """Every number of a data file, as float64 (raises ``ValueError`` on a bad token)."""
    return np.array(Path(path).read_bytes().split(), dtype=np.float64)


def count_problem(path: Path, needed: int, *, parse: bool = True) -> str | None:
    """Why ``path`` cannot feed a transfer of ``needed`` values (§1.3), or None.
    With ``parse`` every token must also read as a decimal number."""
    if not path.is_file():
        return f"input file {path.name} is missing; the actor would wait for ever (§6.2 f12)"
    tokens = path.read_bytes().split()
    if len(tokens) < needed:
        return (
            f"input file {path.name} holds {len(tokens)} numbers; the transfer reads {needed} "
            f"(32 per package)"
        )
    if parse:
        try:
            np.array(tokens[:needed], dtype=np.float64)
        except ValueError:
            bad = next(t for t in tokens[:needed] if not _is_number(t))
            return f"input file {path.name} holds {bad.decode(errors='replace')!r}, not a number"
    return None


def _is_number(token: bytes) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True
