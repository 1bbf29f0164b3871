"""The command line's arguments read into values: k ranges and named bounds, --at sweeps, option
pairs, --test/--truth files, --plot specs, the model (a model file or a Python model module), the
output files. Every mistake is a :class:`CLIError` (exit status 2), located and with a hint."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import ModelError
from ..outputs import check_output, distinct, protected_paths
from ..util import parse_named_values, parse_values

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


def parse_jobs(text: str) -> int:
    """``--jobs N``: a number of workers, or -1 for one per core (argparse's type: a bad value is
    said as ``argument --jobs: ...`` with the usage, exit status 2)."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n == 0 or n < -1 or text.strip() != str(n):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number of workers: give 1 (serial, the default), a number of workers, or -1 "
            "(one per core)"
        )
    return n


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

    from ..model.problem import Model
    from ..problem import Problem

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
    from ..workflows.metrics import Given

    files = named_files(getattr(args, "test", None), "--test")
    if not files:
        return None
    return Given({n: f for n, (f, _) in files.items()}, {n: w for n, (_, w) in files.items()})


def truth_values(args: argparse.Namespace, problem: Any) -> Any:
    """--truth: the true values by variable name, read as a vector or matrix like the variable."""
    from ..io import read_data
    from ..workflows.metrics import Given, MetricError

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


def check_metrics(
    args: argparse.Namespace, held: bool, truth: bool, extra: tuple[str, ...] = (), problem: Any = None
) -> None:
    """The metrics of --plot, checked before anything runs (``held``: held-out data or splits,
    ``truth``: a truth; ``problem``: the model, whose held-out metrics are a classifier's too)."""
    from ..workflows.metrics import metric_names

    if args.plot_metrics:
        metric_names(args.plot_metrics, metrics_of(held, truth, extra, problem))


def metrics_of(test: bool, truth: bool, extra: tuple[str, ...] = (), problem: Any = None) -> list[str]:
    from ..workflows.metrics import TRUTH_METRICS, held_out_columns

    return [
        *extra,
        "objective",
        "lower_bound",
        "gap",
        "nnz",
        "df",
        "time_s",
        "iterations",
        *(held_out_columns(problem) if test else []),
        *(TRUTH_METRICS if truth else ()),
    ]


def load_problem(args: argparse.Namespace):
    from ..grammar import load

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
