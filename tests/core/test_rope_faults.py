"""Faults around apply_rope's native kernel and its public entry (posenc_core/rope/native.py,
apply.py): the first call never stalls for long (another process's build lock, a compiler that
hangs, whose processes are all killed), the cache folder's problems are named as they are (a
symbolic link, a noexec filesystem, an empty HOME), CC may be a command with arguments,
POSENC_NATIVE may carry stray whitespace, every fallback is silent in the default mode; and the
entry refuses sparse tensors and an in-place out that overlaps the tables, on every path alike.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from pathlib import Path

import pytest
import torch

import posenc_core as pc
from posenc_core.rope import native

REAL_CC = shutil.which(os.environ.get("CC") or "cc")


@pytest.fixture(autouse=True)
def default_mode(monkeypatch):
    """Every test starts without POSENC_NATIVE and POSENC_CACHE_DIR (set where needed)."""
    monkeypatch.delenv("POSENC_NATIVE", raising=False)
    monkeypatch.delenv("POSENC_CACHE_DIR", raising=False)


def bits_equal(a, b):
    view = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(view), b.view(view))


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, 5, 8, generator=g)
    cos, sin = pc.rope_cos_sin(torch.arange(5), 8)
    return x, cos, sin


def fake_compiler(tmp_path, hang=None):
    """A $CC that answers --version, fails the OpenMP probe and the build quickly (so the
    kernel is unavailable), except at the stage ``hang`` ("version", "probe" or "build"), where
    it starts a child ``sleep 1000``, writes the child's pid and its own to ``pids`` and
    sleeps; every call is logged. Returns (script, log, pids)."""
    script, log, pids = tmp_path / "fake-cc", tmp_path / "cc.log", tmp_path / "pids"
    script.write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        echo "$*" >> "{log}"
        case "$*" in
          *--version*) stage=version ;;
          *openmp_probe*) stage=probe ;;
          *) stage=build ;;
        esac
        if [ "$stage" != "{hang}" ]; then
          if [ "$stage" = version ]; then echo "fake-cc 1.0"; exit 0; fi
          echo "error: the fake compiler builds nothing" >&2; exit 1
        fi
        sleep 1000 &
        echo $! >> "{pids}"
        echo $$ >> "{pids}"
        sleep 1000
        """)
    )
    script.chmod(0o755)
    return script, log, pids


def alive(pid):
    """Whether process ``pid`` exists and is not a zombie (one that exited and waits to be
    reaped, e.g. by a container's init that reaps nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def use_kernel(monkeypatch, kern):
    monkeypatch.setattr(native, "kernel", kern)
    return kern


# --------------------------------------------------------------------------- A1: the build lock


LOCK_HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


@pytest.fixture
def lock_held_elsewhere(tmp_path):
    """A cache folder whose build lock another process holds (for 30 s, or until the test
    ends); yields the folder."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(cache / native.LOCK_NAME), "30"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield cache
    finally:
        holder.kill()
        holder.wait()


def test_a_build_lock_held_by_another_process_is_waited_for_a_few_seconds_at_most(
    monkeypatch, tmp_path, lock_held_elsewhere
):
    """While another process holds rope_native.lock (a build in progress, or a process stopped
    with it), the first apply_rope blocked until it was released (41.5 s measured): now it waits
    LOCK_WAIT_S (5 s) at most, then rotates on the eager path, silently, with the same values;
    status() says why, nothing is compiled, and fused=True raises naming the lock."""
    wait = getattr(native, "LOCK_WAIT_S", 5.0)
    assert wait <= 5
    cc, log, _ = fake_compiler(tmp_path)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(lock_held_elsewhere))
    kern = use_kernel(monkeypatch, native.NativeKernel(compiler=str(cc)))
    x, cos, sin = inputs(1)
    start = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = pc.apply_rope(x, cos, sin)
    elapsed = time.monotonic() - start
    assert wait - 0.1 <= elapsed < wait + 3, elapsed
    assert bits_equal(y, pc.apply_rope(x, cos, sin, fused=False))
    st = native.status()
    assert not st.available and st.cache_folder == lock_held_elsewhere
    assert st.reason.startswith("another process is building the kernel (the lock ")
    assert str(lock_held_elsewhere / native.LOCK_NAME) in st.reason
    assert st.reason.endswith("; the eager path is used in this process")
    assert log.read_text().splitlines() == ["--version"]  # nothing compiled, nothing probed
    with pytest.raises(RuntimeError, match=r"unavailable: another process is building"):
        pc.apply_rope(x, cos, sin, fused=True)
    assert kern.error == st.reason


