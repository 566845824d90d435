"""Data files: loaders round-trip and refuse bad files; NAME=@FILE bindings, load() in
scripts, --save. The oracle for every value is NumPy's own writer or a closed form."""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gradcalc.autodiff import set_max_elements
from gradcalc.parser import LanguageError, Session
from gradcalc.parser.datafiles import file_bindings, load_array, split_spec

from .test_cli import gradcalc

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@pytest.fixture()
def cap():
    """Set the element cap for one test."""
    saved: list[int] = []

    def set_cap(n: int) -> None:
        saved.append(set_max_elements(n))

    yield set_cap
    if saved:
        set_max_elements(saved[0])


def refused(path: Path | str, *fragments: str, key: str | None = None) -> LanguageError:
    with pytest.raises(LanguageError) as caught:
        load_array(path, key)
    message = str(caught.value)
    assert str(path) in message, message  # every error names the file
    for fragment in fragments:
        assert fragment in message, message
    return caught.value


# ---- round trips ---------------------------------------------------------------------------------


@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4), elements=finite),
       st.booleans())
def test_npy_round_trip(tmp_path_factory, array, fortran):
    path = tmp_path_factory.mktemp("npy") / "a.npy"
    np.save(path, np.asfortranarray(array) if fortran and array.ndim > 1 else array)
    loaded = load_array(path)
    assert loaded.dtype == np.float64 and loaded.shape == array.shape
    np.testing.assert_array_equal(loaded, array)


def test_npy_of_ints_bools_and_big_endian_floats_load_as_float64(tmp_path):
    for name, array in {"i": np.arange(6, dtype=np.int32).reshape(2, 3), "b": np.array([True, False]),
                        "e": np.array([1.5, -2.25], dtype=">f8"), "h": np.array([0.5], dtype=np.float16)}.items():
        np.save(tmp_path / f"{name}.npy", array)
        loaded = load_array(tmp_path / f"{name}.npy")
        assert loaded.dtype == np.float64
        np.testing.assert_array_equal(loaded, array.astype(np.float64))


def test_npz_by_key_and_alone(tmp_path):
    np.savez(tmp_path / "d.npz", W=np.eye(2), b=np.array([1.0, 2.0]))
    np.testing.assert_array_equal(load_array(tmp_path / "d.npz", "W"), np.eye(2))
    np.testing.assert_array_equal(load_array(f"{tmp_path / 'd.npz'}:b"), [1.0, 2.0])
    np.savez_compressed(tmp_path / "one.npz", only=np.arange(3.0))
    np.testing.assert_array_equal(load_array(tmp_path / "one.npz"), [0.0, 1.0, 2.0])
    refused(tmp_path / "d.npz", "holds 2 arrays (W, b); name one")
    refused(tmp_path / "d.npz", "has no array 'c' (it holds: W, b)", key="c")


def test_split_spec_reads_a_key_only_after_a_data_file_suffix():
    assert split_spec("data.npz:W") == ("data.npz", "W")
    assert split_spec("t.csv:price") == ("t.csv", "price")
    assert split_spec("C:/data/w.npy") == ("C:/data/w.npy", None)
    assert split_spec("w.npy") == ("w.npy", None)


@given(hnp.arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(2, 4)), elements=finite))
def test_csv_round_trip_with_and_without_header(tmp_path_factory, table):
    folder = tmp_path_factory.mktemp("csv")
    np.savetxt(folder / "plain.csv", table, delimiter=",", fmt="%.17g")
    np.savetxt(folder / "named.csv", table, delimiter=",", fmt="%.17g", header=",".join(f"c{k}" for k in range(table.shape[1])), comments="")
    np.testing.assert_array_equal(load_array(folder / "plain.csv"), table)
    np.testing.assert_array_equal(load_array(folder / "named.csv"), table)
    np.testing.assert_array_equal(load_array(folder / "named.csv", "c1"), table[:, 1])


def test_csv_one_column_is_a_vector_and_blank_lines_are_skipped(tmp_path):
    (tmp_path / "v.csv").write_text("y\n1\n\n2.5\n-3e2\n")
    np.testing.assert_array_equal(load_array(tmp_path / "v.csv"), [1.0, 2.5, -300.0])


@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=3), elements=finite))
def test_json_round_trip(tmp_path_factory, array):
    path = tmp_path_factory.mktemp("json") / "x.json"
    path.write_text(json.dumps(array.tolist()))
    loaded = load_array(path)
    assert loaded.shape == array.shape
    np.testing.assert_array_equal(loaded, array)


