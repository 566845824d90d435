"""Replaying a recorded graph for a gradient check: per column, or batched.

A gradient check differentiates its recorded graph numerically by replaying it once per
element of every input (twice for central differences): one replay per column of the
Jacobian (gradcheck.numerical_jacobian, the reference). `Tape` compiles the graph once
for those replays, and `Tape.batched_jacobian` runs them together. A *slot* is one
replay (input k, flat element j, step +ih; or +h, and -h), and a value that depends on
a perturbed input carries all of its slots at once:

- dense: an array (slots, *shape), the batch axis first. An elementwise op gets each
  batched input reshaped to the output's rank, so that broadcasting lines up as in one
  replay; a reduction gets its axes shifted by one.
- sparse, for one large input at a time: perturbing one element changes, through
  elementwise ops, only that element. Such a value is the unperturbed replay `base`
  plus one entry per slot (flat position idx[s], value vals[s]); an elementwise op maps
  base and vals separately, O(size + slots) instead of O(size * slots). A full sum or
  mean makes it dense exactly: sum(base) - base[idx] + vals (for complex step the
  imaginary part is exact; the real part differs from a replay's sum by rounding).

Small inputs share one batch. Then each slot must see what its own replay sees: in
complex step a value that does not depend on the input a slot perturbs is real in that
replay, and complex arithmetic on it can differ (sqrt(-1) is nan, sqrt(-1 + 0j) is 1j).
So after each op, the slots of inputs it does not depend on get its recorded value
back: a real number there, as in their replays (NumPy makes it complex exactly as a
replay's arithmetic does when it meets a perturbed value).

Each op runs on a batch by its batching rule (batching.py, OpDef.batch), the one vmap
uses, here over arrays. An op without one (a rule the user wrote), an input that is not a
float64 leaf, or a precondition that fails at run time (a sparse sum over non-finite
values) makes `batched_jacobian` return None, and the caller replays per column.
gradcheck also checks sampled columns of a batched result against replays per column.
"""
from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from .limits import charge, check_size, max_elements
from .namespaces import ARRAY_MATH
from .ops.reductions import normalize_axes
from .wiring import recorded_params

SPARSE_MIN = 32  # an input of more elements, replayed on its own, is carried sparse
SMALL_INPUT = 64  # inputs of at most this many elements share batches...
JOINT_COLUMNS = 256  # ...of at most this many columns
DENSE_BUDGET = 1 << 21  # elements of all dense values of a run together (each within the element cap too)

DENSE, SPARSE = 1, 2  # how a node is carried; None: not batched (the same in every slot)
_LEAF, _UNARY, _BINARY, _GENERAL = "leaf", "unary", "binary", "general"  # a replay's steps (Tape.steps)


def check_jacobian_size(rows: int, columns: int) -> None:
    """check_size for the Jacobian of a gradient check, rows x columns."""
    check_size((rows, columns), "the Jacobian of a gradient check")


class Unsupported(Exception):
    """The batched replay does not apply after all: replay per column."""


class Sparse:
    """A batched value equal to `base` except at flat position idx[s] in slot s, where it is vals[s]."""

    __slots__ = ("base", "idx", "vals")

    def __init__(self, base: np.ndarray, idx: np.ndarray, vals: np.ndarray) -> None:
        self.base, self.idx, self.vals = base, idx, vals

    def dense(self) -> np.ndarray:
        n = self.idx.size
        data = np.repeat(self.base.reshape(1, -1), n, axis=0)
        data[np.arange(n), self.idx] = self.vals
        return data.reshape((n, *self.base.shape))


