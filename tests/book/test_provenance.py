"""posenc_core.book.studies.provenance: a study's results are keyed on what its code computes,
so a docstring, comment or formatting edit leaves them fresh and a changed constant does not."""

import ast
import shutil

import pytest

from posenc_core.book.studies import encoder_study as study
from posenc_core.book.studies import lm_study
from posenc_core.book.studies import provenance as pv


def copy_package(tmp_path):
    root = tmp_path / "posenc_core"
    shutil.copytree(pv.PACKAGE_ROOT, root, ignore=shutil.ignore_patterns("data", "__pycache__"))
    return root


def edit(path, old, new):
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{old!r} not found once in {path.name}"
    path.write_text(text.replace(old, new), encoding="utf-8")


def test_docstrings_comments_and_formatting_do_not_stale_the_results(tmp_path):
    root = copy_package(tmp_path)
    recorded = pv.source_keys(lm_study.CODE_MODULES, root)
    lm = root / "book" / "studies" / "lm_study.py"
    edit(lm, '"""The long-context methods,', '"""Reworded: the long-context methods,')
    edit(lm, "\nCODE_MODULES = (\n", "\n# a new comment\n\n\nCODE_MODULES = (  # and another\n")
    native = root / "rope" / "native.c"
    text = native.read_text(encoding="utf-8")
    native.write_text("/* a new comment */\n" + text.replace("\n", "\n\n", 3), encoding="utf-8")
    assert pv.changed_modules(recorded, lm_study.CODE_MODULES, root) == []


def test_a_changed_constant_or_statement_stales_the_results(tmp_path):
    root = copy_package(tmp_path)
    recorded = pv.source_keys(study.CODE_MODULES, root)
    edit(root / "book" / "models" / "encoder.py", "INIT_STD = 0.02", "INIT_STD = 0.03")
    assert pv.changed_modules(recorded, study.CODE_MODULES, root) == ["book.models.encoder"]
    recorded = pv.source_keys(lm_study.CODE_MODULES, root)
    apply = root / "rope" / "apply.py"
    text = apply.read_text(encoding="utf-8")
    apply.write_text(text + "\nEXTRA = 1\n", encoding="utf-8")
    assert pv.changed_modules(recorded, lm_study.CODE_MODULES, root) == ["rope"]


def test_a_c_number_counts_and_its_layout_does_not():
    source = "#include <stdio.h>\nint f(int x) {  // doubles\n  return 2 * x; /* twice */ }\n"
    same = "#include   <stdio.h>\nint f(int x){return 2*x;}"
    assert pv.c_tokens(source) == pv.c_tokens(same)
    assert pv.c_tokens(source) != pv.c_tokens(source.replace("2 * x", "3 * x"))
    assert pv.c_tokens('char *s = "// not a comment";') == [
        "char",
        "*",
        "s",
        "=",
        '"// not a comment"',
        ";",
    ]


def test_the_written_tree_leaves_out_empty_fields():
    """Python 3.12 added FunctionDef.type_params and 3.13's ast.dump omits empty fields; the
    written tree is the same with or without them."""
    plain = ast.parse("def f(x):\n    return x + 1\n").body[0]
    with_params = ast.parse("def f(x):\n    return x + 1\n").body[0]
    with_params.type_params = []
    with_params.type_comment = None
    assert pv.canonical_tree(plain) == pv.canonical_tree(with_params)
    assert "lineno" not in pv.canonical_tree(plain)


def test_bad_names_and_files_are_refused(tmp_path):
    with pytest.raises(ValueError, match="name: no module or package 'no_such_module'"):
        pv.module_files("no_such_module")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match=r"path: expected a \.py or \.c file"):
        pv.source_key(tmp_path / "notes.txt")
    (tmp_path / "bad.py").write_text("def (:\n")
    with pytest.raises(ValueError, match="is not valid Python"):
        pv.source_key(tmp_path / "bad.py")


def test_round_floats_keeps_nan_and_walks_containers():
    out = pv.round_floats({"a": [1.23456, float("nan")], "b": 2}, 2)
    assert out["a"][0] == 1.23 and out["a"][1] != out["a"][1] and out["b"] == 2
