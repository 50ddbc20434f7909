"""The module's surface: generated eager functions, docstrings, stubs, imports."""
import builtins
import ast
import inspect
import os
import pathlib
import subprocess
import sys

import numpy as np

import cbi

PKG = pathlib.Path(cbi.__file__).resolve().parent
SRC = pathlib.Path(__file__).resolve().parents[1] / "cbi"


def test_one_eager_function_per_kind():
    kinds = cbi.filter_kinds()
    assert {"blur", "gaussian", "sobel", "laplacian", "color"} <= {k["name"] for k in kinds}
    for k in kinds:
        f = getattr(cbi, k["name"])
        params = list(inspect.signature(f).parameters)
        assert params[1:1 + len(k["params"].split())] == k["params"].split()
        assert k["form"] in f.__doc__
        # cbi.open is exported by name only: `from cbi import *` keeps the builtin open.
        assert (k["name"] in cbi.__all__) != hasattr(builtins, k["name"])


def test_pipeline_text_from_arguments(rng=np.random.default_rng(0)):
    x = rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)
    np.testing.assert_array_equal(cbi.gaussian(x, 5, sigma=1.2), cbi.Pipeline("gaussian:5:1.2")(x))
    np.testing.assert_array_equal(cbi.gaussian(x, ksize=5), cbi.Pipeline("gaussian:5")(x))
    np.testing.assert_array_equal(cbi.sobel(x, "x", 5), cbi.Pipeline("sobel:x:5")(x))
    np.testing.assert_array_equal(cbi.laplacian(x), cbi.Pipeline("laplacian")(x))
    np.testing.assert_array_equal(cbi.blur(x, np.int64(3)), cbi.Pipeline("blur:3")(x))


def test_public_names_have_docstrings():
    for name in cbi.__all__:
        obj = getattr(cbi, name)
        assert obj.__doc__, name


def test_stub_matches_module():
    stub = ast.parse((SRC / "__init__.pyi").read_text())
    names = set()
    for node in stub.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    # Kinds added after the stub was written are typed by its __getattr__.
    generated = {k["name"] for k in cbi.filter_kinds()}
    assert "__getattr__" in names
    missing = set(cbi.__all__) - names - generated
    assert not missing, f"not in __init__.pyi: {sorted(missing)}"


def test_import_starts_no_cuda_and_imports_no_frameworks():
    code = ("import sys, cbi; "
            "assert 'torch' not in sys.modules and 'cupy' not in sys.modules, 'framework imported'; "
            "maps = open('/proc/self/maps').read(); "
            "assert 'libcuda.so' not in maps, 'the CUDA driver was loaded'; "
            "print('ok')")
    env = dict(os.environ, PYTHONPATH=str(PKG.parent))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_schedules_listed():
    names = {s["name"] for s in cbi.schedules()}
    assert {"naive", "column", "tile"} <= names