def test_a_held_build_lock_is_an_error_under_posenc_native_1(
    monkeypatch, tmp_path, lock_held_elsewhere
):
    """POSENC_NATIVE=1: the lock still held after LOCK_WAIT_S is a RuntimeError naming it, as
    every other reason the kernel is unavailable."""
    monkeypatch.setattr(native, "LOCK_WAIT_S", 0.5, raising=False)
    cc, _, _ = fake_compiler(tmp_path)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(lock_held_elsewhere))
    monkeypatch.setenv("POSENC_NATIVE", "1")
    use_kernel(monkeypatch, native.NativeKernel(compiler=str(cc)))
    x, cos, sin = inputs(2)
    start = time.monotonic()
    with pytest.raises(
        RuntimeError,
        match=r"POSENC_NATIVE=1 requires .*: another process is building the kernel \(the lock "
        r".*rope_native\.lock was still held after 0\.5 s; not waiting longer\)$",
    ):
        pc.apply_rope(x, cos, sin)
    assert time.monotonic() - start < 3


# --------------------------------------------------------------------------- A2: a hung compiler


def test_the_waits_of_a_first_call_are_bounded():
    """--version and the OpenMP probe 15 s each, the build 60 s (it takes about 5 s), another
    process's lock 5 s: were 60 s, 120 s, 300 s and unbounded."""
    assert native.PROBE_TIMEOUT_S <= 20 and native.BUILD_TIMEOUT_S <= 60
    assert native.LOCK_WAIT_S <= 5 and native.LOCK_POLL_S < native.LOCK_WAIT_S


@pytest.mark.parametrize("stage", ["version", "probe", "build"])
def test_a_compiler_that_hangs_is_killed_with_its_children(monkeypatch, tmp_path, stage):
    """A compiler that hangs (here at --version, at the OpenMP probe or at the build) blocked
    the first call for up to 422 s (60 s, 120 s, 300 s timeouts) and left its children running:
    now each step has a bounded timeout (monkeypatched to 1 s here), the compiler's whole
    process group is killed, and the call rotates on the eager path, silently, with the same
    values; status() says the compiler timed out."""
    monkeypatch.setattr(native, "PROBE_TIMEOUT_S", 1.0, raising=False)
    monkeypatch.setattr(native, "BUILD_TIMEOUT_S", 1.0, raising=False)
    cc, log, pids = fake_compiler(tmp_path, hang=stage)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path / "cache"))
    use_kernel(monkeypatch, native.NativeKernel(compiler=str(cc)))
    x, cos, sin = inputs(3)
    started = []
    try:
        start = time.monotonic()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y = pc.apply_rope(x, cos, sin)
        elapsed = time.monotonic() - start
        started = [int(p) for p in pids.read_text().split()] if pids.exists() else []
        assert elapsed < 5, elapsed
        assert bits_equal(y, pc.apply_rope(x, cos, sin, fused=False))
        st = native.status()
        assert not st.available
        assert st.reason.startswith("the C compiler timed out after 1 s"), st.reason
        assert st.reason.endswith("it was killed with its child processes")
        what = {"version": "--version", "probe": "the OpenMP probe", "build": "compiling"}
        assert f"({what[stage]}" in st.reason
        assert len(started) == 2  # the fake compiler and its child sleep
        deadline = time.monotonic() + 3  # os.kill(pid, 0): ProcessLookupError (or a zombie)
        while any(alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid in started if alive(pid)] == []
        builds = [ln for ln in log.read_text().splitlines() if "rope_native_" in ln]
        assert len(builds) == (stage == "build")  # a compiler that hung is not asked again
        assert not list((tmp_path / "cache").glob(".build-*"))  # its scratch folder removed
    finally:
        kill_leftovers(pids)


