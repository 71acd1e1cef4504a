"""Checkers for the chapters' exercises: each compares a reader's answer with posenc_core and
says what is wrong, naming the usual mistake when it recognises one.

Every checker returns a :class:`Feedback`, which prints as a short message and is truthy
when the answer is right.
"""

from __future__ import annotations

import copy
import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass

import torch

from posenc_core import _validation as check
from posenc_core.sinusoidal import sinusoidal_encoding, sinusoidal_frequencies, sinusoidal_table

__all__ = [
    "WIDTH",
    "Feedback",
    "check_close",
    "check_frequencies",
    "check_sinusoidal_table",
    "check_equivariance",
    "check_reversal_cap",
    "check_checkpoint_conversion",
    "check_decode_step",
    "check_scaling_loader",
    "check_prope_equivalent",
    "check_mrope_positions",
    "check_sink_positions",
    "check_rollback",
]

WIDTH = 80
"""Characters per line of a printed verdict (the book's code column)."""


@dataclass(frozen=True)
class Feedback:
    """The verdict of a checker.

    Attributes:
        ok: whether the answer is right.
        message: what was checked and, if wrong, what differs and the likely cause.
    """

    ok: bool
    message: str

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        # wrapped to the width of the book's code column, so a printed verdict never needs
        # sideways scrolling
        text = ("Correct: " if self.ok else "Not yet: ") + self.message
        return textwrap.fill(text, width=WIDTH, break_long_words=False, break_on_hyphens=False)

    __repr__ = __str__

    def _repr_markdown_(self) -> str:
        return ("**Correct.** " if self.ok else "**Not yet.** ") + self.message


def _as_tensor(name: str, answer: object) -> torch.Tensor:
    try:
        if isinstance(answer, (int, float)) and not isinstance(answer, bool):
            # keep all 53 bits of a Python float
            return torch.tensor(float(answer), dtype=torch.float64)
        t = torch.as_tensor(answer)
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(
            f"{name} must be a tensor or array of numbers, got {type(answer).__name__}"
        ) from err
    if not (t.is_floating_point() or t.dtype in (torch.int32, torch.int64)):
        raise TypeError(f"{name} must hold real numbers, got dtype {t.dtype}")
    return t.detach().to(torch.float64).cpu()


def check_close(
    answer: object,
    expected: float | torch.Tensor,
    what: str,
    *,
    rtol: float = 1e-6,
    atol: float = 1e-9,
) -> Feedback:
    """Compare a number (or array) with the value posenc_core computes.

    Args:
        answer: the reader's value.
        expected: the reference value.
        what: a description used in the message.
        rtol, atol: tolerances.

    Returns:
        a :class:`Feedback`.
    """
    a = _as_tensor("answer", answer)
    e = torch.as_tensor(expected, dtype=torch.float64)
    if a.shape != e.shape:
        return Feedback(False, f"{what}: expected shape {tuple(e.shape)}, got {tuple(a.shape)}.")
    if torch.allclose(a, e, rtol=rtol, atol=atol):
        return Feedback(True, f"{what} matches ({_short(e)}).")
    return Feedback(False, f"{what}: expected {_short(e)}, got {_short(a)}.")


def _short(t: torch.Tensor) -> str:
    if t.numel() == 1:
        return f"{t.item():.6g}"
    start = [round(x, 4) for x in t.flatten()[:3].tolist()]
    return f"a tensor of shape {tuple(t.shape)} starting {start}"


