"""Fuzzing the front end: mutations of the example models (characters and tokens deleted,
inserted, duplicated and swapped; numbers replaced by 0, -1, 1e400, nan; lines dropped) checked
in-process. Every outcome must be success or a ModelError that says where (file, line and
column), within a few seconds; any other exception is a bug. The default run tries a bounded,
derandomized set of examples; `pytest -m slow` tries many more, and also solves 300 mutants that
check passes (an answer, a model error or the time limit; never another exception)."""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparsemodel as sm
from sparsemodel.errors import ModelError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MODELS = {p.name: p.read_text() for p in sorted(EXAMPLES.glob("*.sm"))}
TOKEN = re.compile(r"\d+\.?\d*(?:[eE][+-]?\d+)?|[A-Za-z_]\w*|\"[^\"\n]*\"|<=|>=|\*\*|\S")
NUMBER = re.compile(r"(?<![\w.])\d+\.?\d*(?:[eE][+-]?\d+)?")
ODD = list("()[]{},:;=+-*/@'^.<>#\"\\") + ["\n", " ", "\t", "é", "\x00", "k", "w", "0"]
LIMIT_S = 5.0


def mutate(text: str, ops: list[tuple[str, int, int]]) -> str:
    for op, a, b in ops:
        toks = [m.span() for m in TOKEN.finditer(text)]
        lines = text.split("\n")
        if op == "del_char" and text:
            i = a % len(text)
            text = text[:i] + text[i + 1 :]
        elif op == "ins_char":
            i = a % (len(text) + 1)
            text = text[:i] + ODD[b % len(ODD)] + text[i:]
        elif op == "dup_char" and text:
            i = a % len(text)
            text = text[: i + 1] + text[i:]
        elif op == "swap_char" and len(text) > 1:
            i = a % (len(text) - 1)
            text = text[:i] + text[i + 1] + text[i] + text[i + 2 :]
        elif op in ("del_tok", "dup_tok", "swap_tok") and toks:
            i = a % len(toks)
            s, e = toks[i]
            if op == "del_tok":
                text = text[:s] + text[e:]
            elif op == "dup_tok":
                text = text[:e] + " " + text[s:e] + text[e:]
            elif len(toks) > 1:
                j = (i + 1 + b % (len(toks) - 1)) % len(toks)
                (s1, e1), (s2, e2) = sorted([toks[i], toks[j]])
                text = text[:s1] + text[s2:e2] + text[e1:s2] + text[s1:e1] + text[e2:]
        elif op == "number":
            nums = list(NUMBER.finditer(text))
            if nums:
                m = nums[a % len(nums)]
                text = text[: m.start()] + ["0", "-1", "1e400", "nan"][b % 4] + text[m.end() :]
        elif op == "drop_line" and lines:
            del lines[a % len(lines)]
            text = "\n".join(lines)
    return text


OPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["del_char", "ins_char", "dup_char", "swap_char", "del_tok", "dup_tok", "swap_tok", "number", "drop_line"]
        ),
        st.integers(0, 10**6),
        st.integers(0, 10**6),
    ),
    min_size=1,
    max_size=3,
)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):  # noqa: ANN001
    raise _Timeout


def check_one(name: str, text: str) -> None:
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, 2 * LIMIT_S)
    t0 = time.perf_counter()
    try:
        report = sm.parse(text, base_dir=EXAMPLES, name=name).check()
        for e in report.errors:
            assert e.span is not None, f"an error without a location: {e.render()}\n--- model ---\n{text}"
    except ModelError as exc:
        assert exc.span is not None, f"an error without a location: {exc.render()}\n--- model ---\n{text}"
    except _Timeout:
        pytest.fail(f"check took more than {2 * LIMIT_S} s on\n{text}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    elapsed = time.perf_counter() - t0
    assert elapsed < LIMIT_S, f"check took {elapsed:.1f} s on\n{text}"


def test_the_examples_themselves_check():
    assert MODELS, "no example models found"
    for name, text in MODELS.items():
        report = sm.parse(text, base_dir=EXAMPLES, name=name).check()
        assert report.ok, report.render()


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(sorted(MODELS)), ops=OPS)
def test_mutated_models_fail_cleanly(name, ops):
    check_one(name, mutate(MODELS[name], ops))


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(sorted(MODELS)), ops=OPS)
def test_mutated_models_fail_cleanly_many(name, ops):
    check_one(name, mutate(MODELS[name], ops))


def solve_one(name: str, text: str) -> None:
    """Parse, check and (when check passes) solve a mutant: an answer, a located model error or a
    run stopped at the time limit are all fine; any other exception is a bug."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, 4 * LIMIT_S)
    try:
        prob = sm.parse(text, base_dir=EXAMPLES, name=name)
        if prob.check().ok:
            prob.solve()
    except (ModelError, _Timeout):
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.sampled_from(sorted(MODELS)), ops=OPS)
def test_mutated_models_solve_or_fail_cleanly_many(name, ops):
    solve_one(name, mutate(MODELS[name], ops))
