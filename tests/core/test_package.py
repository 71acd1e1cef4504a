"""Packaging promises: importable, typed, documented, and free of plotting imports."""

import inspect
import pathlib
import subprocess
import sys

import posenc_core as pc


def test_numerical_core_imports_neither_matplotlib_nor_ipywidgets():
    code = "import sys, posenc_core; print(sorted(m for m in ('matplotlib', 'ipywidgets') if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_every_public_name_exists_and_is_documented():
    for name in pc.__all__:
        obj = getattr(pc, name)
        doc = inspect.getdoc(obj) or ""
        assert len(doc) > 40, f"{name} has no real docstring"
        if (
            inspect.isfunction(obj)
            and inspect.signature(obj).return_annotation is not inspect.Signature.empty
        ):
            if obj.__name__ not in {"first_rise"}:
                assert "Returns" in doc or "Return" in doc, f"{name} does not say what it returns"


def test_py_typed_marker_ships():
    assert (pathlib.Path(pc.__file__).parent / "py.typed").exists()