def check_frequencies(answer: object, d_model: int, *, base: float = 10000.0) -> Feedback:
    """Check omega_i = base**(-2i/d_model), i = 0 .. d_model/2 - 1.

    Args:
        answer: the reader's frequencies, shape ``(d_model // 2,)``.
        d_model, base: the settings they were meant for.

    Returns:
        a :class:`Feedback` naming a likely mistake (i instead of 2i, starting at i = 1,
        wavelengths instead of frequencies, a wrong length).
    """
    a = _as_tensor("answer", answer)
    ref = sinusoidal_frequencies(d_model, base=base)
    half = d_model // 2
    if a.shape != ref.shape:
        hint = (
            " (one per dimension instead of one per (sin, cos) pair?)"
            if a.numel() == d_model
            else ""
        )
        return Feedback(
            False,
            f"expected {half} frequencies, one per pair of dimensions; "
            f"got shape {tuple(a.shape)}{hint}.",
        )
    if torch.allclose(a, ref, rtol=2e-6, atol=0):
        return Feedback(
            True,
            f"omega runs from {ref[0].item():g} down to {ref[-1].item():.4g}, "
            f"ratio {base ** (-2 / d_model):.6g} per pair.",
        )
    i = torch.arange(half, dtype=torch.float64)
    base_t = torch.tensor(base, dtype=torch.float64)
    suspects = (
        (
            "you used base**(-i/d_model): the exponent needs 2i, the index of the sin dimension",
            base_t ** (-i / d_model),
        ),
        (
            "your index starts at 1; the first pair (i = 0) has frequency 1",
            base_t ** (-2 * (i + 1) / d_model),
        ),
        (
            "these are wavelengths-like values base**(2i/d_model); frequencies are their inverses",
            base_t ** (2 * i / d_model),
        ),
        (
            "these are wavelengths 2*pi/omega; the question asks for omega",
            2 * math.pi / ref,
        ),
    )
    for hint, values in suspects:
        if torch.allclose(a, values, rtol=2e-6, atol=0):
            return Feedback(False, hint + ".")
    bad = int(torch.nonzero(~torch.isclose(a, ref, rtol=2e-6, atol=0))[0, 0])
    return Feedback(
        False,
        f"first wrong entry is i = {bad}: expected {ref[bad].item():.6g}, got {a[bad].item():.6g}.",
    )


