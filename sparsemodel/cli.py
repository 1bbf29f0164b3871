"""Command line: ``sparsemodel demo | check | solve | compare | path | select | solvers``.

Every error a user can cause is printed as one paragraph (what, where, what was expected) on
stderr with exit status 2; no traceback reaches the terminal (set SPARSEMODEL_DEBUG=1 to see one
for an internal error). Output files are never written over the model, its data, or any existing
file unless --force is given.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
from pathlib import Path
from typing import Any

from .errors import ModelError
from .outputs import check_output, distinct, protected_paths, write_error, write_output
from .util import jsonable, parse_named_values, parse_values

EXIT_USER = 2


class CLIError(ModelError):
    kind = "error"


def parse_value(text: str) -> Any:
    """Command-line option values: integers, floats, true/false, none, else the string."""
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_pairs(pairs: list[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in pairs or []:
        if "=" not in item:
            raise CLIError(f"{what} {item!r} is not of the form NAME=VALUE", hint=f"for example --{what} name=value")
        name, value = item.split("=", 1)
        if not name.strip():
            raise CLIError(f"{what} {item!r} has an empty name")
        out[name.strip()] = value.strip()
    return out


K_BY_NAME = (
    "several bounds are given by name: --k L=2,S=30 (solve), --k S=10:50:10 or --k S=10,20,L=1,2 "
    "(compare, path: every combination of the values)"
)


def parse_named_k(text: str) -> list[dict[str, int]]:
    """``S=10,L=2`` -> [{"S": 10, "L": 2}]; ``S=10:30:10,L=1,2`` -> every combination, in order."""
    import itertools

    try:
        named = parse_named_values(text)
        if not all(isinstance(v, int) for vals in named.values() for v in vals):
            raise ValueError(text)
    except ValueError:
        raise CLIError(f"--k {text!r} is not a list of bounds by name", hint=K_BY_NAME) from None
    return [dict(zip(named, combo)) for combo in itertools.product(*named.values())]


def parse_bound(text: str | None) -> Any:
    """The --k of solve: one integer, or one bound per name (``L=2,S=30``)."""
    if text is None:
        return None
    if "=" in text:
        ks = parse_named_k(text)
        if len(ks) != 1:
            raise CLIError(f"--k {text!r} gives a bound several values; solve takes one per name", hint=K_BY_NAME)
        return ks[0]
    try:
        return int(text)
    except ValueError:
        raise CLIError(
            f"--k {text!r} is not a bound", hint="an integer in the bound's unit, e.g. --k 20; " + K_BY_NAME
        ) from None


def parse_k_range(text: str) -> list[Any]:
    """``20`` or ``5:50:5`` (stop inclusive) or ``1,2,5``; several bounds by name: ``S=10:50:10``."""
    if "=" in text:
        return parse_named_k(text)
    try:
        vals = parse_values(text)
        if not all(isinstance(v, int) for v in vals):
            raise ValueError(text)
        return vals
    except ValueError:
        raise CLIError(
            f"--k {text!r} is not a bound or a range of bounds", hint="use --k 20, --k 5:50:5 or --k 1,2,5"
        ) from None


def parse_at(text: str) -> tuple[str, list[float]]:
    """``NAME=VALUES``: ``lam=0.001,0.01,0.1`` or ``k=5:50:5`` (stop inclusive)."""
    if "=" not in text:
        raise CLIError(f"--at {text!r} is not of the form NAME=VALUES", hint="for example --at lam=0.001,0.01,0.1")
    name, vals = (t.strip() for t in text.split("=", 1))
    if not name:
        raise CLIError(f"--at {text!r} has an empty name")
    try:
        return name, parse_values(vals)
    except ValueError:
        raise CLIError(
            f"--at {text!r}: the values are not numbers or a range", hint="use --at lam=0.001,0.01,0.1 or --at k=5:50:5"
        ) from None


def load_python_model(path: Path):
    """A Python model module: a .py file that builds ``problem`` (a ``sm.Problem``) with the Python
    builder -- what a model that needs Python (``sm.custom_loss``) runs from the command line as.
    The module runs as a script; its exceptions become one located message."""
    import runpy
    import traceback

    from .model.problem import Model
    from .problem import Problem

    if not path.exists():
        raise CLIError(f"the model module {path} does not exist", hint=f"looked for {path.resolve()}")
    try:
        env = runpy.run_path(str(path), run_name="__sparsemodel_model__")
    except ModelError:
        raise
    except SystemExit as exc:
        raise CLIError(f"the model module {path} exited ({exc.code}) before defining problem") from None
    except BaseException as exc:  # the user's code: say where it failed, with no traceback
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).resolve() == path.resolve()]
        where = f" at line {frames[-1].lineno}" if frames else ""
        raise CLIError(
            f"running the model module {path} failed{where}: {type(exc).__name__}: {exc}",
            hint="run it with python to see the traceback",
        ) from None
    problem = env.get("problem")
    if not isinstance(problem, Model):
        raise CLIError(
            f"the model module {path} defines no problem",
            hint="end it with problem = sm.Problem(sm.minimize(...), [constraints])",
        )
    problem = Problem.of(problem)
    problem.source = str(path)
    return problem


def named_files(items: list[str] | None, flag: str) -> dict[str, tuple[str, str]]:
    """``--test X=Xt.npy,y=yt.npy`` (repeatable): {name: (file, the argument as written)}."""
    out: dict[str, tuple[str, str]] = {}
    for item in items or []:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            if "=" not in part:
                raise CLIError(
                    f"{flag} {part!r} is not of the form NAME=FILE",
                    hint=f"for example {flag} X=Xt.npy,y=yt.npy"
                    if flag == "--test"
                    else f"for example {flag} w=w_true.npy",
                )
            name, path = (t.strip() for t in part.split("=", 1))
            if not name or not path:
                raise CLIError(f"{flag} {part!r} has an empty name or file")
            if name in out:
                raise CLIError(f"{flag} gives {name} twice")
            out[name] = (path, f"{flag} {name}={path}")
    return out


def held_out(args: argparse.Namespace) -> Any:
    """--test: the held-out data files by data name (read by the model's own data lines)."""
    from .workflows.metrics import Given

    files = named_files(getattr(args, "test", None), "--test")
    if not files:
        return None
    return Given({n: f for n, (f, _) in files.items()}, {n: w for n, (_, w) in files.items()})


def truth_values(args: argparse.Namespace, problem: Any) -> Any:
    """--truth: the true values by variable name, read as a vector or matrix like the variable."""
    from .io import read_data
    from .workflows.metrics import Given, MetricError

    files = named_files(getattr(args, "truth", None), "--truth")
    if not files:
        return None
    variables = {v.name: v for v in problem.variables}
    values = {}
    for name, (path, written) in files.items():
        if name not in variables:
            raise MetricError(
                f"{written}: the model has no variable named {name!r}", hint=f"its variables: {', '.join(variables)}"
            )
        kind = "matrix" if len(variables[name].shape) == 2 else "vector"
        values[name] = read_data(path, kind, base_dir=Path.cwd(), name=f"the truth of {name}")
    return Given(values, {n: w for n, (_, w) in files.items()})


def plot_spec(args: argparse.Namespace) -> None:
    """``--plot test_loss,time_s=FILE`` (the metrics to plot, then the file) or ``--plot FILE``:
    splits args.plot into the file and args.plot_metrics."""
    import re

    args.plot_metrics = None
    text = getattr(args, "plot", None)
    if text and "=" in text:
        left, right = text.split("=", 1)
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\s*,\s*[A-Za-z_][A-Za-z0-9_]*)*", left.strip()):
            if not right.strip():
                raise CLIError(f"--plot {text!r} names no file", hint="for example --plot test_loss,time_s=t.png")
            args.plot_metrics, args.plot = left, right.strip()