class Tape:
    """The graph of `output` (its topological order) compiled for replays.

    `steps` is what a replay does at each node, looked up once. What batched replays
    also need (each op node's parents as positions in the order, the parameters it was
    called with, whether every op may be batched) is worked out on first use: most
    checks of a check file only replay."""

    def __init__(self, output: Any, order: list[Any]) -> None:
        self.output, self.order = output, order
        self.index = index = {id(node): i for i, node in enumerate(order)}
        # At position i: (i, LEAF, None, id(leaf), None), (i, UNARY or BINARY, forward,
        # parent positions) for the common op without parameters, else (i, GENERAL,
        # forward, parents, (params, pick)).
        self.steps: list[tuple[Any, ...]] = []
        # Each node's recorded value; a 0-d one as the NumPy scalar holding it, as ops
        # give them (NumPy's arithmetic on scalars costs a third of that on 0-d arrays;
        # the ops' ufuncs make it the same bits: see ops/arithmetic.py).
        self.recorded: list[Any] = []
        self._plans: dict[tuple[int, ...], list[tuple[Any, ...]]] = {}  # replaced leaves -> replay's plan (plan())
        keep, record = self.steps.append, self.recorded.append
        for i, node in enumerate(order):
            data = node.data
            record(data if data.ndim else data[()])
            op = node.op
            if op is None:
                keep((i, _LEAF, None, id(node), None))
                continue
            parents = node._prev
            if not node.params and len(parents) <= 2:
                if len(parents) == 2:
                    keep((i, _BINARY, op.forward, index[id(parents[0])], index[id(parents[1])]))
                    continue
                if len(parents) == 1:
                    keep((i, _UNARY, op.forward, index[id(parents[0])], None))
                    continue
            params, pick = recorded_params(node)
            keep((i, _GENERAL, op.forward, tuple([index[id(p)] for p in parents]), (params or None, pick)))

    @functools.cached_property
    def parents(self) -> list[tuple[int, ...]]:
        index = self.index
        return [tuple([index[id(p)] for p in node._prev]) for node in self.order]

    @functools.cached_property
    def params(self) -> list[dict[str, Any]]:
        return [recorded_params(node)[0] if node.op is not None else {} for node in self.order]

    @functools.cached_property
    def batchable(self) -> bool:
        """Every op on the graph has a batching rule."""
        return all(node.op.batch is not None for node in self.order if node.op is not None)

    @functools.cached_property
    def picks(self) -> list[int | None]:
        """Which output of its op each node is (None for an op with one)."""
        return [recorded_params(node)[1] if node.op is not None else None for node in self.order]

    def replay(self, values: dict[int, Any]) -> np.ndarray:
        """gradcheck.replay: the graph recomputed with some leaves' data replaced
        (`values` keyed by id(leaf)); the same forwards on the same arrays.

        Only the nodes that depend on a replaced leaf run again: every other node would
        compute its recorded value from its recorded inputs, so it keeps that value (a
        check of three numbers replays about half of its graph per column)."""
        charge(len(self.order), "gradient check")
        key = tuple(values)
        plan = self._plans.get(key)
        if plan is None:
            self.plan([key])
            plan = self._plans[key]
        data = self.recorded.copy()
        for i, kind, forward, a, b in plan:
            if kind is _BINARY:
                data[i] = forward(data[a], data[b])
            elif kind is _UNARY:
                data[i] = forward(data[a])
            elif kind is _LEAF:
                data[i] = values[a]
            else:
                params, pick = b
                args = [data[p] for p in a]
                out = forward(*args) if params is None else forward(*args, **params)
                data[i] = out if pick is None else out[pick]
        return np.asarray(data[-1])

    def plan(self, replays: list[tuple[int, ...]]) -> None:
        """Plan replays that each replace some nodes' values (by id), in one pass over the
        graph: a replay runs the steps of the nodes that depend on a node it replaces. A
        replaced op node (`check ... wrt y` for a named intermediate y, as `grad(out, y)`
        differentiates) is an input in that replay, whose value is given, and is computed
        as recorded in the others."""
        given = [0] * len(self.steps)  # bit r: replay r replaces the node
        for r, key in enumerate(replays):
            for node in key:
                i = self.index.get(node)
                if i is not None:
                    given[i] |= 1 << r
        varies: list[int] = []  # bit r: the node depends on a node replay r replaces
        mark = varies.append
        for (_, kind, _, a, b), mask in zip(self.steps, given):
            if kind is _BINARY:
                mark(mask | varies[a] | varies[b])
            elif kind is _UNARY:
                mark(mask | varies[a])
            elif kind is _LEAF:
                mark(mask)
            else:
                for p in a:
                    mask |= varies[p]
                mark(mask)
        for r, key in enumerate(replays):
            bit = 1 << r
            self._plans[key] = [
                (step[0], _LEAF, None, id(self.order[step[0]]), None) if mine & bit and step[1] is not _LEAF else step
                for step, mask, mine in zip(self.steps, varies, given) if mask & bit
            ]

    def batched_jacobian(self, leaves: Sequence[Any], method: str, step: float) -> list[np.ndarray] | None:
        """d output / d leaf for each leaf as (output.size, leaf.size) matrices
        (np.zeros((0, 0)) for an empty leaf, as numerical_jacobian gives) from batched
        replays, or None where they do not apply."""
        if not self.batchable or len({id(leaf) for leaf in leaves}) != len(leaves):
            return None
        for leaf in leaves:
            if leaf.op is not None or leaf.data.dtype != np.float64:
                return None
        base = np.asarray(self.output.data)
        jacobians: list[Any] = []
        for leaf in leaves:
            if leaf.size == 0:
                jacobians.append(np.zeros((0, 0)))
                continue
            check_jacobian_size(base.size, leaf.size)
            if id(leaf) in self.index:
                jacobians.append(None)  # from the batched replays, below
            else:  # the output does not vary with it: every replay gives the output as it is
                outputs = np.broadcast_to(base.reshape(1, -1), (_slots(method), base.size))
                jacobians.append(np.repeat(_columns(outputs, method, step).T, leaf.size, axis=1))
        used = [k for k, leaf in enumerate(leaves) if jacobians[k] is None]
        small = [k for k in used if leaves[k].size <= SMALL_INPUT]
        try:
            for ks in _joint(small, leaves) + [[k] for k in used if leaves[k].size > SMALL_INPUT]:
                batch = BatchedReplay(self, [leaves[k] for k in ks], method, step)
                for pieces in batch.runs():
                    charge(len(self.order), "gradient check")
                    for (i, start, stop), block in zip(pieces, batch.run(pieces)):
                        k = ks[i]
                        if start == 0 and stop == leaves[k].size:  # the whole leaf in one run
                            jacobians[k] = block
                            continue
                        if jacobians[k] is None:
                            jacobians[k] = np.empty((base.size, leaves[k].size))
                        jacobians[k][:, start:stop] = block
        except (Unsupported, FloatingPointError, ValueError, TypeError, IndexError, MemoryError):
            return None  # (replays one by one need less memory, and raise what they raise)
        return jacobians


