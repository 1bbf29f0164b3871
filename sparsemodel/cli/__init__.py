"""Command line: ``sparsemodel demo | check | solve | compare | path | select | knockoffs | stability | solvers``.

Every error a user can cause is printed as one paragraph (what, where, what was expected) on
stderr with exit status 2; no traceback reaches the terminal (set SPARSEMODEL_DEBUG=1 to see one
for an internal error). Output files are never written over the model, its data, or any existing
file unless --force is given.

This module builds the argument parser and runs a command with the error handling above; the
commands are in :mod:`sparsemodel.cli.commands`, the reading of their arguments in
:mod:`sparsemodel.cli.args`."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from typing import Any

from ..errors import ModelError
from ..outputs import write_error
from .args import EXIT_USER, CLIError, parse_jobs
from .commands import (
    cmd_check,
    cmd_compare,
    cmd_demo,
    cmd_knockoffs,
    cmd_path,
    cmd_select,
    cmd_solve,
    cmd_solvers,
    cmd_stability,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sparsemodel",
        description="Sparsity-, rank- and spectrum-constrained learning: model files, l0 solvers, convex baselines.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command(sub)
    return p


def _model_args(q: argparse.ArgumentParser) -> None:
    q.add_argument("model", help="model file (.sm), or a Python model module (.py) defining problem")
    q.add_argument("--data", action="append", metavar="NAME=PATH", help="rebind a data name to another file")
    q.add_argument("--param", action="append", metavar="NAME=VALUE", help="set a param")
    q.add_argument(
        "--scheduler",
        metavar="WHERE",
        help="where passes over dask data run: threads (default), synchronous, local (an embedded "
        "LocalCluster) or a scheduler address such as tcp://host:8786",
    )


def _jobs_arg(q: argparse.ArgumentParser, what: str) -> None:
    """--jobs N: a study's independent tasks on workers (sparsemodel.workflows.runner)."""
    q.add_argument(
        "--jobs",
        type=parse_jobs,
        default=1,
        metavar="N",
        help=f"run {what} on N worker processes (joblib; -1: one per core; default 1: serially), the same "
        "results as serially; with --scheduler ADDRESS (or local) on that dask cluster's workers",
    )


def _metric_args(q: argparse.ArgumentParser) -> None:
    """--test and --truth: metrics beside the objective (docs/comparisons.md)."""
    q.add_argument(
        "--test",
        action="append",
        metavar="NAME=FILE,...",
        help="held-out data for the model's data names (X=Xt.npy,y=yt.npy): adds test_loss, the model's own "
        "loss per held-out sample",
    )
    q.add_argument(
        "--truth",
        action="append",
        metavar="NAME=FILE",
        help="the true value of a variable (w=w_true.npy): adds precision, recall, f1, exact, exact_top, covers, "
        "fp, fn, fdr, power and error",
    )


def _output_args(q: argparse.ArgumentParser, what: str, table: bool = True) -> None:
    """The outputs every command that solves takes, with one meaning everywhere."""
    q.add_argument("--json", action="store_true", help=f"print the {what} as one JSON object instead of the text")
    q.add_argument("--out", metavar="FILE", help=f"also write the {what} as JSON to FILE")
    if table:
        q.add_argument("--csv", metavar="FILE", help=f"write the {what} as CSV (with the supports)")
        q.add_argument(
            "--plot",
            metavar="[METRICS=]FILE",
            help=f"write the {what} as a PNG plot; test_loss,time_s=FILE plots those metrics (one panel each)",
        )
    q.add_argument("--force", action="store_true", help="allow outputs to replace existing files")
    loud = q.add_mutually_exclusive_group()
    loud.add_argument("--quiet", action="store_true", help="no progress bar")
    loud.add_argument(
        "--progress", action="store_true", help="a progress bar even when standard error is not a terminal"
    )


def _report_args(q: argparse.ArgumentParser, what: str, k_required: bool = True) -> None:
    _metric_args(q)
    q.add_argument(
        "--k",
        required=k_required,
        help="values of the bound, in its unit: 1:40 (inclusive), 1:40:2 or 1,2,5 (several bounds by name: S=10:50:10)"
        + ("" if k_required else " (default 0 to n / (log(log n) log p))"),
    )
    q.add_argument("--solver", help="solver name, or auto (default: the model's `solve with`, else auto)")
    q.add_argument("--option", "-o", action="append", metavar="KEY=VALUE", help="solver option, repeatable")
    _output_args(q, what)


