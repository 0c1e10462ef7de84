"""Element types and tensor types of the IR."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

MAX_RANK = 64  # dimensions of one tensor
MAX_NUMEL = 2**63 - 1  # elements of one tensor: torch counts them in an int64


class DType(Enum):
    """Element type; the value is the spelling in the IR text."""

    F64 = "f64"
    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"
    I64 = "i64"
    I32 = "i32"
    I16 = "i16"
    I8 = "i8"
    U8 = "u8"
    BOOL = "bool"
    C64 = "c64"

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.F64, DType.F32, DType.F16, DType.BF16)

    @classmethod
    def parse(cls, text: str) -> DType:
        try:
            return cls(text)
        except ValueError:
            known = ", ".join(d.value for d in cls)
            raise ValueError(f"unknown dtype {text!r}; known: {known}") from None


_ITEMSIZE: dict[DType, int] = {
    DType.F64: 8,
    DType.F32: 4,
    DType.F16: 2,
    DType.BF16: 2,
    DType.I64: 8,
    DType.I32: 4,
    DType.I16: 2,
    DType.I8: 1,
    DType.U8: 1,
    DType.BOOL: 1,
    DType.C64: 8,
}


@dataclass(frozen=True, slots=True)
class TensorType:
    """A static shape and an element type; ``f32[32,512]`` in the text form."""

    shape: tuple[int, ...]
    dtype: DType

    def __post_init__(self) -> None:
        if any((not isinstance(d, int)) or d < 0 for d in self.shape):
            raise ValueError(f"tensor dimensions must be non-negative ints, got {self.shape}")
        if len(self.shape) > MAX_RANK or math.prod(self.shape) > MAX_NUMEL:
            raise ValueError(
                f"a tensor has at most {MAX_RANK} dimensions and 2**63-1 elements (as in "
                f"torch), got {len(self.shape)} dimensions of up to {max(self.shape)}"
            )

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    def with_shape(self, shape: tuple[int, ...]) -> TensorType:
        return TensorType(tuple(shape), self.dtype)

    def __str__(self) -> str:
        return f"{self.dtype.value}[{','.join(str(d) for d in self.shape)}]"
