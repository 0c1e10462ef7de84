"""A typed model of an AMCoDA experiment: one actor program per actor.

An actor program is a list of entries; an entry is the seed machine's
Out_Config + In_Config + Op_Config triple (amcoda-program-format.md §3). This
module holds the vocabulary (ALU ops and modes, operand kinds, the Out/In modes),
the derived sizes of every operand (§3.5, §3.6) and the ALU time of every op
(§7), and nothing that runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

FLOATS_PER_PACKAGE = 32  # one 1056-bit link word: 32 fp32 values + a 32-bit id
MACS_PER_CYCLE = 1024  # ALU compute parallelism
BLOCK_FLOATS = 1 << 16  # local memory is handed out in 65,536-float blocks
MEMORY_BLOCKS = 128  # 2^23 floats per actor
RESERVATION_ENTRIES = 5  # entries in flight per actor
MAX_OPERANDS = 4  # per In_Config / Out_Config instruction
MAX_SLOTS = 32  # entries of the local-memory table mem_rt
MAX_ACTORS = 16  # interface_size: N-1 peers + the host per actor
MAX_ENTRIES = 341  # 1024-instruction cache / 3 instructions per entry
MAX_PARAM = 0xFFFF  # every Op_Config parameter is a 16-bit field
CLOCK_NS = 10  # 100 MHz


def packages(floats: int) -> int:
    """Link packages needed for ``floats`` values: ceil(S / 32)."""
    return -(-floats // FLOATS_PER_PACKAGE)


def split_floats(floats: int, ways: int) -> int:
    """Values each consumer gets from a split: floor(S / n), as the SU computes it."""
    return floats // ways


def blocks(floats: int) -> int:
    """Memory blocks a buffer of ``floats`` values occupies (whole 65,536-float blocks)."""
    return -(-floats // BLOCK_FLOATS)


class AluOp(Enum):
    """Op_Config ``aluop`` codes (§3.5)."""

    ADD = 0xF1
    LOSS = 0xF2
    MUL = 0xF3
    CONV = 0xF4
    POOL = 0xF5
    ACT = 0xF6
    FC = 0xF7
    STORE = 0xF8
    LOAD = 0xF9


class Mode(Enum):
    """Op_Config ``para9``. The same code means different things per op, so each
    meaning is its own member; ``code`` gives the byte written in the script."""

    NONE = "none"
    FP = "fp"  # CONV / FC forward
    BP = "bp"  # CONV / FC input gradient
    DIVW = "divw"  # CONV / FC weight gradient
    RELU_FP = "relu_fp"
    RELU_BP = "relu_bp"
    MAX_FP = "max_fp"
    MAX_BP = "max_bp"
    AVE_FP = "ave_fp"
    AVE_BP = "ave_bp"

    @property
    def code(self) -> int:
        return _MODE_CODES[self]


_MODE_CODES = {
    Mode.NONE: 0x00,
    Mode.FP: 0xF1,
    Mode.BP: 0xF2,
    Mode.DIVW: 0xF3,
    Mode.RELU_FP: 0xF1,
    Mode.RELU_BP: 0xF2,
    Mode.MAX_FP: 0xF1,
    Mode.MAX_BP: 0xF2,
    Mode.AVE_FP: 0xF3,
    Mode.AVE_BP: 0xF4,
}

# which modes each op accepts
_VALID_MODES: dict[AluOp, frozenset[Mode]] = {
    AluOp.CONV: frozenset({Mode.FP, Mode.BP, Mode.DIVW}),
    AluOp.FC: frozenset({Mode.FP, Mode.BP, Mode.DIVW}),
    AluOp.POOL: frozenset({Mode.MAX_FP, Mode.MAX_BP, Mode.AVE_FP, Mode.AVE_BP}),
    AluOp.ACT: frozenset({Mode.RELU_FP, Mode.RELU_BP}),
    AluOp.ADD: frozenset({Mode.NONE}),
    AluOp.LOSS: frozenset({Mode.NONE}),
    AluOp.MUL: frozenset({Mode.NONE}),
    AluOp.STORE: frozenset({Mode.NONE}),
    AluOp.LOAD: frozenset({Mode.NONE}),
}


class OutMode(Enum):
    """Out_Config modes (§3.3)."""

    BROADCAST = 0xF0
    SPLIT1 = 0xF1  # consumer c gets the c-th contiguous 1/n (a batch split)
    SPLIT2 = 0xF2  # per sample, consumer c gets the c-th 1/n (a channel split)


class InMode(Enum):
    """In_Config modes (§3.4)."""

    SINGLE = 0xF0
    GATHER1 = 0xF1  # concatenate producers along the batch
    GATHER2 = 0xF2  # concatenate producers along the channels


class OperandKind(Enum):
    NONE = "none"
    ACTOR = "actor"
    HOST = "host"
    KEEP = "keep"  # local slot, kept after use (type 2)
    RELEASE = "release"  # local slot, released after use (type 3)


@dataclass(frozen=True, slots=True)
class Operand:
    """An operand: an actor (1..16), the host, or a local slot (0..31)."""

    kind: OperandKind
    index: int = 0

    def __post_init__(self) -> None:
        if self.kind is OperandKind.ACTOR and not 1 <= self.index <= MAX_ACTORS:
            raise ValueError(f"actor operand must be 1..{MAX_ACTORS}, got {self.index}")
        if self.kind in (OperandKind.KEEP, OperandKind.RELEASE) and not (
            0 <= self.index < MAX_SLOTS
        ):
            raise ValueError(f"slot operand must be 0..{MAX_SLOTS - 1}, got {self.index}")

    @property
    def is_peer(self) -> bool:
        """An actor or the host: a producer or consumer across a link."""
        return self.kind in (OperandKind.ACTOR, OperandKind.HOST)

    @property
    def is_slot(self) -> bool:
        return self.kind in (OperandKind.KEEP, OperandKind.RELEASE)

    @property
    def peer(self) -> int:
        """The peer's address index: the actor number, or 0 for the host."""
        if self.kind is OperandKind.HOST:
            return 0
        if self.kind is OperandKind.ACTOR:
            return self.index
        raise ValueError(f"{self} is not a peer")

    def __str__(self) -> str:
        return {
            OperandKind.NONE: "-",
            OperandKind.ACTOR: f"A{self.index}",
            OperandKind.HOST: "host",
            OperandKind.KEEP: f"s{self.index}",
            OperandKind.RELEASE: f"s{self.index}!",
        }[self.kind]


