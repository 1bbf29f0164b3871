"""`import sparsemodel` against `import numpy, scipy.sparse` (the target: within 1.3 times).

Each import runs in a fresh interpreter (``python -X importtime`` is not used: it adds its own
cost); the two commands alternate, ``--runs`` times each, and the medians of the wall times are
compared. The interpreter's own start-up (``python -c pass``) is measured the same way and printed,
so that the import cost proper (median minus start-up) can be compared too. Each interpreter may
write bytecode caches (``PYTHONDONTWRITEBYTECODE`` is dropped from its environment), as a user's
does: numpy's and scipy's come compiled with their wheels, and a shell that forbids writing ours
would time the compilation of sparsemodel's sources (about 45 ms) at every import.

    python benchmarks/import_time.py [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c pass": "pass",
    "import numpy, scipy.sparse": "import numpy, scipy.sparse",
    "import sparsemodel": "import sparsemodel",
    "import sparsemodel; w = Variable + nnz": "import sparsemodel as sm; w = sm.Variable(3, name='w'); sm.nnz(w) <= 1",
}


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def once(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=ENV)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    a = ap.parse_args()
    times: dict[str, list[float]] = {k: [] for k in COMMANDS}
    for code in COMMANDS.values():  # warm the file cache
        once(code)
    for _ in range(a.runs):
        for name, code in COMMANDS.items():
            times[name].append(once(code))
    med = {k: statistics.median(v) for k, v in times.items()}
    base = med["python -c pass"]
    for k, v in med.items():
        print(f"{k:45s} median {1000 * v:7.1f} ms   import cost {1000 * (v - base):7.1f} ms")
    ratio = med["import sparsemodel"] / med["import numpy, scipy.sparse"]
    ratio_cost = (med["import sparsemodel"] - base) / (med["import numpy, scipy.sparse"] - base)
    print(f"\nimport sparsemodel / import numpy, scipy.sparse: {ratio:.2f} (wall), {ratio_cost:.2f} (import cost)")
    print(f"target <= 1.3: {'holds' if ratio <= 1.3 else 'fails'}")


if __name__ == "__main__":
    main()
