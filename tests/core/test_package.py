"""Packaging promises: two layers, a light import, a small documented namespace, typed.

The numerical core (``posenc_core/`` outside ``posenc_core/book``) imports only torch, numpy
and the standard library; ``import posenc_core`` loads nothing of the book layer.
"""

import ast
import inspect
import json
import pathlib
import re
import subprocess
import sys

import torch

import posenc_core as pc

PACKAGE = pathlib.Path(pc.__file__).parent

PUBLIC = [
    "SinusoidalPositionalEncoding",
    "sinusoidal_frequencies",
    "sinusoidal_encoding",
    "sinusoidal_table",
    "sinusoidal_wavelengths",
    "rotation_matrix",
    "shift_matrix",
    "LearnedPositionalEmbedding",
    "MultiHeadSelfAttention",
    "attention",
    "self_attention",
    "alibi_bias",
    "alibi_key_bias",
    "alibi_slopes",
    "RotaryEmbedding",
    "RopeScaling",
    "apply_rope",
    "rope_cos_sin",
    "rope_frequencies",
    "rotate_pairs",
    "permute_qk_weight",
    "cosine_similarity_matrix",
    "count_pairs",
    "first_rise",
    "largest_reversal",
    "nearest_neighbour_margin",
    "rope_decay_bound",
    "rope_score_vs_distance",
    "score_decomposition",
    "sinusoidal_similarity",
]

# Never loaded by `import posenc_core` (figures, widgets, notebooks, checkpoint files, downloads).
HEAVY = ("matplotlib", "ipywidgets", "IPython", "safetensors", "urllib.request")

FRESH_IMPORT = """
import json, sys
import numpy, torch  # what the core is allowed to need: their own imports do not count
before = set(sys.modules)
import posenc_core
print(json.dumps({
    "added": sorted(set(sys.modules) - before),
    "loaded": sorted(m for m in %r if m in sys.modules),
}))
"""


def test_import_posenc_core_loads_only_the_core():
    """In a fresh process, ``import posenc_core`` adds only core modules of posenc_core (no
    ``posenc_core.book``) and the standard library to what torch and numpy load themselves;
    none of HEAVY is loaded by posenc_core (torch's own ``torch.hub`` imports urllib.request,
    so that one may be present, but posenc_core must not be what adds it)."""
    out = subprocess.run(
        [sys.executable, "-c", FRESH_IMPORT % (HEAVY,)], capture_output=True, text=True, check=True
    ).stdout
    report = json.loads(out)
    added = report["added"]
    assert "posenc_core.sinusoidal" in added and "posenc_core.rope" in added  # the probe works
    book = [m for m in added if m == "posenc_core.book" or m.startswith("posenc_core.book.")]
    assert book == [], f"import posenc_core loaded the book layer: {book}"
    foreign = [
        m
        for m in added
        if m.split(".")[0] != "posenc_core" and m.split(".")[0] not in sys.stdlib_module_names
    ]
    assert foreign == [], f"import posenc_core loaded non-core packages: {foreign}"
    assert not set(HEAVY) & set(added), set(HEAVY) & set(added)
    assert [m for m in report["loaded"] if m != "urllib.request"] == [], report["loaded"]


def test_the_namespace_is_the_thirty_names():
    assert len(pc.__all__) <= 30
    assert len(set(pc.__all__)) == len(pc.__all__), "a name is listed twice"
    assert sorted(pc.__all__) == sorted(PUBLIC)
    for name in pc.__all__:
        assert getattr(pc, name) is not None
    # nothing else public at the top level except the submodules and __version__
    stray = {
        name
        for name, obj in vars(pc).items()
        if not name.startswith("_") and not inspect.ismodule(obj) and name not in pc.__all__
    }
    assert stray == set(), f"public names outside __all__: {sorted(stray)}"
    # what left the namespace is still importable from its module
    assert callable(pc.analysis.similarity_by_offset) and callable(pc.analysis.neighbour_distance)


def _section(doc: str, title: str) -> str | None:
    """The text of a Google-style section (``Args:``), up to the next section or the end."""
    m = re.search(rf"^{title}:\n(.*?)(?=^\S[^\n]*:\n|\Z)", doc, flags=re.M | re.S)
    return m.group(1) if m else None


SOURCE = re.compile(r"\b(19|20)\d\d\b|tests/|[Rr]eference|Hugging Face|transformers|RoFormer")
SHAPE = re.compile(r"shape|\([^()]*,[^()]*\)|same .* as ``")


