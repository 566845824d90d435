"""Replays compiled once per shape of graph: JAX's `jit` for the derivatives it takes of a
recorded graph.

A replay op by op (values.replay) is what JAX calls eager mode: every op dispatched on its
own, and under `jax.grad` traced again at each call. A program that takes a gradient in a
loop (`for k in range(100): L = loss(w); ... grad(L, w)`) records a graph of the same shape
in every iteration, so the graph's shape (its ops, parameters and wiring, the shapes of
its leaves) keys a cache of jitted functions of the leaves' values: the first iteration
compiles, the others run XLA's code.

A graph with calls (a derivative, a transformed function, a function with a rule of
yours) has no such key: its calls run the user's code again. Where compiling pays at once
(a check's Jacobians, a derivative, a report's adjoints) it is compiled for this use
alone, which still beats the eager replay: JAX's eager transformations lower and compile
every primitive of the derivative's own rules on its own (`gradcalc check
examples/second_order.gc --engine jax`: 19 s op by op, 7 s so). jit traces the graph's
leaves, which the eager replay reads as they are: a call whose code reads one as a number
(an index, a parameter) runs the same function op by op.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .library import ValueDependent
from .values import EngineValue, OpStep, replay, value_of

if TYPE_CHECKING:
    from .library import Library

Plan = tuple[Hashable, list[EngineValue]]
_CACHE: dict[Hashable, Callable[..., Any]] = {}
LARGEST_CACHE = 64  # compiled functions kept (the oldest go first: each holds its machine code)


def plan(order: Sequence[EngineValue], outputs: Sequence[EngineValue], inputs: Sequence[EngineValue] = (),
         offsets: Sequence[EngineValue] = ()) -> Plan | None:
    """The graph's shape as a key, and its leaves (whose values the compiled function
    takes); `inputs` are nodes whose values are given, `offsets` nodes where an offset is
    added. None for a graph that cannot be keyed (a call of the user's function)."""
    index: dict[int, int] = {}
    given = {id(n): k for k, n in enumerate(inputs)}
    parts: list[Hashable] = []
    leaves: list[EngineValue] = []
    for k, node in enumerate(order):
        index[id(node)] = k
        if id(node) in given:
            parts.append(("in", given[id(node)]))
        elif not node._prev:
            parts.append(("leaf", len(leaves), tuple(node.shape), str(node.dtype)))
            leaves.append(node)
        elif type(node.step) is OpStep:
            frozen = _frozen(node.params or {})
            if frozen is None:
                return None
            parts.append((node.step.op, frozen, tuple(index[id(p)] for p in node._prev)))
        else:
            return None
    # (an offset at a node off the graph changes nothing: its derivative is 0)
    where = (tuple(index[id(o)] for o in outputs), tuple(index.get(id(n), -1) for n in offsets))
    return (tuple(parts), where), leaves


def _frozen(params: dict[str, Any]) -> Hashable | None:
    """Parameters as a key (arrays by their bytes); None when one cannot be."""
    items = []
    for key, value in sorted(params.items()):
        parts = value if isinstance(value, tuple) else (value,)
        frozen = tuple(("array", p.shape, str(p.dtype), p.tobytes()) if isinstance(p, np.ndarray) else
                       ("slice", p.start, p.stop, p.step) if isinstance(p, slice) else p for p in parts)  # (slices hash from Python 3.12)
        try:
            hash(frozen)
        except TypeError:
            return None
        items.append((key, isinstance(value, tuple), frozen))
    return tuple(items)


def _thawed(frozen: Any) -> dict[str, Any]:
    params = {}
    for key, is_tuple, parts in frozen:
        values = tuple(_thawed_part(p) for p in parts)
        params[key] = values if is_tuple else values[0]
    return params


def _thawed_part(part: Any) -> Any:
    if isinstance(part, tuple) and part[:1] == ("array",):
        return np.frombuffer(part[3], dtype=part[2]).reshape(part[1])
    if isinstance(part, tuple) and part[:1] == ("slice",):
        return slice(*part[1:])
    return part


def runner(library: Library, key: Hashable) -> Callable[[list[Any], list[Any], list[Any]], list[Any]]:
    """The function of (leaf values, input values, offsets) that the graph of `key` computes."""
    shape: Any = key
    parts, (outputs, offsets) = shape
    steps = [(OpStep(p[0]), _thawed(p[1]), p[2]) if p[0] not in ("in", "leaf") else None for p in parts]

    def run(leaf_values: list[Any], input_values: list[Any], offset_values: list[Any]) -> list[Any]:
        added = dict(zip(offsets, offset_values))
        values: list[Any] = []
        for k, (part, step) in enumerate(zip(parts, steps)):
            if step is None:
                value = input_values[part[1]] if part[0] == "in" else leaf_values[part[1]]
            else:
                op, params, parents = step
                value = op.run(library, [values[p] for p in parents], params)
            if k in added:
                value = value + added[k]
            values.append(value)
        return [values[o] for o in outputs]

    return run


def compiled(library: Library, purpose: Hashable, key: Hashable, make: Callable[[Callable[..., list[Any]]], Callable[..., Any]]) -> Callable[..., Any]:
    """`jax.jit(make(run))` for the graph of `key`, made once per (purpose, key): `make`
    turns the graph's function run(leaves, inputs, offsets) into the one compiled, which
    takes (leaves, inputs, offsets) too."""
    found = _CACHE.get((purpose, key))
    if found is None:
        if len(_CACHE) >= LARGEST_CACHE:
            del _CACHE[next(iter(_CACHE))]
        found = _CACHE[(purpose, key)] = library.jax.jit(make(runner(library, key)))  # type: ignore[attr-defined]
    return found


def forget() -> None:
    """Drop every compiled function (Library.relieve)."""
    _CACHE.clear()


def jitted(library: Library, purpose: Hashable, order: Sequence[EngineValue], outputs: Sequence[EngineValue], inputs: Sequence[EngineValue],
           offsets: Sequence[EngineValue], make: Callable[[Callable[..., list[Any]]], Callable[..., Any]]) -> Callable[..., Any] | None:
    """On JAX, `make(run)` compiled for this graph's shape, as a function of the inputs' and
    offsets' values (the leaves' own are bound); a graph with calls compiled for this use
    alone (_CompiledOnce). None on the other engines. Every caller compiles at once: what
    it compiles (a check's Jacobians, a derivative, a report's adjoints) runs JAX's own
    transformations, which op by op lower and compile every primitive of their rules."""
    if library.name != "jax":
        return None
    planned = plan(order, outputs, inputs, offsets)
    if planned is None:
        return _CompiledOnce(library, order, outputs, inputs, offsets, make)
    key, leaves = planned
    function = compiled(library, purpose, key, make)
    bound = [value_of(leaf) for leaf in leaves]
    return lambda input_values, offset_values: function(bound, list(input_values), list(offset_values))


class _CompiledOnce:
    """`make(run)` of a graph with calls, compiled for this graph alone: `run` replays it
    (values.replay, whose calls read the values it substitutes). Called as jitted's
    functions are; `eager` once a call's code has asked for a traced value as a number
    (jit traces the leaves, which the replay op by op reads as they are), after which the
    same function runs op by op."""

    __slots__ = ("function", "fast", "bound", "eager")

    def __init__(self, library: Library, order: Sequence[EngineValue], outputs: Sequence[EngineValue], inputs: Sequence[EngineValue],
                 offsets: Sequence[EngineValue], make: Callable[[Callable[..., list[Any]]], Callable[..., Any]]) -> None:
        given = {id(n) for n in inputs}
        leaves = [n for n in order if not n._prev and id(n) not in given]
        nodes = list(order)

        def run(leaf_values: list[Any], input_values: list[Any], offset_values: list[Any]) -> list[Any]:
            values = {**{id(n): v for n, v in zip(leaves, leaf_values)}, **{id(n): v for n, v in zip(inputs, input_values)}}
            return replay(library, outputs, values, nodes, {id(n): v for n, v in zip(offsets, offset_values)})

        self.function = make(run)
        self.fast = library.jax.jit(self.function)  # type: ignore[attr-defined]
        self.bound = [value_of(leaf) for leaf in leaves]
        self.eager = False

    def __call__(self, input_values: Sequence[Any], offset_values: Sequence[Any]) -> Any:
        if not self.eager:
            try:
                return self.fast(self.bound, list(input_values), list(offset_values))
            except ValueDependent:
                self.eager = True
        return self.function(self.bound, list(input_values), list(offset_values))