HOST = Operand(OperandKind.HOST)


def actor(i: int) -> Operand:
    return Operand(OperandKind.ACTOR, i)


def keep(slot: int) -> Operand:
    return Operand(OperandKind.KEEP, slot)


def release(slot: int) -> Operand:
    return Operand(OperandKind.RELEASE, slot)


def peer(i: int) -> Operand:
    """Actor ``i``, or the host for 0."""
    return HOST if i == 0 else actor(i)


@dataclass(frozen=True, slots=True)
class Op:
    """Op_Config: the ALU op, its mode and para1..para8 (§3.5 table)."""

    alu: AluOp
    mode: Mode
    params: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.mode not in _VALID_MODES[self.alu]:
            raise ValueError(f"{self.alu.name} takes no mode {self.mode.value}")
        if len(self.params) != 8:
            raise ValueError(f"Op_Config takes 8 parameters, got {len(self.params)}")
        for p in self.params:
            if not 0 <= p <= MAX_PARAM:
                raise ValueError(f"parameter {p} does not fit a 16-bit field")

    # -- constructors ---------------------------------------------------------------
    @staticmethod
    def conv(b: int, cin: int, hw: int, k: int, cout: int, stride: int, pad: int, mode: Mode) -> Op:
        return Op(AluOp.CONV, mode, (b, cin, hw, k, cout, stride, pad, 0))

    @staticmethod
    def fc(b: int, m: int, n: int, mode: Mode) -> Op:
        return Op(AluOp.FC, mode, (b, m, n, 0, 0, 0, 0, 0))

    @staticmethod
    def pool(b: int, c: int, hw: int, k: int, stride: int, pad: int, mode: Mode) -> Op:
        return Op(AluOp.POOL, mode, (b, c, hw, k, 0, stride, pad, 0))

    @staticmethod
    def act(b: int, c: int, h: int, w: int, mode: Mode) -> Op:
        return Op(AluOp.ACT, mode, (b, c, h, w, 0, 0, 0, 0))

    @staticmethod
    def _bchw(alu: AluOp, b: int, c: int, h: int, w: int) -> Op:
        return Op(alu, Mode.NONE, (b, c, h, w, 0, 0, 0, 0))

    @staticmethod
    def add(b: int, c: int, h: int, w: int) -> Op:
        return Op._bchw(AluOp.ADD, b, c, h, w)

    @staticmethod
    def loss(b: int, c: int, h: int, w: int) -> Op:
        return Op._bchw(AluOp.LOSS, b, c, h, w)

    @staticmethod
    def store(b: int, c: int, h: int, w: int) -> Op:
        return Op._bchw(AluOp.STORE, b, c, h, w)

    @staticmethod
    def load(b: int, c: int, h: int, w: int) -> Op:
        return Op._bchw(AluOp.LOAD, b, c, h, w)

    @staticmethod
    def mul(b: int, m: int, n: int) -> Op:
        return Op(AluOp.MUL, Mode.NONE, (b, m, n, 0, 0, 0, 0, 0))

    # -- derived sizes (§3.5 / §3.6) --------------------------------------------------
    @property
    def hw_out(self) -> int:
        """Output side of CONV / POOL: (HW_in + 2 pad - k) // stride + 1."""
        p = self.params
        return (p[2] + 2 * p[6] - p[3]) // p[5] + 1

    @property
    def bchw(self) -> int:
        p = self.params
        return p[0] * p[1] * p[2] * p[3]

    @property
    def n_inputs(self) -> int:
        """Operands the op reads (a STORE's producers all write one buffer; a LOAD reads one slot)."""
        if self.alu is AluOp.ADD:
            return MAX_OPERANDS  # 1..4 inputs, all of the same shape
        if self.alu is AluOp.ACT:
            return 2 if self.mode is Mode.RELU_BP else 1
        if self.alu is AluOp.POOL:
            return 2 if self.mode is Mode.MAX_BP else 1
        if self.alu in (AluOp.STORE, AluOp.LOAD):
            return 1
        return 2

    def input_size(self, i: int) -> int:
        """Floats of ALU operand ``i`` (the buffer the SU allocates for an actor operand)."""
        p = self.params
        a = self.alu
        if a in (AluOp.ADD, AluOp.LOSS, AluOp.STORE, AluOp.LOAD):
            return self.bchw
        if a is AluOp.ACT:
            return self.bchw if i < self.n_inputs else 0
        if a is AluOp.MUL:
            return (p[0] * p[1], p[1] * p[2])[i] if i < 2 else 0
        if a is AluOp.CONV:
            x = p[0] * p[1] * p[2] * p[2]
            w = p[4] * p[1] * p[3] * p[3]
            y = p[0] * p[4] * self.hw_out**2
            sizes = {Mode.FP: (x, w), Mode.BP: (y, w), Mode.DIVW: (x, y)}[self.mode]
            return sizes[i] if i < 2 else 0
        if a is AluOp.POOL:
            x = p[0] * p[1] * p[2] * p[2]
            y = p[0] * p[1] * self.hw_out**2
            sizes = {
                Mode.MAX_FP: (x,),
                Mode.AVE_FP: (x,),
                Mode.MAX_BP: (y, x),
                Mode.AVE_BP: (y,),
            }[self.mode]
            return sizes[i] if i < len(sizes) else 0
        if a is AluOp.FC:
            bm, mn, bn = p[0] * p[1], p[1] * p[2], p[0] * p[2]
            sizes = {Mode.FP: (bm, mn), Mode.BP: (bn, mn), Mode.DIVW: (bm, bn)}[self.mode]
            return sizes[i] if i < 2 else 0
        raise AssertionError(a)

    @property
    def output_size(self) -> int:
        """Floats of the result buffer (0 for a LOAD, which sends a slot)."""
        p = self.params
        a = self.alu
        if a in (AluOp.ADD, AluOp.LOSS, AluOp.ACT, AluOp.STORE, AluOp.LOAD):
            return self.bchw
        if a is AluOp.MUL:
            return p[0] * p[2]
        if a is AluOp.CONV:
            return {
                Mode.FP: p[0] * p[4] * self.hw_out**2,
                Mode.BP: p[0] * p[1] * p[2] * p[2],
                Mode.DIVW: p[4] * p[1] * p[3] * p[3],
            }[self.mode]
        if a is AluOp.POOL:
            if self.mode in (Mode.MAX_FP, Mode.AVE_FP):
                return p[0] * p[1] * self.hw_out**2
            return p[0] * p[1] * p[2] * p[2]
        if a is AluOp.FC:
            return {Mode.FP: p[0] * p[2], Mode.BP: p[0] * p[1], Mode.DIVW: p[1] * p[2]}[self.mode]
        raise AssertionError(a)

    @property
    def weight_size(self) -> int:
        """Floats of the layer's weights for CONV and FC (0 otherwise)."""
        p = self.params
        if self.alu is AluOp.CONV:
            return p[4] * p[1] * p[3] * p[3]
        if self.alu is AluOp.FC:
            return p[1] * p[2]
        return 0

    @property
    def macs(self) -> int:
        """Multiply-accumulates the ALU charges compute cycles for (§7)."""
        p = self.params
        if self.alu is AluOp.CONV:
            return p[0] * p[1] * self.hw_out**2 * p[3] * p[3] * p[4]
        if self.alu is AluOp.POOL:
            return p[0] * p[1] * self.hw_out**2 * p[3] * p[3]
        if self.alu in (AluOp.FC, AluOp.MUL):
            return p[0] * p[1] * p[2]
        return 0

    @property
    def uses_alu(self) -> bool:
        return self.alu not in (AluOp.STORE, AluOp.LOAD)

    @property
    def alu_cycles(self) -> int:
        """ALU time R + C + W + 2 (§7): R = ceil(largest operand / 32) (operands are
        read in parallel), C = floor(MACs / 1024) (MUL: B*M*N), W = ceil(output / 32)."""
        if not self.uses_alu:
            return 0
        read = max(self.input_size(i) for i in range(self.n_inputs))
        compute = self.macs if self.alu is AluOp.MUL else self.macs // MACS_PER_CYCLE
        return packages(read) + compute + packages(self.output_size) + 2

    def __str__(self) -> str:
        mode = "" if self.mode is Mode.NONE else f".{self.mode.value}"
        used = {
            AluOp.CONV: 7,
            AluOp.POOL: 7,
            AluOp.FC: 3,
            AluOp.MUL: 3,
        }.get(self.alu, 4)
        return f"{self.alu.name}{mode}({','.join(str(p) for p in self.params[:used])})"