def _joint(small: list[int], leaves: Sequence[Any]) -> list[list[int]]:
    """Small inputs in batches of at most JOINT_COLUMNS columns."""
    batches: list[list[int]] = []
    width = JOINT_COLUMNS
    for k in small:
        if width + leaves[k].size > JOINT_COLUMNS:
            batches.append([])
            width = 0
        batches[-1].append(k)
        width += leaves[k].size
    return batches


def _slots(method: str) -> int:
    """Slots per column: +h and -h for central differences, +ih for complex step."""
    return 2 if method == "central" else 1


def _columns(outputs: np.ndarray, method: str, step: float) -> np.ndarray:
    """Jacobian columns, one a row, from the flat outputs of the slots (those of +h,
    then those of -h), formed as numerical_jacobian forms them."""
    if method == "complex":
        return np.imag(outputs) / step
    half = outputs.shape[0] // 2
    return (np.real(outputs[:half]) - np.real(outputs[half:])) / (2 * step)


def _scalar_params(params: dict[str, Any]) -> bool:
    return all(np.ndim(getattr(v, "data", v)) == 0 for v in params.values())


class Layout:
    """Which column and element each slot of a run perturbs, and by how much.

    Columns are numbered over `pieces` in order; with central differences slot c adds
    +h to column c and slot c + columns adds -h to it; with complex step slot c adds ih."""

    def __init__(self, pieces: tuple[tuple[int, int, int], ...], offsets: tuple[int, ...], method: str, step: float) -> None:
        owner = np.concatenate([np.full(stop - start, k) for k, start, stop in pieces])
        where = np.concatenate([np.arange(start, stop) for _, start, stop in pieces])
        self.columns = owner.size
        if method == "central":
            owner, where = np.concatenate([owner, owner]), np.concatenate([where, where])
            self.deltas = np.repeat([step, -step], self.columns)
        else:
            self.deltas = np.full(owner.size, 1j * step)
        self.owner, self.where = owner, where  # the leaf each slot perturbs, and its element
        self.slots = owner.size
        self.rows = np.arange(self.slots)
        self.cells = np.asarray(offsets)[owner] + where  # the element, in all leaves' elements in a row
        self.outside: dict[int, np.ndarray] = {}

    def outside_of(self, mask: int) -> np.ndarray:
        """Slots that perturb a leaf not in `mask` (bit k: leaf k)."""
        rows = self.outside.get(mask)
        if rows is None:
            inside = np.array([(mask >> k) & 1 for k in range(int(self.owner.max()) + 1)], dtype=bool)
            rows = self.outside[mask] = ~inside[self.owner]
        return rows


