"""Tuning a relaxation's weight to an exact structure: the binary search of paper 003, Section
6.3.2 ("for each sparsity level we applied binary search on alpha in order to find a parameter
alpha that gives the required sparsity"), shared by every convex baseline (``lasso``: nonzeros of
the l1 relaxation; ``nuclear``: the rank of the nuclear-norm relaxation).

The search runs on log(lambda). At lambda_max the relaxation's solution has none of the structure
(the caller computes lambda_max from the optimality conditions and never solves there, counting it
as 0). It brackets downwards by factors of 10 until the count reaches the target (down to
``min_ratio * lambda_max``), then bisects log(lambda) between the last lambda below the target and
the first above it, until one lambda gives exactly the target or the bracket is narrower than a
factor ``1 + lambda_tol``. When no lambda gives the target, a SolverError says why (the largest
count found; the budget of solves; the count jumping over the target, e.g. from collinear columns)
and lists the counts reached along the search.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import SolverError
from .base import Solver
from .options import Option


def search_options(problem: str) -> dict[str, Option]:
    """The options every tuned relaxation shares (``problem`` names its relaxed problem)."""
    return {
        "lambda_tol": Option(
            1e-7, "stop the search when the lambda bracket is narrower than a factor 1 + lambda_tol", float
        ),
        "min_ratio": Option(1e-4, "smallest lambda tried, as a fraction of lambda_max", float),
        "max_solves": Option(200, f"maximum number of solves of {problem} along the search", int, low=1),
    }


def check_search_options(o: dict[str, Any], solver: str) -> None:
    for name in ("zero_tol", "lambda_tol", "min_ratio"):
        if not 0 < o[name] < 1:
            raise SolverError(f"option {name}={o[name]} of {solver} must be in (0, 1)")
    if o["max_solves"] < 1:
        raise SolverError(f"option max_solves={o['max_solves']} of {solver} must be at least 1")


def choose_backend(lp: Any, backend: str) -> str:
    """``auto``: the NumPy path for composite objectives (it needs the design), cvxpy otherwise."""
    if backend == "auto":
        return "numpy" if lp.design is not None else "cvxpy"
    if backend == "numpy" and lp.design is None:
        raise SolverError(
            f"backend='numpy' needs an objective made of losses of affine maps; this one is a {lp.structure}",
            hint="use backend='cvxpy' (or 'auto')",
        )
    return backend


@dataclass
class Search:
    lam: float
    x: np.ndarray
    seen: list[tuple[float, int]] = field(default_factory=list)


def search_lambda(
    solve_at: Callable[[float], tuple[np.ndarray, int]],
    solves: Callable[[], int],
    target: int,
    lam_max: float,
    options: dict[str, Any],
    *,
    what: str,
    target_text: str,
    count_name: str,
    counts_name: str,
    unit: str = "",
    span: Any = None,
    reachable_hint: str = "",
) -> Search:
    """Find lambda whose solution (``solve_at(lam) -> (x, count)``) has exactly ``target``.

    ``what`` names the relaxation ("LASSO", "the nuclear-norm relaxation"), ``target_text`` the goal
    as the error says it ("k=5 nonzeros", "rank 3"), ``count_name`` / ``counts_name`` what is
    counted ("support" / "sparsities", "rank" / "ranks"), ``unit`` its unit (" nonzeros")."""
    min_ratio, lambda_tol, max_solves = options["min_ratio"], options["lambda_tol"], options["max_solves"]
    seen: list[tuple[float, int]] = []

    def at(lam: float) -> tuple[np.ndarray, int]:
        x, c = solve_at(lam)
        seen.append((lam, c))
        return x, c

    found: tuple[float, np.ndarray] | None = None
    hi, n_hi = lam_max, 0  # fewer than the target at hi
    lo, n_lo = None, None  # more than the target at lo
    floor = lam_max * min_ratio
    lam = lam_max
    while found is None and solves() < max_solves:
        lam = max(lam / 10.0, floor)
        x, c = at(lam)
        if c == target:
            found = (lam, x)
        elif c > target:
            lo, n_lo = lam, c
            break
        else:
            hi, n_hi = lam, c
            if lam <= floor:
                break
    while found is None and lo is not None and solves() < max_solves:
        if hi / lo <= 1.0 + lambda_tol:
            break
        lam = math.sqrt(lo * hi)
        x, c = at(lam)
        if c == target:
            found = (lam, x)
        elif c > target:
            lo, n_lo = lam, c
        else:
            hi, n_hi = lam, c
    if found is not None:
        return Search(found[0], found[1], seen)
    counts = sorted({c for _, c in seen} | {0})
    reached = ", ".join(map(str, counts))
    alt = "or use an l0 solver (grahtp, grasp, foba, iht)"
    if lo is None and hi <= floor * (1 + 1e-12):
        why = (
            f"the largest {what} {count_name} found has {max(counts)}{unit} "
            f"(down to lambda = {floor:.3g} = {min_ratio:g} * lambda_max)"
        )
        hint = f"choose a target among the reachable ones, {alt}; {reachable_hint}a smaller min_ratio searches further"
    elif lo is None or hi / lo > 1.0 + lambda_tol:
        why = f"the search stopped after {solves()} solves (max_solves={max_solves})"
        hint = f"raise max_solves or lambda_tol, {alt}"
    else:
        why = f"the {count_name} jumps from {n_hi} to {n_lo} at lambda ~ {math.sqrt(lo * hi):.6g}"
        hint = f"choose a target among the reachable ones, {alt}; structure entering together usually comes from duplicated or collinear columns"
    raise SolverError(
        f"{what} cannot reach exactly {target_text}: {why}; {counts_name} reached along the search: {reached}",
        span,
        hint,
    )


def finish_tuned(
    lp: Any,
    solver: Any,
    search: Search,
    clock: Any,
    hist: Any,
    *,
    lam_max: float,
    penalty: float,
    name: str,
    norm_name: str,
    solves: int,
    backend: str,
    state: Any = None,
    undebiased: Callable[[np.ndarray], tuple[np.ndarray, float]] | None = None,
    extra: dict[str, Any] | None = None,
) -> Any:
    """The common end of every tuned relaxation (lasso, nuclear, glasso, tv): the relaxation's
    solution at the lambda found, refit on its structure (``debias``, the set's restricted solve on
    ``state``, by default the set's state of the solution) or reported as it is (``undebiased``
    may move it into a side set first), and the Result with lambda, the relaxation's objective,
    its penalized objective (``penalty``: the penalty's value at the solution, lambda not applied),
    the solves and the path of (lambda, count) of the search."""
    from .result import CONVERGED, finish

    o = solver.opts
    lam, x_rel = search.lam, search.x
    f_rel = lp.oracle.peek(x_rel)
    if o["debias"]:
        st = lp.set.state(x_rel) if state is None else state
        r = lp.restricted_minimize(st, x0=x_rel, method=o["restricted"])
        x, f = r.x, r.f
    elif undebiased is not None:
        x, f = undebiased(x_rel)
    else:
        x, f = x_rel, f_rel
    out: dict[str, Any] = {
        "lambda": lam,
        "lambda_max": lam_max,
        f"{name}_objective": f_rel,
        f"{name}_penalized_objective": f_rel + lam * penalty,
        **({norm_name: penalty} if norm_name else {}),
        "solves": solves,
        "backend": backend,
        "debiased": bool(o["debias"]),
        **(extra or {}),
        "path": [[float(a), int(b)] for a, b in search.seen],
    }
    return finish(lp, solver, x, CONVERGED, solves, clock, hist, f=f, extra=out)


class TunedRelaxation(Solver, ABC):
    """A convex relaxation tuned to an exact structure, then debiased: what ``lasso``, ``nuclear``,
    ``glasso`` and ``tv`` share. A subclass gives where the search starts (:meth:`start`: lambda_max,
    the relaxation's solver, the back-end's name), how a solution is read (:meth:`snap`: its small
    parts zeroed and its structure counted), the relaxation's penalty at the answer
    (:meth:`penalty`) and the words of its messages; :meth:`run` is the search of the module
    docstring and :func:`finish_tuned`."""

    convex_relaxation = True
    # when the default back-end is cvxpy: "always", "without a design" (choose_backend), or "never"
    cvxpy_path = "without a design"
    needs = "a composite loss, or an objective with a cvxpy counterpart (a custom_loss needs hvp=)"
    what = "the relaxation"  # as messages name it: "LASSO", "total variation"
    counted = "nonzeros"  # the unit of the count: nonzeros, changes, edges ("" for a rank)
    count_name = "support"  # what is counted, one and several: ("support", "sparsities")
    counts_name = "sparsities"
    log_name = "nnz"  # the history column of the count
    norm_name = ""  # the Result.extra entry of the penalty's value ("" for none)
    reachable_hint = ""

    @classmethod
    def unfit(cls, lp: Any) -> SolverError | None:
        """A relaxation built in cvxpy needs every part of the objective to have a cvxpy
        counterpart (a ``custom_loss`` has none)."""
        if cls.cvxpy_path == "always" or (cls.cvxpy_path == "without a design" and lp.design is None):
            err = lp.cvxpy_missing()
            if err is not None:
                return SolverError(f"the {cls.what} relaxation cannot be built: {err.message}", err.span, err.hint)
        return None

    @abstractmethod
    def start(self, lp: Any) -> tuple[float, Any, str]:
        """(lambda_max, the relaxation's solver (``.solve(lam)``, ``.solves``), back-end name);
        raises a SolverError when no lambda gives any structure."""

    @abstractmethod
    def snap(self, lp: Any, raw: Any) -> tuple[np.ndarray, int]:
        """The point x of the relaxation's answer at one lambda with its negligible parts zeroed,
        and its count."""

    @abstractmethod
    def penalty(self, lp: Any, x: np.ndarray) -> float:
        """The relaxation's penalty at x (its norm: l1, nuclear, ...)."""

    def ending(self, lp: Any, search: Search) -> dict[str, Any]:
        """Extra arguments of :func:`finish_tuned` (``state``, ``undebiased``, ``extra``)."""
        return {}

    def target_text(self, k: int) -> str:
        return f"k={k} {self.counted}"

    def run(self, lp: Any) -> Any:
        from ..util import Clock

        o = self.opts
        clock = Clock()
        check_search_options(o, self.name)
        lam_max, relax, backend = self.start(lp)
        hist = self.history(lp, clock)

        def solve_at(lam: float) -> tuple[np.ndarray, int]:
            x, c = self.snap(lp, relax.solve(lam))
            hist.log(lp.oracle.peek(x), lam=lam, **{self.log_name: c})
            return x, c

        k = lp.set.k
        search = search_lambda(
            solve_at,
            lambda: relax.solves,
            k,
            lam_max,
            o,
            what=self.what,
            target_text=self.target_text(k),
            count_name=self.count_name,
            counts_name=self.counts_name,
            unit=f" {self.counted}" if self.counted else "",
            span=lp.set.span,
            reachable_hint=self.reachable_hint,
        )
        return finish_tuned(
            lp,
            self,
            search,
            clock,
            hist,
            lam_max=lam_max,
            penalty=self.penalty(lp, search.x),
            name=self.name,
            norm_name=self.norm_name,
            solves=relax.solves,
            backend=backend,
            **self.ending(lp, search),
        )


__all__ = [
    "Search",
    "TunedRelaxation",
    "check_search_options",
    "choose_backend",
    "finish_tuned",
    "search_lambda",
    "search_options",
]
