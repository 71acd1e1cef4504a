"""Chapter 7c's methods by loss and by retrieval (posenc_core.book.studies.method_retrieval),
checked on small hand-made results whose means, orders and swaps are worked out by hand, and
the figure that draws them (posenc_core.book.figures.method_retrieval)."""

import struct

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from posenc_core.book import figures
from posenc_core.book.notebook import BUILD_ENV
from posenc_core.book.studies import method_retrieval as mr

L = 2  # P = 8L = 16 positions


def _loss(beyond: float, spread: float = 1.0) -> list[float]:
    """16 losses: 50 inside L (must not count), then beyond +- spread alternating (mean beyond)."""
    return [50.0, 50.0] + [beyond + (spread if i % 2 else -spread) for i in range(14)]


def _probe(gain_2: float, gain_4: float, copy: float = 1.0) -> dict:
    """The probe at d = 1 (< L: must not count, a huge gain), 2 and 4; control = copy + gain."""
    return {
        "1": {"copy": copy, "control": copy + 99.0},
        "2": {"copy": copy, "control": copy + gain_2},
        "4": {"copy": copy + 0.5, "control": copy + 0.5 + gain_4},
    }


def _results(table: dict[tuple[str, int, int], tuple[float, float, float]]):
    """lm and mixing dicts from {(method, factor, seed): (loss beyond, gain at 2, gain at 4)}."""
    lm = {"config": {"train_len": L}, "runs": {}, "scaling": {}, "finetune": {}}
    methods = {}
    for (m, s, seed), (beyond, g2, g4) in table.items():
        entry = {"method": m, "factor": s, "seed": seed, "probe": _probe(g2, g4)}
        if m == "none":
            lm["runs"][f"rope/{seed}"] = {"loss": _loss(beyond)}
        elif m.startswith("finetuned-"):
            entry["steps"] = 200
            by_step = {"25": _loss(70.0), "200": _loss(beyond)}  # only 200 steps counts
            lm["finetune"][f"{m[10:]}/{s}/{seed}"] = {"loss_by_step": by_step}
        else:
            lm["scaling"][f"{m}/{s}/{seed}"] = {"loss": _loss(beyond)}
        methods[f"{m}/{s}/{seed}"] = entry
    return {"methods": methods}, lm


# Seed 0 and seed 1 at factor 4 (and one method at factor 8). Retrieval = mean of the gains at
# d = 2 and d = 4.
TABLE = {
    ("none", 1, 0): (3.0, 0.2, 0.0),  # retrieval 0.1
    ("pi", 4, 0): (2.0, 0.6, 0.4),  # 0.5
    ("ntk", 4, 0): (1.5, 0.1, 0.1),  # 0.1
    ("finetuned-pi", 4, 0): (1.0, 1.0, 0.6),  # 0.8
    ("none", 1, 1): (3.2, 0.3, 0.1),  # 0.2
    ("pi", 4, 1): (2.2, 0.0, 0.2),  # 0.1
    ("ntk", 4, 1): (1.7, 0.5, 0.3),  # 0.4
    ("finetuned-pi", 4, 1): (1.2, 0.9, 0.5),  # 0.7
    ("pi", 8, 0): (2.5, 0.3, 0.1),  # 0.2
}


def test_each_row_is_the_loss_beyond_L_and_the_gain_over_d_at_least_L():
    mixing, lm = _results(TABLE)
    rows = mr.method_table(mixing, lm)
    assert len(rows) == len(TABLE)
    assert [(r.method, r.factor, r.seed) for r in rows] == sorted(TABLE)
    for r in rows:
        beyond, g2, g4 = TABLE[r.method, r.factor, r.seed]
        assert r.loss_beyond == pytest.approx(beyond, abs=1e-12)
        assert r.gain == pytest.approx({1: 99.0, 2: g2, 4: g4}, abs=1e-12)
        assert r.copy == {1: 1.0, 2: 1.0, 4: 1.5}
        assert r.retrieval == pytest.approx((g2 + g4) / 2, abs=1e-12)


def test_seed_means_average_both_measures_over_seeds():
    means = mr.seed_means(mr.method_table(*_results(TABLE)))
    assert means["pi", 4] == pytest.approx(((2.0 + 2.2) / 2, (0.5 + 0.1) / 2))
    assert means["none", 1] == pytest.approx((3.1, 0.15))
    assert means["pi", 8] == pytest.approx((2.5, 0.2))