def kill_leftovers(pids):
    """Kill the fake compiler's processes that are still running (those the code under test
    should have killed), so that a failing test leaves nothing behind."""
    for pid in [int(p) for p in pids.read_text().split()] if pids.exists() else []:
        if alive(pid):
            os.kill(pid, 9)


def test_a_compiler_timeout_is_an_error_under_posenc_native_1(monkeypatch, tmp_path):
    """POSENC_NATIVE=1: a compiler timeout is a RuntimeError naming it."""
    monkeypatch.setattr(native, "PROBE_TIMEOUT_S", 1.0, raising=False)
    cc, _, pids = fake_compiler(tmp_path, hang="version")
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("POSENC_NATIVE", "1")
    use_kernel(monkeypatch, native.NativeKernel(compiler=str(cc)))
    x, cos, sin = inputs(4)
    try:
        with pytest.raises(RuntimeError, match=r"POSENC_NATIVE=1 requires .*compiler timed out"):
            pc.apply_rope(x, cos, sin)
    finally:
        kill_leftovers(pids)


# --------------------------------------------------------------------------- A3: cache folders


def test_a_symbolic_link_as_cache_folder_is_named_as_one(tmp_path, monkeypatch):
    """A cache folder that is a symbolic link (to a good folder) was reported as "cannot be
    opened (Not a directory)": now the note says it is a symbolic link, not trusted."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "cache"
    link.symlink_to(real, target_is_directory=True)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(link))
    chosen, note = native._cache_folder()
    chosen.close()
    assert chosen.private and chosen.path != link
    assert note == (
        f"cache folder {link} is a symbolic link; not trusted: built in a private temporary folder"
    )


def fake_statvfs(monkeypatch, noexec_folder):
    """os.fstatvfs reporting the filesystem of ``noexec_folder`` (only) as mounted noexec."""
    real = os.fstatvfs
    target = os.stat(noexec_folder)

    class Result:
        def __init__(self, fd):
            self.f_flag = real(fd).f_flag
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino):
                self.f_flag |= os.ST_NOEXEC

    monkeypatch.setattr(os, "fstatvfs", Result)


@pytest.mark.skipif(not hasattr(os, "ST_NOEXEC"), reason="no ST_NOEXEC on this platform")
def test_a_cache_folder_on_a_noexec_filesystem_is_named_as_such(tmp_path, monkeypatch):
    """A cache folder on a filesystem mounted noexec was reported as "cannot be written" (after
    a build there whose library the loader refused, then a second build): now it is detected
    before anything is built (fstatvfs's ST_NOEXEC), and the note says so."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    fake_statvfs(monkeypatch, cache)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(cache))
    chosen, note = native._cache_folder()
    chosen.close()
    assert chosen.private and chosen.path != cache
    assert note == (
        f"cache folder {cache} is on a filesystem mounted noexec (a library there cannot be "
        "loaded): built in a private temporary folder"
    )


def writable_noexec_folder():
    """A folder of ours on a real filesystem mounted noexec, or None."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in mounts:
        fields = line.split()
        if len(fields) > 3 and "noexec" in fields[3].split(",") and "rw" in fields[3].split(","):
            try:
                return Path(tempfile.mkdtemp(prefix="posenc_noexec_", dir=fields[1]))
            except OSError:
                continue
    return None


def test_a_real_noexec_cache_folder_is_detected(monkeypatch):
    """Where this machine has a writable noexec mount: the same note, on the real flag."""
    folder = writable_noexec_folder()
    if folder is None:
        pytest.skip("no writable filesystem mounted noexec here")
    try:
        monkeypatch.setenv("POSENC_CACHE_DIR", str(folder))
        chosen, note = native._cache_folder()
        chosen.close()
        assert chosen.private and "is on a filesystem mounted noexec" in note
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --------------------------------------------------------------------------- A4: CC with arguments


def launcher(tmp_path):
    """A compiler launcher as ccache is one: logs its arguments and runs them."""
    script, log = tmp_path / "launcher", tmp_path / "launcher.log"
    script.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "$@"\n')
    script.chmod(0o755)
    return script, log


@pytest.mark.skipif(REAL_CC is None, reason="no C compiler")
def test_cc_may_be_a_command_with_arguments(monkeypatch, tmp_path):
    """CC="ccache gcc" (here: a launcher, then the real compiler) was refused as "no C
    compiler": now it is split as a shell would, its first word looked up on PATH, and the
    kernel builds through it; status() gives CC as it was set."""
    script, log = launcher(tmp_path)
    monkeypatch.setenv("CC", f"{script} {REAL_CC}")
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path / "cache"))
    kern = use_kernel(monkeypatch, native.NativeKernel())
    assert kern.library() is not None, kern.error
    st = native.status()
    assert st.available and st.compiler == f"{script} {REAL_CC}"
    assert st.library.parent == tmp_path / "cache"
    calls = log.read_text().splitlines()
    assert calls[0] == f"{REAL_CC} --version" and any("rope_native_" in c for c in calls)
    x, cos, sin = inputs(5)
    assert bits_equal(
        pc.apply_rope(x, cos, sin, fused=True), pc.apply_rope(x, cos, sin, fused=False)
    )


def test_every_word_of_cc_is_part_of_the_library_name(tmp_path):
    """The same compiler with other leading arguments (CC="cc -m32", a launcher) must not share
    a library: the compiler's identity in the cache key holds every word of CC."""
    script, _ = launcher(tmp_path)
    real = shutil.which("sh")  # any program answers --version (or not) the same way each time
    identities = {
        cc: native.NativeKernel(compiler=cc)._compiler_identity()
        for cc in (real, f"{real} -c true", f"{script} {real}")
    }
    names = {
        native.library_name(b"src", ident, native.compile_flags(False))
        for ident in identities.values()
    }
    assert len(names) == 3
    for cc, ident in identities.items():
        assert all(word in ident for word in cc.split())


@pytest.mark.parametrize("cc", ["no-such-cc-posenc -O2", "'unbalanced"])
def test_a_cc_that_names_no_program_is_reported(monkeypatch, tmp_path, cc):
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path / "cache"))
    kern = use_kernel(monkeypatch, native.NativeKernel(compiler=cc))
    x, cos, sin = inputs(6)
    assert bits_equal(pc.apply_rope(x, cos, sin), pc.apply_rope(x, cos, sin, fused=False))
    reason = native.status().reason
    assert reason.startswith(f"no C compiler {cc!r} (")
    assert ("no program 'no-such-cc-posenc' on PATH" in reason) or ("split" in reason)
    assert kern.error == reason


