"""The five input formats the fuzzers mutate: valid seed documents, and how each is
loaded and used, as the command line would (bytes -> text -> parse -> use).

A load either returns or raises a ``WaferflowError``; anything else is a bug. "Use"
goes a step past parsing (verify, print, simulate, describe), where huge but finite
figures used to overflow.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from waferflow.api import loads_plan
from waferflow.fileio import decode_text
from waferflow.ir.dtypes import DType
from waferflow.ir.graph import Phase
from waferflow.ir.opkind import OpKind
from waferflow.ir.parser import parse_graph
from waferflow.ir.plan import Actor, HostTransfer, Message, OpWork, Plan, plan_to_json
from waferflow.ir.printer import print_graph
from waferflow.ir.serialize import dumps_graph, loads_graph
from waferflow.ir.target import get_wafer, parse_wafer_toml, wafer_to_toml
from waferflow.ir.target.catalog import PRESET_DIR
from waferflow.ir.verifier import verify_graph
from waferflow.parallel.plan_spec import parse_plan

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "ir"
HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Format:
    name: str
    seeds: Callable[[], list[bytes]]
    load: Callable[[bytes], object]
    json: bool = False  # structural JSON mutations apply


def _ir_text(data: bytes) -> object:
    g = parse_graph(decode_text(data, "g.wf"), source="g.wf")
    verify_graph(g)
    return print_graph(g)


def _ir_json(data: bytes) -> object:
    g = loads_graph(decode_text(data, "g.json"), source="g.json")
    verify_graph(g)
    return dumps_graph(g)


def _bundle(data: bytes) -> object:
    compiled = loads_plan(decode_text(data, "plan.json"), "plan.json", HERE)
    return str(compiled.simulate())


def _toml(data: bytes) -> object:
    w = parse_wafer_toml(decode_text(data, "w.toml"), "w.toml", PRESET_DIR)
    text = w.describe() + wafer_to_toml(w)
    assert parse_wafer_toml(wafer_to_toml(w), "again.toml") == w  # round trip
    return text


def _plan_string(data: bytes) -> object:
    # a command line argument: text, with undecodable bytes as the shell passes them
    return str(parse_plan(data.decode("utf-8", errors="surrogateescape")))


# a placed parallel plan in the IR: shardings, stages, micro-batches, placements
PARALLEL_IR = GOLDEN.parent / "passes" / "place" / "mlp_dp2_pp2_mb2.wf"


@functools.cache
def _ir_seeds() -> list[bytes]:
    placed = b"".join(
        line for line in PARALLEL_IR.read_bytes().splitlines(keepends=True)
        if not line.startswith(b"#")
    )  # fmt: skip
    return [(GOLDEN / "mlp_train.ir").read_bytes(), placed]


@functools.cache
def _json_seeds() -> list[bytes]:
    placed = parse_graph(_ir_seeds()[1].decode(), source="placed.wf")
    return [(GOLDEN / "mlp_train.json").read_bytes(), dumps_graph(placed).encode()]


def seed_plan() -> Plan:
    """A small hand-made plan on mesh4x4: routes, a core-local message, recompute, an
    actor's datapath passes, a last use, host transfers."""
    actors = [
        Actor(0, "embed", 0, flops=10, dtype=DType.BF16, op_kind=OpKind.EMBEDDING,
              module="emb", mem_bytes=4096, out_bytes=256, layer="emb",
              work=(OpWork(OpKind.EMBEDDING, 10, (64, 128), (256,)),)),
        Actor(1, "mm", 1, flops=2_000_000, bytes_read=300, bytes_written=200,
              phase=Phase.BWD, op_kind=OpKind.MATMUL, stage=1, microbatch=1),
        Actor(2, "loss", 1, op_kind=OpKind.NLL_LOSS),
        Actor(3, "upd", 2, phase=Phase.OPT, op_kind=OpKind.ADAM_UPDATE),
    ]  # fmt: skip
    messages = [
        Message(0, 0, 1, 256),
        Message(1, 1, 2, 64, route=(1,), last_use=2),
        Message(2, 2, 3, 128, route=(1, 2), holds=False),
    ]
    host = [HostTransfer(0, 4096, "emb.weight"), HostTransfer(3, 128, "upd.out", to_host=True)]
    return Plan.build(
        "p", "mesh4x4", actors, messages, notes=("hand-made",), source="hand", host=host
    )


@functools.cache
def _bundle_seeds() -> list[bytes]:
    out = []
    for wafer in ("mesh4x4", "torus8x8"):
        doc = {
            "format": "waferflow.compiled",
            "version": 1,
            "wafer_toml": wafer_to_toml(get_wafer(wafer)),
            "plan": json.loads(plan_to_json(seed_plan())),
            "notes": ["a note"],
        }
        out.append((json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
    return out


@functools.cache
def _toml_seeds() -> list[bytes]:
    # amcoda and example have every table: [core], [memory], [host], [flow], [faults]
    return [(PRESET_DIR / f"{name}.toml").read_bytes() for name in ("mesh4x4", "amcoda", "example")]


def _plan_seeds() -> list[bytes]:
    return [
        s.encode()
        for s in (
            "dp=2,tp=4,pp=2,microbatches=4",
            "dp=1,tp=12,pp=4,microbatches=8,recompute=true,span=auto",
            "tp=2;pp=2;schedule=1f1b;span=3",
            "layers=ddt,ways=4",
            "dp=2,grad-reduce=root,algo=ring,group=layer,overlap=true",
            "gpipe=4",
            "pipe,cut=layer",
        )
    ]


FORMATS: tuple[Format, ...] = (
    Format("ir-text", _ir_seeds, _ir_text),
    Format("ir-json", _json_seeds, _ir_json, json=True),
    Format("plan-bundle", _bundle_seeds, _bundle, json=True),
    Format("wafer-toml", _toml_seeds, _toml),
    Format("plan-string", _plan_seeds, _plan_string),
)