def _inference_args(q: argparse.ArgumentParser, what: str) -> None:
    """What knockoffs and stability share (docs/inference.md)."""
    q.add_argument("--solver", help="solver of the l0 fits (default: the model's `solve with`, else auto)")
    q.add_argument("--option", "-o", action="append", metavar="KEY=VALUE", help="solver option, repeatable")
    q.add_argument(
        "--start",
        choices=("warm", "best", "cold"),
        default="warm",
        help="how the path's points start (default warm: from the previous k's solution)",
    )
    q.add_argument("--seed", type=int, default=0, help="random seed (default 0): the same seed, the same answer")
    _jobs_arg(q, "the replicates (knockoff draws, stability's half-samples)")
    q.add_argument(
        "--truth",
        action="append",
        metavar="NAME=FILE",
        help="the true value of the selected variable (w=w_true.npy): adds the false discoveries and the power",
    )
    _output_args(q, what)


def _demo_parser(sub: Any) -> None:
    d = sub.add_parser("demo", help="solve the paper-000 Section 6.1 problem with GraHTP and FGraHTP")
    d.add_argument("--n", type=int, default=250, help="number of samples (default 250)")
    d.add_argument("--seed", type=int, default=0, help="random seed of the simulated data")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(func=cmd_demo)


def _check_parser(sub: Any) -> None:
    c = sub.add_parser("check", help="parse, shapes, convexity, and which solvers apply")
    _model_args(c)
    c.set_defaults(func=cmd_check)


def _solve_parser(sub: Any) -> None:
    s = sub.add_parser("solve", help="solve a model file")
    _model_args(s)
    s.add_argument("--solver", help="solver name, or auto (default: the model's `solve with`, else auto)")
    s.add_argument("--option", "-o", action="append", metavar="KEY=VALUE", help="solver option, repeatable")
    s.add_argument(
        "--k",
        help="override the bound of the sparsity or rank constraint, in its unit (coordinates, groups, edges, rank); "
        "several bounds by name: --k L=2,S=30",
    )
    s.add_argument(
        "--bound",
        default="fast",
        metavar="MODE",
        help="the lower bound beside the answer (docs/certify.md): fast (default: one dual point), tight (Frank-Wolfe "
        "steps on the perspective relaxation) or none; --solver bnb proves optimality",
    )
    _output_args(s, "result", table=False)
    s.add_argument("--csv", metavar="FILE", help="write the coefficient table (every coordinate, by name) as CSV")
    s.set_defaults(func=cmd_solve, plot=None)


def _compare_parser(sub: Any) -> None:
    m = sub.add_parser("compare", help="run several solvers on one model, optionally over a range of k")
    _model_args(m)
    m.add_argument(
        "--solvers",
        help="comma-separated solver names (default: the model's `compare with`); knockoffs and stability choose "
        "their own units (-o knockoffs:fdr=0.2), with --truth their fdr and power",
    )
    m.add_argument(
        "--k",
        help="values of the bound, in its unit: 20, 5:50:5 (inclusive) or 1,2,5 (sparsity k or rank r); several bounds "
        "by name: S=10:50:10 or S=10,20,L=1,2 (every combination)",
    )
    m.add_argument("--at", metavar="NAME=VALUES", help="sweep a param instead: lam=0.001,0.01,0.1 or lam=1:3")
    m.add_argument("--option", "-o", action="append", metavar="SOLVER:KEY=VALUE", help="solver option, repeatable")
    _metric_args(m)
    m.add_argument(
        "--splits",
        type=int,
        metavar="N",
        help="replications: N random train/test splits of the model's rows (stratified for logistic and softmax "
        "labels); the table gives means and standard errors",
    )
    m.add_argument(
        "--test-size", type=float, metavar="SHARE", help="the share of rows held out by --splits (default 0.3)"
    )
    m.add_argument(
        "--seed", type=int, default=0, help="seed of the random splits (and of --select cv's folds; default 0)"
    )
    m.add_argument(
        "--select",
        choices=("cv", "ebic", "aic", "bic", "ebic_cc", "gic"),
        help="each method at the k it chooses by this criterion (per replication; lasso, nuclear and glasso choose "
        "their penalty by it too); --k gives the candidates",
    )
    m.add_argument(
        "--paired",
        metavar="SOLVER",
        help="with replications, the paired differences (each method - SOLVER on the same split) are against this "
        "method (default: the first one listed)",
    )
    m.add_argument("--folds", type=int, help="folds of --select cv (default 5)")
    m.add_argument(
        "--no-early-stop",
        dest="early_stop",
        action="store_false",
        help="--select computes every k of --k (default: each path stops once its curve has clearly turned)",
    )
    _jobs_arg(m, "the replications of --splits (or of --select)")
    _output_args(m, "comparison (every run's solution)")
    m.set_defaults(func=cmd_compare)