# Small layouts are the same for every check with the same inputs' sizes (a file of
# scalar checks builds one); large ones are built for their run only.
_LAYOUTS: dict[tuple[Any, ...], Layout] = {}
CACHED_LAYOUTS, CACHED_SLOTS = 64, 1024


def layout(pieces: list[tuple[int, int, int]], offsets: tuple[int, ...], method: str, step: float) -> Layout:
    if offsets[-1] > CACHED_SLOTS:
        return Layout(tuple(pieces), offsets, method, step)
    key = (tuple(pieces), offsets, method, step)
    found = _LAYOUTS.get(key)
    if found is None:
        if len(_LAYOUTS) >= CACHED_LAYOUTS:
            _LAYOUTS.clear()
        found = _LAYOUTS[key] = Layout(key[0], offsets, method, step)
    return found


class BatchedReplay:
    """Batched replays of a tape perturbing the elements of `leaves`.

    Planned once from the recorded shapes (how each node is carried, which leaves it
    depends on, how many elements its dense values take per slot), then run for parts of
    the columns that keep all dense values of a run (they stay alive until it ends)
    within DENSE_BUDGET elements."""

    def __init__(self, tape: Tape, leaves: list[Any], method: str, step: float) -> None:
        self.tape, self.leaves, self.method, self.step = tape, leaves, method, step
        order = tape.order
        self.leaf_at = {tape.index[id(leaf)]: k for k, leaf in enumerate(leaves)}
        self.offsets = tuple(itertools.accumulate((leaf.size for leaf in leaves), initial=0))
        # Sparse values only with one input: they carry one changed entry per slot.
        self.sparse = len(leaves) == 1 and leaves[0].size > SPARSE_MIN
        # In joint complex-step batches, slots whose input a value does not depend on
        # hold its recorded value wherever it meets values that do (module docstring).
        self.joint_complex = method == "complex" and len(leaves) > 1
        self.kinds: list[int | None] = [None] * len(order)
        self.depends = [0] * len(order)  # bit k: the node varies with leaves[k]
        self.restore: list[tuple[int, ...]] = [()] * len(order)  # inputs to restore first
        self.per_slot = 0  # elements of all dense values, per slot
        for i, node in enumerate(order):
            self.plan(i, node)

    # ---- planning -----------------------------------------------------------------------
    def plan(self, i: int, node: Any) -> None:
        if node.op is None:
            k = self.leaf_at.get(i)
            if k is not None:
                self.kinds[i] = SPARSE if self.sparse else DENSE
                self.depends[i] = 1 << k
                self.per_slot += 0 if self.sparse else node.data.size
            return
        parents, depends_on = self.tape.parents[i], self.depends
        depends = 0
        for p in parents:
            depends |= depends_on[p]
        if not depends:  # not batched: the same in every slot
            return
        depends_on[i] = depends
        order = self.tape.order
        width = max([node.data.size] + [order[p].data.size for p in parents if depends_on[p]])
        if self.joint_complex:
            # A leaf needs none: where it is not perturbed it holds its own value already.
            self.restore[i] = tuple([p for p in parents if depends_on[p] and depends_on[p] != depends and p not in self.leaf_at])
        kind = DENSE
        if self.sparse and self.tape.picks[i] is None:  # one input: sparse where the op keeps it so (module docstring)
            kinds = [self.kinds[p] for p in parents]
            batched = [order[p].data for p in parents if depends_on[p]]
            passes, shape = node.op.batch.sparse, node.data.shape
            if passes == "elementwise":
                if DENSE not in kinds and _scalar_params(self.tape.params[i]) and all(x.shape == shape for x in batched):
                    kind, width = SPARSE, 0
            elif passes in ("total", "average") and kinds[0] == SPARSE and self.reduced_axes(i) == tuple(range(batched[0].ndim)):
                width = node.data.size  # dense (slots, 1, ...) from a sparse value, with no dense copy of it
            elif passes == "view" and kinds[0] == SPARSE:
                kind, width = SPARSE, 0
        self.kinds[i] = kind
        self.per_slot += width

    def reduced_axes(self, i: int) -> tuple[int, ...]:
        x = self.tape.order[self.tape.parents[i][0]].data
        return normalize_axes(self.tape.params[i].get("axis"), x.ndim)

    def runs(self) -> list[list[tuple[int, int, int]]]:
        """The columns as (leaf k, first, last + 1 flat position) pieces, cut into runs
        that keep the dense values within the budget."""
        per_run = max(1, min(DENSE_BUDGET, max_elements()) // max(self.per_slot, 1) // _slots(self.method))
        runs: list[list[tuple[int, int, int]]] = [[]]
        room = per_run
        for k, leaf in enumerate(self.leaves):
            start = 0
            while start < leaf.size:
                if room == 0:
                    runs.append([])
                    room = per_run
                stop = min(leaf.size, start + room)
                runs[-1].append((k, start, stop))
                room -= stop - start
                start = stop
        return runs

    # ---- running ------------------------------------------------------------------------
    def run(self, pieces: list[tuple[int, int, int]]) -> list[np.ndarray]:
        """Replay the slots of the columns in `pieces`: the Jacobian block of each piece
        (views of one array)."""
        tape = self.tape
        slots = layout(pieces, self.offsets, self.method, self.step)
        values: list[Any] = [None] * len(tape.order)
        self.place_leaves(values, slots)
        kinds, restore, order = self.kinds, self.restore, tape.order
        restored: set[int] = set()
        for i, node in enumerate(order):
            if kinds[i] is None or node.op is None:
                continue
            for p in restore[i]:
                if p not in restored:  # its other slots get its recorded value (see plan)
                    values[p][slots.outside_of(self.depends[p])] = order[p].data
                    restored.add(p)
            values[i] = self.apply(i, node, values)
        result = values[-1]  # the output, last in topological order
        if result is None:
            raise Unsupported("the output does not vary with the inputs")
        if isinstance(result, Sparse):
            result = result.dense()
        columns = _columns(result.reshape(slots.slots, -1), self.method, self.step)
        blocks, start = [], 0
        for _, first, stop in pieces:
            blocks.append(columns[start : start + stop - first].T)
            start += stop - first
        return blocks

    def place_leaves(self, values: list[Any], slots: Layout) -> None:
        """Each perturbed input's value in every slot: its own slots perturbed at one
        element (the step added as a replay adds it: x + 1j*h, x + h, x + -h), the
        other slots as it is (complex for complex step, as NumPy makes it there)."""
        leaves = self.leaves
        if len(leaves) == 1:
            row = leaves[0].data.reshape(-1)
        elif all(leaf.ndim == 0 for leaf in leaves):
            row = np.array([leaf.data for leaf in leaves])
        else:
            row = np.concatenate([leaf.data.reshape(-1) for leaf in leaves])
        if self.method == "complex":
            row = row.astype(np.complex128)
        if self.sparse:
            vals = row[slots.where]
            vals += slots.deltas
            values[self.tape.index[id(leaves[0])]] = Sparse(row.reshape(leaves[0].shape), slots.where, vals)
            return
        batch = row.reshape(1, -1).repeat(slots.slots, axis=0)
        batch[slots.rows, slots.cells] += slots.deltas
        offsets, index = self.offsets, self.tape.index
        for k, leaf in enumerate(leaves):
            if leaf.ndim == 0:
                values[index[id(leaf)]] = batch[:, offsets[k]]
            else:
                values[index[id(leaf)]] = batch[:, offsets[k] : offsets[k + 1]].reshape((slots.slots, *leaf.shape))

    def apply(self, i: int, node: Any, values: list[Any]) -> Any:
        """One node in every slot: its op's batching rule over the slot axis (batching.py),
        or, for a sparse value, the elementwise map or C-order view of base and entries."""
        tape = self.tape
        op, params, shape = node.op, tape.params[i], node.data.shape
        parents = tape.parents[i]
        if self.kinds[i] == SPARSE:
            if op.batch.sparse == "view":
                value = values[parents[0]]
                return Sparse(value.base.reshape(shape), value.idx, value.vals)
            return self.sparse_elementwise(node, params, [(tape.order[p], values[p]) for p in parents])
        if op.batch.sparse in ("total", "average") and type(values[parents[0]]) is Sparse:
            value = values[parents[0]]
            if self.reduced_axes(i) == tuple(range(value.base.ndim)):
                return _sparse_sum(op.batch.sparse == "average", value).reshape((value.idx.size, *shape))
        args, flags = [], []
        for p in parents:
            data = values[p]
            if data is None:  # not batched: the same in every slot
                args.append(tape.order[p].data)
                flags.append(False)
                continue
            args.append(data.dense() if type(data) is Sparse else data)
            flags.append(True)
        out = op.batch.run(ARRAY_MATH, op, 1, args, flags, params)
        pick = tape.picks[i]
        if pick is not None:
            out = out[pick]
        if type(out) is not np.ndarray or out.shape[1:] != shape:
            raise Unsupported(op.name)
        return out

    def sparse_elementwise(self, node: Any, params: dict[str, Any], inputs: list[tuple[Any, Any]]) -> Sparse:
        idx = next(v.idx for _, v in inputs if v is not None)
        bases, vals = [], []
        for parent, value in inputs:
            if value is None:  # not batched: its element at each slot's position
                data = parent.data
                bases.append(data)
                vals.append(data if data.ndim == 0 else np.broadcast_to(data, node.data.shape).reshape(-1)[idx])
            else:
                bases.append(value.base)
                vals.append(value.vals)
        base = np.asarray(node.op.forward(*bases, **params))
        out = np.asarray(node.op.forward(*vals, **params))
        if base.shape != node.data.shape or out.shape != idx.shape:
            raise Unsupported(node.op.name)
        return Sparse(base, idx, out)


def _sparse_sum(average: bool, value: Sparse) -> np.ndarray:
    """Each slot's sum (or mean) of a sparse value: the base's, with the one entry changed."""
    base = value.base
    total = np.sum(base)
    # Exact only where nothing is lost to inf or nan (inf - inf is not the sum without
    # that entry): otherwise replay per column.
    if not (np.isfinite(total) and np.all(np.isfinite(base))):
        raise Unsupported("a sum over non-finite values")
    sums = total - base.reshape(-1)[value.idx] + value.vals
    return sums / base.size if average else sums
