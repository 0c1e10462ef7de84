"""Tag traced nodes with the module that produced them and the step phase.

Both tags travel in ``node.meta["custom"]`` through ``torch.fx.traceback.annotate``
(active while ``preserve_node_meta`` is on): make_fx copies the current
annotation onto every node it creates.

- Forward: a pre/post forward hook on every submodule enters/leaves an
  annotation ``{"module": <qualified name>}``.
- Backward: the autograd engine runs outside any module, so each autograd node
  gets a pre/post hook that annotates the module whose forward op created it.
  Which module that was is found by autograd sequence number: the forward hooks
  log (sequence number, module) at every module entry and exit, and a grad_fn's
  sequence number is the one its forward op drew.
- Phase: the traced step wraps its stages in ``phase("fwd" | "bwd" | "opt")``.
"""

from __future__ import annotations

import bisect
import sys
from collections import deque
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

import torch
import torch.fx.traceback as fx_traceback
from torch import nn


def phase(name: str) -> AbstractContextManager[None]:
    """Annotate the nodes traced inside with ``phase=name``."""
    return fx_traceback.annotate({"phase": name})


def module_scope(name: str) -> AbstractContextManager[None]:
    """Annotate the nodes traced inside with ``module=name``."""
    return fx_traceback.annotate({"module": name})


def _sequence_nr() -> int:
    # the autograd sequence number the next recorded op will draw (private torch API)
    return int(torch.autograd._get_sequence_nr())


class ModuleScopes:
    """Context manager that installs the module hooks on ``model`` for one trace.

    Must be entered inside ``torch.fx.traceback.preserve_node_meta()``, which also
    restores the annotation state should a trace fail half-way.
    """

    def __init__(self, model: nn.Module) -> None:
        self._names = {m: n for n, m in model.named_modules() if n}
        self._handles: list[Any] = []
        self._open: list[AbstractContextManager[None]] = []
        self._stack: list[str] = []
        self._event_seq: list[int] = []
        self._event_module: list[str] = []
        self._failed: tuple[BaseException, str] | None = None

    # -- install / remove ------------------------------------------------------------
    def __enter__(self) -> ModuleScopes:
        for module in self._names:
            self._handles.append(module.register_forward_pre_hook(self._pre))
            self._handles.append(module.register_forward_hook(self._post, always_call=True))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        while self._open:
            self._open.pop().__exit__(None, None, None)

    # -- forward ----------------------------------------------------------------------
    def _enter(self, name: str) -> None:
        cm = module_scope(name)
        cm.__enter__()
        self._open.append(cm)

    def _leave(self) -> None:
        if self._open:
            self._open.pop().__exit__(None, None, None)

    def _log(self) -> None:
        self._event_seq.append(_sequence_nr())
        self._event_module.append(self._stack[-1] if self._stack else "")

    def _pre(self, module: nn.Module, args: Any) -> None:
        name = self._names[module]
        self._stack.append(name)
        self._enter(name)
        self._log()

    def _post(self, module: nn.Module, args: Any, output: Any) -> None:
        exc = sys.exc_info()[1]
        if exc is not None and self._failed is None:
            # called while an exception leaves forward: the innermost module fails first
            self._failed = (exc, self._names[module])
        if self._stack:
            self._stack.pop()
        self._leave()
        self._log()

    def failed_module(self, exc: BaseException) -> str | None:
        """The innermost module whose forward raised ``exc`` (or what caused it)."""
        if self._failed is None:
            return None
        seen: BaseException | None = exc
        while seen is not None:
            if seen is self._failed[0]:
                return self._failed[1]
            seen = seen.__cause__ or seen.__context__
        return None

    def module_of_sequence_nr(self, seq: int) -> str:
        """The module that was running when the op with sequence number ``seq`` ran."""
        i = bisect.bisect_right(self._event_seq, seq) - 1
        return self._event_module[i] if i >= 0 else ""

    # -- backward ---------------------------------------------------------------------
    def tag_backward(self, loss: torch.Tensor) -> None:
        """Hook every autograd node reachable from ``loss`` so that the ops its
        backward emits carry the module of the forward op that created it."""
        root = loss.grad_fn
        if root is None:
            return
        seen = {root}
        queue = deque([root])
        while queue:
            fn = queue.popleft()
            module = self.module_of_sequence_nr(fn._sequence_nr())
            fn.register_prehook(self._backward_pre(module))
            fn.register_hook(self._backward_post)
            for nxt, _ in fn.next_functions:
                if nxt is not None and nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)

    def _backward_pre(self, module: str) -> Any:
        def hook(grad_outputs: Any) -> None:
            self._enter(module)

        return hook

    def _backward_post(self, grad_inputs: Any, grad_outputs: Any) -> None:
        self._leave()
