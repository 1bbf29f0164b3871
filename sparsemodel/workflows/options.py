"""What a study asks beside the problem and its solvers, in one place for compare, path, select and
experiment.

* :class:`StudyOptions` -- the progress bar, where passes over dask data run, on how many workers
  the study's independent tasks run, the held-out data and the truth that add metrics to every
  row, the CSV written as rows finish and whether files may be overwritten; and how k is chosen
  when it is (:class:`SelectOptions`).
* :class:`SelectOptions` -- how ``select`` chooses the bound: ``by`` (a criterion or ``cv``), the
  folds, their seed or the user's ``fold_ids``, the rule, EBIC's ``gamma``, the path's ``start`` and
  the early stop.
* :class:`Replications` -- how a study's replications are made (a data generator, random splits).
* :func:`bounds_of` -- the bounds of a sweep (``k=10``, ``k=[5, 10]``, ``range(...)``, or bounds by
  name), checked once.

The Python methods keep their keywords (``Problem.select(k=..., by="cv", folds=10)``): the facade
builds these objects once (:meth:`StudyOptions.split`), every keyword that is neither a study's nor
a selection's being the solver's option (the solver refuses an unknown one by name).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConstraintError, ModelError
from .runner import check_jobs


class OptionsError(ModelError):
    kind = "options error"


@dataclass(frozen=True)
class SelectOptions:
    """How ``select`` chooses the bound (docs/selection.md): ``by`` (``ebic`` by default, ``aic``,
    ``bic``, ``ebic_cc``, ``gic`` or ``cv``), ``folds`` (a number, or the splits themselves), their
    ``seed``, the user's ``fold_ids``, ``rule`` (``min``, ``1se``, ``1se_paired``), EBIC's ``gamma``,
    the path's ``start`` and the early stop (``early_stop``, ``patience``, ``margin``)."""

    by: str | None = None
    folds: Any = None
    seed: int | None = 0
    fold_ids: Any = None
    rule: str | None = None
    gamma: float = 1.0
    start: str = "warm"
    early_stop: bool = True
    patience: int | None = None
    margin: float | None = None

    @classmethod
    def of(cls, given: Mapping[str, Any] | None, where: str = "select_options") -> SelectOptions:
        """The options named in ``given``; an unknown name is refused with the known ones."""
        mine, rest = _take(cls, dict(given or {}))
        if rest:
            from ..util import did_you_mean

            bad, known = next(iter(rest)), [f.name for f in fields(cls)]
            raise OptionsError(
                f"{where}: {bad!r} is not an option of choosing k",
                hint=f"{did_you_mean(bad, known)}options: {', '.join(known)}",
            )
        return cls(**mine)


@dataclass(frozen=True)
class StudyOptions:
    """What every study asks beside its problem, solvers and bounds: ``progress`` (True, False, or
    None for a terminal or a notebook), ``scheduler`` (where passes over dask data run; with
    ``n_jobs`` above 1, the dask cluster whose workers run the study's tasks), ``n_jobs`` (a
    study's replications or cross-validation's folds on that many workers: 1 or None serially, -1
    one per core; the rows are the serial run's, :mod:`sparsemodel.workflows.runner`), ``test``
    (held-out data by data name) and ``truth`` (true values by variable name), which add their
    metrics to every row, ``csv`` (rows written there as they finish) and ``overwrite``, and
    ``select``: how k is chosen (:class:`SelectOptions`)."""

    progress: bool | None = False
    scheduler: Any = None
    n_jobs: int | None = 1
    test: Mapping[str, Any] | None = None
    truth: Mapping[str, Any] | None = None
    csv: str | Path | None = None
    overwrite: bool = False
    select: SelectOptions = field(default_factory=SelectOptions)

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_jobs", check_jobs(self.n_jobs, OptionsError))  # None: 1, serially

    def refuse_jobs(self, where: str, why: str) -> None:
        """An :class:`OptionsError` when ``n_jobs`` asks for workers that ``where`` does not use
        (``why``: what runs instead)."""
        if self.n_jobs != 1:
            raise OptionsError(
                f"{where}: n_jobs={self.n_jobs} runs a study's replications or cross-validation's folds on "
                f"workers; {why}",
                hint="drop n_jobs, or run the replications with experiment(..., splits=N, n_jobs=...)",
            )

    @classmethod
    def split(
        cls, kw: dict[str, Any], *, selecting: bool = False, **defaults: Any
    ) -> tuple[StudyOptions, dict[str, Any]]:
        """(the options, the keywords left: the solver's options) of a method's keywords ``kw``;
        with ``selecting`` the names of :class:`SelectOptions` are taken too. ``defaults``: the
        method's own defaults (``progress=None`` for compare)."""
        mine, rest = _take(cls, kw, exclude=("select",))
        chosen, rest = _take(SelectOptions, rest) if selecting else ({}, rest)
        return cls(**{**defaults, **mine}, select=SelectOptions(**chosen)), rest

    @classmethod
    def merged(cls, study: StudyOptions | None, kw: dict[str, Any], where: str, **defaults: Any) -> StudyOptions:
        """``study`` (or the method's ``defaults``) with the options named in the keywords ``kw``;
        any other keyword is refused by name (``where``: the method)."""
        mine, rest = _take(cls, kw, exclude=("select",))
        refuse_unknown(rest, where, [f.name for f in fields(cls) if f.name != "select"])
        return replace(study if study is not None else cls(**defaults), **mine)


