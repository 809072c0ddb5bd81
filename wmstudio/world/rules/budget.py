"""Running a compiled CEL check under a CPU-time budget, so that one slow rule cannot hold a thread for minutes.

cel-python interprets the parsed check node by node (macros such as `.all()` in evaluators of their own); this
evaluator counts the nodes that all of them visit and, every few hundred, reads the thread's CPU clock. A served
request may also bound all its checks together (`shared_budget`), compiling them included: twenty rules of two
seconds each are not one request's to spend, nor are twenty rules that take seconds to parse. The clock leaves out the time the thread spends in Python's garbage collector: a full collection
in a large process (a test run, a studio holding several models) can take seconds and is not the check's doing."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from celpy.evaluation import Evaluator

CLOCK_EVERY = 256  # nodes visited between two looks at the clock (a look costs about as much as one node)


class _CollectorClock(threading.local):
    """CPU seconds this thread has spent in the garbage collector (gc.callbacks run in the collecting thread)."""

    def __init__(self) -> None:
        self.spent, self.started = 0.0, None


_COLLECTOR = _CollectorClock()


def _time_collection(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _COLLECTOR.started = time.thread_time()
    elif _COLLECTOR.started is not None:
        _COLLECTOR.spent += time.thread_time() - _COLLECTOR.started
        _COLLECTOR.started = None


gc.callbacks.append(_time_collection)


def check_clock() -> float:
    """The thread's CPU time less its time in the garbage collector: what a check's budget counts."""
    return time.thread_time() - _COLLECTOR.spent


class OverBudget(BaseException):
    """The check used up its CPU time. A BaseException, because cel-python turns an Exception inside a check
    into a value (so that `a || b` can still hold) and would go on evaluating."""


class SharedOverBudget(BaseException):
    """All the checks run under one `shared_budget` used up its CPU time: the request asked for too much work.
    Not an OverBudget (which one check's verdict absorbs): it ends the request."""

    def __init__(self, seconds: float):
        super().__init__(f"the rule checks ran over this request's {seconds:g}-second CPU budget for checks")
        self.seconds = seconds


class _Shared:
    """CPU seconds the checks run within one `shared_budget` (or one of its side accounts) have used so far, and may
    use. A side account's spending counts against its request's account too: a request's checks, side work
    included, never pass the request's seconds."""

    def __init__(self, seconds: float, parent: "_Shared | None" = None):
        self.seconds, self.spent, self.parent = seconds, 0.0, parent
        self.sides: dict[str, _Shared] = {}

    def chain(self) -> list["_Shared"]:
        accounts, account = [], self
        while account is not None:
            accounts.append(account)
            account = account.parent
        return accounts

    def charge(self, seconds: float) -> None:
        for account in self.chain():
            account.spent += seconds

    def check(self, pending: float = 0.0) -> None:
        """SharedOverBudget when this account or its request's would pass its seconds with `pending` more."""
        for account in self.chain():
            if account.spent + pending > account.seconds:
                raise SharedOverBudget(account.seconds)


_SHARED: ContextVar[_Shared | None] = ContextVar("wmstudio_shared_check_budget", default=None)


@contextmanager
def shared_budget(seconds: float) -> Iterator[None]:
    """Bound every check evaluated inside (in this context) to `seconds` of CPU time together; past it, the check
    running raises SharedOverBudget."""
    token = _SHARED.set(_Shared(seconds))
    try:
        yield
    finally:
        _SHARED.reset(token)


@contextmanager
def side_budget(share: float, account: str) -> Iterator[None]:
    """Checks evaluated inside spend the request's side account named `account`, `share` of the shared budget in
    force, opened once per request however often this is entered: work a request may skip when that account runs
    out (trying outcomes against the rules before writing). Its spending counts against the request's budget too.
    Past either, SharedOverBudget, for the caller to absorb (at once when the account is spent already)."""
    parent = _SHARED.get()
    side = None
    if parent is not None:
        side = parent.sides.setdefault(account, _Shared(parent.seconds * share, parent=parent))
        side.check()
    token = _SHARED.set(side)
    try:
        yield
    finally:
        _SHARED.reset(token)


def charge_shared(seconds: float) -> None:
    """Count `seconds` of CPU spent on checks outside an evaluation (compiling one) against the shared budget in
    force, if any; SharedOverBudget when that passes it."""
    shared = _SHARED.get()
    if shared is None:
        return
    shared.charge(seconds)
    shared.check()


class _Budget:
    """CPU seconds one check may use, shared by the evaluators of its macros (and its part of a shared budget)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.started = check_clock()
        self.deadline = self.started + seconds
        self.shared = _SHARED.get()
        self.visits = 0

    def spend(self) -> None:
        self.visits += 1
        if self.visits % CLOCK_EVERY == 0:
            now = check_clock()
            if self.shared is not None:
                self.shared.check(pending=now - self.started)
            if now > self.deadline:
                raise OverBudget(self.seconds)

    def close(self) -> None:
        if self.shared is not None:
            self.shared.charge(check_clock() - self.started)


class _BudgetedEvaluator(Evaluator):
    """cel-python's evaluator, spending the budget at every node it visits (macros' evaluators included)."""

    def __init__(self, ast: Any, activation: Any, budget: _Budget):
        super().__init__(ast, activation=activation)
        self.budget = budget

    def sub_evaluator(self, ast: Any) -> Evaluator:
        return _BudgetedEvaluator(ast, self.activation, self.budget)

    def _visit_tree(self, tree: Any) -> Any:
        self.budget.spend()
        return super()._visit_tree(tree)


def evaluate_within(runner: Any, activation: dict[str, Any], seconds: float) -> Any:
    """Evaluate a compiled check (`Environment.program(...)`) on `activation`; OverBudget after `seconds` of the
    calling thread's CPU time. Errors are raised as cel-python raises them."""
    budget = _Budget(seconds)
    try:
        return _BudgetedEvaluator(runner.ast, runner.new_activation(), budget).evaluate(activation)
    finally:
        budget.close()
