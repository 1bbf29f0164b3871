"""The layering of docs/architecture.md, read from the import graph (every import statement, top
level or inside a function): each package imports only packages on its own floor or below, the
model layer never reaches up to the facade, solvers never import cvxpy or the grammar."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "sparsemodel"

# floors, bottom up: a module may import its own floor and the floors below, never above
FLOORS = [
    ("sparsemodel.errors", "sparsemodel.util", "sparsemodel.progress", "sparsemodel.datasets", "sparsemodel.io"),
    ("sparsemodel.model",),
    ("sparsemodel.objective",),
    ("sparsemodel.numerics",),  # kernels that take arrays (and the reduced design's type)
    ("sparsemodel.sets",),  # the sets: linear constraints project with numerics' QP
    ("sparsemodel.lowering",),
    ("sparsemodel.solvers",),
    ("sparsemodel.outputs", "sparsemodel.workflows"),
    ("sparsemodel.inference",),  # knockoffs, stability selection: built on the paths and the solvers
    ("sparsemodel.problem",),  # the facade: Problem
    (
        "sparsemodel.grammar",
        "sparsemodel.estimators",
        "sparsemodel.sklearn",
        "sparsemodel.demo",
    ),  # front ends that make Problems
    ("sparsemodel.cli", "sparsemodel"),
]


def floor_of(mod: str) -> int | None:
    best, depth = None, -1
    for i, names in enumerate(FLOORS):
        for p in names:
            if (mod == p or mod.startswith(p + ".")) and p.count(".") > depth:
                best, depth = i, p.count(".")
    return best


def imports(path: Path) -> list[tuple[str, int]]:
    """(absolute module name, line) of every import in a file of the package."""
    rel = path.relative_to(PKG.parent).with_suffix("")
    here = list(rel.parts)  # e.g. ["sparsemodel", "model", "problem"]
    if here[-1] == "__init__":
        here = here[:-1] + ["__init__"]
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


def module_of(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_module_has_a_floor():
    lost = [module_of(f) for f in PKG.rglob("*.py") if floor_of(module_of(f)) is None]
    assert lost == []


def test_no_import_runs_up_a_floor():
    """The whole rule: data flows down. This is what makes the model layer free of the solvers (the
    old Problem.solve imported the session from inside the model: a 24-file import loop)."""
    bad = []
    for f in sorted(PKG.rglob("*.py")):
        here = floor_of(module_of(f))
        for mod, line in imports(f):
            if not mod.startswith("sparsemodel"):
                continue
            there = floor_of(mod)
            if there is not None and there > here:
                bad.append(f"{f.relative_to(PKG.parent)}:{line} imports {mod} (floor {there} > {here})")
    assert bad == []


def offending(layer: str, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for f in sorted((PKG / layer).rglob("*.py")):
        for mod, line in imports(f):
            if any(mod == p or mod.startswith(p + ".") for p in forbidden):
                bad.append(f"{f.relative_to(PKG.parent)}:{line} imports {mod}")
    return bad


def test_solvers_never_import_cvxpy_or_the_grammar():
    assert offending("solvers", ("cvxpy", "sparsemodel.grammar", "lark", "sparsemodel.lowering.cvxpy_lower")) == []


def test_numerics_take_arrays_not_problems():
    """Kernels take arrays, operators and reduced designs: nothing of the lowering, the sets or the
    solvers (the reduced design's type is read for annotations only)."""
    assert offending("numerics", ("sparsemodel.lowering", "sparsemodel.sets", "sparsemodel.solvers")) == []


def test_the_checker_sees_imports_inside_functions():
    """The graph reader is not blind to late imports: the facade's methods import the workflows
    inside themselves (so that `import sparsemodel` stays light), and the checker sees them."""
    mods = [m for m, _ in imports(PKG / "problem.py")]
    assert "sparsemodel.workflows" in mods


def test_the_estimators_use_only_the_builder():
    """The estimators (sparsemodel/estimators/, re-exported by sparsemodel/sklearn.py) build models
    with the Python builder and solve them through Problem: they import nothing from the lowerings,
    the solvers, the reports or the session. Two exceptions, read by the covariance models whose
    objective Problem.select cannot read as a sum over samples: select's formulas
    (workflows.criteria: criterion, default_k_max) and its early-stop rule (workflows.select.EarlyStop),
    pure functions of numbers, so that the estimators compute no second version of either."""
    below = ("sparsemodel.objective", "sparsemodel.lowering", "sparsemodel.solvers", "sparsemodel.workflows")
    allowed = {
        "sparsemodel.workflows.criteria.criterion",
        "sparsemodel.workflows.criteria.default_k_max",
        "sparsemodel.workflows.select.EarlyStop",
        "sparsemodel.workflows.select.IC_MARGIN",
        "sparsemodel.workflows.select.IC_PATIENCE",
    }
    files = [PKG / "sklearn.py", *sorted((PKG / "estimators").rglob("*.py"))]
    names = []  # every imported module, and every name imported from a module
    for f in files:
        names += [m for m, _ in imports(f)]
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                parts = module_of(f).split(".")
                base = parts[: len(parts) - node.level + (f.name == "__init__.py")] if node.level else []
                names += [".".join([*base, node.module, a.name]) for a in node.names]
    low = [m for m in names if any(m == p or m.startswith(p + ".") for p in below)]
    assert names and {m for m in low if m.count(".") > 2} <= allowed
    assert {m for m in low if m.count(".") <= 2} <= {".".join(a.split(".")[:3]) for a in allowed}


def test_import_loads_only_the_model_layer():
    """`import sparsemodel` (the Python builder) loads neither the grammar (lark), the solvers and
    their numerics, nor scipy.special, cvxpy, sympy or matplotlib; they load on first use."""
    import subprocess
    import sys

    code = (
        "import sys, sparsemodel as sm\n"
        "heavy = ['lark', 'sparsemodel.grammar', 'sparsemodel.solvers', 'sparsemodel.objective',\n"
        "         'sparsemodel.lowering', 'sparsemodel.workflows', 'scipy.special',\n"
        "         'scipy.linalg', 'cvxpy', 'sympy', 'matplotlib', 'tqdm', 'dask']\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
        "from sparsemodel import load, parse, registry, Result\n"
        "print(sm.load is load, 'auto' in registry, Result.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == ""
    assert out[1] == "True True Result"


SET_CLASSES = {
    "ConstraintSet",
    "CoordinateSparsity",
    "LowRank",
    "EigBox",
    "Box",
    "SideSet",
    "FusedSparsity",
    "CoordSubspace",
    "LowRankSubspace",
}


def test_kind_knowledge_lives_in_the_sets():
    """No isinstance on a set class and no comparison of a ``.kind`` with a string outside the sets
    package (and the model, whose constraints carry the kinds): everything else asks the set."""
    bad = []
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(PKG)
        if rel.parts[0] in ("sets", "model"):
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                arg = node.args[1]
                names = [e for e in (arg.elts if isinstance(arg, ast.Tuple) else [arg])]
                if any(getattr(e, "id", getattr(e, "attr", None)) in SET_CLASSES for e in names):
                    bad.append(f"{rel}:{node.lineno} isinstance on a set")
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                reads_kind = any(
                    isinstance(e, ast.Attribute)
                    and e.attr == "kind"
                    and not isinstance(e.value, ast.Call)  # np.dtype(...).kind
                    and getattr(e.value, "attr", None) != "dtype"  # a.dtype.kind
                    for e in sides
                )
                literal = any(
                    isinstance(e, ast.Constant)
                    and isinstance(e.value, str)
                    or isinstance(e, (ast.Tuple, ast.List, ast.Set))
                    and any(isinstance(x, ast.Constant) and isinstance(x.value, str) for x in e.elts)
                    for e in sides
                )
                if reads_kind and literal:
                    bad.append(f"{rel}:{node.lineno} compares a .kind with a string")
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "startswith":
                if isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "kind":
                    bad.append(f"{rel}:{node.lineno} reads a .kind prefix")
    assert bad == []


# what a solver or a workflow must not ask (docs/architecture.md, "What a solver sees"): the lowered
# problem's slots per kind, the kind attributes of a set, and the unit words of the reports; the
# sets answer through their protocol, the special forms through lowering/forms.py
KIND_SLOTS = {"sparsity", "precision", "eigbox", "spca", "box", "linear"}
DISTINCT_SLOTS = {"sparsity", "eigbox", "spca"}  # names no other object here uses: flagged on any receiver
KIND_ATTRIBUTES = {"pairs", "coordinate"}
LOWERED_NAMES = {"lp", "lowered"}


def unit_words() -> set[str]:
    from sparsemodel.sets.units import UNITS

    return set(UNITS) | {"per variable"}


def _strings(node: ast.AST) -> set[str]:
    """The string constants of a literal (a string, or a tuple, list or set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _reads_unit(node: ast.AST) -> bool:
    """Whether an expression reads a unit: ``r.unit``, ``b["unit"]``, ``d.get("unit")``, a name with unit in it."""
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and n.attr in ("unit", "units"):
            return True
        if isinstance(n, ast.Name) and "unit" in n.id:
            return True
        if isinstance(n, ast.Constant) and n.value == "unit":
            return True
    return False


def _lowered(node: ast.AST) -> bool:
    """A lowered problem by its usual names: ``lp``, ``lowered``, ``self.lp``, ``act.lp``."""
    if isinstance(node, ast.Name):
        return node.id in LOWERED_NAMES
    return isinstance(node, ast.Attribute) and node.attr in LOWERED_NAMES


def kind_questions(tree: ast.AST, where: str, constraint_classes: bool = True) -> list[str]:
    """Every place a module asks which kind a problem has: a kind slot of the lowered problem read
    (``lp.sparsity``, ``lp.box``, ``getattr(lp, "eigbox")``), a kind attribute of a set (``.pairs``,
    ``.coordinate``), a unit word compared or looked up (``r.unit == "rank"``, ``{"changes": ...}.get(b["unit"])``),
    an isinstance on a model constraint class."""
    words = unit_words()
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in DISTINCT_SLOTS or (node.attr in KIND_SLOTS and _lowered(node.value)):
                bad.append(f"{where}:{node.lineno} reads the kind slot .{node.attr}")
            elif node.attr in KIND_ATTRIBUTES:
                bad.append(f"{where}:{node.lineno} reads the kind attribute .{node.attr}")
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" and len(node.args) >= 2:
            if _strings(node.args[1]) & KIND_SLOTS and _lowered(node.args[0]):
                bad.append(f"{where}:{node.lineno} reads a kind slot by getattr")
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_strings(e) & words for e in sides) and any(_reads_unit(e) for e in sides):
                bad.append(f"{where}:{node.lineno} compares a unit with a unit word")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            table = node.func.value
            if isinstance(table, ast.Dict) and any(_strings(k) & words for k in table.keys if k is not None):
                if any(_reads_unit(a) for a in node.args):
                    bad.append(f"{where}:{node.lineno} looks a unit word up")
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict) and _reads_unit(node.slice):
            bad.append(f"{where}:{node.lineno} looks a unit word up")
        if (
            constraint_classes
            and isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "isinstance"
            and len(node.args) == 2
        ):
            arg = node.args[1]
            for e in arg.elts if isinstance(arg, ast.Tuple) else [arg]:
                name = getattr(e, "id", getattr(e, "attr", "")) or ""
                if name.endswith("Constraint") or name == "Bounded":
                    bad.append(f"{where}:{node.lineno} isinstance on the constraint class {name}")
    return bad


def test_solvers_and_workflows_never_ask_which_kind():
    """Outside sets/ and lowering/ (and the model, whose constraints define the kinds) nothing reads
    a kind slot of the lowered problem, a kind attribute of a set or a unit word, and nothing tests
    a model constraint's class (the grammar included): a solver states what it needs (handles,
    requires, unfit) and then reads protocol members only."""
    bad = []
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(PKG)
        if rel.parts[0] in ("sets", "lowering", "model"):
            continue
        bad += kind_questions(ast.parse(f.read_text()), str(rel))
    assert bad == []


def test_the_kind_checker_sees_each_question():
    """The checker is not blind: each way of asking which kind that the code used to have is found."""
    asked = {
        "lp.sparsity.coords": "kind slot",
        "self.lp.box.lo": "kind slot",
        "act.lp.eigbox.alpha": "kind slot",
        "d = other.spca": "kind slot",
        "getattr(lp, 'precision', None)": "getattr",
        "sps.pairs": "kind attribute",
        "lp.set.coordinate": "kind attribute",
        "r.unit == 'rank'": "unit word",
        "b['unit'] != 'changes'": "unit word",
        "r.unit in ('coordinates', 'groups')": "unit word",
        "{'changes': 'changepoints'}.get(b['unit'], 'selected')": "unit word",
        "isinstance(c, (NnzConstraint, RankConstraint))": "constraint class",
    }
    for code, what in asked.items():
        found = kind_questions(ast.parse(code), "snippet")
        assert found and all(what in m for m in found), (code, found)
    fine = ["pe.box", "self.multinomial == 'groups'", "pname == 'groups'", "lp.set.box_bounds()", "r.view.dense"]
    for code in fine:
        assert kind_questions(ast.parse(code), "snippet") == [], code


def test_nothing_outside_the_lowering_writes_into_a_lowered_problem():
    """Options and progress reach a run as arguments (``Solver.solve(lp, progress=)``,
    ``lp.fresh(subproblem=)``), never as attributes hung on the lowered problem: no assignment to
    an attribute of ``lp`` (or an ``update`` of one) outside sparsemodel/lowering."""
    found = []
    for path in PKG.rglob("*.py"):
        if "lowering" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[ast.AST] = []
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update":
                targets = [node.func.value]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
                targets = [ast.Attribute(value=node.args[0], attr="?")] if node.args else []
            for t in targets:
                while isinstance(t, ast.Subscript):
                    t = t.value
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in ("lp", "lowered"):
                    found.append(f"{path.relative_to(PKG.parent)}:{node.lineno}")
    assert not found, f"attributes of a lowered problem set outside sparsemodel/lowering: {found}"


def test_the_tests_mirror_the_packages():
    """Each folder of tests/ is named after the package (or module) of sparsemodel it tests."""
    tests = Path(__file__).resolve().parent
    packages = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    packages |= {p.stem for p in PKG.glob("*.py")}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders <= packages, f"test folders without a package: {sorted(folders - packages)}"
