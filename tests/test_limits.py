"""Limits that hold on every path: the element cap, the step budget, no recursion per
nesting level, and work linear in the input.

Each reported case runs the real command in a child process under a memory limit
(RLIMIT_AS), so a regression fails here instead of taking the machine down.
"""
from __future__ import annotations

import os
import re
import resource
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradcalc.autodiff import Tensor
from gradcalc.autodiff.errors import SizeLimitError
from gradcalc.autodiff.limits import (
    DEFAULT_MAX_STEPS,
    StepLimitError,
    check_size,
    indexed_shape,
    joined_shape,
    matmul_shape,
    max_steps,
    set_max_elements,
    set_max_steps,
    step_budget,
)
from gradcalc.parser import LanguageError, Session, compile_program
from tests.launch import GRADCALC

MEMORY = 600 << 20  # bytes: room for a few tensors at the cap (80 MB each), not for 10^8


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def limited(*args: str, stdin: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run gradcalc in a child under MEMORY bytes of address space."""
    env = {**os.environ, "NO_COLOR": "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [*GRADCALC, *args], input=stdin, capture_output=True, text=True, env=env, timeout=timeout, preexec_fn=_limit_memory,
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    assert "internal error" not in done.stderr, done.stderr
    return done


def refused(done: subprocess.CompletedProcess[str], op: str, shape: tuple[int, ...]) -> None:
    """The error names the op, the shape and --max-elements, with exit status 2."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{op}: a tensor of shape {shape}" in done.stderr, done.stderr
    assert "--max-elements" in done.stderr


@pytest.mark.parametrize(
    ("expr", "op", "shape"),
    [
        ("ones(15000, 2) @ ones(2, 15000)", "matmul", (15000, 15000)),
        ("ones(40000, 2) @ ones(2, 40000)", "matmul", (40000, 40000)),
        ("x = ones(2000, 2000); concatenate(x, x, x)", "concatenate", (6000, 2000)),
        ("x = ones(2000, 2000); stack(x, x, x)", "stack", (3, 2000, 2000)),
        ("x = ones(2000, 2000); [x, x, x]", "tensor literal", (3, 2000, 2000)),
        ("x = ones(2000, 2000); [x * 1, x, x]", "tensor literal", (3, 2000, 2000)),
        ("x = ones(10, 10); x[zeros(5000, 1), zeros(1, 5000)]", "getitem", (5000, 5000)),
        ("x = ones(10, 10, 10); x[zeros(4000, 1), :, zeros(1, 4000)]", "getitem", (4000, 4000, 10)),
        ("x = ones(10000); jacobian(x * 2, x)", "jacobian", (10000, 10000)),
        ("x = ones(10000); hessian(sum(x ** 3), x)", "hessian", (10000, 10000)),
        ("zeros(10**10, 0)", "zeros", (10**10, 0)),
        ("zeros(0, 10**10)", "zeros", (0, 10**10)),  # sum(..., axis=0) would be 10**10 zeros
        ("zeros(0).reshape(10**10, 0)", "reshape", (10**10, 0)),
    ],
)
def test_every_result_is_checked_against_the_cap_before_it_is_allocated(expr, op, shape):
    refused(limited("eval", expr), op, shape)


def test_split_into_ten_million_sections_is_refused():
    done = limited("eval", "split(zeros(10**7), 10**7)")
    assert done.returncode == 2
    assert "split: 10,000,000 results of shape (1,)" in done.stderr and "--max-elements" in done.stderr


def test_the_jacobian_that_check_builds_is_checked(tmp_path):
    source = tmp_path / "big.gc"
    source.write_text("x = randn(10000, seed=0)\ncheck tanh(x)\ncheck sum(x)\n")
    done = limited("check", str(source))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0].startswith("ERROR") and "Jacobian of a gradient check: a tensor of shape (10000, 10000)" in lines[0]
    assert lines[1].startswith("PASS")  # the next check still runs


def test_a_gradient_built_in_the_language_is_checked():
    # d(sum(a @ b))/da is g @ b.T over the batch: (10, 30, 30), over a cap of 1000
    done = limited("eval", "--max-elements", "1000", "a = ones(30, 30); b = ones(10, 30, 1); grad(sum(a @ b), a)")
    refused(done, "matmul", (10, 30, 30))


def test_the_cap_is_a_flag_and_a_result_at_the_cap_is_fine():
    assert limited("eval", "--max-elements", "100", "sum(ones(10) @ ones(10, 10))").returncode == 0
    refused(limited("eval", "--max-elements", "99", "ones(10, 1) @ ones(1, 10)"), "matmul", (10, 10))