def check_metrics(args: argparse.Namespace, available: list[str]) -> None:
    """The metrics of --plot, checked before anything runs."""
    from .workflows.metrics import metric_names

    if args.plot_metrics:
        metric_names(args.plot_metrics, available)


def metrics_of(test: bool, truth: bool, extra: tuple[str, ...] = ()) -> list[str]:
    from .workflows.metrics import TRUTH_METRICS

    return [
        *extra,
        "objective",
        "nnz",
        "df",
        "time_s",
        "iterations",
        *(["test_loss"] if test else []),
        *(TRUTH_METRICS if truth else ()),
    ]


def load_problem(args: argparse.Namespace):
    from .grammar import load

    path = Path(args.model)
    if path.suffix == ".py":
        if args.data or args.param:
            raise CLIError(
                "--data and --param rebind a model file's data and params; a Python model module builds its own",
                hint="change the data or the values in the module",
            )
        return load_python_model(path)
    data = parse_pairs(args.data, "data")
    params = {k: parse_value(v) for k, v in parse_pairs(args.param, "param").items()}
    for k, v in params.items():
        if not isinstance(v, (int, float)):
            raise CLIError(f"--param {k}={v!r}: a param value must be a number")
    return load(str(path), data=data or None, params=params or None)


# ------------------------------------------------------------------ commands


