"""The book's trained byte models, run in the reader's browser: the model lab.

Every model the studies train and commit (the ten :class:`~posenc_core.book.models.byte_lm.ByteLM`
runs of chapters 5, 7 and 8 at seed 0, and the eight mixed layouts of chapter 10, each a
:class:`~posenc_core.book.models.layered_lm.LayeredLM`) is described here for ``bytelm.js``,
which computes the forward pass in plain JavaScript: :func:`model_spec` (the architecture),
:func:`run_spec` (how positions enter each layer under a *change*: a scaling method at a
factor, or a shipped bug that acts on one forward pass) and :func:`weights` (the committed
checkpoint, SHA-256 checked). :func:`torch_logits` applies the same change to the PyTorch model
through posenc_core itself (``set_rope_scaling``, the bugs' own ``broken`` functions,
``with_plan``), which is what ``tests/book/test_lab_engine.py`` compares ``bytelm.js`` with, to
1e-4 of the largest logit. :func:`model_lab` is the widget (``lab.js``); the static book fetches
the weights from ``_static/bytelm/`` (written by ``_ext/lab_weights.py`` at build time), a live
kernel sends them.

A change is a string: ``"none"``; ``"<method>:<factor>"`` for a ByteLM trained with RoPE and
``"<method>:<factor>:<where>"`` for a mixed layout (``where``: the global layers or all, as
:data:`~posenc_core.book.studies.mixing_study.SCALING`); ``"bug:<key>"`` for a bug of
:data:`~posenc_core.book.instruments.bugs.BUGS` or
:data:`~posenc_core.book.studies.mixing_study.BUGS`. Shapes: s = sequence, V = 256.
"""

from __future__ import annotations

import functools
import hashlib
import pathlib
from collections.abc import Mapping
from typing import Any, NamedTuple

import torch

from posenc_core import _validation as check
from posenc_core.book.instruments import bugs
from posenc_core.book.models.byte_lm import ByteLM
from posenc_core.book.studies import corpus, heldout, lm_study, mixing_study
from posenc_core.book.widgets.mixing import MODEL_LABELS
from posenc_core.rope import (
    LayerPlan,
    RotaryEmbedding,
    layer_plan,
    parse_scaling,
    permute_qk_weight,
    rope_frequencies,
)

__all__ = [
    "MODELS",
    "METHODS",
    "FACTORS",
    "P_VALUES",
    "ONE_PASS_BUGS",
    "OTHER_BUGS",
    "LabModel",
    "load_model",
    "checkpoint",
    "weights",
    "model_spec",
    "changes",
    "run_spec",
    "reference_of",
    "torch_logits",
    "loss_per_byte",
    "excerpts",
    "lab_spec",
    "engine_source",
    "WEIGHTS_BASE",
    "DEFAULTS",
    "NOSCRIPT",
    "change_of",
    "ModelLab",
    "model_lab",
]

HERE = pathlib.Path(__file__).resolve().parent


class LabModel(NamedTuple):
    """One trained model of the lab: its label, and how the studies name it."""

    label: str
    """A short name for buttons."""
    study: str
    """``"lm"`` (:func:`~posenc_core.book.studies.lm_study.load_lm`) or ``"mix"``
    (:func:`~posenc_core.book.studies.mixing_study.load_layered`)."""
    name: str
    """The scheme (``"lm"``) or the layout (``"mix"``)."""
    rotary_dim: int | None = None
    """The rotated width of a partial-rotary RoPE run (``"lm"`` only), else None."""
    base: float | None = None
    """The base of a RoPE run at another base (``"lm"`` only), else None."""


MODELS: dict[str, LabModel] = {
    "none": LabModel("NoPE", "lm", "none"),
    "sinusoidal": LabModel("sinusoidal", "lm", "sinusoidal"),
    "sinusoidal-matched": LabModel("sinusoidal ×0.028", "lm", "sinusoidal-matched"),
    "learned": LabModel("learned", "lm", "learned"),
    "rope": LabModel("RoPE", "lm", "rope"),
    "rope-r8": LabModel("RoPE, 8 of 16 dims", "lm", "rope", rotary_dim=8),
    "rope-b500000": LabModel("RoPE, base 500k", "lm", "rope", base=500000.0),
    "xpos": LabModel("xPos", "lm", "xpos"),
    "alibi": LabModel("ALiBi", "lm", "alibi"),
    "t5": LabModel("T5 bias", "lm", "t5"),
    **{f"mix-{k}": LabModel(MODEL_LABELS[k], "mix", k) for k in mixing_study.LAYOUTS},
}  # fmt: skip
"""The lab's models by key, each a :class:`LabModel`. First the study's ByteLM runs at seed 0
(2 layers), then chapter 10's layouts (4 layers) as ``"mix-<layout>"``."""