@dataclass(frozen=True)
class Replications:
    """How a study's replications are made (:func:`sparsemodel.workflows.experiment.experiment`):
    ``data`` (a generator drawing each replication's data, truth and held-out data) ``reps`` times
    at every point of the grid ``over``; or ``splits`` random splits of the model's rows holding out
    ``test_size`` of them (``stratify``: by class, the default for a classifier); ``seed`` fixes both."""

    data: Any = None
    reps: int | None = None
    over: Mapping[str, Iterable[Any]] | None = None
    splits: int | None = None
    test_size: float = 0.3
    seed: int | None = 0
    stratify: bool | None = None

    @classmethod
    def split(cls, kw: dict[str, Any], given: Replications | None = None) -> tuple[Replications, dict[str, Any]]:
        """(``given``, or the defaults, with the replications named in the keywords ``kw``; the
        keywords left)."""
        mine, rest = _take(cls, kw)
        return replace(given if given is not None else cls(), **mine), rest


def _take(cls: type, kw: dict[str, Any], exclude: tuple[str, ...] = ()) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the keywords that name fields of the dataclass ``cls``, the others)."""
    names = {f.name for f in fields(cls)} - set(exclude)
    return {k: v for k, v in kw.items() if k in names}, {k: v for k, v in kw.items() if k not in names}


def refuse_unknown(kw: dict[str, Any], where: str, known: list[str]) -> None:
    """An :class:`OptionsError` naming the first keyword of ``kw`` that ``where`` does not take."""
    if kw:
        from ..util import did_you_mean

        bad = next(iter(kw))
        raise OptionsError(
            f"{where}() got the keyword {bad}=, which it does not take",
            hint=f"{did_you_mean(bad, known)}keywords: {', '.join(known)}",
        )


def bounds_of(k: Iterable[int] | int | None) -> list[Any]:
    """The bounds of a sweep: integers, or one bound per name for several bounds (``{"S": 10,
    "L": 2}``, checked by the set); ``[None]`` for the problem's own bound."""
    if k is None:
        return [None]
    items = [k] if isinstance(k, (int, np.integer, Mapping)) and not isinstance(k, bool) else k
    try:
        items = list(items)  # type: ignore[arg-type]
    except TypeError:
        raise ConstraintError(f"k={k!r} is not an integer or a list of integers") from None
    out: list[int | None] = []
    for v in items:
        if isinstance(v, Mapping):  # several bounds by name: the set checks them
            if v not in out:
                out.append(v)
            continue
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, np.integer, float, np.floating))
            or not np.isfinite(v)
            or v != int(v)
        ):
            raise ConstraintError(
                f"sparsity level k={v!r} is not an integer", hint="use k=10, k=[5, 10] or range(5, 55, 5)"
            )
        if v < 0:
            raise ConstraintError(f"the bound k={int(v)} is negative", hint="bounds are integers >= 0")
        if int(v) not in out:
            out.append(int(v))
    if not out:
        raise ConstraintError("no sparsity levels to compare (k is empty)")
    return out


__all__ = ["OptionsError", "Replications", "SelectOptions", "StudyOptions", "bounds_of", "refuse_unknown"]