@pytest.mark.parametrize(
    ("shape", "index"),
    [
        ((5, 6, 7), (np.array([[0], [1]]), slice(None), np.array([0, 1, 2]))),
        ((5, 6, 7), (slice(1, 3), np.array([[0], [1]]), np.array([0, 1, 2]))),
        ((5, 6, 7), (Ellipsis, np.array([1, 2]))),
        ((5, 6, 7), (None, 1, slice(None, None, 2))),
        ((5, 6), (np.array([True, False, True, True, False]),)),
        ((5, 6), (np.ones((5, 6), dtype=bool),)),
        ((5, 6, 7), (0, slice(None), np.array([1, 2]))),
        ((5, 6, 7), (np.array([1, 2]), 0)),
    ],
)
def test_indexed_shape_matches_numpy(shape, index):
    assert indexed_shape(shape, index) == np.zeros(shape)[index].shape


def test_matmul_and_joined_shapes_match_numpy():
    for a, b in [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 6))]:
        assert matmul_shape(a, b) == (np.zeros(a) @ np.zeros(b)).shape
    shapes = [(2, 3), (2, 3), (2, 3)]
    assert joined_shape(shapes, 1, new_axis=False) == np.concatenate([np.zeros(s) for s in shapes], axis=1).shape
    assert joined_shape(shapes, -1, new_axis=True) == np.stack([np.zeros(s) for s in shapes], axis=-1).shape


# ---- the step budget --------------------------------------------------------------------------

DOUBLING = "def f(n) = f(n-1) + f(n-1) if n > 0 else 1; f(40)"


@pytest.mark.parametrize("engine", ["tensor", "scalar"])
def test_exponential_recursion_stops_with_a_clear_error(engine):
    done = limited("eval", "--engine", engine, "--max-steps", "100000", DOUBLING)
    assert done.returncode == 2
    assert "over its budget of 100,000 steps" in done.stderr and "--max-steps" in done.stderr


def test_run_and_check_take_max_steps(tmp_path):
    script = tmp_path / "a.gc"
    script.write_text(f"x = 1\n{DOUBLING.replace('; ', chr(10))}\n")
    assert "over its budget" in limited("run", "--max-steps", "50000", str(script)).stderr
    check = tmp_path / "b.gc"
    check.write_text("x = 0.5\ndef f(n) = f(n-1) + f(n-1) if n > 0 else x\ncheck f(30)\ncheck x * 2\n")
    done = limited("check", "--max-steps", "50000", str(check))
    assert done.returncode == 1
    assert done.stdout.splitlines()[0].startswith("ERROR") and "over its budget" in done.stdout
    assert done.stdout.splitlines()[1].startswith("PASS")


def test_the_budget_is_per_statement_and_counts_engine_ops():
    previous = set_max_steps(1000)
    try:
        session = Session()
        session.run_source("x = ones(3)\n" + "y = x\n" * 2000)  # many small statements: fine
        with pytest.raises(LanguageError) as err:  # one instruction, thousands of ops
            session.run_source("x = ones(3)\nj = jacobian(" + " + ".join(["exp(x) * x"] * 400) + ", x)")
        assert err.value.kind == "steps"
        with pytest.raises(LanguageError) as err:
            session.run_source("x = 0.5\ny = grad(" * 1 + "+".join(["x*x"] * 400) + ", x)")
        assert err.value.kind == "steps"
    finally:
        set_max_steps(previous)


def test_the_engine_as_a_library_has_no_budget_and_the_default_is_ten_million():
    assert max_steps() == DEFAULT_MAX_STEPS == 10**7
    previous = set_max_steps(10)
    try:
        x = Tensor(1.0, requires_grad=True)
        for _ in range(100):  # no budget is running: nothing counts
            x = x * 1.0
        with pytest.raises(StepLimitError), step_budget():
            for _ in range(100):
                x = x * 1.0
    finally:
        set_max_steps(previous)


def test_the_cap_is_checked_on_the_plain_backward_pass_too():
    previous = set_max_elements(50)
    try:
        x = Tensor(np.ones(5), requires_grad=True)
        with pytest.raises(SizeLimitError):
            x[np.zeros((10, 10), dtype=int)]
    finally:
        set_max_elements(previous)


# ---- nesting and linear time ----------------------------------------------------------------


def test_three_hundred_nested_conditionals_compile_and_run():
    done = limited("eval", "x = 2; " + "1 if x else " * 300 + "x")
    assert done.returncode == 0 and "value: 1.0" in done.stdout


# The bound on `_ratio` for a linear cost: ten times the input costs ten times the
# operations (9.97 for each workload here), a quadratic cost a hundred times.
LINEAR = 11