def _callable_problems(name: str, fn, doc: str, *, returns: bool) -> list[str]:
    problems = []
    params = [p for p in inspect.signature(fn).parameters if p != "self"]
    args = _section(doc, "Args")
    if params and args is None:
        problems.append(f"{name}: no Args section")
    for p in params if args is not None else ():
        if not re.search(rf"\b{re.escape(p)}\b", args):
            problems.append(f"{name}: argument {p} is not described under Args")
    if not returns:
        return problems
    annotation = str(inspect.signature(fn).return_annotation)
    if annotation in ("None", str(inspect.Signature.empty)):
        return problems
    ret = _section(doc, "Returns")
    if ret is None:
        problems.append(f"{name}: no Returns section")
    elif "Tensor" in annotation and not SHAPE.search(ret):
        problems.append(f"{name}: returns a tensor but Returns gives no shape")
    return problems


def test_every_public_name_has_a_house_style_docstring():
    """torchtune style (STYLE.md): Args naming every argument, Returns for what returns, the
    shape of every returned tensor, and the paper, equation or reference implementation the
    result is checked against."""
    problems = []
    for name in PUBLIC:
        obj = getattr(pc, name)
        doc = inspect.getdoc(obj) or ""
        if len(doc) < 80:
            problems.append(f"{name}: no real docstring")
            continue
        if not SOURCE.search(doc):
            problems.append(f"{name}: names no paper, reference implementation or test")
        if inspect.isclass(obj):
            if obj.__init__ is not object.__init__:
                problems += _callable_problems(name, obj.__init__, doc, returns=False)
            if issubclass(obj, torch.nn.Module):
                forward = obj.forward
                fdoc = inspect.getdoc(forward) or ""
                problems += _callable_problems(f"{name}.forward", forward, fdoc, returns=True)
        else:
            problems += _callable_problems(name, obj, doc, returns=True)
    assert problems == [], "\n".join(problems)


# --------------------------------------------------------------------------- the two layers

FORBIDDEN = {
    "matplotlib": "figures live in posenc_core.book.figures",
    "ipywidgets": "widgets live in posenc_core.book.widgets",
    "IPython": "notebook display lives in posenc_core.book",
    "safetensors": "checkpoint files are read in posenc_core.book.sources.minilm",
    "urllib": "downloads live in posenc_core.book.sources.minilm",
    "http": "downloads live in posenc_core.book.sources.minilm",
}
ALLOWED_THIRD_PARTY = {"torch", "numpy"}


def _import_problems(path: pathlib.Path) -> list[str]:
    """Imports in one core source file that break the layering (anywhere in the file, also
    inside functions): the book layer, a FORBIDDEN module, or a package that is neither
    torch, numpy nor the standard library."""
    rel = path.relative_to(PACKAGE.parent)
    depth = len(path.relative_to(PACKAGE).parts) - 1  # 0 for posenc_core/x.py
    problems = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            targets = [node.module or ""]
        elif isinstance(node, ast.ImportFrom):
            # resolve `from ..x import y` against the file's package, posenc_core[.sub]
            package = ["posenc_core", *path.relative_to(PACKAGE).parts[:depth]]
            base = package[: len(package) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
            targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            top = target.split(".")[0]
            where = f"{rel}:{node.lineno} imports {target}"
            if target == "posenc_core.book" or target.startswith("posenc_core.book."):
                problems.append(f"{where}: the core never imports the book layer")
            elif top in FORBIDDEN:
                problems.append(f"{where}: {FORBIDDEN[top]}")
            elif top != "posenc_core" and not (
                top in ALLOWED_THIRD_PARTY or top in sys.stdlib_module_names
            ):
                problems.append(f"{where}: the core imports only torch, numpy and the stdlib")
    return problems


def test_the_core_never_imports_the_book_layer_or_plotting():
    core = [p for p in sorted(PACKAGE.rglob("*.py")) if "book" not in p.relative_to(PACKAGE).parts]
    assert len(core) >= 10, core  # sinusoidal, rotation, learned, alibi, attention, rope, ...
    problems = [problem for path in core for problem in _import_problems(path)]
    assert problems == [], "\n".join(problems)
    # the scan does see such imports: the book layer has them
    style = _import_problems(PACKAGE / "book" / "figures" / "style.py")
    assert any("imports matplotlib" in p for p in style), style


def test_py_typed_marker_ships():
    assert (PACKAGE / "py.typed").exists()
