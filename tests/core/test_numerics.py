"""The trigonometry warm-up of ``posenc_core._numerics``: lazy, and run before every sin/cos.

In a fresh process torch 2.13's first float64 sin/cos call split across threads was seen off
by up to 7e-9 on the worker thread's part, in about one process in four (commit a487b22). The
core calls ``warm_up_trigonometry`` (a few elements, one thread, once) just before its own
sin/cos; ``import posenc_core`` computes nothing. See numerics.md.
"""

import os
import subprocess
import sys

import pytest
import torch

import posenc_core as pc
import posenc_core._numerics as numerics
from posenc_core.analysis import neighbour_distance, rope_base_lower_bound, rope_bound_curve
from posenc_core.multi_axis import axial_rope_cos_sin, mrope_cos_sin
from posenc_core.rope.xpos import xpos_score_vs_distance

F64 = torch.float64
N = 4096  # positions: 4096 x 32 angles, above torch's 32768-element grain, so split across threads


def _fresh(code: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_import_computes_no_trigonometry():
    """``import posenc_core`` leaves the warm-up for later; the first table runs it."""
    code = (
        "import posenc_core as pc, posenc_core._numerics as n\n"
        "print(n._trig_warm)\n"
        "pc.sinusoidal_table(4, 4)\n"
        "print(n._trig_warm)\n"
    )
    out, err = _fresh(code).communicate()
    assert out.split() == ["False", "True"], err


# the public functions that build a table with sin/cos (sinusoidal_table: EXACT below), each
# called on a table big enough to be split across threads; shift_matrix computes only d/2 angles
FIRST_CALLS = {
    "sinusoidal_encoding": f"pc.sinusoidal_encoding(torch.arange({N}), 64)",
    "SinusoidalPositionalEncoding": f"pc.SinusoidalPositionalEncoding(64, {N}).pe",
    "rope_cos_sin": f"torch.cat(pc.rope_cos_sin(torch.arange({N}), 64, dtype=torch.float64))",
    "RotaryEmbedding": (
        f"torch.cat(pc.RotaryEmbedding(64)(*[torch.ones({N}, 64, dtype=torch.float64)] * 2))"
    ),
    "axial_rope_cos_sin": (
        f"torch.cat(axial_rope_cos_sin(torch.arange({N}) % 64, torch.arange({N}) // 64, 64, "
        "dtype=torch.float64))"
    ),
    "mrope_cos_sin": (
        f"torch.cat(mrope_cos_sin(torch.arange({N}).expand(3, {N}), 64, [8, 12, 12], "
        "dtype=torch.float64))"
    ),
    "rotation_matrix": "pc.rotation_matrix(torch.linspace(0, 1e4, 100_000, dtype=torch.float64))",
}

FIRST_CALL = """
import torch, posenc_core as pc
from posenc_core.multi_axis import axial_rope_cos_sin, mrope_cos_sin
first = {expr}  # the first sin/cos of the process
again = {expr}
print(torch.equal(first, again), (first - again).abs().max().item())
"""

EXACT = f"""
import math, torch, posenc_core as pc
table = pc.sinusoidal_table({N}, 16, dtype=torch.float64)  # the first sin/cos of the process
omega = pc.sinusoidal_frequencies(16).tolist()
exact = torch.tensor([[f(p * w) for w in omega for f in (math.sin, math.cos)]
                      for p in range({N})], dtype=torch.float64)
print((table - exact).abs().max().item())
"""


def test_the_first_table_of_a_process_is_as_accurate_as_the_rest():
    """Each public table function, called first in a fresh process, gives the same bits as its
    second call, and sinusoidal_table's first call (two processes) matches math.sin/math.cos."""
    runs = {name: _fresh(FIRST_CALL.format(expr=e)) for name, e in FIRST_CALLS.items()}
    exact = [_fresh(EXACT) for _ in range(2)]
    for name, p in runs.items():
        out, err = p.communicate()
        assert out.split()[:1] == ["True"], (name, out, err)
    errors = [float(p.communicate()[0]) for p in exact]
    assert max(errors) < 1e-12, errors  # the inexact first call was off by 7e-9


def _sinusoidal_module():
    return pc.SinusoidalPositionalEncoding(64, 8)


TRIG_CALLS = {
    "sinusoidal_table": lambda: pc.sinusoidal_table(8, 16),
    "sinusoidal_encoding": lambda: pc.sinusoidal_encoding(torch.arange(8), 16),
    "SinusoidalPositionalEncoding": _sinusoidal_module,
    "rope_cos_sin": lambda: pc.rope_cos_sin(torch.arange(8), 16),
    "RotaryEmbedding": lambda: pc.RotaryEmbedding(16)(torch.ones(8, 16), torch.ones(8, 16)),
    "axial_rope_cos_sin": lambda: axial_rope_cos_sin([0, 1], [0, 1], 16),
    "mrope_cos_sin": lambda: mrope_cos_sin(torch.zeros(3, 4), 16, [2, 3, 3]),
    "rotation_matrix": lambda: pc.rotation_matrix(torch.arange(8.0)),
    "shift_matrix": lambda: pc.shift_matrix(3, 16),
    "sinusoidal_similarity": lambda: pc.sinusoidal_similarity(torch.arange(8), 16),
    "neighbour_distance": lambda: neighbour_distance(16),
    "rope_score_vs_distance": lambda: pc.rope_score_vs_distance(torch.arange(8), 16),
    "rope_score_vs_distance(q, k)": lambda: pc.rope_score_vs_distance(
        torch.arange(8), 16, q=torch.ones(16, dtype=F64), k=torch.ones(16, dtype=F64)
    ),
    "rope_decay_bound": lambda: pc.rope_decay_bound(torch.arange(8), 16),
    "rope_bound_curve": lambda: rope_bound_curve(64, 16),
    "rope_base_lower_bound": lambda: rope_base_lower_bound(64, 16),
    "xpos_score_vs_distance": lambda: xpos_score_vs_distance(torch.arange(8), 16),
}


@pytest.mark.parametrize("name", TRIG_CALLS)
def test_every_sin_and_cos_of_the_core_comes_after_the_warm_up(name, monkeypatch):
    """In this process the warm-up has long run, so it is switched off again and torch's
    sin, cos and polar record whether it had run at each call: the warm-up's own four calls
    come first, then the function's, all after it."""
    seen = []
    for fn in ("sin", "cos", "polar"):
        original = getattr(torch, fn)

        def record(*args, _original=original, **kwargs):
            seen.append(numerics._trig_warm)
            return _original(*args, **kwargs)

        monkeypatch.setattr(torch, fn, record)
    monkeypatch.setattr(numerics, "_trig_warm", False)
    TRIG_CALLS[name]()
    assert len(seen) > 4 and seen == [False] * 4 + [True] * (len(seen) - 4), seen