def test_points_are_each_seed_loss_and_retrieval_at_one_factor():
    pts = mr.points(mr.method_table(*_results(TABLE)), 4)
    assert list(pts) == ["finetuned-pi", "ntk", "pi"]
    assert pts["pi"][0] == pytest.approx([2.0, 2.2])
    assert pts["pi"][1] == pytest.approx([0.5, 0.1])
    assert mr.points(mr.method_table(*_results(TABLE)), 1) == {
        "none": (pytest.approx([3.0, 3.2]), pytest.approx([0.1, 0.2]))
    }


def test_one_seed_ranking_lists_the_swapped_pairs_and_kendall_tau():
    """Seed 0, factor 4: by loss ft-pi < ntk < pi < none; by retrieval ft-pi 0.8, pi 0.5, then
    ntk and none tied at 0.1. Of the 6 pairs: (ntk, pi) swaps, (ntk, none) ties, the other 4
    agree, so tau = (4 - 1) / 6."""
    rank = mr.rankings(mr.method_table(*_results(TABLE)), 4, seed=0)
    assert rank.by_loss == ["finetuned-pi", "ntk", "pi", "none"]
    assert rank.by_retrieval[:2] == ["finetuned-pi", "pi"]
    assert set(rank.by_retrieval[2:]) == {"ntk", "none"}
    assert [(a, b) for a, b, *_ in rank.swaps] == [("ntk", "pi")]
    _, _, dloss, dret = rank.swaps[0]
    assert dloss == pytest.approx(0.5) and dret == pytest.approx(0.4)
    assert rank.tau == pytest.approx(3 / 6)


def test_the_ranking_across_seeds_uses_the_seed_means():
    """Means: ft-pi (1.1, 0.75), ntk (1.6, 0.25), pi (2.1, 0.3), none (3.1, 0.15): again only
    (ntk, pi) swaps, by 0.05 in retrieval; seed 1 alone agrees everywhere but (pi, none)."""
    rows = mr.method_table(*_results(TABLE))
    rank = mr.rankings(rows, 4)
    assert [(a, b) for a, b, *_ in rank.swaps] == [("ntk", "pi")]
    assert rank.swaps[0][2:] == pytest.approx((0.5, 0.05))
    assert rank.tau == pytest.approx((5 - 1) / 6)
    one = mr.rankings(rows, 4, seed=1)
    assert [(a, b) for a, b, *_ in one.swaps] == [("pi", "none")]
    no_reference = mr.rankings(rows, 4, seed=1, reference=False)
    assert no_reference.swaps == [] and no_reference.tau == 1.0
    assert mr.rankings(rows, 8).by_loss == ["pi", "none"]


def test_seed_swaps_count_the_seeds_on_which_each_pair_swaps():
    """Seed 0 swaps (ntk, pi) only, seed 1 (pi, none) only (see the two tests above)."""
    rows = mr.method_table(*_results(TABLE))
    assert mr.seed_swaps(rows, 4) == {("ntk", "pi"): 1, ("pi", "none"): 1}
    assert mr.seed_swaps(rows, 4, reference=False) == {("ntk", "pi"): 1}


def test_reversed_orders_give_tau_minus_one():
    table = {("a", 4, 0): (1.0, 0.0, 0.0), ("b", 4, 0): (2.0, 1.0, 1.0),
             ("c", 4, 0): (3.0, 2.0, 2.0)}  # fmt: skip
    rank = mr.rankings(mr.method_table(*_results(table)), 4, reference=False)
    assert rank.tau == -1.0 and len(rank.swaps) == 3
    assert rank.by_retrieval == ["c", "b", "a"]


def test_bad_inputs_raise_naming_what_is_wrong():
    mixing, lm = _results(TABLE)
    with pytest.raises(ValueError, match="methods"):
        mr.method_table({"methods": {}}, lm)
    with pytest.raises(ValueError, match="factor=16"):
        mr.rankings(mr.method_table(mixing, lm), 16)
    near = {
        "methods": {k: {**e, "probe": {"1": e["probe"]["1"]}} for k, e in mixing["methods"].items()}
    }
    with pytest.raises(ValueError, match="d >= L=2"):
        mr.method_table(near, lm)


