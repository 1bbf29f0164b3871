"""The lean path's view of a lowered problem: its composite objective as the arrays the compiled
kernels of :mod:`sparsemodel.numerics._lean` take, built once per design and kept with it (so a
path over k, a comparison or a repeated solve pays nothing again), with the Gram block of a
quadratic objective filled column by column as the searches read it.

The class it covers (:func:`lean_data` returns None otherwise): coordinate sparsity on single
coordinates or on groups of one size of at most MAX_UNIT coordinates (free coordinates allowed: an
intercept), no box, linear constraint, eigenvalue box or other side set; a composite objective with
one data term, either c sum_i w_i phi((J x + b)_i) of a built-in elementwise loss without parameters
(square, logistic, exp, log: least squares, logistic, Poisson and Gamma regression) or the row-wise
softmax c sum_i w_i logsumexp((J x + b)_i) over samples i of K entries (``logsumexp(Z, axis=1)``:
multinomial regression), its Jacobian dense (the design's dense copy, or one written for the kernel
from dense data below the design's FULL_LIMIT: objective/columns.dense_jacobian), plus linear terms
and separable ridges (lam/2 ||w||^2). Everything else runs the general path.
"""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..util import as_slice
from .guards import DOMAIN_TRIALS

if TYPE_CHECKING:
    from .data import LoweredData

ATOM_NAMES = (
    "square",
    "logistic",
    "exp",
    "log",
)  # the elementwise losses the kernels evaluate (numerics/_lean.ATOM_CODES)
MAX_UNIT = 16  # the largest group the kernels take (numerics/_lean.MAX_UNIT)


ARRAYS = ("J", "b", "wc", "lin", "rd", "g0", "R", "diag", "Jsq")  # the kernel problem's arrays a rebinding rewrites


@dataclass
class LeanData:
    """The kernel's :class:`~sparsemodel.numerics._lean.Problem` of one design on one set's
    coordinates (its arrays, the Gram store of a quadratic objective), and the start inside the
    loss's domain once known."""

    P: Any
    quadratic: bool
    coords: int  # |C|
    phi: Any = None  # the data term's loss (its atom: value and derivatives in one place)
    start: np.ndarray | None = None  # the start inside the loss's domain (initial_point), once known
    where: Any = None  # the set's coordinates C as a slice when they are a run (J[:, C] a view)
    views: dict[str, np.ndarray] = field(default_factory=dict)  # P's ARRAYS as NumPy arrays (rewritten in place)
    owner: Any = None  # (a weak reference to) the design whose numbers P holds: its rebindings share P
    term: int | None = None  # the data term's index among the design's terms
    classes: int = 1  # its entries per sample (K of the row-wise softmax)


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # design -> {coords key: LeanData}
_KERNELS: list[Any] = []  # the compiled module, or None when it is not built (looked up once)


def kernels() -> Any:
    """The compiled kernels (:mod:`sparsemodel.numerics._lean`), or None when the extension is not
    built (a source tree used without ``pip install -e .``): then ``auto`` runs its Python pipeline,
    the same steps, and one RuntimeWarning says so."""
    if not _KERNELS:
        try:
            from ..numerics import _lean
        except ImportError as exc:
            warnings.warn(
                f"sparsemodel's compiled kernels are not built ({exc}); auto runs its Python pipeline (the same "
                "steps, slower on small problems). Build them (a C compiler is needed) with: pip install -e .",
                RuntimeWarning,
                stacklevel=3,
            )
            _lean = None
        _KERNELS.append(_lean)
    return _KERNELS[0]