def _path_parser(sub: Any) -> None:
    pa = sub.add_parser("path", help="a warm-started path over the bound k with one solver")
    _model_args(pa)
    _report_args(pa, "path")
    pa.add_argument(
        "--start",
        choices=("best", "cold", "warm"),
        default="best",
        help="best: cold and warm solve, keep the lower objective (default); cold: = single solves; warm: fastest",
    )
    pa.set_defaults(func=cmd_path)


def _select_parser(sub: Any) -> None:
    se = sub.add_parser("select", help="choose k: an information criterion or cross-validation over a path")
    _model_args(se)
    _report_args(se, "curve", k_required=False)
    se.add_argument(
        "--by",
        choices=("ebic", "aic", "bic", "ebic_cc", "gic", "cv"),
        help="how to choose (default ebic; cv when --folds or --fold-ids is given)",
    )
    se.add_argument("--folds", type=int, help="number of folds of cross-validation (default 5; implies --by cv)")
    se.add_argument("--seed", type=int, default=0, help="seed of the random folds (default 0)")
    se.add_argument(
        "--fold-ids",
        metavar="FILE",
        help="a vector file with one fold label per sample (instead of --folds; implies --by cv)",
    )
    se.add_argument(
        "--rule",
        choices=("min", "1se", "1se_paired"),
        help="cross-validation: 1se_paired (default): the smallest k whose mean held-out loss is within one "
        "standard error of the paired (fold by fold) difference from the minimum; min: the lowest mean; 1se: "
        "within one se of the minimum's mean (Breiman)",
    )
    se.add_argument("--gamma", type=float, default=1.0, help="the EBIC constant gamma (default 1)")
    se.add_argument(
        "--start",
        choices=("best", "cold", "warm"),
        default="warm",
        help="how path points are started (default warm: from the previous k's solution)",
    )
    se.add_argument(
        "--no-early-stop",
        dest="early_stop",
        action="store_false",
        help="compute every k (default: stop once the curve has clearly turned)",
    )
    _jobs_arg(se, "cross-validation's folds (--by cv)")
    se.add_argument("--patience", type=int, help="early stop: consecutive k above the minimum + margin (default 5)")
    se.add_argument(
        "--margin",
        type=float,
        help="early stop: criterion units (default 10), or standard errors for cv (default 0)",
    )
    se.set_defaults(func=cmd_select)


def _knockoffs_parser(sub: Any) -> None:
    ko = sub.add_parser("knockoffs", help="the knockoff filter: variables selected with the FDR controlled")
    _model_args(ko)
    ko.add_argument("--fdr", type=float, default=0.1, help="the target false discovery rate q (default 0.1)")
    ko.add_argument(
        "--statistic",
        choices=("path", "support", "coef"),
        default="path",
        help="path: the coefficient difference summed over the l0 path k = 1..K (default); support: how many of "
        "the path's best supports hold each variable against its knockoff; coef: the coefficient difference at k",
    )
    ko.add_argument(
        "--k",
        type=int,
        help="the path's largest k (path, support) or the bound (coef), over the 2p units (default: the model's bound)",
    )
    ko.add_argument(
        "--method",
        choices=("mvr", "maxent", "sdp", "equi"),
        default="mvr",
        help="the knockoff construction (default mvr)",
    )
    ko.add_argument(
        "--fixed-x", action="store_true", help="fixed-X knockoffs (least squares, n >= 2p + 1) instead of model-X"
    )
    ko.add_argument(
        "--draws", type=int, default=1, help="knockoff copies; more than 1 derandomizes with e-values (default 1)"
    )
    ko.add_argument(
        "--knockoffs",
        action="append",
        metavar="FILE",
        help="your own knockoff copy of the design (n x p, one column per constrained unit), repeatable",
    )
    _inference_args(ko, "knockoff report (one row per unit)")
    ko.set_defaults(func=cmd_knockoffs)