METHODS: dict[str, str] = {
    "pi": "PI",
    "ntk": "NTK-aware",
    "dynamic": "dynamic NTK",
    "yarn": "YaRN",
    "llama3": "Llama 3.1",
    "p-rope": "p-RoPE",
}
"""The scaling methods by key, each with its label. Chapter 7's five
(:data:`~posenc_core.book.studies.lm_study.METHODS`, the same dicts) and p-RoPE (Gemma 4's
``proportional``: the fraction p of frequency pairs that rotate)."""

FACTORS = (2, 4, 8)
"""The factors s of the five context-extension methods (original length L0 = L = 64)."""

P_VALUES = (0.25, 0.5, 0.75)
"""p-RoPE's fractions p of rotating pairs (its "factor")."""

ONE_PASS_BUGS = (
    "layout", "layout-bias", "partial-denominator", "partial-slice", "bf16-angles",
    "packing-no-restart", "packing-no-mask", "yarn-dropped", "yarn-twice", "config-ignored",
    "dynamic-sticky", "rope-off-by-one", "learned-off-by-one", "learned-packing-no-restart",
    "longrope-long-always", "theta-default", "theta-converse", "chunk-restart",
    "draft-position-lag",
)  # fmt: skip
"""The bugs of chapters 8 and 8b the lab runs, each acting on one forward pass of the text."""

OTHER_BUGS: dict[str, str] = {
    "padding-positions": "runs a padded batch: the text is not one sequence",
    "padding-unmasked": "runs a padded batch: the text is not one sequence",
    "learned-padding-positions": "runs a padded batch: the text is not one sequence",
    "cache-off-by-one": "decodes one byte at a time with a KV cache",
    "window-no-sinks": "decodes one byte at a time through an evicting cache",
    "sinks-text-positions": "decodes one byte at a time through an evicting cache",
    "sinks-not-rerotated": "decodes one byte at a time through an evicting cache",
    "longrope-stale-cache": "decodes one byte at a time with a KV cache",
    "drafts-kept": "inserts rejected drafts into the text",
}
"""The bugs of chapters 8 and 8b the lab leaves out, key -> why (each needs more than one pass
over the text, or another text)."""

_PACK = {"positions": {"kind": "mod", "n": bugs.DOC_LEN}, "doc_len": bugs.DOC_LEN}
_BUG_RUNS: dict[str, dict[str, Any]] = {
    "rope-off-by-one": {"positions": {"kind": "shift", "by": 1}},
    "learned-off-by-one": {"positions": {"kind": "shift", "by": 1}},
    "chunk-restart": {"positions": {"kind": "mod", "n": bugs.CHUNK}},
    "draft-position-lag": {"positions": {"kind": "lag", "k": bugs.DRAFTS[0]}},
    "packing-no-restart": {"doc_len": bugs.DOC_LEN},
    "learned-packing-no-restart": {"doc_len": bugs.DOC_LEN},
    "packing-no-mask": {"positions": {"kind": "mod", "n": bugs.DOC_LEN}},
}
"""The bugs that change only the positions fed or the mask (the rest change the rotation)."""

_REFERENCES = {"yarn": f"yarn:{int(bugs.YARN['factor'])}", "packed": "packed",
               "dynamic": "dynamic:8"}  # fmt: skip
"""A bug's correct counterpart when it is not the unmodified model, by the bug's ``baseline``."""


# ----------------------------------------------------------------------------- models


@functools.cache
def _lm_config() -> lm_study.LMStudyConfig:
    return lm_study.LMStudyConfig.from_dict(lm_study.load_results()["config"])


@functools.cache
def _mix_config() -> mixing_study.MixingConfig:
    return mixing_study.MixingConfig.from_dict(mixing_study.load_results()["config"])


