"""The registry, option metadata and ``describe_passes``."""

from __future__ import annotations

import pkgutil
import sys
from dataclasses import dataclass
from typing import ClassVar

import pytest

import waferflow.passes
from waferflow.errors import PassError
from waferflow.passes import (
    OptionSpec,
    Pass,
    all_passes,
    describe_passes,
    get_pass,
    option,
    register_pass,
)
from waferflow.passes.dce import DeadCodeElimination
from waferflow.passes.fuse_elementwise import FuseElementwise


def test_the_first_four_passes_are_registered() -> None:
    names = [cls.name for cls in all_passes()]
    assert names == sorted(names)
    assert {"canonicalize", "dce", "fuse-elementwise", "annotate-cost"} <= set(names)
    assert get_pass("dce") is DeadCodeElimination


def test_importing_the_package_imports_every_module_in_it() -> None:
    modules = {
        f"waferflow.passes.{m.name}"
        for m in pkgutil.iter_modules(waferflow.passes.__path__)
        if not m.name.startswith("_")
    }
    assert modules <= set(sys.modules)
    assert {cls.__module__ for cls in all_passes()} <= modules


def test_get_pass_unknown_suggests() -> None:
    with pytest.raises(PassError, match=r"unknown pass 'fuse'; did you mean 'fuse-elementwise'\?"):
        get_pass("fuse")


def test_option_specs_come_from_the_fields() -> None:
    assert DeadCodeElimination.option_specs() == (
        OptionSpec("keep-sources", "keep_sources", bool, True, "keep unused INPUT, PARAM and BUFFER ops"),
    )  # fmt: skip
    (spec,) = FuseElementwise.option_specs()
    assert (spec.name, spec.type_name, spec.default) == ("max", "int", 16)
    assert spec.describe() == "max: int = 16"


def test_options_are_type_checked_when_built_from_python() -> None:
    with pytest.raises(PassError, match="option 'max' of pass 'fuse-elementwise' expects int"):
        FuseElementwise(max="8")  # type: ignore[arg-type]
    with pytest.raises(PassError, match="expects bool"):
        DeadCodeElimination(keep_sources=1)  # type: ignore[arg-type]


def test_register_pass_rejects_malformed_passes() -> None:
    class NotADataclass(Pass):
        """x"""

        name: ClassVar[str] = "not-a-dataclass"

    with pytest.raises(TypeError, match="must be a @dataclass\\(frozen=True\\)"):
        register_pass(NotADataclass)

    @dataclass(frozen=True)
    class BadName(Pass):
        """x"""

        name: ClassVar[str] = "Bad_Name"

    with pytest.raises(ValueError, match="lower case words joined by '-'"):
        register_pass(BadName)

    @dataclass(frozen=True)
    class NoDoc(Pass):
        name: ClassVar[str] = "no-doc"

    with pytest.raises(ValueError, match="needs a docstring"):
        register_pass(NoDoc)

    @dataclass(frozen=True)
    class BadType(Pass):
        """x"""

        name: ClassVar[str] = "bad-type"
        sizes: tuple[int, ...] = (1,)

    with pytest.raises(TypeError, match="options must be int, float, bool, str or an Enum"):
        register_pass(BadType)

    @dataclass(frozen=True)
    class Taken(Pass):
        """x"""

        name: ClassVar[str] = "dce"

    with pytest.raises(ValueError, match="pass name 'dce' is taken"):
        register_pass(Taken)
    assert get_pass("dce") is DeadCodeElimination
    names = {cls.name for cls in all_passes()}
    assert not names & {"not-a-dataclass", "Bad_Name", "no-doc", "bad-type"}


def test_summary_defaults_to_the_docstring_first_line() -> None:
    assert DeadCodeElimination.summary == "Remove ops whose results no graph output needs."


def test_describe_passes() -> None:
    text = describe_passes()
    assert text.endswith("\n")
    assert (
        "fuse-elementwise - Fold chains and single-consumer DAGs of elementwise ops into FUSED ops.\n"
        "    reads the ops; writes the ops (elementwise groups become fused ops)\n"
        "    max: int = 16  most ops in one fused group\n"
    ) in text
    assert (
        "dce - Remove ops whose results no graph output needs.\n"
        "    reads the ops; writes the ops (those no output needs removed)\n"
        "    keep-sources: bool = true  keep unused INPUT, PARAM and BUFFER ops\n"
    ) in text
    # which passes need a wafer, and what each reads and writes
    assert "parallelize - " in text and "    needs a wafer (--wafer); reads the ops," in text
    needs = {c.name for c in all_passes() if c.needs_wafer}
    assert needs == {
        "parallelize", "schedule", "lower-collectives", "plan-memory", "place", "route",
        "parallel-lowering",
    }  # fmt: skip
    assert text.count("needs a wafer (--wafer)") == len(needs)
    # one header line per pass, in name order
    headers = [line.split(" - ")[0] for line in text.splitlines() if not line.startswith(" ")]
    assert headers == [cls.name for cls in all_passes()]


def test_option_helper_records_help() -> None:
    @dataclass(frozen=True)
    class Local(Pass):
        """A local pass."""

        name: ClassVar[str] = "local"
        depth: int = option(2, "how deep")

    (spec,) = Local.option_specs()
    assert spec.help == "how deep"
    assert Local().depth == 2
