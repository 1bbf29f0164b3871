"""The command line's commands, one function each (``cmd_solve``, ``cmd_compare``, ...): read the
arguments (:mod:`sparsemodel.cli.args`), run the workflow, print and write the reports."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..outputs import protected_paths, write_output
from ..util import jsonable
from .args import (
    EXIT_USER,
    CLIError,
    announce,
    check_metrics,
    held_out,
    load_problem,
    output_files,
    parse_at,
    parse_bound,
    parse_k_range,
    parse_pairs,
    parse_value,
    plot_spec,
    progress_of,
    solver_and_options,
    truth_values,
)


def cmd_solvers(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from ..solvers import REGISTRY

    if args.json:
        out = {
            name: {
                "handles": cls.kinds(),
                "needs": cls.needs,
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
            if c.needs:  # (check lists a solver only where it runs)
                print()
                print("\n".join(textwrap.wrap(f"{n} needs {c.needs}", width=100, subsequent_indent="  ")))
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


def cmd_solve(args: argparse.Namespace) -> int:
    problem = load_problem(args)
    outs = output_files(args, problem)
    name, opts = solver_and_options(args, problem)
    result = problem.solve(name or "auto", k=parse_bound(args.k), bound=args.bound, progress=progress_of(args), **opts)
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
    if args.paired is not None and args.splits is None:
        raise CLIError(
            "--paired compares the methods over replications", hint="add --splits N (random train/test splits)"
        )
    selectors = inference_methods(solvers, options, args.seed)
    if args.splits is not None or args.select is not None or selectors:
        from ..workflows.compare import BOUND_NAMES, find_param

        if sweep is not None and not args.at and sweep[0] in BOUND_NAMES and find_param(problem, sweep[0]) is None:
            sweep, ks = None, [int(v) for v in sweep[1]]  # the model's `compare ... at k in 2:20:2`: the bound
        if sweep is not None:
            raise CLIError(
                "--splits and --select compare over the bound k; --at (or the model's `compare ... at`) sweeps a param",
                hint="give --k instead of --at",
            )
        return run_study(args, problem, solvers, ks, options, outs, test, truth, selectors)
    if not args.early_stop:
        raise CLIError("--no-early-stop is an option of --select", hint="add --select ebic (or cv, bic, ...)")
    if args.test_size is not None or args.folds is not None:
        raise CLIError(
            f"{'--test-size' if args.test_size is not None else '--folds'} needs "
            f"{'--splits' if args.test_size is not None else '--select cv'}"
        )
    check_metrics(args, test is not None, truth is not None, problem=problem)
    if args.jobs != 1:
        raise CLIError(
            f"--jobs {args.jobs} runs the replications of --splits (or --select) on workers; a comparison on the "
            "model's data runs its sweep here, in order",
            hint="add --splits N, or drop --jobs",
        )
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
    return report_runs(args, comp, outs, interrupted)


def run_study(
    args: argparse.Namespace,
    problem: Any,
    solvers: list[str],
    ks: list[int] | None,
    options: dict[str, dict[str, Any]],
    outs: dict[str, Path],
    test: Any,
    truth: Any,
    selectors: dict[str, Any] | None = None,
) -> int:
    """compare --splits / --select (or with an inference method among the solvers): replications,
    each method over k or at its chosen k; knockoffs and stability choose their own units."""
    from ..workflows.experiment import experiment

    if args.folds is not None and args.select != "cv":
        raise CLIError("--folds sets the folds of --select cv", hint="add --select cv, or drop --folds")
    if args.paired is not None and args.paired not in solvers:
        raise CLIError(
            f"--paired {args.paired}: the baseline is not among the compared solvers",
            hint=f"compared: {', '.join(solvers)}",
        )
    held = test is not None or args.splits is not None
    check_metrics(args, held, truth is not None, ("k", "penalty", "lower_s") if args.select else ("lower_s",), problem)
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
            [(selectors or {}).get(s, s) for s in solvers],
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
            n_jobs=args.jobs,
        )
    except KeyboardInterrupt as exc:
        study = getattr(exc, "study", None)
        if study is None:
            raise
        interrupted = True
    if args.paired is not None:
        study.baseline = args.paired
    return report_runs(args, study, outs, interrupted)


def report_runs(args: argparse.Namespace, report: Any, outs: dict[str, Path], interrupted: bool) -> int:
    """Print and write a comparison's or a study's report (CSV rows were written as they ran), say
    an interruption (exit 130) or the runs that failed (exit 2), and return the exit status."""
    if args.json:
        print(json.dumps(report.to_dict(), allow_nan=False))
    else:
        print(report.table())
    if "json" in outs:
        report.to_json(outs["json"], overwrite=args.force)
    if "plot" in outs:
        report.plot(outs["plot"], overwrite=args.force, metrics=args.plot_metrics)
    for kind, p in outs.items():
        announce(args, kind, p)
    if interrupted:
        print(
            f"interrupted after {len(report.rows)} of {report.total} runs; the finished ones are above and in the files",
            file=sys.stderr,
        )
        return 130
    failed = report.failed()
    if failed:  # a solver refused its cell (an option, a constraint, a k it cannot reach): said, not a bug
        print(f"{len(failed)} of {len(report.rows)} runs failed; their messages are in the table", file=sys.stderr)
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
    check_metrics(args, test is not None, truth is not None, problem=problem)
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
    check_metrics(args, test is not None, truth is not None, ("value", "loss"), problem)
    ks = parse_k_range(args.k) if args.k is not None else None
    fold_ids = None
    if args.fold_ids:
        from ..io import read_data

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
        n_jobs=args.jobs,
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


def inference_methods(solvers: list[str], options: dict[str, dict[str, Any]], seed: int) -> dict[str, Any]:
    """The inference methods among compare's solvers (``knockoffs``, ``stability``), built with their
    ``-o knockoffs:fdr=0.2`` options (taken out of the solvers' options)."""
    from ..inference.methods import METHODS, method

    return {s: method(s, options.pop(s, {}), seed) for s in solvers if s in METHODS}


def inference_options(args: argparse.Namespace, problem: Any) -> dict[str, Any]:
    """What knockoffs and stability share: the solver and its options, the seed, the workers, the truth."""
    name, opts = solver_and_options(args, problem)
    out: dict[str, Any] = {"seed": args.seed, "n_jobs": args.jobs, "progress": progress_of(args), **opts}
    if name is not None:
        out["solver"] = name
    truth = truth_values(args, problem)
    if truth is not None:
        out["truth"] = truth
    return out


def report_inference(args: argparse.Namespace, report: Any, outs: dict[str, Path]) -> int:
    if args.json:
        print(json.dumps(jsonable(report.to_dict()), allow_nan=False))
    else:
        print(report.table())
    write_reports(args, report, outs)
    return 0


def cmd_knockoffs(args: argparse.Namespace) -> int:
    problem = load_problem(args)
    outs = output_files(args, problem)
    args.plot_metrics = None
    kw = inference_options(args, problem)
    if args.knockoffs:
        from ..io import read_data

        kw["knockoffs"] = [read_data(f, "matrix", base_dir=Path.cwd()) for f in args.knockoffs]
    res = problem.knockoffs(
        fdr=args.fdr,
        statistic=args.statistic,
        k=args.k,
        fixed_x=args.fixed_x,
        method=args.method,
        draws=args.draws,
        start=args.start,
        **kw,
    )
    return report_inference(args, res, outs)


def cmd_stability(args: argparse.Namespace) -> int:
    problem = load_problem(args)
    outs = output_files(args, problem)
    args.plot_metrics = None
    ks = parse_k_range(args.k) if args.k else None
    res = problem.stability(
        k=ks,
        pairs=args.n_pairs,
        threshold=args.threshold,
        at_k=args.at_k,
        start=args.start,
        **inference_options(args, problem),
    )
    return report_inference(args, res, outs)


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import run_demo

    return run_demo(n=args.n, seed=args.seed, as_json=args.json)