def _model_key(key: object) -> LabModel:
    return MODELS[check.choice("model", key, tuple(MODELS))]


@functools.cache
def load_model(key: str) -> ByteLM:
    """The trained model ``key`` of :data:`MODELS` (SHA-256 checked), in eval mode; cached, so
    never change it in place (:func:`torch_logits` works on copies)."""
    m = _model_key(key)
    if m.study == "mix":
        return mixing_study.load_layered(m.name)
    return lm_study.load_lm(m.name, rotary_dim=m.rotary_dim, base=m.base)


def checkpoint(key: str) -> tuple[pathlib.Path, str]:
    """The committed checkpoint of model ``key`` and the SHA-256 its study records."""
    from posenc_core.book import data_entry

    m = _model_key(key)
    if m.study == "mix":
        res, path, entry = mixing_study.load_results(), mixing_study.RESULTS_FILE, f"{m.name}/0"
    else:
        variant = "" if m.rotary_dim is None else f"-r{m.rotary_dim}"
        variant = variant if m.base is None else f"-b{m.base:g}"
        res, path, entry = lm_study.load_results(), lm_study.RESULTS_FILE, f"{m.name}{variant}/0"
    return data_entry(res["checkpoints"][entry], where=f"{path.name} checkpoints[{entry!r}]",
                      folder=path.parent)  # fmt: skip


def weights(key: str) -> bytes:
    """The checkpoint's bytes (safetensors, float32), after checking its SHA-256.

    Raises:
        ValueError: the file's SHA-256 is not the one its study records.
    """
    path, sha = checkpoint(key)
    data = path.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if actual != sha:
        raise ValueError(f"refusing {path.name}: its SHA-256 is {actual}, the study records {sha}")
    return data


# ----------------------------------------------------------------------------- specs


def _rope(rope: Any, *, first: int = 0, angles: str = "exact") -> dict[str, Any]:
    """One rotation for ``bytelm.js``: frequencies (or the rule that gives them for a length),
    layout, rotated dims and attention factor; xPos adds its scale settings."""
    xpos = None
    if not isinstance(rope, RotaryEmbedding):  # ByteLM's xPos: a rotation plus scale tables
        xpos = {"scale_base": float(rope.scale_base), "gamma": 0.4}
        rope = rope.rotary
    sc, r = rope.scaling, rope.rotary_dim
    out: dict[str, Any] = {"layout": rope.layout, "rotary_dim": r, "base": rope.base,
                           "first": first, "angles": angles,
                           "attention_scaling": float(sc.attention_scaling)}  # fmt: skip
    if sc.rope_type == "dynamic":
        out["dynamic"] = {"factor": sc.factor, "l0": sc.original_max_position_embeddings}
    elif sc.rope_type == "longrope":
        out["longrope"] = {"short": list(sc.short_factor), "long": list(sc.long_factor),
                           "l0": sc.original_max_position_embeddings}  # fmt: skip
    else:
        out["inv_freq"] = rope_frequencies(r, base=rope.base, scaling=sc).tolist()
    if xpos:
        out["xpos"] = xpos
    return out


def _layer(plan: LayerPlan | None, rope: Any) -> dict[str, Any]:
    """One layer for ``bytelm.js``: rotation, window or chunk, temperature and sinks."""
    out: dict[str, Any] = {"rope": None if rope is None else _rope(rope), "window": None,
                           "chunk": None, "temperature": None, "sinks": False}  # fmt: skip
    if plan is None:
        return out
    if plan.attention == "sliding":
        out["window"] = plan.window
    elif plan.attention == "chunked":
        out["chunk"] = plan.window
    t = plan.temperature
    if t is not None:
        out["temperature"] = {"scale": t.scale, "step": t.step, "offset": t.offset,
                              "positions": t.positions}  # fmt: skip
    out["sinks"] = bool(plan.sinks)
    return out


def _t5_buckets(model: ByteLM, longest: int) -> list[int]:
    from posenc_core.t5_bias import relative_position_bucket

    n = torch.arange(longest)
    ids = relative_position_bucket(-n, bidirectional=False, num_buckets=model.t5_num_buckets,
                                   max_distance=model.t5_max_distance)  # fmt: skip
    return ids.tolist()


