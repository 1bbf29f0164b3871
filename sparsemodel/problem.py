"""The user's problem: a :class:`~sparsemodel.model.problem.Model` with the methods that solve,
compare, path over and choose the bound of it (as cvxpy's ``Problem.solve``), and select its
variables with an error guarantee (knockoffs, stability selection). This facade sits
above every layer; the layers below take the model as data and never import it. The workflows load
on first use (inside the methods), so that ``import sparsemodel`` stays light."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .model.problem import Model


class Problem(Model):
    """minimize f(x) subject to structural constraints, with its solvers (see
    :class:`~sparsemodel.model.problem.Model` for the data)."""

    @classmethod
    def of(cls, model: Model) -> Problem:
        """The facade over a model built elsewhere (the same objects, not copies)."""
        if isinstance(model, cls):
            return model
        out = cls.__new__(cls)
        out.__dict__.update(model.__dict__)
        return out

    def check(self):
        """What `sparsemodel check` prints: shapes, convexity, the constraint sets and their bounds,
        which solvers apply (a :class:`sparsemodel.workflows.session.CheckReport`)."""
        from .workflows import session

        return session.check(self)

    # ------------------------------------------------------------------ solving (delegated to the session)
    def lower(self, k: int | None = None):
        """The lowered problem (what solvers see), with the bound ``k`` in place of the model's."""
        from .workflows import session

        return session.lower(self, k)

    def solver_errors(self, solver: str, **options: Any) -> list:
        """What stops ``solver`` with ``options`` from running on this problem (the errors ``check``
        lists; empty when it runs): an unknown name or option, a constraint kind it does not take
        (:meth:`~sparsemodel.solvers.base.Solver.refuse`, whose hint names the solvers that take
        the model)."""
        from .workflows import session

        return session.solver_errors(self, solver, options, None)

    def solve(self, solver: str | None = None, k: int | None = None, bound: str = "fast", **options: Any):
        """Solve with a registered solver (``'auto'`` picks one that handles every constraint).

        ``k`` overrides the bound of the sparsity or rank constraint for this solve (in its unit:
        entries, groups or the rank). Options are the solver's (see ``sparsemodel solvers``);
        unknown options are refused with the list of valid ones. Without a solver name, the model
        file's ``solve with`` line (if any) is used, else ``'auto'``.

        ``bound`` puts a lower bound on the best objective beside the answer (``Result.lower_bound``,
        ``Result.gap``; docs/certify.md): ``"fast"`` (the default, one dual point at the answer),
        ``"tight"`` (a few Frank-Wolfe steps on the perspective relaxation) or ``"none"``. To prove
        optimality, use ``solver="bnb"``.
        """
        from .workflows import session

        return session.solve(self, solver, k=k, bound=bound, **options)

    def compare(
        self,
        solvers: Iterable[str],
        k: Iterable[int] | int | None = None,
        options: dict[str, dict[str, Any]] | None = None,
        sweep: Any = None,
        **kw: Any,
    ):
        """Run several solvers on this problem, optionally over a range of the bound ``k`` or of
        a param (``sweep={"lam": [...]}``); ``options``: per-solver options. Other keywords: the
        study's (:class:`~sparsemodel.workflows.options.StudyOptions`: ``progress``, ``csv``,
        ``overwrite``, ``scheduler``, ``test``, ``truth``). See
        :func:`sparsemodel.workflows.compare.compare`."""
        from .workflows import session
        from .workflows.options import StudyOptions

        study = StudyOptions.merged(None, kw, "compare", progress=None)
        return session.compare(self, list(solvers), k, options, sweep, study)

    def path(
        self,
        k: Iterable[int] | int,
        solver: str | None = None,
        start: str = "best",
        progress: bool | None = False,
        **options: Any,
    ):
        """A warm-started path over the bound: ``solver`` at every k (one lowering), each point
        started from its neighbour's solution; ``start`` = ``best`` (also solve cold, keep the lower
        objective: never worse than ``solve(k=k)``), ``cold`` (identical to ``solve(k=k)``) or
        ``warm``. Keywords of :class:`~sparsemodel.workflows.options.StudyOptions` (``test``,
        ``truth``, ``scheduler``) are the study's, the others the solver's options. Returns a
        :class:`sparsemodel.workflows.path.SolutionPath`; see docs/selection.md."""
        from .workflows import session
        from .workflows.options import StudyOptions

        study, options = StudyOptions.split(options, progress=progress)
        return session.path(self, k, solver, start, study, **options)

    def select(
        self,
        k: Iterable[int] | int | None = None,
        by: str | None = None,
        solver: str | None = None,
        folds: Any = None,
        seed: int | None = 0,
        fold_ids: Any = None,
        rule: str | None = None,
        **kw: Any,
    ):
        """Choose the bound among ``k`` (default: 0 to n / (log(log n) log p)): ``by`` = ``"ebic"``
        (the default), ``"aic"``, ``"bic"``, ``"gic"``, or ``"cv"`` (K-fold cross-validation with a
        fixed ``seed``, or the user's ``fold_ids``; the held-out loss is the model's own data term
        on the held-out rows); ``rule`` = ``min`` or ``1se`` (cross-validation's default). The path
        is warm-started and stops once the curve has clearly turned. Other keywords: ``gamma``
        (EBIC), ``early_stop``, ``patience``, ``margin`` (the early stop), ``start`` (the path;
        :class:`~sparsemodel.workflows.options.SelectOptions`), the study's ``progress``, ``test``,
        ``truth``, ``scheduler``, ``n_jobs`` (cross-validation's folds on that many workers, -1:
        every core, the same curve as serially; with ``scheduler=`` a dask ``Client`` or address on
        its cluster; :class:`~sparsemodel.workflows.options.StudyOptions`), and the solver's
        options. Returns a :class:`sparsemodel.workflows.select.Selection` (``.k``,
        ``.result``, ``.curve``); see docs/selection.md."""
        from .workflows import session
        from .workflows.options import StudyOptions

        given = dict(kw, by=by, folds=folds, seed=seed, fold_ids=fold_ids, rule=rule)
        study, options = StudyOptions.split(given, selecting=True)
        return session.select(self, k, solver, study, **options)

    # ------------------------------------------------------------------ inference (sparsemodel.inference)
    def knockoffs(self, fdr: float = 0.1, statistic: str = "path", k: int | None = None, **kw: Any):
        """The knockoff filter: the constrained variables selected with the false discovery rate
        controlled at ``fdr``. Knockoff copies of the design of the constrained coordinates (model-X
        Gaussian with ``method`` = ``mvr`` (default), ``maxent``, ``sdp`` or ``equi``; ``fixed_x=True``
        for least squares with n >= 2p + 1; or your own, ``knockoffs=Xk``), the model re-solved on
        [X, X~] with its own loss, free coordinates and penalties, k units among 2p, and the statistic
        ``path`` (the coefficient difference summed over the l0 path k = 1..K, K = ``k`` or the
        model's bound), ``support`` (how many of the path's best supports hold a variable against how
        many hold its knockoff) or ``coef`` (the coefficient difference at k), thresholded by
        knockoff+. ``draws=M`` derandomizes over M copies
        with e-values (Ren and Barber 2023). Other keywords: ``seed``, ``n_jobs``, ``solver`` and
        its options, ``start``, ``mu``/``sigma`` (a known distribution), ``shrinkage``, ``offset``,
        ``alpha_kn``, ``truth``, ``progress``. Returns a
        :class:`sparsemodel.inference.knockoffs.KnockoffResult`; see docs/inference.md."""
        from .inference.knockoffs import knockoffs

        return knockoffs(self, fdr=fdr, statistic=statistic, k=k, **kw)

    def stability(self, k: Any = None, pairs: int = 50, threshold: float = 0.6, **kw: Any):
        """Stability selection with complementary pairs (Shah and Samworth 2013): the l0 path
        k = 1..K (K = ``k`` or the model's bound) on each half of ``pairs`` random splits of the
        rows, each unit's selection probability per k, and the units whose largest probability
        reaches ``threshold``, with the bound on the expected number of false selections beside
        them (Meinshausen and Buhlmann 2010; Shah and Samworth's under unimodality). ``at_k``
        selects at one k instead. Other keywords: ``seed``, ``n_jobs``, ``solver`` and its
        options, ``start``, ``truth``, ``progress``. Returns a
        :class:`sparsemodel.inference.stability.StabilityResult`; see docs/inference.md."""
        from .inference.stability import stability

        return stability(self, k=k, pairs=pairs, threshold=threshold, **kw)
