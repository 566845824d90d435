"""gradcalc's autodiff engine: a NumPy tensor engine and a scalar engine, no UI.

    from gradcalc.autodiff import Tensor, grad
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()      # x.grad == [2., 4.]

JAX's transformations over Python functions of Tensors, each one pass:

    from gradcalc.autodiff import vmap, grad, jacrev, jacfwd, hessian
    vmap(grad(lambda w: (w * w).sum()))(W)  # each row's gradient, one evaluation, one backward pass
"""
from . import ops as _ops  # noqa: F401  (registers every op)
from .backprop import backward, collector_paused, topological_order
from .derivatives import jacobian
from .errors import ArgumentError, EngineError, ShapeError, SizeLimitError
from .forward import jacobian_forward, push_forward, tangent_of
from .graph import GraphStats, TreeNode, first_nonfinite, graph_stats, graph_tree, walk_tree
from .limits import max_elements, set_max_elements
from .registry import ALIASES, REGISTRY, TORCH_CHECKED, Check, Edge, OpDef, defop, lookup
from .registry import TENSOR_MATH as ops  # ops.exp(x), ops.sum(x, axis=0), ...
from .scalar import Value
from .tensor import Provenance, Tensor, as_tensor, is_grad_enabled, made_by, no_grad, set_grad_enabled, whole_numbers
from .transforms import Batched, grad, grad_of, hessian, hessian_of, jacfwd, jacrev, jvp, value_and_grad, vjp, vmap

__all__ = [
    "ALIASES", "REGISTRY", "TORCH_CHECKED", "ArgumentError", "Check", "Edge", "collector_paused", "EngineError", "GraphStats", "OpDef", "ShapeError",
    "SizeLimitError", "Tensor", "TreeNode", "Value", "as_tensor", "backward", "defop", "first_nonfinite",
    "grad", "graph_stats", "graph_tree", "hessian", "is_grad_enabled", "jacobian", "jacobian_forward", "jvp",
    "lookup", "made_by", "Provenance", "push_forward", "tangent_of",
    "max_elements", "no_grad", "ops", "set_grad_enabled", "set_max_elements", "topological_order", "walk_tree", "whole_numbers",
    "Batched", "grad_of", "hessian_of", "jacfwd", "jacrev", "value_and_grad", "vjp", "vmap",
]