def _stability_parser(sub: Any) -> None:
    st = sub.add_parser("stability", help="stability selection: complementary pairs and a bound on false selections")
    _model_args(st)
    st.add_argument("--k", help="the path's bounds: K (1..K), 1:20 or 1,2,5 (default 1..the model's bound)")
    st.add_argument(
        "--pairs", dest="n_pairs", type=int, default=50, help="complementary pairs of halves B (default 50)"
    )
    st.add_argument(
        "--threshold", type=float, default=0.6, help="selection probability a unit needs (default 0.6, above 0.5)"
    )
    st.add_argument("--at-k", type=int, help="select at this k instead of over the whole path")
    _inference_args(st, "stability report (one row per unit)")
    st.set_defaults(func=cmd_stability)


def _solvers_parser(sub: Any) -> None:
    v = sub.add_parser("solvers", help="the solver registry: names, constraint kinds, options")
    v.add_argument("--json", action="store_true", help="print the registry as JSON")
    v.add_argument("-v", "--verbose", action="store_true", help="list every option")
    v.set_defaults(func=cmd_solvers)


# one function per command, each adding its subparser (in the order `sparsemodel --help` lists them)
COMMANDS = (
    _demo_parser,
    _check_parser,
    _solve_parser,
    _compare_parser,
    _path_parser,
    _select_parser,
    _knockoffs_parser,
    _stability_parser,
    _solvers_parser,
)


def _show_warning(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
    """Warnings as one line without internal source paths (each message once)."""
    text = f"warning: {message}"
    if text not in _SHOWN:
        _SHOWN.add(text)
        print(text, file=sys.stderr)


_SHOWN: set[str] = set()


def main(argv: list[str] | None = None) -> int:
    import warnings

    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    old = _json_with_a_file(argv)
    if old is not None:
        print(old.render(), file=sys.stderr)
        return EXIT_USER
    args = parser.parse_args(argv)
    saved = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("once")
            warnings.showwarning = _show_warning
            from ..workflows.scheduler import use_scheduler

            jobs = getattr(args, "jobs", 1)
            local = None if jobs == 1 else (os.cpu_count() or 1) if jobs == -1 else jobs
            # loading reads dask data too; `--scheduler local --jobs N`: N worker processes
            with use_scheduler(getattr(args, "scheduler", None), workers=local):
                code = int(args.func(args) or 0)
            sys.stdout.flush()  # a closed pipe or a full disk shows here, not at interpreter exit
            return code
    except ModelError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_USER
    except BrokenPipeError:  # `sparsemodel solve m.sm --json | head`: stop quietly, as Unix tools do
        _silence_stdout()
        return 141
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as exc:
        if exc.errno not in WRITE_ERRNOS:
            return _internal_error(exc)
        # standard output could not be written (`sparsemodel solve m.sm > /dev/full`): say so
        _silence_stdout()
        print(write_error("standard output", exc).render(), file=sys.stderr)
        return EXIT_USER
    except Exception as exc:  # a bug in sparsemodel: one line, the traceback only on request
        if os.environ.get("SPARSEMODEL_DEBUG"):
            raise
        return _internal_error(exc)
    finally:
        warnings.showwarning = saved


def _json_with_a_file(argv: list[str]) -> CLIError | None:
    """``--json t.json`` (what compare, path and select took before): --json is a flag on every
    command, the file is --out."""
    for i, a in enumerate(argv):
        name = (
            a.split("=", 1)[1]
            if a.startswith("--json=")
            else (argv[i + 1] if a == "--json" and i + 1 < len(argv) else "")
        )
        if name and not name.startswith("-") and (a.startswith("--json=") or name.lower().endswith(".json")):
            return CLIError(
                f"--json {name}: --json takes no file name; on every command it prints the JSON on standard output",
                hint=f"write the JSON to a file with --out {name}",
            )
    return None


WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO)


def _silence_stdout() -> None:
    """Nothing more goes to a standard output that cannot be written (a closed pipe, a full disk):
    the process's descriptor is pointed at /dev/null so that the interpreter's exit does not fail
    on the unwritten buffer again."""
    real = sys.stdout is sys.__stdout__
    try:
        if real:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - replaces the broken stream until exit
    except (OSError, ValueError):
        pass


def _internal_error(exc: BaseException) -> int:
    if os.environ.get("SPARSEMODEL_DEBUG"):
        raise exc
    cause = str(exc).splitlines()[0] if str(exc) else ""
    print(
        f"internal error (a bug in sparsemodel, not in your model): {type(exc).__name__}: {cause}\n"
        "rerun with SPARSEMODEL_DEBUG=1 to see the traceback, and please report it",
        file=sys.stderr,
    )
    return 1