def model_spec(key: str) -> dict[str, Any]:
    """The architecture of model ``key`` for ``bytelm.js`` (JSON): sizes, embedding scale, the
    position table or score bias, and every layer as trained."""
    m, model = _model_key(key), load_model(key)
    longest = _mix_config().eval_len if m.study == "mix" else _lm_config().eval_len
    out: dict[str, Any] = {
        "name": key, "label": m.label, "d_model": model.d_model, "n_heads": model.n_heads,
        "embed_scale": float(model.embed_scale), "table": None, "bias": None,
        "longest": longest, "train_len": _lm_config().train_len,
    }  # fmt: skip
    if m.study == "mix":
        out["layers"] = [_layer(p, p.rope) for p in model.plan]
        return out
    if model.scheme in ("sinusoidal", "sinusoidal-matched"):
        out["table"] = {"kind": "sinusoidal", "base": model.base,
                        "scale": float(model.pos.table_scale)}  # fmt: skip
    elif model.scheme == "learned":
        out["table"] = {"kind": "learned", "rows": model.max_len}
    if model.scheme == "alibi":
        from posenc_core.alibi import alibi_slopes

        out["bias"] = {"kind": "alibi", "slopes": alibi_slopes(model.n_heads).tolist()}
    elif model.scheme == "t5":
        out["bias"] = {"kind": "t5", "num_buckets": model.t5_num_buckets,
                       "buckets": _t5_buckets(model, longest)}  # fmt: skip
    out["layers"] = [_layer(None, model.rope) for _ in range(model.n_layers)]
    return out


def changes(key: str) -> list[str]:
    """The changes model ``key`` can take: ``"none"``, its scaling methods at each factor, its
    bugs (see the module docstring)."""
    m, model = _model_key(key), load_model(key)
    out = ["none"]
    values = {k: (P_VALUES if k == "p-rope" else FACTORS) for k in METHODS}
    if m.study == "mix":
        where = mixing_study.SCALING if _per_type(m.name) else ("all",)
        out += [f"{k}:{v}:{w}" for k in METHODS for v in values[k] for w in where]
        out += [f"bug:{b}" for b, bug in mixing_study.BUGS.items() if bug.layout == m.name]
        return out
    if model.scheme == "rope":
        out += [f"{k}:{v}" for k in METHODS for v in values[k]]
    out += [f"bug:{b}" for b in ONE_PASS_BUGS if bugs.BUGS[b].model == key]
    return out


def _scaling(method: str, value: float) -> dict[str, Any]:
    if method == "p-rope":
        return {"rope_type": "proportional", "partial_rotary_factor": float(value)}
    return lm_study.METHODS[method](_lm_config(), float(value))


def _parse(key: str, change: str) -> tuple[str, ...]:
    check.choice("change", change, tuple(changes(key)) + (("packed",) if key in _PACKED else ()))
    return tuple(change.split(":"))


_PACKED = ("rope", "learned")  # models whose bugs have the correct packing as counterpart


def _qk_perm(head_dim: int) -> list[int]:
    """new row r of each head's queries and keys = old row perm[r], as
    :func:`~posenc_core.rope.permute_qk_weight` ``to="interleaved"`` moves them."""
    rows = torch.arange(head_dim, dtype=torch.float64)[:, None]
    return [int(v) for v in permute_qk_weight(rows, 1, to="interleaved")[:, 0].tolist()]


def _like(model: ByteLM, scaling: Any = None, base: float | None = None) -> RotaryEmbedding:
    rope = model.rope
    return RotaryEmbedding(rope.head_dim, base=rope.base if base is None else base,
                           scaling=scaling, rotary_dim=rope.rotary_dim)  # fmt: skip


