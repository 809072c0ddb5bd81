"""Running a compiled CEL check under a CPU-time budget, so that one slow rule cannot hold a thread for minutes.

cel-python interprets the parsed check node by node (macros such as `.all()` in evaluators of their own); this
evaluator counts the nodes that all of them visit and, every few hundred, reads the thread's CPU clock."""

from __future__ import annotations

import time
from typing import Any

from celpy.evaluation import Evaluator

CLOCK_EVERY = 256  # nodes visited between two looks at the clock (a look costs about as much as one node)


class OverBudget(BaseException):
    """The check used up its CPU time. A BaseException, because cel-python turns an Exception inside a check
    into a value (so that `a || b` can still hold) and would go on evaluating."""


class _Budget:
    """CPU seconds one check may use, shared by the evaluators of its macros."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.deadline = time.thread_time() + seconds
        self.visits = 0

    def spend(self) -> None:
        self.visits += 1
        if self.visits % CLOCK_EVERY == 0 and time.thread_time() > self.deadline:
            raise OverBudget(self.seconds)


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
    evaluator = _BudgetedEvaluator(runner.ast, runner.new_activation(), _Budget(seconds))
    return evaluator.evaluate(activation)