# ----------------------------------------------------------------------------- the figure


PANELS = {
    "factor s = 4": {
        "PI": ([2.0, 2.2, 2.1], [0.5, 0.1, 0.3]),
        "NTK-aware": ([1.5, 1.7, 1.6], [0.1, 0.4, 0.2]),
        "PI, fine-tuned": ([1.0, 1.2, 1.1], [0.8, 0.7, 0.6]),
    },
    "factor s = 8": {
        "PI": ([2.5, 2.6, 2.7], [0.2, 0.1, 0.0]),
        "NTK-aware": ([1.9, 2.0, 2.1], [0.0, 0.1, 0.2]),
    },
}
REFERENCE = {"no scaling": ([3.0, 3.2, 3.1], [0.1, 0.2, 0.0])}


def _figure():
    return figures.loss_retrieval_figure(
        PANELS, reference=REFERENCE, tuned={"PI, fine-tuned": "PI"}
    )


def test_figure_draws_each_seed_and_marks_the_mean_in_one_colour_per_method():
    fig = _figure()
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2
    for ax, (title, points) in zip(axes, PANELS.items()):
        assert ax.get_title() == title
        seeds = [c.get_offsets() for c in ax.collections]
        wanted = [*REFERENCE.values(), *points.values()]
        assert len(seeds) == len(wanted)
        for got, (xs, ys) in zip(seeds, wanted):
            np.testing.assert_allclose(got, np.column_stack([xs, ys]))
        means = {
            line.get_label(): line for line in ax.lines if not line.get_label().startswith("_")
        }
        for label, (xs, ys) in {**REFERENCE, **points}.items():
            np.testing.assert_allclose(means[label].get_xydata(), [[np.mean(xs), np.mean(ys)]])
    colour = {ax.get_title(): {ln.get_label(): ln.get_markeredgecolor() for ln in ax.lines}
              for ax in axes}  # fmt: skip
    assert colour["factor s = 4"]["PI"] == colour["factor s = 8"]["PI"]
    assert colour["factor s = 4"]["PI, fine-tuned"] == colour["factor s = 4"]["PI"]
    assert colour["factor s = 4"]["NTK-aware"] != colour["factor s = 4"]["PI"]
    tuned = next(ln for ln in axes[0].lines if ln.get_label() == "PI, fine-tuned")
    assert tuned.get_markerfacecolor() == "white"
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "no scaling", "PI", "NTK-aware", "PI, fine-tuned",
    ]  # fmt: skip


def _chunks(png: bytes) -> list[tuple[bytes, bytes]]:
    """The PNG's chunks in order, ``(type, data)``, from an independent parse."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    found, at = [], 8
    while at < len(png):
        (length,) = struct.unpack(">I", png[at : at + 4])
        found.append((png[at + 4 : at + 8], png[at + 8 : at + 8 + length]))
        at += 12 + length
    return found


def test_figure_phone_rendition_fits_the_phone_column(monkeypatch):
    """As tests/book/test_figures_phone.py checks every figure: the desktop PNG carries a phone
    PNG at most 342 CSS px wide whose smallest text shows at 9 px or more."""
    monkeypatch.setenv(BUILD_ENV, "1")
    desktop, _ = figures.figure_for_display(_figure())
    phone = dict(_chunks(desktop))[figures.PHONE_CHUNK]
    chunks = _chunks(phone)
    width = struct.unpack(">I", dict(chunks)[b"IHDR"][:4])[0]
    assert width / figures.PIXEL_RATIO <= 342
    texts = dict(d.split(b"\0", 1) for kind, d in chunks if kind == b"tEXt")
    smallest = float(texts[figures.TEXT_SIZE_KEY.encode()])
    assert smallest * figures.DISPLAY_DPI / 72 >= 9.0


def test_figure_rejects_bad_points():
    with pytest.raises(ValueError, match="panels"):
        figures.loss_retrieval_figure({})
    with pytest.raises(ValueError, match="'PI'"):
        figures.loss_retrieval_figure({"s = 4": {"PI": ([1.0, 2.0], [0.1])}})