@dataclass(frozen=True, slots=True)
class OutConfig:
    """Where the result goes: a kept slot (operand 1 only) and/or consumers."""

    mode: OutMode
    operands: tuple[Operand, ...]

    @property
    def keep_slot(self) -> int | None:
        if self.operands and self.operands[0].kind is OperandKind.KEEP:
            return self.operands[0].index
        return None

    @property
    def consumers(self) -> tuple[int, ...]:
        """Peer indices (0 = host) of every actor-type operand, in order."""
        return tuple(o.peer for o in self.operands if o.is_peer)

    def __str__(self) -> str:
        ops = ", ".join(str(o) for o in self.operands) or "discard"
        return ops if self.mode is OutMode.BROADCAST else f"{self.mode.name.lower()} {ops}"


@dataclass(frozen=True, slots=True)
class InConfig:
    """Where the operands come from; the non-none operands are ALU operands 0..3."""

    mode: InMode
    operands: tuple[Operand, ...]

    @property
    def producers(self) -> tuple[int, ...]:
        return tuple(o.peer for o in self.operands if o.is_peer)

    def __str__(self) -> str:
        ops = ", ".join(str(o) for o in self.operands)
        return ops if self.mode is InMode.SINGLE else f"{self.mode.name.lower()} {ops}"