def _ratio(function, small, large) -> float:
    """How many times more bytecode instructions `function(large)` executes than
    `function(small)`, for a large input ten times the small one. Instructions are
    counted, not timed, so a loaded machine measures what an idle one does; after one
    untimed call, so that what is done once (tables loaded, caches filled) is not
    counted. A C function's work inside one instruction is not seen: a cost that grows
    there (a str method over the whole source per statement) shows only in the time."""
    function(small)
    return _operations(function, large) / _operations(function, small)


def _operations(function, argument) -> int:
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if event == "call":
            frame.f_trace_opcodes = True
        elif event == "opcode":
            count += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        function(argument)
    finally:
        sys.settrace(previous)
    return count


def test_compiling_is_linear_in_the_number_of_statements():
    # 10^4 lines of `x = 1` took 5.7 s, 4x10^4 took 97 s: each statement split the source
    small, large = "x = 1\ny = x + 1\n" * 20, "x = 1\ny = x + 1\n" * 200
    compile_program(small)  # the parser tables load once
    ratio = _ratio(compile_program, small, large)
    assert ratio < LINEAR, f"10x the statements took {ratio:.1f}x the operations"
    ratio = _ratio(lambda source: compile_program(source, recover=True), small, large)
    assert ratio < LINEAR, f"10x the statements took {ratio:.1f}x the operations (recovering parse)"


def test_running_is_linear_in_the_number_of_statements():
    small, large = compile_program("x = 1\ny = x + 1\n" * 20), compile_program("x = 1\ny = x + 1\n" * 200)
    ratio = _ratio(lambda program: Session().run(program), small, large)
    assert ratio < LINEAR, f"10x the statements took {ratio:.1f}x the operations"


def test_continuation_lines_are_decided_in_linear_time():
    from gradcalc.parser.syntax import PendingInput

    def paste(n: int) -> None:
        pending = PendingInput()
        assert not pending.add("v = [")
        for i in range(n):
            assert not pending.add(f"  {i},")
        assert pending.add("]")

    paste(10)
    ratio = _ratio(paste, 20, 200)
    assert ratio < LINEAR, f"10x the lines took {ratio:.1f}x the operations"


@pytest.mark.parametrize(
    ("lines", "complete"),
    [
        (["x = 3 +", "4"], [False, True]),
        (["x = 3 \\", "+ 4"], [False, True]),
        (["f(1,", "2)"], [False, True]),
        (["def f(x) =", "x * 2"], [False, True]),
        (["x = 1  # (a comment"], [True]),
        (["x = (1 +", ")"], [False, True]),  # a syntax error, but a finished one: run it and report
        (["x = 1 $"], [True]),
        (["x = 1  # a note \\", "y = 2"], [True, True]),  # a backslash in a comment continues nothing
        (["x = 3 +  # more", "4"], [False, True]),
    ],
)
def test_pending_input_knows_when_a_statement_is_finished(lines, complete):
    from gradcalc.parser.syntax import PendingInput

    pending = PendingInput()
    assert [pending.add(line) for line in lines] == complete


def test_a_trailing_operator_continues_the_statement_in_scripts_too():
    assert Session().run_source("x = 3 +\n4\nx")[0].value.data == 7.0
    assert Session().run_source("y = [1,\n 2]\nsum(y)")[0].value.data == 3.0


def test_non_ascii_digits_are_not_numbers():
    with pytest.raises(LanguageError, match="digits 0-9"):
        Session().run_source("\u0663 + 1")


def test_statement_text_is_the_source_text():
    program = compile_program("(A + 3) ** v\ncheck x.tanh()\n(x+1)*2\nf()\n  y[:]  # note\ncheck (x + 1) * 2 wrt x tol=1e-3\ncheck [x,] == [1]")
    assert [s.text for s in program.statements] == [
        "(A + 3) ** v", "x.tanh()", "(x+1)*2", "f()", "y[:]", "(x + 1) * 2", "[x,] == [1]",
    ]


def test_time_budget_message_has_no_python_words():
    done = limited("eval", "--max-steps", "1000", DOUBLING)
    assert not re.search(r"RecursionError|Traceback|StepLimitError", done.stderr)


SNIPPETS = [
    "(A + 3) ** v", "x.tanh()", "(x+1)*2", "f()", "y[:]", "[1, 2,]", "x = (1 +\n 2)", "def g(a) = (a)", "a, b = split(x, 2)",
    "z += (1)", "-(x)", "x if (y) else (z)", "sum(x, axis=0)", "[[1], [2]][0]", "x = 3 +\n4", "m = x \\\n* 2",
]


