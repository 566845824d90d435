"""The engine's broadcasting of shapes against NumPy's, and past NumPy's 32 dimensions."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gradcalc.autodiff.shapes import broadcast_shapes

shapes = st.lists(st.lists(st.sampled_from([0, 1, 1, 2, 3]), max_size=5).map(tuple), max_size=4)


@given(shapes)
def test_broadcast_shapes_is_numpys(given_shapes):
    try:
        expected = np.broadcast_shapes(*given_shapes)
    except ValueError as err:
        with pytest.raises(ValueError, match="shape mismatch: objects cannot be broadcast to a single shape"):
            broadcast_shapes(*given_shapes)
        if len(given_shapes) == 2:  # (with two, the pair named is the only pair: NumPy's words exactly)
            with pytest.raises(ValueError) as ours:
                broadcast_shapes(*given_shapes)
            assert str(ours.value) == str(err)
        return
    assert broadcast_shapes(*given_shapes) == expected


def test_broadcast_shapes_goes_past_32_dimensions():
    assert broadcast_shapes((1,) * 40, (3,)) == (1,) * 39 + (3,)
    assert broadcast_shapes((2,) + (1,) * 63, (5,)) == (2,) + (1,) * 62 + (5,)
    with pytest.raises(ValueError, match="arg 0 with shape"):
        broadcast_shapes((2,) * 33, (3,))
