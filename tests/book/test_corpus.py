"""The language-model corpus (posenc_core.book.studies.corpus): selection, split, SHA-256 checks."""

import hashlib

import pytest
import torch

from posenc_core.book.studies import corpus


def test_selection_is_sorted_and_leaves_out_exactly_the_generated_modules():
    files = corpus.corpus_files()
    names = [rel for rel, _ in files]
    assert names == sorted(names) and len(names) == corpus.N_FILES
    assert not any(corpus.is_generated(n) for n in names)
    assert "pygments/lexers/python.py" in names
    for generated in ("pygments/lexers/_mapping.py", "pygments/lexers/_php_builtins.py"):
        assert corpus.is_generated(generated) and generated not in names
    assert sum(p.stat().st_size for _, p in files) == corpus.N_BYTES


def test_splits_are_verified_disjoint_by_file_and_cover_the_selection():
    train, held = corpus.corpus_split("train"), corpus.corpus_split("heldout")
    assert train.dtype == torch.int64 and int(train.max()) <= 255 and int(train.min()) >= 0
    assert len(train) + len(held) == corpus.N_BYTES
    files = corpus.corpus_files()
    held_files = [rel for k, (rel, _) in enumerate(files) if k % 10 == 9]
    assert len(held_files) == corpus.N_FILES // 10
    # the held-out split is exactly those files, and none of them is in the training split
    held_bytes = b"".join(p.read_bytes() for k, (_, p) in enumerate(files) if k % 10 == 9)
    assert bytes(held.to(torch.uint8).tolist()) == held_bytes
    train_bytes = bytes(train.to(torch.uint8).tolist())
    for k, (_, p) in enumerate(files):
        if k % 10 == 9 and len(p.read_bytes()) > 2000:
            assert p.read_bytes() not in train_bytes


def test_a_tampered_split_raises_naming_both_versions(monkeypatch):
    monkeypatch.setattr(corpus, "TRAIN_SHA256", "0" * 64)
    with pytest.raises(ValueError, match=r"Pygments 2\.21\.0.*expected 0{64} \(Pygments 2\.21\.0"):
        corpus.corpus_split("train")


def test_excerpt_is_the_start_of_the_heldout_split_and_checked(tmp_path):
    ex = corpus.heldout_excerpt()
    assert ex.shape == (corpus.EXCERPT_BYTES,)
    assert torch.equal(ex, corpus.corpus_split("heldout")[: corpus.EXCERPT_BYTES])
    data = corpus.EXCERPT_FILE.read_bytes()
    bad = tmp_path / "excerpt.bin"
    bad.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one bit flipped
    with pytest.raises(ValueError, match="SHA-256"):
        corpus.heldout_excerpt(bad)
    assert hashlib.sha256(corpus.LICENSE_FILE.read_bytes()).hexdigest() == corpus.LICENSE_SHA256
    assert "Redistribution and use in source and binary forms" in corpus.LICENSE_FILE.read_text()


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="split"):
        corpus.corpus_split("test")
    with pytest.raises(TypeError, match="path"):
        corpus.heldout_excerpt(3)
    with pytest.raises(TypeError, match="relative_path"):
        corpus.is_generated(None)