def cmd_solvers(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from .solvers import REGISTRY

    if args.json:
        out = {
            name: {
                "handles": cls.kinds(),
                "summary": cls.summary,
                "reference": cls.reference,
                "convex_relaxation": cls.convex_relaxation,
                "options": {k: {"default": jsonable(o.default), "help": o.help} for k, o in cls.options.items()},
            }
            for name, cls in REGISTRY.items()
        }
        print(json.dumps(out, indent=2))
        return 0
    import textwrap

    rows = [(n, ", ".join(c.kinds()), c.summary, c.reference) for n, c in REGISTRY.items()]
    print(tabulate(rows, headers=["solver", "constraints", "what it does", "reference"], maxcolwidths=[8, 16, 38, 26]))
    if args.verbose:
        for n, c in REGISTRY.items():
            print(f"\n{n} options:")
            for k, o in c.options.items():
                head = f"  {k:<14} default {jsonable(o.default)!s:<10} "
                lines = textwrap.wrap(o.help, width=max(40, 100 - len(head)))
                print(head + (lines[0] if lines else ""))
                for line in lines[1:]:
                    print(" " * len(head) + line)
    else:
        print("\n(sparsemodel solvers -v lists every option with its default)")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    problem = load_problem(args)
    report = problem.check()
    print(report.render())
    return 0 if report.ok else EXIT_USER


def solver_and_options(args: argparse.Namespace, problem: Any) -> tuple[str | None, dict[str, Any]]:
    opts = {k: parse_value(v) for k, v in parse_pairs(args.option, "option").items()}
    name = args.solver
    if problem.solve_with is not None:
        sw_name, sw_opts, _ = problem.solve_with
        if name is None or name == sw_name:
            return sw_name, {**sw_opts, **opts}
    return name, opts


def progress_of(args: argparse.Namespace) -> bool | None:
    """--progress: always; --quiet: never; neither: on a terminal (or in a notebook) only."""
    if getattr(args, "progress", False):
        return True
    if getattr(args, "quiet", False):
        return False
    return None


def output_files(args: argparse.Namespace, problem: Any) -> dict[str, Path]:
    """--out (JSON), --csv and --plot, checked before anything runs: never an input of the model,
    never an existing file without --force, never two outputs to one file."""
    protected = protected_paths(problem)
    given = {"json": getattr(args, "out", None), "csv": getattr(args, "csv", None), "plot": getattr(args, "plot", None)}
    flags = {"json": "--out", "csv": "--csv", "plot": "--plot"}
    distinct({flags[k]: p for k, p in given.items()})
    return {k: check_output(p, protected, args.force, "--force") for k, p in given.items() if p is not None}


def announce(args: argparse.Namespace, kind: str, path: Path) -> None:
    """`wrote csv: t.csv`, on stdout, or on stderr when stdout carries --json."""
    print(f"wrote {kind}: {path}", file=sys.stderr if args.json else sys.stdout)


def cmd_solve(args: argparse.Namespace) -> int:
    problem = load_problem(args)
    outs = output_files(args, problem)
    name, opts = solver_and_options(args, problem)
    result = problem.solve(name or "auto", k=parse_bound(args.k), progress=progress_of(args), **opts)
    payload = result.to_dict()
    payload["model"] = str(args.model)
    text = json.dumps(payload, indent=None if args.json else 2, allow_nan=False)
    protected = protected_paths(problem)
    if "json" in outs:  # checked again now: a file created meanwhile is not replaced
        write_output(outs["json"], text + "\n", protected, args.force, "--force")
    if "csv" in outs:
        write_output(outs["csv"], coefficients_csv(result), protected, args.force, "--force")
    if args.json:
        print(text)
    else:
        print(result.summary())
    for kind, path in outs.items():
        announce(args, kind, path)
    if result.status in ("unbounded", "diverged"):
        print(f"the solve ended {result.status}: {result.message}", file=sys.stderr)
        return EXIT_USER
    return 0


def coefficients_csv(result: Any) -> str:
    """The coefficient table of a result (every coordinate of every variable): variable, name,
    position and value, one row each."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["variable", "name", "position", "value"])
    for r in result.coefficients(all=True):
        w.writerow([r["variable"], r["name"], " ".join(map(str, r["position"])), repr(r["value"])])
    return buf.getvalue()


def cmd_compare(args: argparse.Namespace) -> int:
    problem = load_problem(args)
    plot_spec(args)
    outs = output_files(args, problem)
    test = held_out(args)
    truth = truth_values(args, problem)
    cw = problem.compare_with or {}
    solvers = [s.strip() for s in args.solvers.split(",")] if args.solvers else cw.get("solvers")
    if not solvers:
        raise CLIError(
            "no solvers to compare", hint="give --solvers grahtp,omp,... or add `compare with ...` to the model"
        )
    ks = parse_k_range(args.k) if args.k else None
    sweep = None
    if args.at:
        if args.k:
            raise CLIError("give either --k (the bound) or --at (a param), not both")
        sweep = parse_at(args.at)
    elif not args.k and cw.get("sweep"):
        sweep = (cw["sweep"], cw["values"])
    options = {}
    for item in args.option or []:
        if ":" not in item.split("=", 1)[0]:
            raise CLIError(
                f"--option {item!r} needs a solver prefix in compare", hint="for example --option grahtp:eta=0.5"
            )
        solver, rest = item.split(":", 1)
        options.setdefault(solver, {}).update({k: parse_value(v) for k, v in parse_pairs([rest], "option").items()})
    if args.splits is not None or args.select is not None:
        from .workflows.compare import BOUND_NAMES, find_param

        if sweep is not None and not args.at and sweep[0] in BOUND_NAMES and find_param(problem, sweep[0]) is None:
            sweep, ks = None, [int(v) for v in sweep[1]]  # the model's `compare ... at k in 2:20:2`: the bound
        if sweep is not None:
            raise CLIError(
                "--splits and --select compare over the bound k; --at (or the model's `compare ... at`) sweeps a param",
                hint="give --k instead of --at",
            )
        return run_study(args, problem, solvers, ks, options, outs, test, truth)
    if not args.early_stop:
        raise CLIError("--no-early-stop is an option of --select", hint="add --select ebic (or cv, bic, ...)")
    if args.test_size is not None or args.folds is not None:
        raise CLIError(
            f"{'--test-size' if args.test_size is not None else '--folds'} needs "
            f"{'--splits' if args.test_size is not None else '--select cv'}"
        )
    check_metrics(args, metrics_of(test is not None, truth is not None))
    interrupted = False
    try:  # the CSV is written row by row as runs finish
        comp = problem.compare(
            solvers,
            k=ks,
            options=options,
            progress=progress_of(args),
            sweep=sweep,
            csv=outs.get("csv"),
            overwrite=args.force,
            test=test,
            truth=truth,
        )
    except KeyboardInterrupt as exc:
        comp = getattr(exc, "comparison", None)
        if comp is None:
            raise
        interrupted = True
    if args.json:
        print(json.dumps(comp.to_dict(), allow_nan=False))
    else:
        print(comp.table())
    if "json" in outs:
        comp.to_json(outs["json"], overwrite=args.force)
    if "plot" in outs:
        comp.plot(outs["plot"], overwrite=args.force, metrics=args.plot_metrics)
    for kind, p in outs.items():
        announce(args, kind, p)
    if interrupted:
        print(
            f"interrupted after {len(comp.rows)} of {comp.total} runs; the finished ones are above and in the files",
            file=sys.stderr,
        )
        return 130
    failed = comp.failed()
    if failed:  # a solver refused its cell (an option, a constraint, a k it cannot reach): said, not a bug
        print(f"{len(failed)} of {len(comp.rows)} runs failed; their messages are in the table", file=sys.stderr)
        return EXIT_USER
    return 0


def run_study(
    args: argparse.Namespace,
    problem: Any,
    solvers: list[str],
    ks: list[int] | None,
    options: dict[str, dict[str, Any]],
    outs: dict[str, Path],
    test: Any,
    truth: Any,
) -> int:
    """compare --splits / --select: replications, each method over k or at its chosen k."""
    from .workflows.experiment import experiment

    if args.folds is not None and args.select != "cv":
        raise CLIError("--folds sets the folds of --select cv", hint="add --select cv, or drop --folds")
    held = test is not None or args.splits is not None
    check_metrics(
        args,
        metrics_of(held, truth is not None, ("k", "penalty") if args.select else ()) + ["lower_s"],
    )
    select_options: dict[str, Any] = {}
    if args.select == "cv":
        select_options = {"folds": args.folds or 5, "seed": args.seed}
    if not args.early_stop:
        if args.select is None:
            raise CLIError("--no-early-stop is an option of --select", hint="add --select ebic (or cv, bic, ...)")
        select_options["early_stop"] = False
    interrupted = False
    try:
        study = experiment(
            problem,
            solvers,
            k=ks,
            splits=args.splits,
            test_size=args.test_size if args.test_size is not None else 0.3,
            seed=args.seed,
            select=args.select,
            test=test,
            truth=truth,
            options=options,
            select_options=select_options or None,
            progress=progress_of(args),
            csv=outs.get("csv"),
            overwrite=args.force,
        )
    except KeyboardInterrupt as exc:
        study = getattr(exc, "study", None)
        if study is None:
            raise
        interrupted = True
    if args.json:
        print(json.dumps(study.to_dict(), allow_nan=False))
    else:
        print(study.table())
    if "json" in outs:
        study.to_json(outs["json"], overwrite=args.force)
    if "plot" in outs:
        study.plot(outs["plot"], overwrite=args.force, metrics=args.plot_metrics)
    for kind, p in outs.items():
        announce(args, kind, p)
    if interrupted:
        print(
            f"interrupted after {len(study.rows)} of {study.total} runs; the finished ones are above and in the files",
            file=sys.stderr,
        )
        return 130
    failed = study.failed()
    if failed:
        print(f"{len(failed)} of {len(study.rows)} runs failed; their messages are in the table", file=sys.stderr)
        return EXIT_USER
    return 0


def write_reports(args: argparse.Namespace, report: Any, outs: dict[str, Path]) -> None:
    writers = {"csv": report.to_csv, "json": report.to_json}
    for kind, path in outs.items():
        if kind == "plot":
            report.plot(path, overwrite=True, metrics=args.plot_metrics)
        else:
            writers[kind](path, overwrite=True)
        announce(args, kind, path)


def cmd_path(args: argparse.Namespace) -> int:
    problem = load_problem(args)
    plot_spec(args)
    outs = output_files(args, problem)
    name, opts = solver_and_options(args, problem)
    ks = parse_k_range(args.k)
    test = held_out(args)
    truth = truth_values(args, problem)
    check_metrics(args, metrics_of(test is not None, truth is not None))
    result = problem.path(
        k=ks, solver=name or "auto", start=args.start, progress=progress_of(args), test=test, truth=truth, **opts
    )
    if args.json:
        print(json.dumps(result.to_dict(), allow_nan=False))
    else:
        print(result.table())
    write_reports(args, result, outs)
    if result.failed():
        print(f"{len(result.failed())} of {len(result.points)} points failed; see the notes", file=sys.stderr)
        return EXIT_USER
    return 0


def cmd_select(args: argparse.Namespace) -> int:
    problem = load_problem(args)
    plot_spec(args)
    outs = output_files(args, problem)
    name, opts = solver_and_options(args, problem)
    test = held_out(args)
    truth = truth_values(args, problem)
    check_metrics(args, metrics_of(test is not None, truth is not None, ("value", "loss")))
    ks = parse_k_range(args.k) if args.k is not None else None
    fold_ids = None
    if args.fold_ids:
        from .io import read_data

        fold_ids = read_data(args.fold_ids, "vector", base_dir=Path.cwd())
    sel = problem.select(
        k=ks,
        by=args.by,
        solver=name or "auto",
        folds=args.folds,
        seed=args.seed,
        fold_ids=fold_ids,
        rule=args.rule,
        gamma=args.gamma,
        start=args.start,
        progress=progress_of(args),
        early_stop=args.early_stop,
        patience=args.patience,
        margin=args.margin,
        test=test,
        truth=truth,
        **opts,
    )
    if args.json:
        print(json.dumps(sel.to_dict(), allow_nan=False))
    else:
        print(sel.table())
        print()
        print(sel.result.summary())
    write_reports(args, sel, outs)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(n=args.n, seed=args.seed, as_json=args.json)


# ------------------------------------------------------------------ entry point


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sparsemodel",
        description="Sparsity-, rank- and spectrum-constrained learning: model files, l0 solvers, convex baselines.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    d = sub.add_parser("demo", help="solve the paper-000 Section 6.1 problem with GraHTP and FGraHTP")
    d.add_argument("--n", type=int, default=250, help="number of samples (default 250)")
    d.add_argument("--seed", type=int, default=0, help="random seed of the simulated data")
    d.add_argument("--json", action="store_true", help="print one JSON object")
    d.set_defaults(func=cmd_demo)

    def model_args(q: argparse.ArgumentParser) -> None:
        q.add_argument("model", help="model file (.sm), or a Python model module (.py) defining problem")
        q.add_argument("--data", action="append", metavar="NAME=PATH", help="rebind a data name to another file")
        q.add_argument("--param", action="append", metavar="NAME=VALUE", help="set a param")
        q.add_argument(
            "--scheduler",
            metavar="WHERE",
            help="where passes over dask data run: threads (default), synchronous, local (an embedded "
            "LocalCluster) or a scheduler address such as tcp://host:8786",
        )

    c = sub.add_parser("check", help="parse, shapes, convexity, and which solvers apply")
    model_args(c)
    c.set_defaults(func=cmd_check)

    def metric_args(q: argparse.ArgumentParser) -> None:
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
            "fp, fn and error",
        )

    def output_args(q: argparse.ArgumentParser, what: str, table: bool = True) -> None:
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

    s = sub.add_parser("solve", help="solve a model file")
    model_args(s)
    s.add_argument("--solver", help="solver name, or auto (default: the model's `solve with`, else auto)")
    s.add_argument("--option", "-o", action="append", metavar="KEY=VALUE", help="solver option, repeatable")
    s.add_argument(
        "--k",
        help="override the bound of the sparsity or rank constraint, in its unit (coordinates, groups, edges, rank); "
        "several bounds by name: --k L=2,S=30",
    )
    output_args(s, "result", table=False)
    s.add_argument("--csv", metavar="FILE", help="write the coefficient table (every coordinate, by name) as CSV")
    s.set_defaults(func=cmd_solve, plot=None)

    m = sub.add_parser("compare", help="run several solvers on one model, optionally over a range of k")
    model_args(m)
    m.add_argument("--solvers", help="comma-separated solver names (default: the model's `compare with`)")
    m.add_argument(
        "--k",
        help="values of the bound, in its unit: 20, 5:50:5 (inclusive) or 1,2,5 (sparsity k or rank r); several bounds "
        "by name: S=10:50:10 or S=10,20,L=1,2 (every combination)",
    )
    m.add_argument("--at", metavar="NAME=VALUES", help="sweep a param instead: lam=0.001,0.01,0.1 or lam=1:3")
    m.add_argument("--option", "-o", action="append", metavar="SOLVER:KEY=VALUE", help="solver option, repeatable")
    metric_args(m)
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
    m.add_argument("--folds", type=int, help="folds of --select cv (default 5)")
    m.add_argument(
        "--no-early-stop",
        dest="early_stop",
        action="store_false",
        help="--select computes every k of --k (default: each path stops once its curve has clearly turned)",
    )
    output_args(m, "comparison (every run's solution)")
    m.set_defaults(func=cmd_compare)

    def report_args(q: argparse.ArgumentParser, what: str, k_required: bool = True) -> None:
        metric_args(q)
        q.add_argument(
            "--k",
            required=k_required,
            help="values of the bound, in its unit: 1:40 (inclusive), 1:40:2 or 1,2,5 (several bounds by name: S=10:50:10)"
            + ("" if k_required else " (default 0 to n / (log(log n) log p))"),
        )
        q.add_argument("--solver", help="solver name, or auto (default: the model's `solve with`, else auto)")
        q.add_argument("--option", "-o", action="append", metavar="KEY=VALUE", help="solver option, repeatable")
        output_args(q, what)

    pa = sub.add_parser("path", help="a warm-started path over the bound k with one solver")
    model_args(pa)
    report_args(pa, "path")
    pa.add_argument(
        "--start",
        choices=("best", "cold", "warm"),
        default="best",
        help="best: cold and warm solve, keep the lower objective (default); cold: = single solves; warm: fastest",
    )
    pa.set_defaults(func=cmd_path)

    se = sub.add_parser("select", help="choose k: an information criterion or cross-validation over a path")
    model_args(se)
    report_args(se, "curve", k_required=False)
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
        choices=("min", "1se"),
        help="cross-validation: min (default), or 1se: the smallest k within one se of the minimum",
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
    se.add_argument("--patience", type=int, help="early stop: consecutive k above the minimum + margin (default 5)")
    se.add_argument(
        "--margin",
        type=float,
        help="early stop: criterion units (default 10), or standard errors for cv (default 0)",
    )
    se.set_defaults(func=cmd_select)

    v = sub.add_parser("solvers", help="the solver registry: names, constraint kinds, options")
    v.add_argument("--json", action="store_true", help="print the registry as JSON")
    v.add_argument("-v", "--verbose", action="store_true", help="list every option")
    v.set_defaults(func=cmd_solvers)
    return p


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
            from .workflows.scheduler import use_scheduler

            with use_scheduler(getattr(args, "scheduler", None)):  # loading reads dask data too
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