# --------------------------------------------------------------------------- A5: HOME


@pytest.mark.parametrize("home", ["", "/", "relative/home", "missing"])
def test_no_folder_is_created_relative_to_an_unusable_home(monkeypatch, tmp_path, home):
    """HOME="" made the default cache /.cache/posenc_core (created at the filesystem root when
    run as root); HOME="/" the same, a relative HOME a folder under the working directory, a
    missing home that home itself: now no folder is created, the private temporary folder is
    used, and the note says why. (Folder creation is intercepted, so nothing is created even
    where the check fails.)"""
    made = []

    def record(path):
        made.append(Path(path))
        raise PermissionError(13, "intercepted by the test")

    monkeypatch.setattr(native, "_make_folders", record)
    monkeypatch.setenv("HOME", str(tmp_path / "missing") if home == "missing" else home)
    monkeypatch.chdir(tmp_path)
    chosen, note = native._cache_folder()
    chosen.close()
    assert made == []
    assert chosen.private and chosen.path != Path("/.cache/posenc_core")
    assert Path(tempfile.gettempdir()) in chosen.path.parents
    assert note.startswith("no cache folder ~/.cache/posenc_core: ")
    assert note.endswith(
        "so no folder is created relative to it (set POSENC_CACHE_DIR): built in a private "
        "temporary folder"
    )
    expected = {
        "": "HOME is empty",
        "/": "is the filesystem root",
        "relative/home": "is not an absolute path",
        "missing": "does not exist",
    }[home]
    assert expected in note


