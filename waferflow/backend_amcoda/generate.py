"""Actor programs from (CNN, plan), following the seed's layer templates (§3.8, §4).

Actors are numbered as the authors number them: the layers in order, the R actors
of a conv layer consecutive, then the pool, the fully connected layer and the
loss. Slots follow §3.8 (conv: W = s0, X = s1, Z = s2, dZ = s3 or s4 ...).

How the two hazards of §6.3 are kept out by construction:

(a) a handshake word lost on a shared link: between any two actors, all traffic
    one way precedes, in both programs' order, all traffic the other way (the
    loss actor of a GPipe plan collects every logit before its LOADs send any
    gradient back); ``validate_experiment`` checks this pairwise rule.
(b) an ALU completion lost behind a STORE/LOAD: the templates are the authors'
    (their mid-program STOREs/LOADs normally retire long before the next ALU op
    ends), so the published runs are reproduced; the simulator stops with a
    ``PlanError`` if a completion would ever be lost. ``hazard_guard=True`` rules it
    out by construction: each STORE after the leading run and each LOAD followed
    by an ALU op becomes a 1-operand ADD (the spec's mitigation), at a small cost.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from waferflow.backend_amcoda.layers import Cnn, ConvLayer, FcLayer, PoolLayer
from waferflow.backend_amcoda.plans import Par, PlanKind, SeedPlan, check_plan, parse_seed_plan
from waferflow.backend_amcoda.program import (
    HOST,
    MAX_ACTORS,
    ActorProgram,
    AluOp,
    Entry,
    Experiment,
    HostTransfer,
    InMode,
    Mode,
    Op,
    OutMode,
    actor,
    inp,
    keep,
    out,
    release,
)
from waferflow.backend_amcoda.validate import validate_experiment
from waferflow.errors import PlanError


@dataclass(frozen=True, slots=True)
class _Group:
    """The actors of one layer."""

    name: str
    file_no: int  # the layer's number in the authors' file names (pool and loss count)
    actors: tuple[int, ...]
    par: Par = Par.DATA

    @property
    def ways(self) -> int:
        return len(self.actors)


@dataclass(frozen=True, slots=True)
class _Layout:
    convs: tuple[_Group, ...]
    pool: _Group | None
    fc: _Group
    loss: _Group

    @property
    def n_actors(self) -> int:
        return self.loss.actors[-1]

    def after_convs(self) -> _Group:
        return self.pool if self.pool is not None else self.fc


def _layout(cnn: Cnn, plan: SeedPlan) -> _Layout:
    pars = plan.layer_par(len(cnn.convs))
    r = plan.layer_ways
    groups: list[_Group] = []
    nxt = 1
    for i, (conv, par) in enumerate(zip(cnn.convs, pars, strict=True)):
        ids = tuple(range(nxt, nxt + r))
        groups.append(_Group(cnn.layer_name(conv), i + 1, ids, par if r > 1 else Par.DATA))
        nxt += r
    file_no = len(groups) + 1
    pool = None
    if cnn.pool is not None:
        pool = _Group(cnn.layer_name(cnn.pool), file_no, (nxt,))
        nxt, file_no = nxt + 1, file_no + 1
    fc = _Group(cnn.layer_name(cnn.fc), file_no, (nxt,))
    loss = _Group(cnn.layer_name(cnn.loss), file_no + 1, (nxt + 1,))
    layout = _Layout(tuple(groups), pool, fc, loss)
    if layout.n_actors > MAX_ACTORS:
        raise PlanError(
            f"plan {plan} needs {layout.n_actors} actors; the seed machine has at most "
            f"{MAX_ACTORS} (each actor has links to 15 peers and the host)"
        )
    if r > 1 and pool is None:
        raise PlanError(
            f"plan {plan} spreads the last conv layer over {r} actors, which needs a pooling "
            f"layer to join them; this model has none"
        )
    return layout


def _conv_op(conv: ConvLayer, b: int, cout: int, mode: Mode) -> Op:
    return Op.conv(b, conv.cin, conv.hw_in, conv.k, cout, conv.stride, conv.pad, mode)


def _suffix(ways: int, i: int) -> str:
    return f"_{i + 1}" if ways > 1 else ""


# -- pipelines (one actor per layer, M micro-batches) -----------------------------------


def _conv_pipe(
    conv: ConvLayer, g: _Group, prev: int, nxt: int, first: bool, batch: int, m: int
) -> ActorProgram:
    mb = batch // m
    a = g.actors[0]
    hwo = conv.hw_out
    src = HOST if first else actor(prev)
    es: list[Entry] = [
        Entry(out(keep(0)), inp(HOST), Op.store(conv.cout, conv.cin, conv.k, conv.k), f"{g.name}.w")
    ]
    inputs = [HostTransfer(f"weight{g.file_no}.txt", conv.weight_floats)]
    for j in range(m):
        x, z = 1 + 4 * j, 2 + 4 * j
        es.append(
            Entry(
                out(keep(x)),
                inp(src),
                Op.store(mb, conv.cin, conv.hw_in, conv.hw_in),
                f"{g.name}.x[{j}]",
            )
        )
        if first:
            inputs.append(HostTransfer(f"data{_suffix(m, j)}.txt", mb * conv.cin * conv.hw_in**2))
        w_use = release(0) if first and j == m - 1 else keep(0)
        es.append(
            Entry(
                out(keep(z)),
                inp(keep(x), w_use),
                _conv_op(conv, mb, conv.cout, Mode.FP),
                f"{g.name}.fp[{j}]",
            )
        )
        es.append(
            Entry(
                out(actor(nxt)),
                inp(keep(z)),
                Op.act(mb, conv.cout, hwo, hwo, Mode.RELU_FP),
                f"{g.name}.relu[{j}]",
            )
        )
    for j in range(m):
        x, z, dz, dw = 1 + 4 * j, 2 + 4 * j, 3 + 4 * j, 4 + 4 * j
        es.append(
            Entry(
                out(keep(dz)),
                inp(actor(nxt), release(z)),
                Op.act(mb, conv.cout, hwo, hwo, Mode.RELU_BP),
                f"{g.name}.relu_bp[{j}]",
            )
        )
        if not first:
            w_use = release(0) if j == m - 1 else keep(0)
            es.append(
                Entry(
                    out(actor(prev)),
                    inp(keep(dz), w_use),
                    _conv_op(conv, mb, conv.cout, Mode.BP),
                    f"{g.name}.bp[{j}]",
                )
            )
        dest = out(HOST) if m == 1 else out(keep(dw))
        es.append(
            Entry(
                dest,
                inp(release(x), release(dz)),
                _conv_op(conv, mb, conv.cout, Mode.DIVW),
                f"{g.name}.divw[{j}]",
            )
        )
    if m > 1:
        es.append(
            Entry(
                out(HOST),
                inp(*(release(4 + 4 * j) for j in range(m))),
                Op.add(conv.cout, conv.cin, conv.k, conv.k),
                f"{g.name}.dw_sum",
            )
        )
    return ActorProgram(a, tuple(es), tuple(inputs), (f"divw{g.file_no}.txt",), g.name, g.name)


def _pool_prog(
    pool: PoolLayer, g: _Group, last: _Group, nxt: int, batch: int, m: int
) -> ActorProgram:
    """One actor; with a spread last conv layer it joins (gather) and re-splits the batch."""
    a = g.actors[0]

    def pool_op(b: int, mode: Mode) -> Op:
        return Op.pool(b, pool.c, pool.hw_in, pool.k, pool.stride, pool.pad, mode)

    es: list[Entry] = []
    if last.ways == 1:
        mb = batch // m
        prev = actor(last.actors[0])
        for j in range(m):
            es.append(
                Entry(out(actor(nxt)), inp(prev), pool_op(mb, Mode.AVE_FP), f"{g.name}.fp[{j}]")
            )
        for j in range(m):
            es.append(
                Entry(out(prev), inp(actor(nxt)), pool_op(mb, Mode.AVE_BP), f"{g.name}.bp[{j}]")
            )
    else:
        by_batch = last.par is Par.DATA
        gather = InMode.GATHER1 if by_batch else InMode.GATHER2
        split = OutMode.SPLIT1 if by_batch else OutMode.SPLIT2
        peers = [actor(i) for i in last.actors]
        shape = (batch, pool.c, pool.hw_in, pool.hw_in)
        es += [
            Entry(out(keep(0)), inp(*peers, mode=gather), Op.store(*shape), f"{g.name}.x"),
            Entry(out(actor(nxt)), inp(release(0)), pool_op(batch, Mode.AVE_FP), f"{g.name}.fp"),
            Entry(out(keep(1)), inp(actor(nxt)), pool_op(batch, Mode.AVE_BP), f"{g.name}.bp"),
            Entry(out(*peers, mode=split), inp(release(1)), Op.load(*shape), f"{g.name}.dx"),
        ]
    return ActorProgram(a, tuple(es), (), (), g.name, g.name)


def _fc_prog(cnn: Cnn, g: _Group, prev: int, nxt: int, m: int) -> ActorProgram:
    fc: FcLayer = cnn.fc
    mb = cnn.batch // m
    c, h, w = cnn.fc_input_shape
    a = g.actors[0]
    es: list[Entry] = [Entry(out(keep(0)), inp(HOST), Op.store(1, 1, fc.m, fc.n), f"{g.name}.w")]
    for j in range(m):
        x = 1 + 3 * j
        es.append(Entry(out(keep(x)), inp(actor(prev)), Op.store(mb, c, h, w), f"{g.name}.x[{j}]"))
        es.append(
            Entry(
                out(actor(nxt)),
                inp(keep(x), keep(0)),
                Op.fc(mb, fc.m, fc.n, Mode.FP),
                f"{g.name}.fp[{j}]",
            )
        )
    for j in range(m):
        x, dy, dw = 1 + 3 * j, 2 + 3 * j, 3 + 3 * j
        es.append(
            Entry(out(keep(dy)), inp(actor(nxt)), Op.store(mb, 1, 1, fc.n), f"{g.name}.dy[{j}]")
        )
        w_use = release(0) if j == m - 1 else keep(0)
        es.append(
            Entry(
                out(actor(prev)),
                inp(keep(dy), w_use),
                Op.fc(mb, fc.m, fc.n, Mode.BP),
                f"{g.name}.bp[{j}]",
            )
        )
        dest = out(HOST) if m == 1 else out(keep(dw))
        es.append(
            Entry(
                dest,
                inp(release(x), release(dy)),
                Op.fc(mb, fc.m, fc.n, Mode.DIVW),
                f"{g.name}.divw[{j}]",
            )
        )
    if m > 1:
        es.append(
            Entry(
                out(HOST),
                inp(*(release(3 + 3 * j) for j in range(m))),
                Op.add(1, 1, fc.m, fc.n),
                f"{g.name}.dw_sum",
            )
        )
    inputs = (HostTransfer(f"weight{g.file_no}.txt", fc.weight_floats),)
    return ActorProgram(a, tuple(es), inputs, (f"divw{g.file_no}.txt",), g.name, g.name)


def _loss_prog(cnn: Cnn, g: _Group, prev: int, m: int) -> ActorProgram:
    n = cnn.loss.classes
    mb = cnn.batch // m
    a = g.actors[0]
    src = actor(prev)
    if m == 1:
        es = [
            Entry(out(keep(0)), inp(HOST), Op.store(mb, 1, 1, n), f"{g.name}.labels"),
            Entry(out(src), inp(src, release(0)), Op.loss(mb, 1, 1, n), f"{g.name}.loss"),
        ]
        inputs = (HostTransfer("label.txt", mb * n),)
    else:
        # every logit is collected before any gradient goes back (hazard (a), §6.3)
        es = [
            Entry(out(keep(j)), inp(HOST), Op.store(mb, 1, 1, n), f"{g.name}.labels[{j}]")
            for j in range(m)
        ]
        es += [
            Entry(
                out(keep(m + j)), inp(src, release(j)), Op.loss(mb, 1, 1, n), f"{g.name}.loss[{j}]"
            )
            for j in range(m)
        ]
        es += [
            Entry(out(src), inp(release(m + j)), Op.load(mb, 1, 1, n), f"{g.name}.dy[{j}]")
            for j in range(m)
        ]
        inputs = tuple(HostTransfer(f"label_{j + 1}.txt", mb * n) for j in range(m))
    return ActorProgram(a, tuple(es), inputs, (), g.name, g.name)


# -- per-layer data / tensor parallel conv layers ---------------------------------------


def _conv_spread(cnn: Cnn, lay: _Layout, li: int, r: int, authors_slip: bool) -> ActorProgram:
    """Replica / part ``r`` of conv layer ``li`` (§3.8, generalised to any neighbours)."""
    conv = cnn.convs[li]
    g = lay.convs[li]
    R = g.ways
    a = g.actors[r]
    data = g.par is Par.DATA
    b = cnn.batch // R if data else cnn.batch
    co = conv.cout if data else conv.cout // R
    hwo = conv.hw_out
    first = li == 0
    prev = lay.convs[li - 1] if not first else None
    nxt_conv = lay.convs[li + 1] if li + 1 < len(lay.convs) else None
    joiner = lay.after_convs()
    tag = f"{g.name}[{r}]"

    es: list[Entry] = []
    wname = f"weight{g.file_no}{'' if data else _suffix(R, r)}.txt"
    inputs = [HostTransfer(wname, co * conv.cin * conv.k * conv.k)]
    es.append(Entry(out(keep(0)), inp(HOST), Op.store(co, conv.cin, conv.k, conv.k), f"{tag}.w"))

    # forward input
    x_shape = (b, conv.cin, conv.hw_in, conv.hw_in)
    if prev is None:
        es.append(Entry(out(keep(1)), inp(HOST), Op.store(*x_shape), f"{tag}.x"))
        dname = f"data{_suffix(R, r)}.txt" if data else "data.txt"
        inputs.append(HostTransfer(dname, b * conv.cin * conv.hw_in**2))
    elif prev.par is Par.DATA and data:
        es.append(Entry(out(keep(1)), inp(actor(prev.actors[r])), Op.store(*x_shape), f"{tag}.x"))
    else:  # gather the batch (from replicas) or the channels (from parts)
        mode = InMode.GATHER1 if prev.par is Par.DATA else InMode.GATHER2
        es.append(
            Entry(
                out(keep(1)),
                inp(*(actor(i) for i in prev.actors), mode=mode),
                Op.store(*x_shape),
                f"{tag}.x",
            )
        )

    w_fp = release(0) if first else keep(0)
    es.append(Entry(out(keep(2)), inp(keep(1), w_fp), _conv_op(conv, b, co, Mode.FP), f"{tag}.fp"))

    # forward output
    if nxt_conv is None:
        fwd_out = out(actor(joiner.actors[0]))
    elif nxt_conv.par is Par.DATA and data:
        fwd_out = out(actor(nxt_conv.actors[r]))
    elif nxt_conv.par is Par.DATA:  # parts -> replicas: each replica gets its samples
        fwd_out = out(*(actor(i) for i in nxt_conv.actors), mode=OutMode.SPLIT1)
    else:  # -> parts: every part needs every input channel
        fwd_out = out(*(actor(i) for i in nxt_conv.actors))
    es.append(Entry(fwd_out, inp(keep(2)), Op.act(b, co, hwo, hwo, Mode.RELU_FP), f"{tag}.relu"))

    # backward input: the gradient of this layer's output
    y_shape = (b, co, hwo, hwo)
    if nxt_conv is None:
        es.append(
            Entry(
                out(keep(3)),
                inp(actor(joiner.actors[0]), release(2)),
                Op.act(*y_shape, Mode.RELU_BP),
                f"{tag}.relu_bp",
            )
        )
        dz = 3
    elif nxt_conv.par is Par.DATA and data:
        es.append(
            Entry(
                out(keep(3)),
                inp(actor(nxt_conv.actors[r]), release(2)),
                Op.act(*y_shape, Mode.RELU_BP),
                f"{tag}.relu_bp",
            )
        )
        dz = 3
    else:
        peers = [actor(i) for i in nxt_conv.actors]
        if nxt_conv.par is Par.TENSOR:  # partial sums over the next layer's parts
            es.append(Entry(out(keep(3)), inp(*peers), Op.add(*y_shape), f"{tag}.dy_sum"))
        else:  # disjoint sample slices from the next layer's replicas
            es.append(
                Entry(
                    out(keep(3)), inp(*peers, mode=InMode.GATHER1), Op.store(*y_shape), f"{tag}.dy"
                )
            )
        es.append(
            Entry(
                out(keep(4)),
                inp(release(3), release(2)),
                Op.act(*y_shape, Mode.RELU_BP),
                f"{tag}.relu_bp",
            )
        )
        dz = 4
    free = dz + 1

    # backward output: the input gradient, to the previous layer
    if prev is not None:
        if prev.par is Par.DATA and data:
            es.append(
                Entry(
                    out(actor(prev.actors[r])),
                    inp(keep(dz), release(0)),
                    _conv_op(conv, b, co, Mode.BP),
                    f"{tag}.bp",
                )
            )
        else:  # stored, then split by samples (to replicas) or channels (to parts)
            es.append(
                Entry(
                    out(keep(free)),
                    inp(keep(dz), release(0)),
                    _conv_op(conv, b, co, Mode.BP),
                    f"{tag}.bp",
                )
            )
            split = OutMode.SPLIT1 if prev.par is Par.DATA else OutMode.SPLIT2
            peers = [actor(i) for i in prev.actors]
            es.append(
                Entry(out(*peers, mode=split), inp(release(free)), Op.load(*x_shape), f"{tag}.dx")
            )

    # weight gradient
    outputs: tuple[str, ...] = ()
    divw_b = 2 * b if authors_slip and first and data and r > 0 else b
    divw = _conv_op(conv, divw_b, co, Mode.DIVW)
    if not data:
        es.append(Entry(out(HOST), inp(release(1), release(dz)), divw, f"{tag}.divw"))
        outputs = (f"divw{g.file_no}{_suffix(R, r)}.txt",)
    elif R == 1:
        es.append(Entry(out(HOST), inp(release(1), release(dz)), divw, f"{tag}.divw"))
        outputs = (f"divw{g.file_no}.txt",)
    elif r == 0:  # the root replica adds everyone's gradient
        es.append(Entry(out(keep(free)), inp(release(1), release(dz)), divw, f"{tag}.divw"))
        others = [actor(i) for i in g.actors[1:]]
        es.append(
            Entry(
                out(HOST),
                inp(release(free), *others),
                Op.add(conv.cout, conv.cin, conv.k, conv.k),
                f"{tag}.dw_sum",
            )
        )
        outputs = (f"divw{g.file_no}.txt",)
    else:
        es.append(Entry(out(actor(g.actors[0])), inp(release(1), release(dz)), divw, f"{tag}.divw"))
    role = f"{g.name} {'replica' if data else 'part'} {r}" if R > 1 else g.name
    return ActorProgram(a, tuple(es), tuple(inputs), outputs, role, g.name)


def _guard(p: ActorProgram) -> ActorProgram:
    """§6.3 (b), mitigation 2, extended to LOADs: every single-producer STORE after the
    leading run of STOREs, and every LOAD followed by an ALU entry, becomes a 1-operand
    ADD with the same Out_Config, which goes through the ALU and so gives its own
    completion pulse. (A gathering STORE cannot be replaced: an ADD would sum.)"""
    es = list(p.entries)
    alu_after = [any(e.op.uses_alu for e in es[i + 1 :]) for i in range(len(es))]
    leading = True
    for i, e in enumerate(es):
        if e.op.alu is AluOp.STORE and leading:
            continue
        leading = False
        single = len(e.inp.operands) == 1
        if (e.op.alu is AluOp.STORE and single) or (e.op.alu is AluOp.LOAD and alu_after[i]):
            es[i] = replace(e, op=Op.add(*e.op.params[:4]), label=e.label + "+guard")
    return replace(p, entries=tuple(es))


def generate_experiment(
    cnn: Cnn,
    plan: SeedPlan | str,
    *,
    mem_ports: int = 4,
    authors_slip: bool = False,
    hazard_guard: bool = False,
    name: str | None = None,
) -> Experiment:
    """The seed machine's programs for ``cnn`` under ``plan``.

    ``authors_slip`` reproduces a slip in the authors' published 4-way ddd/ddm
    scripts (the non-root replicas of the first conv layer compute their weight
    gradient with the batch of two replicas); use it only to compare with those
    published figures. ``hazard_guard`` rules out hazard (b) by construction (the spec's
    mitigation, at the cost of an ALU pass per guarded entry)."""
    if isinstance(plan, str):
        plan = parse_seed_plan(plan)
    check_plan(plan, cnn)
    if not 1 <= mem_ports <= MAX_ACTORS:
        raise PlanError(f"mem_ports (MemWidth) must be 1..{MAX_ACTORS}, got {mem_ports}")
    lay = _layout(cnn, plan)
    first_spread = lay.convs[0]
    if authors_slip and (first_spread.ways < 2 or first_spread.par is not Par.DATA):
        raise PlanError(
            "authors_slip applies only to plans whose first conv layer is data-parallel "
            f"over 2 or more replicas (got {plan})"
        )
    m = plan.micro_batches
    programs: list[ActorProgram] = []
    n_conv = len(cnn.convs)
    joiner = lay.after_convs()
    for li in range(n_conv):
        g = lay.convs[li]
        if plan.kind is PlanKind.LAYERS:
            programs += [_conv_spread(cnn, lay, li, r, authors_slip) for r in range(g.ways)]
        else:
            prev = lay.convs[li - 1].actors[0] if li else 0
            nxt = lay.convs[li + 1].actors[0] if li + 1 < n_conv else joiner.actors[0]
            programs.append(_conv_pipe(cnn.convs[li], g, prev, nxt, li == 0, cnn.batch, m))
    if lay.pool is not None and cnn.pool is not None:
        programs.append(
            _pool_prog(cnn.pool, lay.pool, lay.convs[-1], lay.fc.actors[0], cnn.batch, m)
        )
    fc_prev = lay.pool.actors[0] if lay.pool is not None else lay.convs[-1].actors[0]
    programs.append(_fc_prog(cnn, lay.fc, fc_prev, lay.loss.actors[0], m))
    programs.append(_loss_prog(cnn, lay.loss, lay.fc.actors[0], m))
    if hazard_guard:
        programs = [_guard(p) for p in programs]
    notes = [f"plan {plan}"]
    if authors_slip:
        notes.append(
            "authors_slip: non-root replicas of the first conv layer compute the weight "
            "gradient with twice their batch, as the published 4-way ddd/ddm scripts do"
        )
    if hazard_guard:
        notes.append("hazard_guard: mid-program STOREs/LOADs replaced by 1-operand ADDs (§6.3 b)")
    exp = Experiment(
        name
        or f"{plan.short_name}{'-slip' if authors_slip else ''}{'-guard' if hazard_guard else ''}",
        tuple(programs),
        mem_ports,
        tuple(notes),
    )
    validate_experiment(exp)
    return exp