def _bug_rope(key: str, model: ByteLM) -> dict[str, Any] | None:
    """The rotation bug ``key`` puts in every layer (None: the model's own)."""
    rope = model.rope
    d, r = rope.head_dim, rope.rotary_dim
    pairs = torch.arange(0, r, 2, dtype=torch.float64)
    explicit = {
        "partial-denominator": (rope.base ** -(pairs / d), 0, "exact"),
        "partial-slice": (rope.base ** -(pairs / r), d - r, "exact"),
        "bf16-angles": (rope.base ** -(pairs / d), 0, "bf16"),
    }
    if key in explicit:
        inv, first, angles = explicit[key]
        return {"layout": "half", "rotary_dim": r, "base": rope.base, "first": first,
                "angles": angles, "attention_scaling": 1.0, "inv_freq": inv.tolist()}  # fmt: skip
    yarn = dict(bugs.YARN)
    if key == "yarn-dropped":
        return _rope(_like(model, {**yarn, "attention_factor": 1.0}))
    if key == "yarn-twice":
        m = parse_scaling(yarn).attention_scaling
        return _rope(_like(model, {**yarn, "attention_factor": m * m}))
    if key == "config-ignored":
        return _rope(_like(model, bugs.rope_scaling_from_config_broken(bugs.CONFIG)))
    if key == "dynamic-sticky":
        out = _rope(_like(model, {"rope_type": "dynamic", "factor": 8.0,
                                  "original_max_position_embeddings": 64}))  # fmt: skip
        out["dynamic"]["sticky"] = 512
        return out
    if key == "longrope-long-always":
        return _rope(_like(model, {**bugs.LONGROPE, "short_factor": bugs.LONGROPE["long_factor"]}))
    if key == "theta-default":
        return _rope(_like(model, base=10000.0))
    if key == "theta-converse":
        return _rope(_like(model, base=500000.0))
    return None


