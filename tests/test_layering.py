"""The layering of DESIGN.md, read from the import graph (every import statement, top level or
inside a function): model/ and grammar/ import nothing from compile/, solvers/ or compare/, and no
solver imports cvxpy or the grammar."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "sparsemodel"


def imports(path: Path) -> list[tuple[str, int]]:
    """(absolute module name, line) of every import in a file of the package."""
    rel = path.relative_to(PKG.parent).with_suffix("")
    here = list(rel.parts)  # e.g. ["sparsemodel", "model", "problem"]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names = [mod] if node.module else [f"{mod}.{a.name}" for a in node.names]
            out += [(m, node.lineno) for m in names]
    return out


def offending(layer: str, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for f in sorted((PKG / layer).rglob("*.py")):
        for mod, line in imports(f):
            if any(mod == p or mod.startswith(p + ".") for p in forbidden):
                bad.append(f"{f.relative_to(PKG.parent)}:{line} imports {mod}")
    return bad


def test_model_and_grammar_import_nothing_below_them():
    below = ("sparsemodel.compile", "sparsemodel.solvers", "sparsemodel.compare")
    assert offending("model", below) == []
    assert offending("grammar", below) == []


def test_solvers_never_import_cvxpy_or_the_grammar():
    assert offending("solvers", ("cvxpy", "sparsemodel.grammar", "lark")) == []


def test_compile_never_imports_solvers_reports_or_the_grammar():
    assert offending("compile", ("sparsemodel.solvers", "sparsemodel.compare", "sparsemodel.grammar")) == []


def test_the_checker_sees_imports_inside_functions(tmp_path):
    """The graph reader is not blind to late imports (the old loop went through them)."""
    f = PKG / "model" / "problem.py"
    mods = [m for m, _ in imports(f)]
    assert "sparsemodel.session" in mods  # Problem.solve delegates downward through the session


def test_the_estimators_use_only_the_builder():
    """sparsemodel/sklearn.py builds models with the Python builder and solves them through Problem:
    it imports nothing from the lowerings, the solvers, the reports or the session."""
    below = ("sparsemodel.compile", "sparsemodel.solvers", "sparsemodel.compare", "sparsemodel.session")
    mods = [m for m, _ in imports(PKG / "sklearn.py")]
    assert mods and not [m for m in mods if any(m == p or m.startswith(p + ".") for p in below)]


def test_import_loads_only_the_model_layer():
    """`import sparsemodel` (the Python builder) loads neither the grammar (lark), the solvers and
    their numerics, nor scipy.special, cvxpy, sympy or matplotlib; they load on first use."""
    import subprocess
    import sys

    code = (
        "import sys, sparsemodel as sm\n"
        "heavy = ['lark', 'sparsemodel.grammar', 'sparsemodel.solvers', 'sparsemodel.compile', 'scipy.special',\n"
        "         'scipy.linalg', 'cvxpy', 'sympy', 'matplotlib', 'tqdm', 'dask']\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
        "from sparsemodel import load, parse, registry, Result\n"
        "print(sm.load is load, 'auto' in registry, Result.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == ""
    assert out[1] == "True True Result"