def lean_data(lp: LoweredData) -> LeanData | None:
    """The lean arrays of ``lp`` (built on the first call for its design and coordinates, then
    shared by every copy and bound), or None when the problem is outside the lean class."""
    s, d = lp.set, lp.design
    if s is None or d is None or not s.coordinate or not s.thresholds or not s.uniform:
        return None
    if lp.box is not None or lp.linear is not None or lp.eigbox is not None or lp.precision is not None:
        return None
    if lp.side or getattr(lp, "spca", None) is not None or d.chunked:
        return None
    if any(v.symmetric for v in lp.layout.variables):
        return None
    per = _CACHE.get(d)
    if per is None:
        per = {}
        _CACHE[d] = per
    key = s.layout_key()
    if key not in per:
        members = s.swap_members()  # (groups of one size, at most MAX_UNIT coordinates)
        if members is None or members.ndim != 2 or not 1 <= members.shape[1] <= MAX_UNIT:
            return None
        data = _build(lp)
        if data is None and _KERNELS == [None]:  # the kernels are missing: nothing cached for this design
            return None
        per[key] = data
    data = per[key]
    if data is not None and (data.owner is None or data.owner() is not d):  # (P holds other numbers)
        if not _rewrite(lp, data):  # (they do not fit: the general pipeline)
            return None
    return data