def check_sinusoidal_table(answer: object, *, base: float = 10000.0) -> Feedback:
    """Check a hand-built sinusoidal table of shape (n_positions, d_model), paper layout.

    Recognises swapped sin/cos, the half layout (all sines, then all cosines), positions
    counted from 1, and an exponent of i instead of 2i.

    Returns:
        a :class:`Feedback`.
    """
    a = _as_tensor("answer", answer)
    if a.dim() != 2 or a.shape[1] % 2:
        return Feedback(
            False, f"expected a 2-D table (n_positions, even d_model); got shape {tuple(a.shape)}."
        )
    n, d = a.shape
    ref = sinusoidal_table(n, d, base=base, dtype=torch.float64)
    tol = 1e-5
    if (a - ref).abs().max() <= tol:
        return Feedback(
            True, f"all {n} x {d} entries agree with the paper's formula within {tol:g}."
        )
    swapped = ref.view(n, d // 2, 2).flip(-1).reshape(n, d)
    half = sinusoidal_table(n, d, base=base, layout="half", dtype=torch.float64)
    one_based = sinusoidal_encoding(torch.arange(1, n + 1), d, base=base, dtype=torch.float64)
    i = torch.arange(d // 2, dtype=torch.float64)
    ang = torch.arange(n, dtype=torch.float64)[:, None] * torch.tensor(
        base, dtype=torch.float64
    ) ** (-i / d)
    half_exponent = torch.stack((ang.sin(), ang.cos()), -1).reshape(n, d)
    for hint, values in (
        (
            "sin and cos are swapped: the paper puts sin on even dimensions (2i) "
            "and cos on odd ones (2i+1)",
            swapped,
        ),
        (
            "this is the half layout (all sines, then all cosines, concatenated); "
            "the paper interleaves them",
            half,
        ),
        (
            "positions start at 1; the first row should be position 0 (sin 0 = 0, cos 0 = 1)",
            one_based,
        ),
        ("the exponent uses i instead of 2i (10000**(2i/d_model))", half_exponent),
    ):
        if (a - values).abs().max() <= tol:
            return Feedback(False, hint + ".")
    p, k = divmod(int(torch.argmax((a - ref).abs())), d)
    return Feedback(
        False,
        f"largest difference at position {p}, dimension {k}: "
        f"expected {ref[p, k].item():.6g}, got {a[p, k].item():.6g}.",
    )


def check_equivariance(
    fn: Callable[[torch.Tensor], torch.Tensor],
    *,
    n_tokens: int = 6,
    d_model: int = 16,
    trials: int = 5,
    seed: int = 0,
) -> Feedback:
    """Test whether ``fn`` (tokens ``(s, d)`` -> outputs ``(s, ...)``) is permutation-equivariant.

    Tries random inputs and permutations; reports the largest violation and the permutation
    that produced it.

    Returns:
        a :class:`Feedback` (ok when every violation is below 1e-5 relative to the outputs).
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    n_tokens = check.positive_int("n_tokens", n_tokens)
    d_model = check.positive_int("d_model", d_model)
    gen = torch.Generator().manual_seed(seed)
    worst, worst_perm = 0.0, None
    for _ in range(check.positive_int("trials", trials)):
        x = torch.randn(n_tokens, d_model, generator=gen)
        perm = torch.randperm(n_tokens, generator=gen)
        with torch.no_grad():
            out, out_perm = fn(x), fn(x[perm])
        if not isinstance(out, torch.Tensor) or out.shape[:1] != (n_tokens,):
            raise ValueError(
                f"fn must return a tensor with one row per token ({n_tokens}), "
                f"got {getattr(out, 'shape', type(out))}"
            )
        scale = out.abs().max().item() or 1.0
        err = (out_perm - out[perm]).abs().max().item() / scale
        if err > worst:
            worst, worst_perm = err, perm.tolist()
    if worst < 1e-5:
        return Feedback(
            True,
            f"fn(x[perm]) == fn(x)[perm] for {trials} random inputs and permutations "
            f"(largest relative gap {worst:.1e}).",
        )
    return Feedback(
        False,
        f"fn is not permutation-equivariant: with perm = {worst_perm}, fn(x[perm]) and "
        f"fn(x)[perm] differ by {worst:.3g} (relative). Something in fn depends on where a "
        "token sits: a positional encoding, a causal mask, or a bias that depends on i and j.",
    )


def check_reversal_cap(
    answer: object, length: int, vocab: int, *, k: int = 3, task: str = "lookback"
) -> Feedback:
    """Check the most a symmetric-ALiBi encoder can score on a task, averaged over a sequence
    (chapter 5): the mean of :func:`posenc_core.book.studies.synthetic_tasks.reversal_cap`.

    Args:
        answer: the reader's number; length: sequence length n; vocab: tokens V; k: look-back.
        task: one of :data:`posenc_core.book.studies.synthetic_tasks.TASKS`.

    Returns:
        a :class:`Feedback` naming a likely mistake (exactly 1/2: the chance 1/V that the two
        targets agree is missing; (1 + 1/V)/2: the ends, where a target is NONE, treated like
        the rest; 1/V: chance, not a cap).
    """
    from posenc_core.book.studies.synthetic_tasks import reversal_cap

    a = float(_as_tensor("answer", answer))
    cap = reversal_cap(task, length, vocab, k)
    ref = float(cap.mean())
    if math.isclose(a, ref, rel_tol=1e-6, abs_tol=1e-9):
        return Feedback(
            True,
            f"on {task} at length {length} with V = {vocab}, no reversal-equivariant model "
            f"can average more than {ref:.4f} (about (1 + 1/V)/2 = {(1 + 1 / vocab) / 2:.4f} "
            "away from the ends).",
        )
    suspects = (
        (0.5, "1/2 leaves out the chance 1/V that the two targets are the same token"),
        (
            (1 + 1 / vocab) / 2,
            "(1 + 1/V)/2 holds away from the ends; near them one of the two targets is NONE "
            "(or both are), which changes the pair's bound",
        ),
        (1 / vocab, "1/V is what guessing scores, not the most a model can score"),
    )
    for value, hint in suspects:
        if math.isclose(a, value, rel_tol=1e-9) and not math.isclose(value, ref, rel_tol=1e-9):
            return Feedback(False, hint + f"; the cap is {ref:.4f}.")
    return Feedback(False, f"expected {ref:.6g}, got {a:.6g}.")


# ----------------------------------------------------------------------------- chapter 8


def _call(what: str, fn: Callable, *args: object) -> tuple[object, Feedback | None]:
    """Run a reader's function; an exception becomes a Feedback that names it."""
    if not callable(fn):
        raise TypeError(f"{what} must be a function, got {type(fn).__name__}")
    try:
        return fn(*args), None
    except Exception as err:  # the reader's code: report, do not crash the chapter
        return None, Feedback(False, f"{what} raised {type(err).__name__}: {err}")


def _logit_gap(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    """Largest |a - b| at position 0 and over the later positions."""
    gap = (a - b).abs()
    return float(gap[:, 0].max()), float(gap[:, 1:].max())


def check_checkpoint_conversion(convert: Callable) -> Feedback:
    """Chapter 8: convert an interleaved checkpoint to the book's half-split model.

    ``convert(state, n_heads)`` gets the trained RoPE model's weights as
    :func:`~posenc_core.book.instruments.bugs.interleaved_checkpoint` gives them (query and key
    rows, weights and biases, in interleaved order) and must return the state dict the half-split
    model loads. Each query, key and value block of every ``attn.qkv`` tensor is compared with
    the trained model's, and a mismatch is named (not converted, converted the wrong way, the
    values permuted); when all match, the logits on a 512-byte held-out window are compared.
    """
    from posenc_core.book.instruments.bugs import interleaved_checkpoint
    from posenc_core.book.studies.corpus import heldout_excerpt
    from posenc_core.book.studies.heldout import windows
    from posenc_core.book.studies.lm_study import load_lm
    from posenc_core.rope import permute_qk_weight

    model = load_lm("rope", 0)
    expected = model.state_dict()
    source = interleaved_checkpoint(model)
    out, fail = _call("convert", convert, {k: v.clone() for k, v in source.items()}, 4)
    if fail is not None:
        return fail
    if not isinstance(out, dict):
        return Feedback(False, f"convert must return a dict of tensors, got {type(out).__name__}.")
    missing, extra = sorted(set(expected) - set(out)), sorted(set(out) - set(expected))
    if missing or extra:
        return Feedback(False, f"the keys differ: missing {missing[:4]}, unexpected {extra[:4]}.")
    problems = []
    d, h = model.d_model, model.n_heads
    for name, want in expected.items():
        got = out[name]
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
            problems.append(f"{name} has shape {shape}, expected {tuple(want.shape)}")
            continue
        if torch.equal(got, want):
            continue
        if not name.endswith(("attn.qkv.weight", "attn.qkv.bias")):
            problems.append(f"{name} changed (only query and key rows need permuting)")
            continue
        for part, rows in (("query", slice(0, d)), ("key", slice(d, 2 * d)),
                           ("value", slice(2 * d, 3 * d))):  # fmt: skip
            g, w, src = got[rows], want[rows], source[name][rows]
            if torch.equal(g, w):
                continue
            kind = "bias" if name.endswith("bias") else "weight"
            if part == "value":
                problems.append(f"{name}: the value rows were permuted; only queries and keys "
                                "are rotated, so values keep their order")  # fmt: skip
            elif torch.equal(g, src):
                problems.append(f"{name}: the {part} {kind} rows are still in interleaved order")
            elif torch.equal(g, permute_qk_weight(src, h, to="interleaved")):
                problems.append(f"{name}: the {part} {kind} rows were permuted the wrong way "
                                "(to='interleaved'; the target is half-split)")  # fmt: skip
            else:
                problems.append(f"{name}: the {part} {kind} rows differ from the trained model's")
    if problems:
        shown = "; ".join(problems[:3]) + (
            f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        )
        return Feedback(False, f"{len(problems)} problem(s): {shown}.")
    m = copy.deepcopy(model)
    m.load_state_dict(out)
    tokens = windows(heldout_excerpt(), 512, max_windows=2)[:, :-1]
    with torch.no_grad():
        first, later = _logit_gap(m(tokens), model(tokens))
    return Feedback(
        True,
        f"every tensor matches the trained model; logits on two 512-byte windows differ by at "
        f"most {max(first, later):.1e}.",
    )


def _probe_position(rotated: torch.Tensor, raw: torch.Tensor, rope: object, n: int) -> str:
    """Which position ``rotated`` was rotated at ("n", "n + 1", ..., "unrotated", "?")."""
    if torch.allclose(rotated, raw, atol=1e-6):
        return "unrotated"
    for p in range(max(0, n - 3), n + 4):
        q, _ = rope(raw, raw, p)  # type: ignore[operator]
        if torch.allclose(rotated, q, atol=1e-5):
            return "n" if p == n else f"n {'+' if p > n else '-'} {abs(p - n)}"
    return "?"


def check_decode_step(step: Callable) -> Feedback:
    """Chapter 8: one decoding step with a KV cache (see
    :data:`~posenc_core.book.instruments.bugs.Step`).

    First a probe: a cache of n = 5 tokens, a new query, key and value; the checker finds at
    which position the returned query and the appended key were rotated (they must be at n, the
    cache's length before the append), whether the value was appended and whether the cached
    tokens were left alone. Then the step decodes held-out text on the trained RoPE model
    (prefill 32, 256 bytes) and its logits are compared with the full forward pass.
    """
    from posenc_core.book.instruments.bugs import cached_forward
    from posenc_core.book.studies.corpus import heldout_excerpt
    from posenc_core.book.studies.heldout import windows
    from posenc_core.book.studies.lm_study import load_lm
    from posenc_core.rope import RotaryEmbedding

    rope = RotaryEmbedding(16)
    g = torch.Generator().manual_seed(0)
    n = 5
    keys, values = torch.randn(1, 2, n, 16, generator=g), torch.randn(1, 2, n, 16, generator=g)
    keys, _ = rope(keys, keys)
    q, k, v = (torch.randn(1, 2, 1, 16, generator=g) for _ in range(3))
    cache = {"k": keys.clone(), "v": values.clone()}
    q_out, fail = _call("step", step, rope, cache, q.clone(), k.clone(), v.clone())
    if fail is not None:
        return fail
    problems = []
    if not isinstance(q_out, torch.Tensor) or q_out.shape != q.shape:
        return Feedback(False, f"step must return the rotated query of shape {tuple(q.shape)}.")
    if cache["k"].shape[-2] != n + 1 or cache["v"].shape[-2] != n + 1:
        return Feedback(
            False,
            f"the cache must grow by one token: it held {n} keys and values and now holds "
            f"{cache['k'].shape[-2]} keys and {cache['v'].shape[-2]} values.",
        )
    if not (
        torch.equal(cache["k"][..., :n, :], keys) and torch.equal(cache["v"][..., :n, :], values)
    ):
        problems.append("the tokens already in the cache were changed")
    if not torch.equal(cache["v"][..., n:, :], v):
        problems.append("the value appended is not the new token's value")
    where_q = _probe_position(q_out, q, rope, n)
    where_k = _probe_position(cache["k"][..., n:, :], k, rope, n)
    for what, where in (("query", where_q), ("cached key", where_k)):
        if where == "unrotated":
            problems.append(f"the new {what} is not rotated")
        elif where == "?":
            problems.append(f"the new {what} is not the key rotated at any position near n")
        elif where != "n":
            problems.append(
                f"the new {what} is rotated at position {where}, where n = {n} is the number of "
                "tokens before it (positions 0 .. n-1 are taken)"
            )
    if problems:
        return Feedback(False, "; ".join(problems) + ".")
    model = load_lm("rope", 0)
    tokens = windows(heldout_excerpt(), 256, max_windows=2)[:, :-1]
    with torch.no_grad():
        cached = cached_forward(model, tokens, prefill=32, step=step)
        _, later = _logit_gap(cached, model(tokens))
    if later > 1e-3:
        return Feedback(False, f"the probe passed, but decoding differs from the full pass by "
                               f"{later:.2e} in the logits.")  # fmt: skip
    return Feedback(
        True,
        f"the new token is rotated at position n and cached rotated; decoding 224 bytes after a "
        f"32-byte prompt matches the full pass to {later:.1e} in the logits.",
    )


_LOADER_CASES = (
    ("the old key 'type' (transformers before 4.43)",
     {"rope_scaling": {"type": "linear", "factor": 4.0}}, {"rope_type": "linear", "factor": 4.0}),
    ("the key 'rope_type' (transformers 4.43 on)",
     {"rope_scaling": {"rope_type": "yarn", "factor": 8.0,
                       "original_max_position_embeddings": 64}},
     {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 64}),
    ("Llama 3.1's 'llama3' type",
     {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}},
     {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192}),
    ("transformers 5's 'rope_parameters'",
     {"rope_parameters": {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0,
                          "original_max_position_embeddings": 64}},
     {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 64}),
    ("'rope_parameters' with the default type", {"rope_parameters": {"rope_type": "default",
                                                                     "rope_theta": 10000.0}},
     None),
    ("no scaling at all", {"rope_theta": 10000.0}, None),
    ("'rope_scaling': null", {"rope_scaling": None}, None),
    ("an unknown type", {"rope_scaling": {"rope_type": "mystery", "factor": 2.0}}, ValueError),
)  # fmt: skip


def check_scaling_loader(load: Callable) -> Feedback:
    """Chapter 8: read the RoPE scaling of a ``config.json`` dict.

    ``load(config)`` must return a Hugging Face-style scaling dict (or None for plain RoPE) and
    raise ``ValueError`` for a type it does not know, instead of running unscaled. Eight
    configurations are tried: the old and new key names, Llama 3.1, transformers 5's
    ``rope_parameters``, the default type, none, null and an unknown type; each answer is
    parsed with :func:`~posenc_core.rope.parse_scaling` and compared with the configuration's.
    """
    from posenc_core.rope import parse_scaling

    problems = []
    for what, config, want in _LOADER_CASES:
        if not callable(load):
            raise TypeError(f"load must be a function, got {type(load).__name__}")
        try:
            got = load(copy.deepcopy(config))
        except ValueError as err:
            if want is not ValueError:
                problems.append(f"{what}: raised ValueError ({err})")
            continue
        except Exception as err:  # the reader's code
            problems.append(f"{what}: raised {type(err).__name__}: {err}")
            continue
        if want is ValueError:
            problems.append(
                f"{what}: returned {got!r} instead of raising ValueError, so the model would "
                "run with a scaling it was not configured with"
            )
            continue
        try:
            parsed = parse_scaling(got)
        except (TypeError, ValueError) as err:
            problems.append(f"{what}: returned {got!r}, which is not a valid scaling ({err})")
            continue
        if parsed != parse_scaling(want):
            told = "plain RoPE" if parsed.rope_type == "default" else f"{got!r}"
            problems.append(f"{what}: got {told}, expected {want!r}")
    if problems:
        return Feedback(
            False,
            f"{len(problems)} of {len(_LOADER_CASES)} configurations: " + "; ".join(problems) + ".",
        )
    return Feedback(True, f"all {len(_LOADER_CASES)} configurations read as configured, and the "
                          "unknown type is refused.")  # fmt: skip


# ----------------------------------------------------------------------------- chapter 9


def check_prope_equivalent(
    rotary_dim: object, base: object, *, head_dim: int = 16, p: float = 0.5
) -> Feedback:
    """Chapter 9: the partial rotary that rotates with exactly p-RoPE's frequencies.

    p-RoPE keeps the fraction p of the highest frequencies theta_i = 10000**(-2i/head_dim) and
    leaves the other pairs unrotated. The answer is a ``(rotary_dim, base)`` for
    :class:`~posenc_core.rope.RotaryEmbedding` whose frequencies,
    :func:`~posenc_core.rope.rope_frequencies` ``(rotary_dim, base=base)``, are those kept.
    """
    from posenc_core.rope import rope_frequencies

    d = check.even_int("head_dim", head_dim)
    kept = int(round(p * d / 2))
    want = rope_frequencies(d, base=10000.0).double()[:kept]
    try:
        r = check.even_int("rotary_dim", rotary_dim)
        b = check.base_value("base", base)
    except (TypeError, ValueError) as err:
        return Feedback(False, str(err))
    if r != 2 * kept:
        return Feedback(
            False,
            f"p-RoPE with p = {p:g} keeps p * {d}/2 = {kept} pairs, so {2 * kept} dims rotate; "
            f"rotary_dim = {r} rotates {r // 2}.",
        )
    got = rope_frequencies(r, base=b).double()
    if torch.allclose(got, want, rtol=1e-9, atol=0):
        return Feedback(
            True,
            f"rotary_dim {r} with base {b:g} = 10000**{p:g} gives theta_i = {b:g}**(-2i/{r}) = "
            f"10000**(-2i/{d}): the {kept} fastest frequencies of the full head.",
        )
    if math.isclose(b, 10000.0):
        return Feedback(
            False,
            f"with base 10000 over {r} dims the slowest kept pair has theta = "
            f"{got[-1].item():.2e}, but p-RoPE keeps {want[-1].item():.2e}: spreading the "
            f"same range over fewer pairs needs a smaller base. Solve b**(-2i/{r}) = "
            f"10000**(-2i/{d}) for b.",
        )
    return Feedback(
        False,
        f"the frequencies are {_short(got)}, expected {_short(want)} (the first {kept} of "
        f"rope_frequencies({d})).",
    )


def check_mrope_positions(answer: object, segments: list) -> Feedback:
    """Chapter 9: Qwen2-VL's M-RoPE position ids for a sequence of text and image segments.

    The answer is a ``(3, s)`` array of (temporal, height, width) ids, compared with
    :func:`~posenc_core.multi_axis.mrope_position_ids`; swapped height and width rows are named,
    otherwise the first token and axis that differ.
    """
    from posenc_core.multi_axis import mrope_position_ids

    want = mrope_position_ids(segments)
    got = _as_tensor("answer", answer)
    if got.shape != want.shape:
        return Feedback(
            False,
            f"expected shape {tuple(want.shape)} (three axes by {want.shape[1]} tokens), got "
            f"{tuple(got.shape)}.",
        )
    if torch.equal(got, want.double()):
        return Feedback(True, "every token's (t, h, w) ids are Qwen2-VL's.")
    if torch.equal(got[[0, 2, 1]], want.double()):
        return Feedback(
            False, "the height and width rows are swapped: row index first, then column."
        )
    axis, token = [int(x) for x in (got != want.double()).nonzero()[0]]
    return Feedback(
        False,
        f"first difference on the {'thw'[axis]} axis at token {token}: got "
        f"{int(got[axis, token])}, expected {int(want[axis, token])} (after an image the next "
        "text starts one past the largest id the image used, on every axis).",
    )


_SINK_CASES = ((3, 8, 2), (8, 8, 2), (9, 8, 2), (40, 8, 2), (100, 16, 4), (30, 8, 0))
"""(n tokens seen, cache size, sinks) for :func:`check_sink_positions`: before the cache is
full, just full, one past, far past, more sinks, none."""


def _as_positions(what: str, value: object) -> list[int] | None:
    try:
        out = [int(x) for x in (value.tolist() if isinstance(value, torch.Tensor) else value)]
    except (TypeError, ValueError):
        return None
    return out if all(isinstance(x, int) for x in out) else None


def check_sink_positions(positions: Callable) -> Feedback:
    """Chapter 8b: the positions of a StreamingLLM cache (sinks kept, positions within the cache).

    ``positions(n, size, sinks)`` gets the number of tokens seen so far (the current one
    included), the cache's size and its number of sinks, and returns ``(keys, query)``: the
    position each cached key is rotated at, in cache order (sinks first), and the query's.
    StreamingLLM's rule (mit-han-lab/streaming-llm#53): the cache holds m = min(n, size) tokens
    and rotates them at 0 .. m - 1; the query is the last of them, at m - 1. The checker tries
    several cases and names the usual mistakes: keys at their positions in the text, and a
    query one past the last key.
    """
    for n, size, sinks in _SINK_CASES:
        out, fail = _call("positions", positions, n, size, sinks)
        if fail is not None:
            return fail
        if not isinstance(out, tuple) or len(out) != 2:
            return Feedback(False, "positions must return a pair (keys, query).")
        keys, query = _as_positions("keys", out[0]), out[1]
        m = min(n, size)
        if keys is None or not isinstance(query, int):
            return Feedback(False, "keys must be a list of ints and query an int.")
        case = f"with n = {n}, size = {size}, sinks = {sinks}"
        text = list(range(min(sinks, n))) + list(range(max(sinks, n - (size - sinks)), n))
        if len(keys) != m:
            return Feedback(False, f"{case} the cache holds {m} keys, got {len(keys)} positions.")
        problems = []
        if keys != list(range(m)):
            if keys == text:
                problems.append(
                    f"{case} the keys keep their positions in the text ({_short_list(text)}); "
                    "StreamingLLM rotates them at their slots, 0 .. m - 1, so the sinks' offsets "
                    "stay in range"
                )
            else:
                problems.append(
                    f"{case} the keys should be at 0 .. {m - 1}, got {_short_list(keys)}"
                )
        if query != m - 1:
            why = (
                "one past the last key: the query is the newest entry of the cache"
                if query == m
                else "its position in the text"
                if query in (n - 1, n)
                else "not the last slot"
            )
            problems.append(f"{case} the query is at {query}, {why}; it belongs at {m - 1}")
        if problems:
            return Feedback(False, "; ".join(problems) + ".")
    return Feedback(
        True,
        f"keys at 0 .. m - 1 and the query at m - 1 in all {len(_SINK_CASES)} cases: every "
        "offset, the sinks' included, stays below the cache's size.",
    )


def _short_list(xs: list[int]) -> str:
    return ", ".join(map(str, xs)) if len(xs) <= 6 else f"{xs[0]}, {xs[1]}, ..., {xs[-1]}"


def check_rollback(rollback: Callable) -> Feedback:
    """Chapter 8b: speculative decoding's rollback of a KV cache.

    ``rollback(cache, proposed, accepted)`` gets a cache ``{"k": (b, h, n, d_h), "v": ...}``
    whose last ``proposed`` entries are draft tokens the target model just verified, of which
    the first ``accepted`` were accepted; it must leave exactly the first ``n - proposed +
    accepted`` entries of keys and values (in the dict, or returned), since the next token's
    position is read from the cache's length. Tried with some, none and all drafts accepted.
    """
    g = torch.Generator().manual_seed(0)
    base, proposed = 10, 4
    for accepted in (2, 0, proposed):
        k = torch.randn(1, 2, base + proposed, 8, generator=g)
        v = torch.randn(1, 2, base + proposed, 8, generator=g)
        cache = {"k": k.clone(), "v": v.clone()}
        out, fail = _call("rollback", rollback, cache, proposed, accepted)
        if fail is not None:
            return fail
        cache = out if isinstance(out, dict) else cache
        keep = base + accepted
        case = f"with {accepted} of {proposed} drafts accepted"
        got_k, got_v = cache.get("k"), cache.get("v")
        if not isinstance(got_k, torch.Tensor) or not isinstance(got_v, torch.Tensor):
            return Feedback(False, "the cache must still hold tensors under 'k' and 'v'.")
        nk, nv = got_k.shape[-2], got_v.shape[-2]
        if nk == 0 and accepted == proposed:
            return Feedback(
                False,
                f"{case} the cache came back empty: x[..., :-0, :] is x[..., :0, :] in Python. "
                "Slice to the length you keep, n - proposed + accepted, not by minus the "
                "rejected count.",
            )
        if nk != keep or nv != keep:
            which = "values" if nk == keep else "keys" if nv == keep else "keys and values"
            return Feedback(
                False,
                f"{case} the cache must keep {keep} entries; its {which} hold "
                f"{nk if which != 'values' else nv}. The next token's position is read from the "
                "cache's length, so every entry left over moves it, and the text attends to the "
                "rejected drafts.",
            )
        if not (torch.equal(got_k, k[..., :keep, :]) and torch.equal(got_v, v[..., :keep, :])):
            return Feedback(False, f"{case} the entries kept must be the first {keep}, unchanged.")
    return Feedback(
        True,
        "the rejected drafts are gone from keys and values, with some, none and every draft "
        "accepted; the next token is positioned where the accepted text ends.",
    )
