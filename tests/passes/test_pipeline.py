"""Pipeline strings: parsing, typed options, errors with columns, canonical round trip."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from waferflow.errors import PassError
from waferflow.passes import (
    DEFAULT_PIPELINE,
    Pass,
    PipelineSyntaxError,
    all_passes,
    format_pipeline,
    option,
    parse_pipeline,
)
from waferflow.passes.annotate_cost import AnnotateCost
from waferflow.passes.canonicalize import Canonicalize
from waferflow.passes.dce import DeadCodeElimination
from waferflow.passes.fuse_elementwise import FuseElementwise


class Mode(Enum):
    RING = "ring"
    TREE = "tree"
    TWO_D = "2d"


@dataclass(frozen=True)
class Opts(Pass):
    """A pass with one option of every type (kept out of the real registry)."""

    name: ClassVar[str] = "opts"
    count: int = option(3, "an int")
    ratio: float = option(0.5, "a float")
    flag: bool = option(False, "a bool")
    label: str = option("a", "a str")
    mode: Mode = option(Mode.RING, "an enum")


@dataclass(frozen=True)
class Bare(Pass):
    """A pass without options."""

    name: ClassVar[str] = "bare"


LOCAL = {"opts": Opts, "bare": Bare}


def test_parse_the_example_pipeline() -> None:
    passes = parse_pipeline("canonicalize,dce,fuse-elementwise{max=8},annotate-cost{overwrite=1}")
    assert passes == [
        Canonicalize(),
        DeadCodeElimination(),
        FuseElementwise(max=8),
        AnnotateCost(True),
    ]


def test_default_pipeline_parses_to_the_five_passes() -> None:
    assert [p.name for p in parse_pipeline(DEFAULT_PIPELINE)] == [
        "canonicalize",
        "dce",
        "split-backward",
        "fuse-elementwise",
        "annotate-cost",
    ]


def test_spaces_underscores_bare_flags_and_empty() -> None:
    assert parse_pipeline("  dce { keep_sources = false } , annotate-cost{ overwrite } ") == [
        DeadCodeElimination(keep_sources=False),
        AnnotateCost(overwrite=True),
    ]
    assert parse_pipeline("") == []
    assert parse_pipeline("   ") == []
    assert parse_pipeline("dce{}") == [DeadCodeElimination()]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("opts{count=-7}", Opts(count=-7)),
        ("opts{ratio=1e-3}", Opts(ratio=0.001)),
        ("opts{ratio=2}", Opts(ratio=2.0)),
        ("opts{flag=TRUE}", Opts(flag=True)),
        ("opts{flag=0}", Opts(flag=False)),
        ("opts{flag}", Opts(flag=True)),
        ("opts{label=out/run_1.json}", Opts(label="out/run_1.json")),
        ('opts{label="a, b {c}"}', Opts(label="a, b {c}")),
        (r'opts{label="say \"hi\" \\ bye"}', Opts(label='say "hi" \\ bye')),
        ("opts{mode=2d}", Opts(mode=Mode.TWO_D)),
        ('opts{mode="tree"}', Opts(mode=Mode.TREE)),
    ],
)
def test_option_values_are_typed_by_the_field(text: str, expected: Pass) -> None:
    assert parse_pipeline(text, LOCAL) == [expected]


def test_an_int_given_for_a_float_option_is_stored_as_float() -> None:
    p = Opts(ratio=2)
    assert isinstance(p.ratio, float)


def _error(text: str, registry: dict[str, type[Pass]] | None = None) -> PassError:
    with pytest.raises(PassError) as info:
        parse_pipeline(text, registry)
    return info.value


def test_unknown_pass_lists_registered_passes_and_suggests() -> None:
    msg = str(_error("canonicalise,dce"))
    assert msg.startswith("unknown pass 'canonicalise' at column 1; did you mean 'canonicalize'?")
    assert "registered passes: " + ", ".join(c.name for c in all_passes()) in msg
    assert "column 5" in str(_error("dce,nope"))


def test_unknown_option_lists_the_pass_options_with_types() -> None:
    msg = str(_error("fuse-elementwise{maxx=3}"))
    assert msg == (
        "pass 'fuse-elementwise' has no option 'maxx' at column 18; did you mean 'max'? "
        "its options: max: int = 16"
    )
    msg = str(_error("opts{colour=1}", LOCAL))
    assert "its options: count: int = 3, ratio: float = 0.5, flag: bool = false, " in msg
    assert "label: str = a, mode: enum(ring|tree|2d) = ring" in msg
    assert "pass 'bare' takes no options" in str(_error("bare{x=1}", LOCAL))


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("fuse-elementwise{max=x}", "option 'max' of pass 'fuse-elementwise' expects an int, got 'x' at column 22"),
        ("fuse-elementwise{max=1.5}", "expects an int, got '1.5'"),
        ("dce{keep-sources=yes}", "option 'keep-sources' of pass 'dce' expects a bool (true, false, 1 or 0), got 'yes'"),
        ("opts{ratio=fast}", "option 'ratio' of pass 'opts' expects a float, got 'fast'"),
        ("opts{mode=mesh}", "option 'mode' of pass 'opts' expects one of 'ring', 'tree', '2d', got 'mesh'"),
        ("fuse-elementwise{max}", "option 'max' of pass 'fuse-elementwise' needs a value (int)"),
        ("fuse-elementwise{max=0}", "option 'max' of pass 'fuse-elementwise' must be >= 1, got 0"),
        ("dce{keep-sources=1,keep_sources=0}", "option 'keep-sources' of pass 'dce' is given twice"),
    ],
)  # fmt: skip
def test_bad_values_name_the_option_type_and_value(text: str, fragment: str) -> None:
    err = _error(text, {**LOCAL, "dce": DeadCodeElimination, "fuse-elementwise": FuseElementwise})
    assert not isinstance(err, PipelineSyntaxError)
    assert fragment in str(err)


@pytest.mark.parametrize(
    ("text", "col", "fragment"),
    [
        ("dce,}", 5, "expected a pass name, found '}'"),
        ("dce,", 5, "expected a pass name after ','"),
        ("a,,b", 3, "expected a pass name, found ','"),
        ("dce x", 5, "expected ',' or end of pipeline, found 'x'"),
        ("dce{keep-sources=1", 19, "unterminated '{' opened at column 4"),
        ("dce{keep-sources=1 x}", 20, "expected ',' or '}' after option 'keep-sources'"),
        ("dce{=1}", 5, "expected an option name, found '='"),
        ("dce{keep-sources=}", 18, "expected a value, found '}'"),
        ('opts{label="abc}', 12, "unterminated string"),
        (r'opts{label="a\n"}', 14, r"only \" and \\ escapes are allowed"),
        ("{max=1}", 1, "expected a pass name, found '{'"),
    ],
)
def test_syntax_errors_carry_the_column(text: str, col: int, fragment: str) -> None:
    with pytest.raises(PipelineSyntaxError) as info:
        parse_pipeline(text, LOCAL)
    err = info.value
    assert err.col == col
    assert f"pipeline syntax error at column {col}: {fragment}" in str(err)
    # the message shows the text with a caret under the column
    lines = str(err).splitlines()
    assert lines[1] == f"  {text}"
    assert lines[2] == "  " + " " * (col - 1) + "^"


def test_syntax_errors_come_before_unknown_passes() -> None:
    with pytest.raises(PipelineSyntaxError):
        parse_pipeline("nope,dce{")


def test_format_writes_only_non_default_options() -> None:
    passes = [Canonicalize(), DeadCodeElimination(keep_sources=False), FuseElementwise(max=16)]
    assert format_pipeline(passes) == "canonicalize,dce{keep-sources=false},fuse-elementwise"
    assert str(FuseElementwise(max=8)) == "fuse-elementwise{max=8}"
    text = format_pipeline([Opts(label="a b", mode=Mode.TWO_D, ratio=0.1, flag=True)])
    assert text == 'opts{ratio=0.1,flag=true,label="a b",mode=2d}'


def test_format_is_canonical() -> None:
    text = " canonicalize , fuse-elementwise{ max = 8 },dce{keep_sources=true}"
    assert format_pipeline(parse_pipeline(text)) == "canonicalize,fuse-elementwise{max=8},dce"


_labels = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@given(
    count=st.integers(-(10**12), 10**12),
    ratio=st.floats(allow_nan=False),
    flag=st.booleans(),
    label=_labels,
    mode=st.sampled_from(Mode),
)
def test_round_trip_of_every_option_type(
    count: int, ratio: float, flag: bool, label: str, mode: Mode
) -> None:
    p = Opts(count=count, ratio=ratio, flag=flag, label=label, mode=mode)
    text = format_pipeline([p, Bare(), p])
    assert parse_pipeline(text, LOCAL) == [p, Bare(), p]


def test_round_trip_of_every_registered_pass_with_defaults() -> None:
    passes = [cls() for cls in all_passes()]
    text = format_pipeline(passes)
    assert text == ",".join(cls.name for cls in all_passes())
    assert parse_pipeline(text) == passes


OWN = [Canonicalize, DeadCodeElimination, FuseElementwise, AnnotateCost]


@given(st.lists(st.sampled_from(OWN), max_size=6), st.data())
def test_round_trip_of_the_first_passes(classes: list[type[Pass]], data: st.DataObject) -> None:
    passes: list[Pass] = []
    for cls in classes:
        kwargs: dict[str, object] = {}
        for spec in cls.option_specs():
            if spec.type is bool:
                kwargs[spec.field_name] = data.draw(st.booleans())
            elif spec.type is int:
                kwargs[spec.field_name] = data.draw(st.integers(1, 1000))
        passes.append(cls(**kwargs))
    assert parse_pipeline(format_pipeline(passes)) == passes