def run_spec(key: str, change: str) -> dict[str, Any]:
    """How ``bytelm.js`` runs model ``key`` under ``change`` (JSON): ``layers`` (each layer as
    :func:`model_spec` writes it), ``positions`` (``plain``, ``shift`` by, ``mod`` n, ``lag`` k),
    ``doc_len`` (a document mask), ``qk_weight_perm`` / ``qk_bias_perm`` (query and key rows
    permuted within each head), ``max_len`` (the longest text it takes) and ``reference`` (the
    change it is measured against)."""
    parts, m, model = _parse(key, change), _model_key(key), load_model(key)
    base = model_spec(key)
    out: dict[str, Any] = {
        "layers": base["layers"], "positions": {"kind": "plain"}, "doc_len": None,
        "qk_weight_perm": None, "qk_bias_perm": None, "max_len": base["longest"],
        "reference": reference_of(key, change),
    }  # fmt: skip
    if parts[0] == "none":
        return out
    if parts[0] == "packed":
        return {**out, **_PACK}
    if m.study == "mix":
        if parts[0] == "bug":
            plan = mixing_study.BUGS[parts[1]].plan(_mix_config())
        else:
            plan = _scaled_plan(m.name, _scaling(parts[0], float(parts[1])), parts[2])
        return {**out, "layers": [_layer(p, p.rope) for p in plan]}
    if parts[0] != "bug":
        rope = _rope(_like(model, _scaling(parts[0], float(parts[1]))))
        return {**out, "layers": [{**layer, "rope": rope} for layer in out["layers"]]}
    bug = parts[1]
    out.update(_BUG_RUNS.get(bug, {}))
    if bug == "learned-off-by-one":
        out["max_len"] = model.max_len - 1
    if bug in ("layout", "layout-bias"):
        perm = _qk_perm(model.d_model // model.n_heads)
        out["qk_bias_perm"] = perm
        out["qk_weight_perm"] = perm if bug == "layout" else None
    rope = _bug_rope(bug, model) if model.rope is not None else None
    if rope is not None:
        out["layers"] = [{**layer, "rope": rope} for layer in out["layers"]]
    return out


def _per_type(layout: str) -> bool:
    """Whether a layout has rope settings per layer type (else one setting for every layer)."""
    return "rope_parameters" in mixing_study.layout_config(layout, _mix_config())


def _scaled_plan(layout: str, scaling: dict[str, Any], where: str) -> Any:
    """The plan of a layout with a scaling method placed ``where``: in the global layers' rope
    settings or every layer type's (:func:`~posenc_core.book.studies.mixing_study.layout_plan`);
    a layout with one rope setting for all layers takes it as ``rope_scaling``."""
    if _per_type(layout):
        return mixing_study.layout_plan(layout, _mix_config(), scaling=scaling, where=where)
    return layer_plan(
        {**mixing_study.layout_config(layout, _mix_config()), "rope_scaling": scaling}
    )


def reference_of(key: str, change: str) -> str:
    """The change a change is shown against: ``"none"`` (the unmodified model), except for a
    bug whose correct counterpart differs (YaRN's bugs: YaRN at factor 8; packing: correct
    packing; sticky dynamic NTK: dynamic NTK, factor 8)."""
    if not change.startswith("bug:") or _model_key(key).study == "mix":
        return "none"
    return _REFERENCES.get(bugs.BUGS[change[4:]].baseline, "none")


# ----------------------------------------------------------------------------- PyTorch


def torch_logits(key: str, change: str, tokens: torch.Tensor) -> torch.Tensor:
    """Logits ``(b, s, 256)`` of model ``key`` under ``change``, computed by PyTorch with the
    change applied through posenc_core: ``set_rope_scaling`` for a method on a ByteLM,
    :meth:`~posenc_core.book.models.layered_lm.LayeredLM.with_plan` of the study's plan for a
    mixed layout, and the bug's own ``broken`` function for a bug."""
    import copy

    parts, m = _parse(key, change), _model_key(key)
    model = load_model(key)
    with torch.no_grad():
        if parts[0] == "none":
            return model(tokens)
        if parts[0] == "packed":
            return bugs.BUGS["packing-no-mask"].correct(model, tokens)
        if m.study == "mix":
            if parts[0] == "bug":
                plan = mixing_study.BUGS[parts[1]].plan(_mix_config())
            else:
                plan = _scaled_plan(m.name, _scaling(parts[0], float(parts[1])), parts[2])
            return model.with_plan(plan)(tokens)
        if parts[0] == "bug":
            return bugs.BUGS[parts[1]].broken(model, tokens)
        other = copy.deepcopy(model)
        other.set_rope_scaling(_scaling(parts[0], float(parts[1])))
        return other(tokens)


def loss_per_byte(key: str, change: str, tokens: torch.Tensor) -> torch.Tensor:
    """The loss (nats, float64 ``(s - 1,)``) of each next byte of ``tokens`` ``(1, s)`` under
    :func:`torch_logits`, as the lab draws it: entry t is byte t + 1's, read after 0 .. t."""
    logits = torch_logits(key, change, tokens)[0].double()
    return torch.nn.functional.cross_entropy(logits[:-1], tokens[0, 1:], reduction="none")


# ----------------------------------------------------------------------------- the page


def excerpts(n: int = 6, length: int = 512) -> list[str]:
    """``n`` windows of ``length`` held-out bytes (Pygments' source, never trained on), spread
    through the committed excerpt, each decoded as Latin-1 (one character per byte)."""
    n = check.positive_int("n", n)
    length = check.positive_int("length", length)
    text = corpus.heldout_excerpt()
    wins = heldout.windows(text, length)
    pick = torch.linspace(0, len(wins) - 1, n).round().long().unique()
    return [bytes(wins[i, :length].tolist()).decode("latin-1") for i in pick.tolist()]


def engine_source() -> str:
    """``bytelm.js``, the forward pass, as text (the widget starts its worker from it)."""
    return (HERE / "bytelm.js").read_text(encoding="utf-8")


def _compact(spec: dict[str, Any], ropes: list[dict], temps: list[dict]) -> list[list]:
    """Layers as [rope index, window, chunk, temperature index, sinks] (-1 / 0: none), the
    rotations and temperatures stored once in ``ropes`` and ``temps``."""

    def index(table: list[dict], item: dict | None) -> int:
        if item is None:
            return -1
        if item not in table:
            table.append(item)
        return table.index(item)

    return [[index(ropes, la["rope"]), la["window"] or 0, la["chunk"] or 0,
             index(temps, la["temperature"]), int(la["sinks"])] for la in spec]  # fmt: skip


def lab_spec(models: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Everything the widget needs but the weights (JSON): the models with their files and
    checksums, each one's changes (compact layers, ``same`` where a change leaves the model as
    it is), the methods, the bugs and the held-out excerpts."""
    keys = tuple(MODELS) if models is None else tuple(_model_key(k) and k for k in models)
    ropes: list[dict] = []
    temps: list[dict] = []
    out_models = []
    for key in keys:
        spec = model_spec(key)
        path, sha = checkpoint(key)
        base_layers = _compact(spec["layers"], ropes, temps)
        runs = {}
        for change in changes(key) + (["packed"] if key in _PACKED else []):
            run = run_spec(key, change)
            layers = _compact(run.pop("layers"), ropes, temps)
            run["layers"] = None if layers == base_layers else layers
            run["same"] = change != "none" and {**run, "reference": None} == {
                **_unchanged_run(spec),
                "reference": None,
            }
            runs[change] = run
        spec["layers"] = base_layers
        out_models.append({**spec, "file": path.name, "sha256": sha,
                           "bytes": path.stat().st_size, "study": _model_key(key).study,
                           "runs": runs})  # fmt: skip
    bug_list = [{"key": b, "label": bugs.BUGS[b].label, "title": bugs.BUGS[b].title,
                 "chapter": "8" if bugs.PARTS[b] == 1 else "8b",
                 "reports": list(bugs.BUGS[b].reports)} for b in ONE_PASS_BUGS]  # fmt: skip
    bug_list += [{"key": b, "label": b.replace("-", " "), "title": mb.summary, "chapter": "10",
                  "reports": []} for b, mb in mixing_study.BUGS.items()]  # fmt: skip
    return {
        "models": out_models, "ropes": ropes, "temperatures": temps,
        "methods": [{"key": k, "label": v, "values": list(P_VALUES if k == "p-rope" else FACTORS)}
                    for k, v in METHODS.items()],
        "where": list(mixing_study.SCALING), "bugs": bug_list,
        "left_out": OTHER_BUGS, "excerpts": excerpts(), "train_len": _lm_config().train_len,
    }  # fmt: skip


def _unchanged_run(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A run that changes nothing, compacted as :func:`lab_spec` stores runs."""
    return {"positions": {"kind": "plain"}, "doc_len": None, "qk_weight_perm": None,
            "qk_bias_perm": None, "max_len": spec["longest"], "layers": None}  # fmt: skip


# ----------------------------------------------------------------------------- the widget

WEIGHTS_BASE = "../_static/bytelm/"
"""Where the static book serves the checkpoints, relative to a chapter's page
(``_ext/lab_weights.py`` copies them there at build time)."""

DEFAULTS: dict[str, Any] = {"model": "rope", "method": "none", "factor": 8, "where": "global",
                            "bug": "none", "layer": 0, "head": 0, "excerpt": 0, "text": None,
                            "position": None}  # fmt: skip
"""The lab's controls and their first values. The model; a scaling method (``"none"``), its
factor (or p) and placement; a bug (``"none"``, else it replaces the method); the layer and head
whose attention is drawn; the held-out excerpt, or the reader's ``text``; the position pointed to
(None: the last)."""


NOSCRIPT = (
    '<noscript><p class="posenc-noscript-note">The model lab computes the trained models in '
    "your browser, so it needs JavaScript; the page's figures show what it draws, computed "
    "by PyTorch.</p></noscript>"
)
"""What a reader without JavaScript sees in the lab's place."""


def change_of(values: Mapping[str, Any]) -> str:
    """The change key of a set of controls: the bug if one is chosen, else the method at its
    factor (and placement, for a mixed layout), else ``"none"``."""
    if values.get("bug", "none") != "none":
        return f"bug:{values['bug']}"
    if values.get("method", "none") == "none":
        return "none"
    factor = values["factor"]
    factor = int(factor) if float(factor).is_integer() else float(factor)
    change = f"{values['method']}:{factor}"
    if _model_key(values["model"]).study == "mix":
        change += f":{values.get('where', 'global')}"
    return change


def _widget_class() -> type:
    import anywidget
    import traitlets

    class LabWidget(anywidget.AnyWidget):
        """The browser side of :func:`model_lab`: ``spec`` (:func:`lab_spec`), ``engine``
        (``bytelm.js``, run in a worker), ``values`` (the controls, synced both ways with a
        kernel) and ``weights_base`` (where a static page fetches the checkpoints)."""

        _esm = (HERE / "lab.js").read_text(encoding="utf-8")
        _css = (HERE / "explorer.css").read_text(encoding="utf-8") + (HERE / "lab.css").read_text(
            encoding="utf-8"
        )
        spec = traitlets.Dict().tag(sync=True)
        engine = traitlets.Unicode().tag(sync=True)
        values = traitlets.Dict().tag(sync=True)
        weights_base = traitlets.Unicode(WEIGHTS_BASE).tag(sync=True)

    return LabWidget


class ModelLab:
    """The model lab (display it as the last expression of a cell): a trained byte model run
    in the browser on any text, with a scaling method or a bug applied, its loss per byte beside
    the reference's, its next-byte guesses and the attention of one head.

    With a kernel the widget asks Python for the weights (a custom message answered with the
    checkpoint's bytes); the static book fetches them from :data:`WEIGHTS_BASE`. :meth:`set`
    moves the controls; :meth:`loss` computes the same losses with PyTorch.

    Attributes:
        widget: the anywidget shown; values: the controls' current values (:data:`DEFAULTS`).
    """

    def __init__(self, **values: Any) -> None:
        unknown = sorted(set(values) - set(DEFAULTS))
        if unknown:
            raise TypeError(f"model_lab() got unknown control(s) {', '.join(unknown)}; it has "
                            f"{', '.join(DEFAULTS)}")  # fmt: skip
        merged = {**DEFAULTS, **values}
        self._check(merged)
        self.widget = _widget_class()(spec=lab_spec(), engine=engine_source(), values=merged)
        self.widget.on_msg(self._on_message)

    @property
    def values(self) -> dict[str, Any]:
        """The controls' current values."""
        return dict(self.widget.values)

    def set(self, **values: Any) -> ModelLab:
        """Move controls (names of :data:`DEFAULTS`); the browser follows with a kernel attached.

        Raises:
            TypeError, ValueError: an unknown control, or a value the model does not take.
        """
        unknown = sorted(set(values) - set(DEFAULTS))
        if unknown:
            raise TypeError(f"set() got unknown control(s) {', '.join(unknown)}; the lab has "
                            f"{', '.join(DEFAULTS)}")  # fmt: skip
        merged = {**self.values, **values}
        self._check(merged)
        self.widget.values = merged
        return self

    def tokens(self) -> torch.Tensor:
        """The bytes the lab reads, int64 ``(1, s)``: the reader's text (UTF-8, cut to the
        model's longest) or the chosen excerpt."""
        v = self.values
        longest = run_spec(v["model"], change_of(v))["max_len"]  # 8L, or 8L - 1 for a shift
        text = v["text"]
        data = (excerpts()[v["excerpt"]].encode("latin-1") if text is None
                else text.encode("utf-8"))  # fmt: skip
        return torch.tensor(list(data[:longest]), dtype=torch.long)[None]

    def loss(self) -> dict[str, Any]:
        """Loss per byte (nats, float64 ``(s - 1,)``) of the change and of its reference, from
        PyTorch: ``{"change", "reference", "loss", "reference_loss"}``."""
        v = self.values
        change = change_of(v)
        ref = reference_of(v["model"], change)
        t = self.tokens()

        return {"change": change, "reference": ref,
                "loss": loss_per_byte(v["model"], change, t).numpy(),
                "reference_loss": loss_per_byte(v["model"], ref, t).numpy()}  # fmt: skip

    def _check(self, v: Mapping[str, Any]) -> None:
        model = load_model(_model_key(v["model"]) and v["model"])
        change = change_of(v)
        check.choice("change", change, tuple(changes(v["model"])))
        n_layers = len(model.blocks)
        check.int_in_range("layer", v["layer"], 0, n_layers - 1)
        check.int_in_range("head", v["head"], 0, model.n_heads - 1)
        check.int_in_range("excerpt", v["excerpt"], 0, len(excerpts()) - 1)
        if v["text"] is not None and not isinstance(v["text"], str):
            raise TypeError(f"text must be a str or None, got {type(v['text']).__name__}")

    def _on_message(self, widget: Any, content: Any, buffers: Any) -> None:
        if not isinstance(content, Mapping) or content.get("kind") != "weights":
            return
        key = content.get("model")
        if key not in MODELS:
            return
        path, sha = checkpoint(key)
        self.widget.send({"kind": "weights", "model": key, "sha256": sha}, buffers=[weights(key)])

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        display(self.widget)
        display(HTML(NOSCRIPT))

    def __repr__(self) -> str:
        return f"<ModelLab {self.values['model']!r}, {change_of(self.values)!r}>"


def model_lab(**values: Any) -> ModelLab:
    """The model lab with its controls at ``values`` (see :data:`DEFAULTS`), e.g.
    ``model_lab(model="rope", method="yarn", factor=8)``."""
    return ModelLab(**values)