def test_json_member_by_key_and_gradcalcs_nonfinite_strings(tmp_path):
    (tmp_path / "o.json").write_text('{"W": [[1, 2], [3, 4]], "v": ["inf", "-inf", 0.5]}')
    np.testing.assert_array_equal(load_array(tmp_path / "o.json", "W"), [[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(load_array(tmp_path / "o.json", "v"), [np.inf, -np.inf, 0.5])
    refused(tmp_path / "o.json", "holds an object; name one of its members")


# ---- bad files -----------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".npy", ".npz", ".csv", ".json"])
def test_a_missing_file(tmp_path, suffix):
    refused(tmp_path / f"nope{suffix}", "cannot read: No such file or directory")


def test_a_truncated_npy_is_refused_before_its_data_is_read(tmp_path):
    path = tmp_path / "t.npy"
    np.save(path, np.arange(6.0))
    whole = path.read_bytes()
    path.write_bytes(whole[:-20])
    refused(path, "truncated: the header promises 48 bytes of data, the file holds 28")
    path.write_bytes(whole[:5])
    refused(path, "not a valid .npy file")


class _Touch:
    """Unpickling this creates a file: proof that a loader unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_a_pickled_object_array_is_refused_and_never_unpickled(tmp_path, monkeypatch):
    marker = tmp_path / "unpickled"
    path = tmp_path / "evil.npy"
    np.save(path, np.array([_Touch(marker), 1], dtype=object), allow_pickle=True)
    np.savez(tmp_path / "evil.npz", W=np.array([_Touch(marker)], dtype=object), allow_pickle=True)

    def no_unpickling(*args, **kwargs):
        raise AssertionError("a loader unpickled")

    monkeypatch.setattr(pickle, "load", no_unpickling)
    monkeypatch.setattr(pickle, "loads", no_unpickling)
    error = refused(path, "holds Python objects", "never unpickles")
    assert error.kind == "safety"
    refused(tmp_path / "evil.npz", "holds Python objects", key="W")
    assert not marker.exists()


def test_a_header_over_the_element_cap_is_refused_before_reading(tmp_path):
    path = tmp_path / "huge.npy"
    header = {"descr": "<f8", "fortran_order": False, "shape": (100_000, 100_000)}
    with path.open("wb") as stream:
        np.lib.format.write_array_header_1_0(stream, header)  # a header promising 80 GB, and no data
    error = refused(path, "(100000, 100000)", "10,000,000,000 elements, over the cap of 10,000,000")
    assert error.kind == "size"


def test_an_oversized_header_is_refused(tmp_path):
    path = tmp_path / "long.npy"
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), " + " " * 20_000 + "}"
    with path.open("wb") as stream:
        stream.write(b"\x93NUMPY\x02\x00" + len(header + "\n").to_bytes(4, "little") + (header + "\n").encode("latin1"))
        stream.write(np.zeros(1).tobytes())
    refused(path, "not a valid .npy file", "large")


def test_other_dtypes_and_kinds_of_file_are_refused(tmp_path):
    np.save(tmp_path / "s.npy", np.array(["a", "b"]))
    refused(tmp_path / "s.npy", "holds <U1 data; gradcalc reads numbers")
    np.save(tmp_path / "c.npy", np.array([1j]))
    refused(tmp_path / "c.npy", "complex128")
    (tmp_path / "w.txt").write_text("1 2")
    refused(tmp_path / "w.txt", "unknown kind of data file; use one of .npy, .npz, .csv, .json")
    (tmp_path / "z.npz").write_text("not a zip")
    refused(tmp_path / "z.npz", "not a valid .npz file")
    np.save(tmp_path / "k.npy", np.ones(2))
    refused(tmp_path / "k.npy", "a .npy file holds one array; there is no key 'W'", key="W")


@pytest.mark.parametrize(("name", "text", "key", "expected"), [
    ("ragged.csv", "a,b\n1,2\n3\n", None, "line 3: 1 columns, but line 1 has 2"),
    ("word.csv", "1,2\n3,x4\n", None, "line 2, column 2: 'x4' is not a number"),
    ("header_only.csv", "a,b\n", None, "holds no rows of numbers"),
    ("columns.csv", "a,b\n1,2\n", "c", "has no column 'c' (columns: a, b)"),
    ("ragged.json", "[[1, 2], [3]]", None, "ragged nested lists: at depth 2 found a list of 1 where the first has 2"),
    ("word.json", '[1, "two"]', None, "found the string 'two' where a number belongs"),
    ("broken.json", "[1,\n 2,,]", None, "line 2, column 4: not valid JSON"),
])
def test_bad_csv_and_json_name_the_place(tmp_path, name, text, key, expected):
    (tmp_path / name).write_text(text)
    refused(tmp_path / name, expected, key=key)


def test_csv_and_json_are_held_to_the_element_cap_while_read(tmp_path, cap):
    cap(5)
    (tmp_path / "big.csv").write_text("1,2\n3,4\n5,6\n")
    assert refused(tmp_path / "big.csv", "more than 5 numbers").kind == "size"
    (tmp_path / "big.json").write_text("[[1, 2], [3, 4], [5, 6]]")
    assert refused(tmp_path / "big.json", "over the cap of 5").kind == "size"


# ---- bindings, load(), --save --------------------------------------------------------------------


def test_file_bindings_name_what_they_bind(tmp_path):
    np.savez(tmp_path / "d.npz", W=np.eye(2), b=np.ones(2))
    (tmp_path / "table.csv").write_text("1,2\n")
    assert file_bindings("x=3") is None and file_bindings("x=a@b") is None
    assert [n for n, _ in file_bindings("@d.npz", tmp_path)] == ["W", "b"]
    assert [n for n, _ in file_bindings("@d.npz:b", tmp_path)] == ["b"]
    assert [n for n, _ in file_bindings("V = @d.npz:W", tmp_path)] == ["V"]
    assert [n for n, _ in file_bindings("@table.csv", tmp_path)] == ["table"]
    with pytest.raises(LanguageError, match="'__x' is not a usable variable name"):
        file_bindings("__x=@table.csv", tmp_path)


def test_eval_binds_arrays_from_files(tmp_path):
    W = np.array([[1.0, 2.0], [3.0, 4.0]])
    np.save(tmp_path / "w.npy", W)
    np.savez(tmp_path / "d.npz", x=np.array([0.5, -1.0]))
    (tmp_path / "t.csv").write_text("p,q\n1,2\n")
    done = gradcalc("eval", "sum(W @ x) + sum(t)", "W=@w.npy", "@d.npz:x", "@t.csv", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    # sum(W @ x) = 1*0.5 + 2*(-1) + 3*0.5 + 4*(-1) = -4; d/dW = outer(1, x); d/dx = column sums of W
    assert doc["value"] == -4.0 + 3.0
    assert doc["grads"] == {"W": [[0.5, -1.0], [0.5, -1.0]], "x": [4.0, 6.0], "t": [[1.0, 1.0]]}


def test_a_bad_binding_file_is_a_clear_error(tmp_path):
    (tmp_path / "r.csv").write_text("1,2\n3\n")
    done = gradcalc("eval", "sum(r)", "@r.csv", cwd=tmp_path)
    assert done.returncode == 2
    assert "r.csv: line 2: 1 columns, but line 1 has 2" in done.stderr
    missing = gradcalc("eval", "W", "W=@nothing.npy", cwd=tmp_path)
    assert missing.returncode == 2 and "nothing.npy: cannot read" in missing.stderr


# Found by a helper's hostile inputs: a data file's members and a file's own name were
# accepted as names by str.isidentifier, which takes names the language cannot read back
# (`é` bound, then `é * 2` a syntax error). A name is what the grammar's NAME reads.
@pytest.mark.parametrize("member", ["é", "données", "x²", "if", "lambda", "__x"])
def test_a_member_named_what_the_language_cannot_read_is_refused(tmp_path, member):
    np.savez(tmp_path / "d.npz", **{member: np.array([1.0, 2.0])})
    with pytest.raises(LanguageError, match="is not a usable variable name"):
        file_bindings("@d.npz", tmp_path)
    done = gradcalc("eval", "1", "@d.npz", cwd=tmp_path)
    assert done.returncode == 2 and "is not a usable variable name" in done.stderr, done.stderr


@pytest.mark.parametrize("member", ["x", "W_1", "_b", "Xtrain2"])
def test_a_member_named_as_the_language_reads_is_bound(tmp_path, member):
    np.savez(tmp_path / "d.npz", **{member: np.array([1.0, 2.0])})
    assert [n for n, _ in file_bindings("@d.npz", tmp_path)] == [member]
    done = gradcalc("eval", f"sum({member} * 2)", "@d.npz", "--json", cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["value"] == 6.0, done.stderr


def test_load_in_a_script_reads_beside_the_script(tmp_path):
    folder = tmp_path / "model"
    (folder / "data").mkdir(parents=True)
    np.save(folder / "data" / "w.npy", np.array([1.0, -2.0, 3.0]))
    np.savez(folder / "data" / "d.npz", b=np.array([0.5, 0.5, 0.5]))
    (folder / "s.gc").write_text('w = load("data/w.npy")\nb = load("data/d.npz", "b")\nc = load("data/d.npz:b")\n'
                                     'sum(w * w) + sum(b) + sum(c)\ncheck tanh(w * b).sum()\n')
    done = gradcalc("run", str(folder / "s.gc"), "--json", cwd=tmp_path)  # run from elsewhere
    assert done.returncode == 0, done.stderr
    result, check = (json.loads(line) for line in done.stdout.splitlines())
    assert result["value"] == 14.0 + 1.5 + 1.5 and result["grads"]["w"] == [2.0, -4.0, 6.0]
    assert check["status"] == "pass"
    bad = tmp_path / "bad.gc"
    bad.write_text('x = load("nope.npy")\n')
    done = gradcalc("run", str(bad))
    assert done.returncode == 2 and f"{tmp_path / 'nope.npy'}: cannot read" in done.stderr
    assert "load takes a file name in quotes" in gradcalc("eval", "load(3)").stderr


def test_load_in_a_session_uses_its_base_dir(tmp_path):
    np.save(tmp_path / "v.npy", np.array([2.0, 3.0]))
    session = Session(base_dir=tmp_path)
    [result] = session.run_source('v = load("v.npy")\nsum(v * v)')
    assert float(result.value.data) == 13.0
    np.save(tmp_path / "one.npy", np.array([2.5]))
    [scalar] = Session(engine="scalar", base_dir=tmp_path).run_source('x = load("one.npy")\nx * x')
    assert scalar.value.data == 6.25
    with pytest.raises(LanguageError, match="the scalar engine holds single numbers"):
        Session(engine="scalar", base_dir=tmp_path).run_source('load("v.npy")')


def test_run_and_check_take_bindings_too(tmp_path):
    np.save(tmp_path / "w.npy", np.array([0.25, -0.5]))
    (tmp_path / "uses.gc").write_text("check tanh(W).sum() * k\nsum(W) * k\n")
    done = gradcalc("check", "uses.gc", "W=@w.npy", "k=2", cwd=tmp_path)
    assert done.returncode == 0 and "1 passed" in done.stdout
    run = gradcalc("run", "uses.gc", "W=@w.npy", "k=2", "--json", cwd=tmp_path)
    assert json.loads(run.stdout.splitlines()[1])["value"] == -0.5
    alone = gradcalc("check", "W=@w.npy", cwd=tmp_path)
    assert alone.returncode == 2 and "no FILE given" in alone.stderr
    twice = gradcalc("run", "uses.gc", "W=@w.npy", "W=@w.npy", "k=2", cwd=tmp_path)
    assert twice.returncode == 2 and "W is given twice" in twice.stderr


def test_save_writes_value_and_gradients_by_name_atomically(tmp_path):
    W = np.array([[1.0, -2.0], [0.5, 3.0]])
    np.save(tmp_path / "w.npy", W)
    assert gradcalc("eval", "sum(W * W) + 3 * c", "W=@w.npy", "c=2", "--save", "out.npz", cwd=tmp_path).returncode == 0
    with np.load(tmp_path / "out.npz", allow_pickle=False) as saved:
        assert sorted(saved.files) == ["grad_W", "grad_c", "value"]
        assert float(saved["value"]) == float(np.sum(W * W)) + 6.0
        np.testing.assert_array_equal(saved["grad_W"], 2 * W)  # d/dW sum(W*W) = 2W
        assert float(saved["grad_c"]) == 3.0
    assert gradcalc("eval", "sum(W * W)", "W=@w.npy", "--save", "out.json", cwd=tmp_path).returncode == 0
    assert json.loads((tmp_path / "out.json").read_text()) == {"value": float(np.sum(W * W)), "grad_W": (2 * W).tolist()}
    # what was saved loads back as bindings
    again = gradcalc("eval", "sum(grad_W)", "@out.npz:grad_W", "--json", cwd=tmp_path)
    assert json.loads(again.stdout)["value"] == float(np.sum(2 * W))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "out.npz", "w.npy"]  # no temporary files left


def test_run_saves_its_last_result_and_bad_destinations_fail_cleanly(tmp_path):
    (tmp_path / "s.gc").write_text("x = [1.0, 2.0]\nsum(x)\nsum(x * x)\n")
    assert gradcalc("run", "s.gc", "--save", "r.json", cwd=tmp_path).returncode == 0
    assert json.loads((tmp_path / "r.json").read_text()) == {"value": 5.0, "grad_x": [2.0, 4.0]}
    (tmp_path / "r.npz").write_text("previous")
    bad = gradcalc("run", "s.gc", "--save", "r.txt", cwd=tmp_path)
    assert bad.returncode == 2 and "--save writes .npz or .json files" in bad.stderr
    missing_folder = gradcalc("eval", "1", "--save", "no/such/dir/r.npz", cwd=tmp_path)
    assert missing_folder.returncode == 2 and "cannot write" in missing_folder.stderr
    (tmp_path / "only.gc").write_text("x = 1\n")
    assert gradcalc("run", "only.gc", "--save", "r.npz", cwd=tmp_path).returncode == 2
    assert (tmp_path / "r.npz").read_text() == "previous"