@given(st.lists(st.sampled_from(SNIPPETS), min_size=1, max_size=8),
       st.lists(st.sampled_from(["\n", ";", " ; ", "\n\n", "  # c\n", "\n  "]), min_size=8, max_size=8))
def test_every_statement_is_quoted_exactly_as_written(snippets, separators):
    source = "".join(s + sep for s, sep in zip(snippets, separators))
    assert [s.text for s in compile_program(source).statements] == snippets
    assert [s.text for s in compile_program(source, recover=True).statements] == snippets


BAD_SNIPPETS = ["y = (1 +* 2)", "1 2", "x = $", "f(,)", "def (a) = 1", "x = )"]


@given(st.lists(st.sampled_from(SNIPPETS) | st.sampled_from(BAD_SNIPPETS), min_size=1, max_size=8),
       st.lists(st.sampled_from(["\n", " ; ", "\n\n"]), min_size=8, max_size=8))
def test_a_bad_statement_is_set_aside_in_its_place_and_the_good_ones_compile(snippets, separators):
    source = "".join(s + sep for s, sep in zip(snippets, separators))
    statements = compile_program(source, recover=True).statements
    assert [s.text for s in statements] == snippets
    assert [s.kind == "error" for s in statements] == [s in BAD_SNIPPETS for s in snippets]
    assert all(s.error.kind == "syntax" for s in statements if s.kind == "error")


def test_matmul_backward_intermediate_is_checked_against_the_cap():
    """a (n, k) @ b (B, k, 1): inputs and output have 10^4 elements, but d/da is first a
    (B, n, k) stack (10^6) that un-broadcasting sums to (n, k); the plain backward pass
    must refuse it as the forward would, not allocate it."""
    a = Tensor(np.ones((100, 100)), requires_grad=True)
    b = Tensor(np.ones((100, 100, 1)), requires_grad=True)
    previous = set_max_elements(100_000)
    try:
        y = (a @ b).sum()
        with pytest.raises(SizeLimitError):
            y.backward()
    finally:
        set_max_elements(previous)


# ---- the element cap on the shortcuts of a plain backward pass ---------------------------------


@pytest.mark.parametrize("shape, fine", [
    ((), True), ((0,), True), ((3, 4), True), ((10**7,), True), ((10**7 + 1,), False), ((0, 10**8), False),
    ((np.int64(5), 3), True), ((True, 2), True), ((-1, 3), False), ((1,) * 65, False), ([3, 4], True),
    ((10**4, 10**4), False), ((2.0, 3), True),
])
def test_check_size_accepts_and_refuses_as_before(shape, fine):
    if fine:
        check_size(shape, "t")
    else:
        with pytest.raises(SizeLimitError):
            check_size(shape, "t")




def test_a_matrix_product_over_the_cap_is_refused_forward_and_backward():
    a, b = Tensor(np.ones((200, 1)), requires_grad=True), Tensor(np.ones((1, 200)), requires_grad=True)
    previous = set_max_elements(10_000)
    try:
        with pytest.raises(SizeLimitError):
            a @ b
        y = (b @ a).sum()  # (1, 1): fine; its gradients are (1, 200) and (200, 1)
        y.backward()
        set_max_elements(100)  # the plain pass checks each product it makes
        with pytest.raises(SizeLimitError):
            (b @ a).sum().backward()
    finally:
        set_max_elements(previous)


def test_a_full_sum_gradient_over_the_cap_is_refused():
    x = Tensor(np.ones((10, 10)), requires_grad=True)
    y = x.sum()
    previous = set_max_elements(50)
    try:
        with pytest.raises(SizeLimitError):
            y.backward()
    finally:
        set_max_elements(previous)


def test_the_cpu_timer_cannot_end_the_process_at_exit():
    """A session arms an interval timer of CPU time (SIGPROF); at exit it is stopped and
    a tick already sent is ignored, never the signal's default action (ending the process)."""
    code = (
        "import signal\n"
        "from gradcalc.parser import Session\n"
        "from gradcalc.autodiff import limits\n"
        "Session().run_source('x = 2\\nx ** 2')\n"
        "assert signal.getsignal(signal.SIGPROF) is limits._ring, 'the budget installed no timer'\n"
        "limits._at_exit()\n"
        "assert signal.getitimer(signal.ITIMER_PROF)[0] == 0\n"
        "assert signal.getsignal(signal.SIGPROF) is signal.SIG_IGN\n"
        "signal.raise_signal(signal.SIGPROF)\n"  # a late tick: ignored
        "print('alive')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "alive", done.stderr