def out(*operands: Operand, mode: OutMode = OutMode.BROADCAST) -> OutConfig:
    return OutConfig(mode, tuple(operands))


def inp(*operands: Operand, mode: InMode = InMode.SINGLE) -> InConfig:
    return InConfig(mode, tuple(operands))


@dataclass(frozen=True, slots=True)
class Entry:
    """One reservation-table entry: Out_Config + In_Config + Op_Config."""

    out: OutConfig
    inp: InConfig
    op: Op
    label: str = ""  # e.g. "conv1.fp[0]"; for reports and traces only

    def input_operand_size(self, position: int) -> int:
        """Floats the receiver expects from the operand at ``position`` of In_Config.
        For a STORE that is its share of the one buffer (1/n with gather)."""
        if self.op.alu is AluOp.STORE:
            n = len(self.inp.operands)
            return self.op.bchw // n
        return self.op.input_size(position)

    @property
    def out_floats_per_consumer(self) -> int:
        """Values each consumer receives (split modes divide the output)."""
        size = self.op.output_size
        n = len(self.out.consumers)
        if self.out.mode is not OutMode.BROADCAST and n:
            return split_floats(size, n)
        return size

    @property
    def out_packages(self) -> int:
        return packages(self.out_floats_per_consumer)

    @property
    def alu_cycles(self) -> int:
        return self.op.alu_cycles

    @property
    def instruction_lines(self) -> int:
        """Instructions this entry takes in the script (continue lines past 4 operands)."""
        extra_out = max(0, -(-len(self.out.operands) // MAX_OPERANDS) - 1)
        return 3 + extra_out

    def __str__(self) -> str:
        return f"{self.op} <- {self.inp} -> {self.out}"


@dataclass(frozen=True, slots=True)
class HostTransfer:
    """One host input (req + trans_data): the file the authors would name and its size."""

    name: str
    floats: int

    @property
    def packages(self) -> int:
        return packages(self.floats)


@dataclass(frozen=True, slots=True)
class ActorProgram:
    """The program of one actor and its host script's transfers, both in program order.

    ``host_inputs`` pair one-to-one, in order, with the entries that list the host
    as a producer; ``host_outputs`` with the entries that list it as a consumer."""

    actor: int
    entries: tuple[Entry, ...]
    host_inputs: tuple[HostTransfer, ...] = ()
    host_outputs: tuple[str, ...] = ()
    role: str = ""  # e.g. "conv1 replica 0"
    layer: str = ""  # e.g. "conv1"

    @property
    def instruction_lines(self) -> int:
        return sum(e.instruction_lines for e in self.entries)


@dataclass(frozen=True, slots=True)
class Experiment:
    """One experiment: the programs of actors 1..N and the machine's MemWidth."""

    name: str
    programs: tuple[ActorProgram, ...]
    mem_ports: int = 4
    notes: tuple[str, ...] = field(default=())

    @property
    def n_actors(self) -> int:
        return len(self.programs)

    def program(self, actor_id: int) -> ActorProgram:
        return self.programs[actor_id - 1]

    def describe(self) -> str:
        """A readable listing, one line per entry."""
        lines = [f"experiment {self.name} ({self.n_actors} actors, MemWidth {self.mem_ports})"]
        for p in self.programs:
            lines.append(f"A{p.actor} {p.role}:")
            for i, e in enumerate(p.entries):
                lines.append(f"  e{i}: {e}")
        return "\n".join(lines)
