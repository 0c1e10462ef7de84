"""The core model beside SCALE-Sim's analytical model, and what it does to step times.

Part 1, layers: CNN and transformer layers as matrix products on the TPU-like core
(one 32 x 32 weight-stationary bf16 array, 2 + 1 SRAM ports of 64 B/cycle). For each:
SCALE-Sim's analytical cycles (Samajdar et al., ISPASS 2020: ``(2R + C + T - 2)`` per
fold, ``ceil(Sr / R) * ceil(Sc / C)`` folds, Sr / Sc / T by dataflow), waferflow's array
cycles under the same dataflow (they must agree: the script fails otherwise), waferflow's
whole pass (ports included), the roofline's cycles (MACs at the array's peak), the
achieved fraction of the array's peak and what bound the pass.

Part 2, models: a small CNN and a small transformer, trained one step on the TPU-like
2 x 2 mesh in bf16, simulated with the core model and with the roofline (the same
wafer without ``[core]``): step times side by side, then the per-op-class utilisation
the report prints.

Run: ``.venv/bin/python benchmarks/bench_core.py`` (``make bench`` runs it too). The
figures are cycle counts and simulated times: they do not depend on the machine's load.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace

import waferflow as wf
from waferflow.backend_sim.core_model import array_timing, pass_time
from waferflow.backend_sim.costs import core_context
from waferflow.backend_sim.utilisation import class_lines
from waferflow.ir.dtypes import DType
from waferflow.ir.opkind import OpKind
from waferflow.ir.plan import Gemm, OpWork
from waferflow.ir.target import get_wafer
from waferflow.ir.target.parts import Dataflow

TPU = get_wafer("tpu-like")
BF16 = DType.BF16


@dataclass(frozen=True)
class Layer:
    """A layer as the product SCALE-Sim's GEMM view gives it: ``m`` output rows (output
    pixels or tokens), ``n`` output columns (filters, features), ``k`` the reduction
    (filter window x input channels, input features); ``batch`` independent ones."""

    name: str
    kind: OpKind
    m: int
    n: int
    k: int
    batch: int = 1


LAYERS = [
    # ResNet-50 on 224 x 224 (one image): conv1 7x7 s2, a 3x3 and a 1x1 of stage 2/3
    Layer("resnet50 conv1 7x7/2 3->64", OpKind.CONV, 112 * 112, 64, 7 * 7 * 3),
    Layer("resnet50 3x3 64->64", OpKind.CONV, 56 * 56, 64, 3 * 3 * 64),
    Layer("resnet50 1x1 256->128", OpKind.CONV, 28 * 28, 128, 256),
    Layer("3x3 8->16 (32 x 32 px)", OpKind.CONV, 32 * 32, 16, 3 * 3 * 8),
    # BERT-base (128 tokens) and GPT-2 small (256 tokens)
    Layer("bert qkv 768->2304", OpKind.MATMUL, 128, 2304, 768),
    Layer("bert scores q k^T (12 heads)", OpKind.BMM, 128, 128, 64, 12),
    Layer("gpt2 mlp up 768->3072", OpKind.MATMUL, 256, 3072, 768),
    Layer("gpt2 mlp down 3072->768", OpKind.MATMUL, 256, 768, 3072),
]


def scalesim(layer: Layer, rows: int, cols: int, flow: Dataflow) -> int:
    """SCALE-Sim's analytical runtime on one rows x cols array (its GEMM mapping:
    output stationary Sr = m, Sc = n, T = k; weight stationary k, n, m; input
    stationary k, m, n), ``batch`` products one after the other."""
    sr, sc, t = {
        Dataflow.OUTPUT: (layer.m, layer.n, layer.k),
        Dataflow.WEIGHT: (layer.k, layer.n, layer.m),
        Dataflow.INPUT: (layer.k, layer.m, layer.n),
    }[flow]
    folds = math.ceil(sr / rows) * math.ceil(sc / cols)
    return layer.batch * folds * (2 * rows + cols + t - 2)


def layer_table() -> bool:
    core = TPU.core
    assert core is not None and core.array is not None
    array = core.array
    ctx = core_context(TPU)
    print("Layers on the TPU-like core: 32 x 32 bf16 array, weight stationary, 1 GHz")
    head = (
        f"{'layer':<30}{'m x n x k':>20}  {'SCALE-Sim WS':>12} {'waferflow':>10} "
        f"{'+ ports':>10} {'roofline':>9} {'util':>6}  bound  {'OS / IS agree':>13}"
    )
    print(head)
    print("-" * len(head))
    ok = True
    for layer in LAYERS:
        g = Gemm(layer.m, layer.n, layer.k, layer.batch)
        size = BF16.itemsize
        a_bytes = layer.batch * layer.m * layer.k * size
        b_bytes = layer.batch * layer.k * layer.n * size
        c_bytes = layer.batch * layer.m * layer.n * size
        work = OpWork(layer.kind, 2 * g.macs, (a_bytes, b_bytes), (c_bytes,), (g,))
        p = pass_time(ctx, work, BF16)
        ws = scalesim(layer, array.rows, array.cols, Dataflow.WEIGHT)
        ours = array_timing(g, array, BF16).cycles
        others = all(
            array_timing(g, replace(array, dataflow=f), BF16).cycles
            == scalesim(layer, array.rows, array.cols, f)
            for f in (Dataflow.OUTPUT, Dataflow.INPUT)
        )
        ok &= ours == ws and others
        roof = math.ceil(g.macs / array.peak_macs(BF16))
        dims = f"{layer.batch}x" if layer.batch > 1 else ""
        dims += f"{layer.m}x{layer.n}x{layer.k}"
        print(
            f"{layer.name:<30}{dims:>20}  {ws:>12,} {ours:>10,} {p.cycles:>10,} {roof:>9,} "
            f"{float(100 * p.ideal / p.cycles):5.1f}%  {p.bound.value:<6}{'yes' if others else 'NO':>13}"
        )
    print(
        "(SCALE-Sim WS / waferflow: the array's cycles; + ports: the whole pass, operand and "
        "partial-sum traffic through the SRAM ports overlapped; roofline: MACs / 1,024 per "
        "cycle; util: roofline / pass)"
    )
    return ok


MODELS = [("cnn:resnet-tiny", 8, None), ("hf:gpt2-tiny", 4, 64)]


def model_table() -> None:
    print("\nOne training step on the TPU-like 2 x 2 mesh (bf16, dp=4), core model vs roofline")
    roof = replace(TPU, core=None)
    for spec, batch, seq in MODELS:
        compiled = wf.compile(
            spec, wafer=TPU, mode="train", batch=batch, seq=seq, dtype="bf16", plan="dp=4",
            place=None,
        )  # fmt: skip
        core = compiled.simulate().result
        base = wf.compile(
            spec, wafer=roof, mode="train", batch=batch, seq=seq, dtype="bf16", plan="dp=4",
            place=None,
        ).simulate().result  # fmt: skip
        print(
            f"\n{spec} (batch {batch}{f', seq {seq}' if seq else ''}): step "
            f"{core.step_time * 1e6:.2f} us with the core model, {base.step_time * 1e6:.2f} us "
            f"on the roofline ({core.step_time / base.step_time:.2f}x)"
        )
        for line in class_lines(core.op_classes, top=8):
            print(line)


def main() -> int:
    ok = layer_table()
    model_table()
    if not ok:
        print("\nFAILED: waferflow's array cycles differ from SCALE-Sim's analytical model")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