def _arrays(lp: LoweredData, into: LeanData | None = None, where: Any = None) -> dict[str, Any] | None:
    """The kernel's arrays of ``lp`` (copies it owns), or None outside the lean class; written into
    the kernel problem of ``into``'s arrays when given and of the same shapes (a rebinding: no
    allocation, no copy after). ``where``: the set's coordinates as :func:`as_slice` gives them,
    when known."""
    d, s = lp.design, lp.set
    views = into.views if into is not None else {}

    def target(name: str, shape: tuple[int, ...]) -> np.ndarray:
        got = views.get(name)
        return got if got is not None and got.shape == shape else np.empty(shape)

    data_term = None
    rd = target("rd", (lp.n,))
    rd[:] = 0.0
    for i, t in enumerate(d.terms):
        r = d.separable_diagonal(i)
        if r is not None:
            rd += r
            continue
        if data_term is not None or _classes(t) is None:
            return None
        data_term = i
    if data_term is None:
        return None
    t = d.terms[data_term]
    shape = (t.map.size, lp.n)
    kern = kernels()  # (looked up, and missed with its warning, only for a problem of the class)
    if kern is None:
        return None
    J_into = views["J"] if "J" in views and views["J"].shape == shape else None
    J = d.dense_jacobian(data_term, J_into)  # C order, the kernel's own copy (a rebinding overwrites it)
    if J is None:
        return None
    n, K = J.shape[0], _classes(t)
    if t.weights is not None and np.size(t.weights) != n // K:
        return None
    b = target("b", (n,))
    np.copyto(b, np.ravel(t.map.b))  # (a scalar offset broadcast)
    wc = target("wc", (n // K,))
    if t.weights is None:
        wc[:] = t.coef
    else:
        np.multiply(t.coef, np.ravel(t.weights), out=wc)
    lin = target("lin", (lp.n,))
    np.copyto(lin, d.lin)
    JC = J[:, into.where if into is not None else where if where is not None else as_slice(s.coords)]
    R, g0, diag, Jsq = _derived(J, b, wc, lin, rd, JC, K, bool(t.quadratic), target, views.get("Jsq"))
    return {
        "J": J,
        "b": b,
        "wc": wc,
        "lin": lin,
        "rd": rd,
        "code": kern.ATOM_CODES[t.phi.name],
        "phi": t.phi,
        "const": float(d.const),
        "quad": bool(t.quadratic),
        "g0": g0,
        "R": R,
        "diag": diag,
        "Jsq": Jsq,
        "term": data_term,
        "classes": K,
    }


def _derived(
    J: np.ndarray,
    b: np.ndarray,
    wc: np.ndarray,
    lin: np.ndarray,
    rd: np.ndarray,
    JC: np.ndarray,
    K: int,
    quad: bool,
    target: Any,
    Jsq_into: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What the kernel problem derives from its data arrays: (R, g0, diag, Jsq) -- each sample's
    squared row norm over the set's coordinates ``JC`` (the softmax's Gram blocks for K > 1), and
    for a quadratic loss the gradient at 0 and the Hessian's diagonal, else, for an elementwise
    loss, the squares of J's entries (the Hessian's diagonal at a point, which the kernels read for
    an elementwise loss only: the softmax's gets none, saving a copy of J, 3.6 MB of fresh memory
    at 500 x 100 with three classes). ``target(name, shape)``: the array each is written into."""
    n = J.shape[0]
    if K == 1:
        R = np.einsum("ij,ij->i", JC, JC, out=target("R", (n,)))
    else:
        R = np.ascontiguousarray(_sample_grams(JC, K))
    if quad:
        w2 = 2.0 * wc
        g0 = np.dot(J.T, w2 * b, out=target("g0", (J.shape[1],)))
        g0 += lin
        diag = np.einsum("ij,ij,i->j", J, J, w2, out=target("diag", (J.shape[1],)))
        diag += rd
        Jsq = np.zeros((0, J.shape[1]))
    else:
        if K == 1:
            Jsq = np.multiply(J, J, out=Jsq_into if Jsq_into is not None and Jsq_into.shape == J.shape else None)
        else:
            Jsq = np.zeros((0, J.shape[1]))
        g0, diag = np.zeros(J.shape[1]), np.zeros(J.shape[1])
    return R, g0, diag, Jsq


def _classes(t: Any) -> int | None:
    """The entries per sample of a data term the kernels evaluate: 1 for a built-in elementwise loss
    without parameters, the classes for the row-wise softmax ``logsumexp(Z, axis=1)``; None for any
    other term."""
    if t.diagonal and t.phi.name in ATOM_NAMES and not t.phi.params:
        return 1
    if t.rowwise and t.phi.name == "logsumexp" and len(t.map.shape) == 2 and 1 <= t.map.shape[1]:
        return int(t.map.shape[1])
    return None


def _sample_grams(JC: np.ndarray, K: int) -> np.ndarray:
    """The Gram block of each sample's K rows of J[:, C], flattened (n x K x K): the softmax's
    mean curvature over C is sum_i w_i tr(H_i G_i) (lowering/constants.mean_curvature_exact)."""
    J3 = JC.reshape(-1, K, JC.shape[1])
    return np.einsum("iaj,ibj->iab", J3, J3).ravel()


def _build(lp: LoweredData) -> LeanData | None:
    where = as_slice(lp.set.coords)
    a = _arrays(lp, where=where)
    if a is None:
        return None
    return _made(a, lp.set, where, weakref.ref(lp.design))


def _made(a: dict[str, Any], s: Any, where: Any, owner: Any) -> LeanData:
    """The kernel problem of the arrays ``a`` on the set ``s``'s coordinates (``where``: as
    :func:`as_slice` gives them), with its Gram store of a quadratic objective (rows written whole
    when first read) and the trial values of the domain search."""
    C = np.ascontiguousarray(s.coords, dtype=np.intp)
    F = np.ascontiguousarray(s.free, dtype=np.intp)
    n = a["J"].shape[1]
    Q = np.empty((n, n)) if a["quad"] else np.zeros((0, 0))  # rows written whole when first read (have)
    have = np.zeros(n, dtype=np.uint8)
    domain = np.asarray(DOMAIN_TRIALS, dtype=float)
    P = kernels().Problem(
        a["J"],
        a["b"],
        a["wc"],
        a["lin"],
        a["rd"],
        a["code"],
        a["const"],
        a["quad"],
        C,
        F,
        a["g0"],
        a["R"],
        a["diag"],
        a["Jsq"],
        Q,
        have,
        domain,
        np.ascontiguousarray(s.swap_members(), dtype=np.intp),
    )
    views = {name: a[name] for name in ARRAYS}  # (P's arrays are these: a typed memoryview copies nothing)
    return LeanData(
        P, a["quad"], len(C), a["phi"], where=where, views=views, owner=owner, term=a["term"], classes=a["classes"]
    )


def on_rows(lp: LoweredData, rows: np.ndarray, factor: float) -> LeanData | None:
    """The kernel problem of ``lp``'s model on its sample rows ``rows`` (a cross-validation fold's
    training rows), made from ``lp``'s own arrays instead of a lowering of that model: the rows of
    its Jacobian and offset, the per-sample weights of those rows times ``factor`` (the data term on
    a subset is ``factor`` times its rows' sum: 1 for a sum with a fixed scale, n / |R| for a mean,
    :func:`~sparsemodel.model.samples.subset_scale`), the same ridges, and what the problem derives
    from them by the same steps. The same arrays, bit for bit, as the kernel problem of that model's
    lowering where ``factor`` is 1 (a mean's coefficient n / |R| times 1 / n may differ from 1 / |R|
    in its last bit). A linear piece of the data term (Poisson's -y'z, Gamma's z) is made again from
    its map's and weights' rows as the design makes it (:func:`_linear_on_rows`). None where this
    reading is not proved: outside the lean class, or where the form's constant, another term or a
    linear piece that is no affine map with a row per sample (the softmax's -<Y, Z>) reads the data
    (their subsets are not rows of ``lp``'s arrays)."""
    data = lean_data(lp)
    d = lp.design
    if data is None or data.term is None or d.tree_const != 0.0 or d.sample_terms != [data.term]:
        return None
    if any(i != data.term and (t.map.reads_data() or t.weights is not None) for i, t in enumerate(d.terms)):
        return None
    K, v = data.classes, data.views
    rows = np.asarray(rows, dtype=np.intp)
    if v["J"].shape[0] != K * d.n_samples or v["wc"].shape[0] != d.n_samples:
        return None
    at = rows if K == 1 else (rows[:, None] * K + np.arange(K)).ravel()
    J, b, wc = v["J"][at], v["b"][at], v["wc"][rows]
    if factor != 1.0:
        wc *= factor
    linear = _linear_on_rows(d, rows, factor)
    if linear is None:
        return None
    lin, const = linear
    rd = v["rd"].copy()
    where = data.where
    JC = J[:, where if where is not None else as_slice(lp.set.coords)]

    def target(name: str, shape: tuple[int, ...]) -> np.ndarray:
        return np.empty(shape)

    R, g0, diag, Jsq = _derived(J, b, wc, lin, rd, JC, K, data.quadratic, target)
    a = {"J": J, "b": b, "wc": wc, "lin": lin, "rd": rd, "code": data.P.code, "phi": data.phi, "const": const}
    a.update(quad=data.quadratic, g0=g0, R=R, diag=diag, Jsq=Jsq, term=data.term, classes=K)
    return _made(a, lp.set, where, None)


def _linear_on_rows(d: Any, rows: np.ndarray, factor: float) -> tuple[np.ndarray, float] | None:
    """The linear part and constant of the design ``d`` on its sample rows ``rows``
    (:func:`~sparsemodel.objective.design.linear_part`, the design's own loop, on its linear terms
    in their order: each sample term's map and weights on those rows, :meth:`AffineMap.rows`, its
    coefficient times ``factor``; the others as they are), or None where a linear term's rows
    cannot be read (a map with a row per sample that reads no data and has no weights, or is not
    affine in the canonical blocks; a map reading data without a row per sample, ``y @ z``)."""
    from ..objective.affine import AffineMap
    from ..objective.design import linear_part

    pieces = []
    for rt, m in zip(d.raw, d.maps):
        if rt.phi is not None:
            continue
        w, coef = rt.weights, rt.coef
        if m.shape and m.shape[0] == d.n_samples:  # (a piece of the data term: its rows, row-local by subset_scale)
            if not isinstance(m, AffineMap) or not (m.reads_data() or w is not None):
                return None
            w = np.broadcast_to(w if w is not None else np.ones(m.size), (m.size,)).reshape(m.shape)[rows].reshape(-1)
            m, coef = m.rows(rows), coef * factor  # (w flat, as linear_part reads a term's weights)
        elif m.reads_data():  # (data read across the samples, y @ z: no row of it is proved)
            return None
        pieces.append((coef, w, m))
    lin, const = linear_part(pieces, d.layout, d.tree_const)
    return lin, float(const)


def adopt(lp: LoweredData, data: LeanData) -> None:
    """``data`` (:func:`on_rows`' kernel problem of ``lp``'s model, already solved on) serves ``lp``'s
    design from now on, instead of one built from it at its first solve: a fold whose path leaves
    the kernel continues on the same problem, whose state (the Gram rows read so far) its answers'
    last bits may depend on."""
    if lp.design is not None and lp.set is not None:
        data.owner = weakref.ref(lp.design)
        family(lp)[lp.set.layout_key()] = data


def _rewrite(lp: LoweredData, data: LeanData, a: dict[str, Any] | None = None) -> bool:
    """``lp``'s numbers written into ``data``'s kernel problem in place (the same arrays, no
    allocation; ``a``: its arrays when already made), which then serves ``lp``'s design; its Gram
    rows and start forgotten. False where they do not fit (another loss or form)."""
    a = _arrays(lp, into=data) if a is None else a  # (its J and J * J written in place)
    if a is None or a["quad"] != data.quadratic or a["code"] != data.P.code:
        data.owner = None  # (its J may hold part of these numbers now: no design's)
        return False
    for name in ARRAYS:
        target = data.views[name]
        if target is not a[name]:
            np.copyto(target, a[name])
    data.P.const = a["const"]
    clear(data)
    data.owner = weakref.ref(lp.design)
    return True


def family(lp: LoweredData) -> dict[Any, Any]:
    """The kernel problems of ``lp``'s design (per set layout; empty until a solve builds one): the
    dict a rebinding's family shares (lowering/rebind.py)."""
    if lp.design is None:
        return {}
    per = _CACHE.get(lp.design)
    if per is None:
        per = _CACHE[lp.design] = {}
    return per


def move(old: LoweredData, new: LoweredData, shared: dict[Any, Any] | None = None) -> None:
    """Rebinding (lowering/rebind.py): the kernel problems of ``old``'s design take ``new``'s numbers
    in place (the same arrays, no allocation) and serve ``new``'s design too; its Gram rows and start
    are forgotten. ``old``'s design keeps them: solved again, its own numbers are written back
    (:func:`lean_data`), so a model rebound from one lowering again and again, or solved between
    its rebindings, never builds a kernel problem again. ``shared``: the kernel problems of the
    rebinding's family (every lowering rebound from one tree, :func:`family`), which ``new`` joins
    (a problem built for any of them serves all; :func:`lean_data` writes a member's numbers back
    when another's are in it), unless one of them does not take ``new``'s numbers."""
    per = _CACHE.get(old.design) if old.design is not None else None
    if not per:
        per = shared
    if new.design is None:
        return
    if not per:  # (nothing built yet: the first solve of the family builds into the shared dict)
        if shared is not None:
            _CACHE[new.design] = shared
        return
    first = next((v for v in per.values() if v is not None), None)
    a = _arrays(new, into=first) if first is not None else None
    kept = {key: data for key, data in per.items() if data is not None and a is not None and _rewrite(new, data, a)}
    if shared is not None and per is shared and len(kept) == sum(v is not None for v in per.values()):
        _CACHE[new.design] = (
            shared  # (every problem took the numbers: the family's dict, entries outside the class kept)
        )
    elif kept:
        _CACHE[new.design] = kept


def lean_start(lp: LoweredData, data: LeanData) -> np.ndarray:
    """The start of GraHTP and of the screening start (``solvers.base.initial_point``: zero, or the
    free coordinates moved into the loss's domain), computed once per design. Zero is tried by the
    kernel's own evaluation (the lean class's set admits it); only outside the loss's domain (a
    Gamma model's -log at zero) does the general search move the free coordinates."""
    if data.start is None:
        zero = lp.zeros()
        if np.isfinite(kernels().value_and_grad(data.P, zero)[0]):
            data.start = zero
        else:
            data.start = np.asarray(lp.feasible_start(lp.inside_domain()), dtype=float)
    return data.start


def free_fit(lp: LoweredData) -> tuple[np.ndarray, float] | None:
    """The answer at a budget of 0 by the kernel's restricted solve (the free coordinates fitted,
    every constrained one at 0; the general path's ``restricted_minimize`` of the empty support,
    to the same tolerance): (x, f), or None outside the lean class or where the kernel leaves the
    case to the general path."""
    data = lean_data(lp)
    if data is None:
        return None
    x, f, ok = kernels().free_fit(data.P, lean_start(lp, data))
    if not ok or not np.isfinite(f):
        return None
    return x, float(f)


def clear(data: LeanData) -> None:
    """Forget what was derived from the data (the Gram rows, the softmax's columns by class, the
    start): after a rebind."""
    np.asarray(data.P.have)[:] = 0
    data.P.forget()
    data.start = None