def test_a_usable_home_still_holds_the_default_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    chosen, note = native._cache_folder()
    chosen.close()
    assert note is None and chosen.path == tmp_path / ".cache" / "posenc_core"


# --------------------------------------------------------------------------- A6: POSENC_NATIVE


@pytest.mark.parametrize("value", [" 0", "0 ", "\t0\n"])
def test_posenc_native_0_with_stray_whitespace_is_0(monkeypatch, tmp_path, value):
    """POSENC_NATIVE=" 0" made every default call a ValueError: surrounding whitespace is now
    ignored, so it turns the kernel off as "0" does."""
    cc, log, _ = fake_compiler(tmp_path)
    monkeypatch.setenv("POSENC_NATIVE", value)
    use_kernel(monkeypatch, native.NativeKernel(compiler=str(cc)))
    x, cos, sin = inputs(7)
    assert bits_equal(pc.apply_rope(x, cos, sin), pc.apply_rope(x, cos, sin, fused=False))
    st = native.status()
    assert st.mode == "0" and st.reason == "disabled by POSENC_NATIVE=0" and not log.exists()


@pytest.mark.parametrize("value", ["1\n", " 1 "])
def test_posenc_native_1_with_stray_whitespace_is_1(monkeypatch, tmp_path, value):
    cc, _, _ = fake_compiler(tmp_path)
    monkeypatch.setenv("POSENC_NATIVE", value)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path / "cache"))
    use_kernel(monkeypatch, native.NativeKernel(compiler=str(cc)))
    x, cos, sin = inputs(8)
    with pytest.raises(RuntimeError, match=r"POSENC_NATIVE=1 requires .*fake compiler"):
        pc.apply_rope(x, cos, sin)
    assert native.status().mode == "1"


@pytest.mark.parametrize("value", [" ", "\n"])
def test_a_blank_posenc_native_is_the_default(monkeypatch, tmp_path, value):
    cc, _, _ = fake_compiler(tmp_path)
    monkeypatch.setenv("POSENC_NATIVE", value)
    monkeypatch.setenv("POSENC_CACHE_DIR", str(tmp_path / "cache"))
    use_kernel(monkeypatch, native.NativeKernel(compiler=str(cc)))
    x, cos, sin = inputs(9)
    assert bits_equal(pc.apply_rope(x, cos, sin), pc.apply_rope(x, cos, sin, fused=False))
    st = native.status()
    assert st.mode == "" and "fake compiler builds nothing" in st.reason


@pytest.mark.parametrize("value", [" yes ", "0 1", "01"])
def test_a_genuinely_invalid_posenc_native_is_still_a_value_error(monkeypatch, value):
    monkeypatch.setenv("POSENC_NATIVE", value)
    use_kernel(monkeypatch, native.NativeKernel(compiler="no-such-cc-posenc"))
    x, cos, sin = inputs(10)
    message = (
        rf"^POSENC_NATIVE must be unset or one of '': .*'0': .*'1': .*\(surrounding "
        rf"whitespace ignored\); got {re.escape(repr(value))}$"
    )
    with pytest.raises(ValueError, match=message):
        pc.apply_rope(x, cos, sin)


# --------------------------------------------------------------------------- B1: sparse tensors


