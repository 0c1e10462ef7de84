"""OR-Tools' ``cp_model``, loaded on first use.

Importing OR-Tools takes about half a CPU second; commands that never solve
(``waferflow passes``, ``--help``, a refused input) should not pay it. The module object
is real: its first attribute access runs the import (``importlib.util.LazyLoader``).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def _lazy(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:  # not installed: the import error, now
        return importlib.import_module(name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


cp_model = _lazy("ortools.sat.python.cp_model")

__all__ = ["cp_model"]