def sparse_cases():
    x, cos, sin = inputs(11)
    yield "x", lambda f: pc.apply_rope(x.to_sparse(), cos, sin, fused=f), "torch.sparse_coo"
    yield (
        "x",
        lambda f: pc.apply_rope(x[0, 0].to_sparse_csr(), cos, sin, fused=f),
        "torch.sparse_csr",
    )
    yield "cos", lambda f: pc.apply_rope(x, cos.to_sparse(), sin, fused=f), "torch.sparse_coo"
    yield "sin", lambda f: pc.apply_rope(x, cos, sin.to_sparse(), fused=f), "torch.sparse_coo"
    out = torch.zeros_like(x).to_sparse()
    yield "out", lambda f: pc.apply_rope(x, cos, sin, fused=f, out=out), "torch.sparse_coo"


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("fused", [None, True, False])
@pytest.mark.parametrize("case", range(5))
def test_a_sparse_tensor_is_refused_naming_it(case, fused):
    """A sparse x gave a bare torch error ("Cannot access storage of SparseTensorImpl",
    "unsupported memory format option Contiguous"), a sparse out a misleading "out has elements
    that overlap": each is now a TypeError naming the argument and its layout, asking for a
    strided (dense) tensor, on every path alike."""
    name, call, layout = list(sparse_cases())[case]
    message = rf"^{name} must be a strided \(dense\) tensor, got layout {layout}; convert"
    with pytest.raises(TypeError, match=message):
        call(fused)


# --------------------------------------------------------------------------- B2: aliasing


def aliasing_cases():
    """(description, x, cos, sin, the tables overlapped); out is x (in place)."""
    x, cos, sin = inputs(12)
    t = torch.randn(5, 8)
    yield "x is cos", t, t, sin, "cos"
    buf = torch.randn(2, 5, 8)
    yield "cos a view of x", buf, buf[1], sin, "cos"
    buf = torch.randn(2, 5, 8)
    yield "sin a view of x", buf, cos, buf[0], "sin"
    buf = torch.randn(2, 5, 8)
    yield "both views of x", buf, buf[0], buf[1], "cos and sin"


@pytest.mark.parametrize("fused", [True, False, None])
@pytest.mark.parametrize("case", range(4))
def test_an_in_place_out_that_overlaps_the_tables_is_refused_on_every_path(case, fused):
    """apply_rope(x, cos, sin, out=x) with cos or sin sharing x's memory: the eager path failed
    inside torch ("some elements of the input tensor and the written-to tensor refer to a single
    memory location") for cos, accepted it for sin, and the native kernel accepted both, reading
    tables it was overwriting. Now the public entry refuses it before choosing a path, with one
    ValueError for every path, and x is left as it was."""
    if fused and native.kernel.library() is None:
        pytest.skip(f"no native kernel here: {native.kernel.error}")
    what, x, cos, sin, overlapped = list(aliasing_cases())[case]
    before = x.clone()
    message = (
        rf"^out=x \(x, rotated in place\) must share no memory with cos or sin, but it overlaps "
        rf"{overlapped}: the tables would be overwritten while they are read; .*\.clone\(\)"
    )
    with pytest.raises(ValueError, match=message):
        pc.apply_rope(x, cos, sin, out=x, fused=fused)
    assert bits_equal(x, before), what


def test_the_aliasing_message_is_the_same_on_both_paths():
    if native.kernel.library() is None:
        pytest.skip(f"no native kernel here: {native.kernel.error}")
    messages = set()
    for fused in (True, False):
        _, x, cos, sin, _ = next(aliasing_cases())
        with pytest.raises(ValueError) as caught:
            pc.apply_rope(x, cos, sin, out=x, fused=fused)
        messages.add(str(caught.value))
    assert len(messages) == 1


def test_an_in_place_rotation_with_separate_tables_is_still_accepted():
    x, cos, sin = inputs(13)
    expected = pc.apply_rope(x, cos, sin, fused=False)
    for fused in (None, False) + ((True,) if native.kernel.library() is not None else ()):
        y = x.clone()
        assert pc.apply_rope(y, cos, sin, out=y, fused=fused) is y
        assert bits_equal(y, expected)


@pytest.mark.parametrize("which", ["q", "k"])
def test_a_sparse_query_or_key_of_a_rotary_embedding_is_refused_naming_it(which):
    """RotaryEmbedding checked q and k for dtype and shape only: a sparse one reached torch and
    failed there with a bare error."""
    rope = pc.RotaryEmbedding(head_dim=8)
    q, k = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    args = {"q": q, "k": k, which: (q if which == "q" else k).to_sparse()}
    with pytest.raises(TypeError, match=rf"^{which} must be a strided \(dense\) tensor"):
        rope(args["q"], args["k"])
