"""The native CPU kernel of :func:`~posenc_core.rope.apply_rope`: ``native.c`` beside this
module, compiled on first use with the system C compiler and called through ``ctypes`` on the
tensors' data pointers.

One pass per pair: read x1 = x[i] and x2 = x[partner(i)] (``"half"``: i + r/2;
``"interleaved"``: 2i + 1) and the table entries, write both outputs, so rotating in place
needs no temporary. Rows are split over ``torch.get_num_threads()`` OpenMP threads where the
compiler has OpenMP; the bits do not depend on the number of threads. float32/float64: the
formula's roundings (compiled with ``-ffp-contract=off``, never ``-ffast-math``);
bfloat16/float16 with tables of x's dtype: the correctly rounded exact value (TwoSum, round to
odd, then to nearest even; Boldo and Melquiond 2008); with float64 tables: the float64 formula
rounded once. Bit for bit covers every non-NaN result; NaN results are NaN at the same
positions on every path, with signs and payloads that may differ.

The library is cached (``$POSENC_CACHE_DIR``, else ``~/.cache/posenc_core``) under a name keyed
by the SHA-256 of ``native.c``, the compiler, the flags and the CPU, and loaded only from a
folder and file that only this user can write, whose SHA-256 matches its record; otherwise it
is rebuilt, in a private temporary folder if the cache folder is not trusted. Builds are
serialised by locks and bounded by ``LOCK_WAIT_S``, ``PROBE_TIMEOUT_S`` and
``BUILD_TIMEOUT_S``. ``POSENC_NATIVE`` (``"0"``: off; ``"1"``: required; unset or ``""``: used
when it builds) is read when the kernel is first needed; :func:`status` says whether the kernel
is in use and why not. The per-dtype arithmetic, the trust rules and their tests
(``tests/core/test_rope_native.py``, ``test_rope_faults.py``) are on the :doc:`/numerics` page.

Notation for tensor shapes: s = sequence, d = head_dim, r = rotary width (r <= d); x is
``(..., s, d)`` with its last dimension contiguous.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import dataclasses
import hashlib
import os
import platform
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import torch

try:
    import fcntl
except ImportError:  # Windows: no flock; the in-process lock still serialises this process
    fcntl = None

SOURCE_NAME = "native.c"  # package data beside this module

# -O3 (and -funroll-loops, a few per cent on the short rows) lets the compiler vectorise the row
# loops; -march=native is right because the library is compiled on the machine that runs it
# (the CPU's flags are part of the cache key); on x86, 512-bit vectors where AVX-512 exists
# (GCC prefers 256; 512 measured 10-25% faster here for the low-precision kinds).
# -ffp-contract=off: no fused multiply-add, whose single rounding differs from the formula's
# two. Never -ffast-math/-Ofast: they allow reassociation (which breaks TwoSum and the formula's
# order) and flush subnormals. -Werror=vla: no variable-length array (a stack overflow for wide
# rows) can come back. OPENMP_FLAG is added where the compiler accepts it (probed).
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")
FLAGS = (
    "-O3",
    "-funroll-loops",
    "-march=native",
    *(("-mprefer-vector-width=512",) if _X86 else ()),
    "-ffp-contract=off",
    "-fno-fast-math",
    "-Werror=vla",
    "-std=gnu11",
    "-fPIC",
    "-shared",
)
OPENMP_FLAG = "-fopenmp"
OPENMP_PROBE = "#include <omp.h>\nint posenc_openmp_probe(void) { return omp_get_max_threads(); }\n"

MODE_ENV = "POSENC_NATIVE"
MODES = {
    "": "use the native kernel when it builds, else the eager paths (the default)",
    "0": "never use the native kernel",
    "1": "require the native kernel: a failed build is an error",
}
CACHE_ENV = "POSENC_CACHE_DIR"
DEFAULT_CACHE = "~/.cache/posenc_core"
LOCK_NAME = "rope_native.lock"
RECORD_SUFFIX = ".sha256"  # the SHA-256 of a library, in hex, beside it

# Bounds on what the first call may wait for. The build measured 4-5 s (gcc 12, -O3, two busy
# cores), the OpenMP probe 0.03 s and ``--version`` a few ms: BUILD_TIMEOUT_S and
# PROBE_TIMEOUT_S leave a slow or loaded machine more than ten times that, while a compiler that
# hangs (it does so on its first call, ``--version``) costs the first call PROBE_TIMEOUT_S, not
# minutes. A compiler that times out is killed with its whole process group.
PROBE_TIMEOUT_S = 15.0  # ``--version`` and the OpenMP probe, each
BUILD_TIMEOUT_S = 60.0  # compiling native.c
# Another process's build lock is waited for this long at most, polled (flock LOCK_NB) every
# LOCK_POLL_S; then this process uses the eager paths rather than stall its first call.
LOCK_WAIT_S = 5.0
LOCK_POLL_S = 0.05

# Kinds by (x dtype, table dtype), as in native.c; the tables are already in the working dtype
# (``kernels.working_dtype``).
KINDS = {
    (torch.float32, torch.float32): 0,
    (torch.float64, torch.float64): 1,
    (torch.bfloat16, torch.bfloat16): 2,
    (torch.float16, torch.float16): 3,
    (torch.bfloat16, torch.float64): 4,
    (torch.float16, torch.float64): 5,
}
MAX_DIMS = 16  # leading dimensions + sequence; more are flattened first (a copy if need be)

# The exact float32 path for bfloat16 needs nonzero finite |x| within [LOW_X_MIN, LOW_X_MAX) and
# nonzero finite table entries within [LOW_TABLE_MIN, LOW_TABLE_MAX]; other rows take the exact
# float64 path (both checked by the kernel, on the bits).
LOW_X_MIN, LOW_X_MAX = 2.0**-63, 2.0**100
LOW_TABLE_MIN, LOW_TABLE_MAX = 2.0**-63, 2.0**8


def supports(x_dtype: torch.dtype, table_dtype: torch.dtype) -> bool:
    """Whether the native kernel handles x of ``x_dtype`` with tables of ``table_dtype`` (the
    working dtype)."""
    return (x_dtype, table_dtype) in KINDS


def source() -> bytes:
    """The kernel's C source: ``native.c``, read from the installed package."""
    return resources.files(__package__).joinpath(SOURCE_NAME).read_bytes()


def read_mode() -> str:
    """The ``POSENC_NATIVE`` setting: ``""`` (unset, empty or blank), ``"0"`` or ``"1"``;
    surrounding whitespace is ignored (``" 0"``, ``"1\\n"``).

    Raises:
        ValueError: any other value, named with the allowed ones.
    """
    value = os.environ.get(MODE_ENV, "")
    if value.strip() not in MODES:
        allowed = "; ".join(f"{k!r}: {v}" for k, v in MODES.items())
        raise ValueError(
            f"{MODE_ENV} must be unset or one of {allowed} (surrounding whitespace ignored); "
            f"got {value!r}"
        )
    return value.strip()


@dataclasses.dataclass(frozen=True)
class Status:
    """Where the native kernel stands (:func:`status`).

    Attributes:
        available: whether ``fused=None`` uses it in this process.
        reason: why it is unavailable (e.g. ``"disabled by POSENC_NATIVE=0"``, ``"no C
            compiler 'cc' (...)"``, the compile error's first line); when it is available,
            None or a note (e.g. that the cache folder was not trusted, so the library was built
            in a private temporary folder).
        library: the loaded library's path (None when unavailable).
        cache_folder: the folder it was loaded from or built in (None if none was reached).
        compiler: the C compiler (``$CC``, else ``cc``).
        openmp: whether the library was built with OpenMP (else it runs on one thread).
        mode: the ``POSENC_NATIVE`` setting (``""``, ``"0"``, ``"1"``, or the invalid value).
    """

    available: bool
    reason: str | None
    library: Path | None
    cache_folder: Path | None
    compiler: str
    openmp: bool
    mode: str


def status() -> Status:
    """Whether :func:`~posenc_core.rope.apply_rope` uses the native kernel in this process,
    and if not, why. Builds (or loads) the library first if no call has needed it yet, so it
    may take a few seconds once."""
    return kernel.status()


# --------------------------------------------------------------------------- trusted folders


def _is_ours(st: os.stat_result) -> bool:
    """Owned by this user and writable by nobody else: only this user (or root) could have
    written what it holds. (Where there are no user ids, Windows, ownership is not checked.)"""
    owner = not hasattr(os, "getuid") or st.st_uid == os.getuid()
    return owner and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _flag(name: str) -> int:
    return getattr(os, name, 0)


class _Folder:
    """An open, checked folder (:func:`_open_folder`). The files whose trust is decided (the
    library, its record, the lock) are opened relative to its descriptor (``dir_fd``), so they
    are read from the folder that was checked even if its path is renamed meanwhile."""

    def __init__(self, path: Path, fd: int, private: bool) -> None:
        self.path, self.fd, self.private = path, fd, private

    def close(self) -> None:
        os.close(self.fd)

    def open_file(self, name: str) -> int | None:
        """A read descriptor of the regular file ``name`` if it exists, is not a symbolic link
        (O_NOFOLLOW) and is ours (:func:`_is_ours`, checked on the opened descriptor, so on the
        file that will be read); else None."""
        flags = os.O_RDONLY | _flag("O_NOFOLLOW") | _flag("O_CLOEXEC")
        try:
            fd = os.open(name, flags, dir_fd=self.fd)  # a symbolic link fails here (ELOOP)
        except OSError:
            return None
        st = os.fstat(fd)  # the opened file itself: no window between check and use
        if stat.S_ISREG(st.st_mode) and _is_ours(st):
            return fd
        os.close(fd)
        return None

    def read_record(self, name: str) -> str | None:
        """The SHA-256 recorded in ``name`` (64 hex digits), if the file is trusted."""
        fd = self.open_file(name)
        if fd is None:
            return None
        with os.fdopen(fd, "rb") as f:
            text = f.read(128).decode("ascii", "replace").strip()
        return text if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else None


SYMLINK_PROBLEM = "is a symbolic link; not trusted"
NOEXEC_PROBLEM = "is on a filesystem mounted noexec (a library there cannot be loaded)"


def _is_symlink(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def _noexec(fd: int) -> bool:
    """Whether the filesystem holding the open folder ``fd`` is mounted noexec (where
    ``os.fstatvfs`` and ``os.ST_NOEXEC`` exist; elsewhere False)."""
    flag = getattr(os, "ST_NOEXEC", 0)
    if not flag or not hasattr(os, "fstatvfs"):
        return False
    try:
        return bool(os.fstatvfs(fd).f_flag & flag)
    except OSError:
        return False


def _open_folder(path: Path, private: bool = False) -> tuple[_Folder | None, str | None]:
    """``path`` opened and checked (a folder, not a symbolic link, ours: :func:`_is_ours`, on a
    filesystem that allows loading libraries), or None and what is wrong with it."""
    flags = os.O_RDONLY | _flag("O_DIRECTORY") | _flag("O_NOFOLLOW") | _flag("O_CLOEXEC")
    try:
        fd = os.open(path, flags)  # O_NOFOLLOW: a symbolic link is refused, not followed
    except OSError as exc:  # a link fails here too (ENOTDIR or ELOOP): say that it is one
        return None, SYMLINK_PROBLEM if _is_symlink(path) else (
            f"cannot be opened ({exc.strerror or exc})"
        )
    st = os.fstat(fd)
    problem = None
    if not stat.S_ISDIR(st.st_mode):
        problem = "is not a folder"
    elif hasattr(os, "getuid") and st.st_uid != os.getuid():
        problem = f"is owned by user id {st.st_uid}, not this user ({os.getuid()})"
    elif not _is_ours(st):
        problem = f"is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    elif _noexec(fd):
        problem = NOEXEC_PROBLEM
    if problem:
        os.close(fd)
        return None, problem
    return _Folder(path, fd, private), None


def _make_folders(path: Path) -> None:
    """Create ``path`` and its missing parents with mode 0700, whatever the umask (mkdir's mode
    is masked by it, so chmod after; only what this call created is changed)."""
    missing = [p for p in (path, *path.parents) if not os.path.lexists(p)]
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:  # created meanwhile by someone else: checked when opened
            continue
        os.chmod(p, 0o700)  # private: a umask of 000 would have left it writable by all


_private: Path | None = None
_private_lock = threading.Lock()


def _private_folder() -> _Folder:
    """This process's private temporary folder (mode 0700, from ``tempfile.mkdtemp``), created
    on first use and removed at exit (a loaded library may be unlinked while it is mapped)."""
    global _private
    with _private_lock:
        if _private is None or not _private.is_dir():
            _private = Path(tempfile.mkdtemp(prefix="posenc_core_"))
            atexit.register(shutil.rmtree, _private, ignore_errors=True)
        folder, problem = _open_folder(_private, private=True)
    if folder is None:
        hint = f" (set {CACHE_ENV} or TMPDIR to a folder elsewhere)" if problem else ""
        raise RuntimeError(f"the private temporary folder {_private} {problem}{hint}")
    return folder


def _home_problem() -> str | None:
    """What makes ``~`` unusable for a cache folder, or None: ``$HOME`` empty, or a home that
    is not an absolute path (``~`` left unexpanded), the filesystem root or missing. Folders
    are never created relative to such a home (``HOME=""`` expands ``~/.cache`` to
    ``/.cache``)."""
    home_env = os.environ.get("HOME")
    if home_env is not None and not home_env.strip():
        return f"HOME is empty ({home_env!r})"
    home = os.path.expanduser("~")
    where = f"the home folder {home!r}" + (" (HOME unset)" if home_env is None else "")
    if not os.path.isabs(home):
        return f"{where} is not an absolute path"
    if Path(home) == Path(home).parent:
        return f"{where} is the filesystem root"
    if not os.path.isdir(home):
        return f"{where} does not exist"
    return None


def _cache_folder() -> tuple[_Folder, str | None]:
    """The cache folder (``$POSENC_CACHE_DIR``, else ``~/.cache/posenc_core``, created if
    missing) if it passes the checks; else the private temporary folder, with a note why."""
    configured = os.environ.get(CACHE_ENV) or DEFAULT_CACHE
    if configured == "~" or configured.startswith("~/"):
        home_problem = _home_problem()
        if home_problem is not None:
            note = (
                f"no cache folder {configured}: {home_problem}, so no folder is created "
                f"relative to it (set {CACHE_ENV}): built in a private temporary folder"
            )
            return _private_folder(), note
    path = Path(configured).expanduser()
    try:
        _make_folders(path)
    except OSError as exc:
        problem = f"cannot be created ({exc.strerror or exc})"
    else:
        folder, problem = _open_folder(path)
        if folder is not None:
            return folder, None
    return _private_folder(), _not_used(path, problem)


def _not_used(path: Path, problem: str | None) -> str:
    return f"cache folder {path} {problem}: built in a private temporary folder"


def cache_dir() -> Path:
    """The folder the library is loaded from or built in: ``$POSENC_CACHE_DIR``, else
    ``~/.cache/posenc_core`` (created with mode 0700 if missing), when it is owned by this user
    and writable by nobody else; else this process's private temporary folder (mode 0700,
    removed at exit)."""
    folder, _ = _cache_folder()
    folder.close()
    return folder.path


class LockBusy(RuntimeError):
    """Another process held the build lock for longer than ``LOCK_WAIT_S``."""


_folder_locks: dict[tuple[int, int], threading.Lock] = {}  # (st_dev, st_ino) -> its lock
_folder_locks_lock = threading.Lock()


@contextlib.contextmanager
def _build_lock(folder: _Folder) -> Iterator[None]:
    """Hold the folder's lock, so that one build at a time runs there: a lock per folder within
    this process (waited for: a build in this process ends within the compiler's timeouts),
    then ``fcntl.flock`` on its lock file across processes (none where fcntl is missing),
    tried without blocking every ``LOCK_POLL_S`` for at most ``LOCK_WAIT_S``: a LockBusy if
    another process still holds it (a build, or a process stopped while holding it). An
    OSError if the file cannot be created (a read-only folder: then the build goes
    elsewhere)."""
    st = os.fstat(folder.fd)
    with _folder_locks_lock:
        local = _folder_locks.setdefault((st.st_dev, st.st_ino), threading.Lock())
    with local:
        if fcntl is None:
            yield
            return
        flags = os.O_RDWR | os.O_CREAT | _flag("O_NOFOLLOW") | _flag("O_CLOEXEC")
        fd = os.open(LOCK_NAME, flags, 0o600, dir_fd=folder.fd)
        try:
            deadline = time.monotonic() + LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when fd closes
                    break
                except BlockingIOError:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise LockBusy(
                            f"another process is building the kernel (the lock "
                            f"{folder.path / LOCK_NAME} was still held after {LOCK_WAIT_S:g} "
                            f"s; not waiting longer)"
                        ) from None
                    time.sleep(min(LOCK_POLL_S, left))
            yield
        finally:
            os.close(fd)


# --------------------------------------------------------------------------- the library


def _sha256(fd: int) -> str:
    """The SHA-256 of the file behind ``fd``, read from its start."""
    digest = hashlib.sha256()
    os.lseek(fd, 0, os.SEEK_SET)
    while chunk := os.read(fd, 1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return ""


def compile_flags(openmp: bool) -> tuple[str, ...]:
    """The flags a library is built with: ``FLAGS``, and ``OPENMP_FLAG`` if ``openmp``."""
    return (*FLAGS, OPENMP_FLAG) if openmp else tuple(FLAGS)


def library_name(text: bytes, version: str, flags: tuple[str, ...]) -> str:
    """The file name of the library built from ``text`` by the compiler whose ``--version``
    is ``version`` with ``flags``, on this CPU."""
    key = hashlib.sha256(
        b"\0".join((text, version.encode(), " ".join(flags).encode(), _cpu_flags().encode()))
    ).hexdigest()[:20]
    return f"rope_native_{key}.so"


def _verified(folder: _Folder, name: str) -> int | None:
    """A read descriptor of ``folder/name`` if it is trusted and its SHA-256, computed on that
    descriptor, matches its record; else None (missing, untrusted, corrupt: rebuild it)."""
    expected = folder.read_record(name + RECORD_SUFFIX)
    if expected is None:  # no record (an older build, or one cut short): rebuild
        return None
    fd = folder.open_file(name)
    # hash the descriptor that will be loaded, not the path: a truncated or overwritten file
    # (which would crash the process with SIGBUS or SIGILL when loaded) is caught here
    if fd is not None and _sha256(fd) != expected:
        os.close(fd)
        fd = None
    return fd


def _dlopen(fd: int, path: Path) -> ctypes.CDLL:
    """Load the library open at ``fd``: through ``/proc/self/fd``, the very file that was
    checked and hashed, where that exists; else by its path (in a folder only this user can
    write). The caller keeps ``fd`` open for as long as the library is loaded: the dynamic
    loader knows a library by the name it was opened with, and must never see that name
    again for another file."""
    via_fd = Path(f"/proc/self/fd/{fd}")
    lib = ctypes.CDLL(str(via_fd if via_fd.exists() else path))
    fn = lib.rope_rotate
    i64p = ctypes.POINTER(ctypes.c_int64)
    fn.restype = ctypes.c_int64
    fn.argtypes = [
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_int,
        i64p,
        i64p,
        i64p,
        i64p,
        i64p,
        ctypes.c_int64,
        ctypes.c_int64,
    ]
    return lib


def _first_line(text: str) -> str:
    lines = text.strip().splitlines() or ["no output"]
    return next((ln for ln in lines if "error" in ln), lines[0]).strip()


_openmp_support: dict[str, bool] = {}  # the compiler's identity -> has -fopenmp


class _CannotLoad(Exception):
    """The dynamic loader refused a verified library (its reason in the message)."""


class CompilerTimeout(RuntimeError):
    """The compiler ran past its timeout (``PROBE_TIMEOUT_S``, ``BUILD_TIMEOUT_S``)."""


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill ``proc`` and every process of its process group (it leads one: started with
    ``start_new_session``), then reap it."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # Windows: no process groups to kill
            proc.kill()
    except OSError:  # already gone, or not ours to kill (a setuid program): the compiler alone
        with contextlib.suppress(OSError):
            proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)  # SIGKILL is not ignored: only a process stuck in the kernel waits
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def _run(command: list[str], timeout: float, what: str) -> subprocess.CompletedProcess:
    """Run the compiler ``command`` in a process group of its own, its output captured (text),
    for at most ``timeout`` seconds: then the whole group (the compiler and whatever it
    started) is killed and a CompilerTimeout names ``what`` it was doing. An OSError if it
    cannot be started."""
    proc = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise CompilerTimeout(
            f"the C compiler timed out after {timeout:g} s ({what}: {shlex.join(command)[:120]}); "
            f"it was killed with its child processes"
        ) from None
    except BaseException:  # e.g. KeyboardInterrupt: leave no compiler running
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def _reason(exc: BaseException) -> str:
    text = str(exc) if isinstance(exc, RuntimeError) else f"{type(exc).__name__}: {exc}"
    return (text.splitlines() or [type(exc).__name__])[0][:300]


class NativeKernel:
    """The compiled library, built (or loaded from the cache) on first use; ``error`` holds why
    it is unavailable.

    Args:
        compiler: the C compiler to call (``$CC``, else ``cc``).
    """

    def __init__(self, compiler: str | None = None) -> None:
        self.compiler = (compiler or os.environ.get("CC") or "").strip() or "cc"
        self.error: str | None = None  # why the kernel is unavailable
        self.note: str | None = None  # what to know although it is available
        self.mode: str | None = None  # POSENC_NATIVE, once read
        self.path: Path | None = None  # the library loaded
        self.folder: Path | None = None  # where it was looked for and built
        self.openmp = False
        self._lib: ctypes.CDLL | None = None
        self._fd: int | None = None  # the loaded library's descriptor
        self._lock = threading.Lock()  # one first use at a time in this process

    def library(self) -> ctypes.CDLL | None:
        """The loaded library, compiling it first if needed; None (and ``error`` set) when that
        fails or ``POSENC_NATIVE=0``. Tries once per process (and reads ``POSENC_NATIVE`` then).

        Raises:
            ValueError: ``POSENC_NATIVE`` holds a value other than ``""``, ``"0"``, ``"1"``.
            RuntimeError: ``POSENC_NATIVE=1`` and the library cannot be built (the reason).
        """
        lib = self._lib
        if lib is not None:  # the common case, on every call: no lock
            return lib
        with self._lock:  # threads arriving meanwhile wait for the first one's build
            if self._lib is None and self.error is None:
                self.mode = read_mode()  # a ValueError here is raised again on the next call
                if self.mode == "0":
                    self.error = f"disabled by {MODE_ENV}=0"
                else:
                    try:
                        self._lib = self._load()
                    except Exception as exc:  # noqa: BLE001 - any failure means: the eager paths
                        self.error = _reason(exc)
                        if isinstance(exc, LockBusy) and self.mode != "1":
                            self.error += "; the eager path is used in this process"
            if self._lib is None and self.mode == "1":
                raise RuntimeError(
                    f"{MODE_ENV}=1 requires apply_rope's native kernel, but it could not be "
                    f"built: {self.error}"
                )
            return self._lib

    def status(self) -> Status:
        """This kernel's :class:`Status` (building or loading the library first if needed)."""
        reason = None
        try:
            self.library()
        except ValueError as exc:  # an invalid POSENC_NATIVE
            reason = str(exc)
        except RuntimeError:  # POSENC_NATIVE=1 and no library: the reason is in self.error
            pass
        available = self._lib is not None
        return Status(
            available=available,
            reason=reason or (self.note if available else self.error),
            library=self.path if available else None,
            cache_folder=self.folder,
            compiler=self.compiler,
            openmp=self.openmp if available else False,
            mode=self.mode if self.mode is not None else os.environ.get(MODE_ENV, ""),
        )

    def _load(self) -> ctypes.CDLL:
        """Find or build the library: in the cache folder if it passes the checks and can be
        written when a build is needed, else in the private temporary folder."""
        version = self._compiler_identity()
        text = source()
        folder, self.note = _cache_folder()
        try:
            return self._load_from(folder, text, version)
        except _CannotLoad as exc:  # e.g. a noexec filesystem that fstatvfs did not reveal
            if folder.private:
                raise RuntimeError(f"the library built in {folder.path} {exc}") from None
            self.note = _not_used(folder.path, f"holds a library that {exc}")
        except OSError as exc:  # cannot write there (read-only, full): build privately
            if folder.private:
                raise
            self.note = _not_used(folder.path, f"cannot be written ({exc.strerror or exc})")
        finally:
            folder.close()
        private = _private_folder()
        try:
            return self._load_from(private, text, version)
        except _CannotLoad as exc:
            raise RuntimeError(f"the library built in {private.path} {exc}") from None
        finally:
            private.close()

    def _load_from(self, folder: _Folder, text: bytes, version: str) -> ctypes.CDLL:
        """The verified library in ``folder``, built there first (one process at a time) if it
        is missing, untrusted or corrupt."""
        self.folder = folder.path
        found = self._find(folder, text, version)  # no lock needed to read a valid library
        if found is None:
            with _build_lock(folder):
                found = self._find(folder, text, version)  # built meanwhile by another process?
                if found is None:
                    self._build(folder, text, version)
                    found = self._find(folder, text, version)
            if found is None:
                raise RuntimeError(f"the library built in {folder.path} does not verify")
        name, fd, openmp = found
        try:
            lib = _dlopen(fd, folder.path / name)
        except OSError as exc:  # the dynamic loader refused it
            os.close(fd)
            raise _CannotLoad(f"cannot be loaded ({_reason(exc)})") from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd  # kept open while the library is loaded (see _dlopen)
        self.path, self.openmp = folder.path / name, openmp
        return lib

    def _find(self, folder: _Folder, text: bytes, version: str) -> tuple[str, int, bool] | None:
        """(name, open descriptor, openmp) of a verified library in ``folder``: the OpenMP
        build first, then the single-threaded one (a compiler without OpenMP)."""
        for openmp in (True, False):
            name = library_name(text, version, compile_flags(openmp))
            fd = _verified(folder, name)
            if fd is not None:
                return name, fd, openmp
        return None

    def command(self) -> list[str]:
        """The compiler as a command: ``compiler`` split as a shell would (``CC="ccache gcc"``:
        the program ``ccache``, found on ``PATH``, then its leading argument ``gcc``).

        Raises:
            RuntimeError: it cannot be split (an unbalanced quote), or its program is not found.
        """
        try:
            words = shlex.split(self.compiler)
        except ValueError as exc:
            raise RuntimeError(
                f"no C compiler {self.compiler!r} (it cannot be split into words: {exc})"
            ) from None
        if not words or shutil.which(words[0]) is None:
            program = words[0] if words else ""
            raise RuntimeError(f"no C compiler {self.compiler!r} (no program {program!r} on PATH)")
        return words

    def _compiler_identity(self) -> str:
        """What identifies the compiler in a library's name: every word of its command (the
        program and its leading arguments) and its ``--version`` output."""
        command = self.command()
        try:
            done = _run([*command, "--version"], PROBE_TIMEOUT_S, "--version")
        except OSError as exc:
            raise RuntimeError(f"no C compiler {self.compiler!r} ({exc})") from None
        return "\0".join(command) + "\0" + done.stdout

    def _has_openmp(self, identity: str, scratch: Path) -> bool:
        """Whether the compiler builds and links a program with ``OPENMP_FLAG`` (probed once per
        compiler and process, in ``scratch``, for at most ``PROBE_TIMEOUT_S``).

        Raises:
            CompilerTimeout: the probe timed out (a compiler that hangs: no build is tried).
        """
        if identity not in _openmp_support:
            probe = scratch / "openmp_probe.c"
            probe.write_text(OPENMP_PROBE)
            args = ["-fPIC", "-shared", OPENMP_FLAG, "-o", str(probe) + ".so", str(probe)]
            try:
                done = _run([*self.command(), *args], PROBE_TIMEOUT_S, "the OpenMP probe")
                _openmp_support[identity] = done.returncode == 0
            except OSError:
                _openmp_support[identity] = False
        return _openmp_support[identity]

    def _build(self, folder: _Folder, text: bytes, version: str) -> None:
        """Compile the library into ``folder``, whose lock is held: in a private subfolder
        (mode 0700, so no one else can open the files while they are written), with its record
        beside it; then both are renamed into place, each atomically (a reader sees a whole
        file or none; a library without its record yet, or with the old one, fails the check
        and waits for the lock, then finds both)."""
        for stale in folder.path.glob(".build-*"):  # left by a build that was killed
            shutil.rmtree(stale, ignore_errors=True)
        scratch = Path(tempfile.mkdtemp(prefix=".build-", dir=folder.path))
        try:
            flags = compile_flags(self._has_openmp(version, scratch))
            name = library_name(text, version, flags)
            src, built = scratch / name.replace(".so", ".c"), scratch / name
            record = scratch / (name + RECORD_SUFFIX)
            src.write_bytes(text)
            done = _run(
                [*self.command(), *flags, "-o", str(built), str(src)],
                BUILD_TIMEOUT_S,
                f"compiling {SOURCE_NAME}",
            )
            if done.returncode != 0:
                raise RuntimeError(
                    f"{self.compiler} failed: {_first_line(done.stderr or done.stdout)}"
                )
            with open(built, "rb") as f:
                record.write_text(_sha256(f.fileno()) + "\n")
            # writable by this user only, whatever the umask the compiler created them under
            os.chmod(built, 0o755)
            os.chmod(record, 0o644)
            os.replace(built, folder.path / name)
            os.replace(record, folder.path / record.name)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def rotate(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        layout: str,
        out: torch.Tensor,
        threads: int | None = None,
    ) -> int:
        """Write the rotation of ``x`` into ``out`` (which may be x itself) with the compiled
        kernel; :meth:`library` must have succeeded.

        Args:
            x: ``(..., s, d)`` CPU tensor (float32/float64/bfloat16/float16), at least one
                element.
            cos, sin: ``(..., s or 1, r)`` CPU tables in the working dtype (``supports``),
                broadcasting to ``x[..., :r]``.
            layout: ``"half"`` or ``"interleaved"``.
            out: ``(..., s, d)`` tensor of x's dtype: x itself (in place), or sharing no memory
                with it.
            threads: how many threads (default ``torch.get_num_threads()``).

        Returns:
            the number of rows that took the exact float64 path (bfloat16 with tables of its
            dtype only; 0 otherwise).
        """
        in_place = out is x
        if x.dim() - 1 > MAX_DIMS:  # flatten the leading dimensions (a copy if need be)
            flat = x.reshape(-1, *x.shape[-2:])
            buf = flat if in_place else torch.empty(flat.shape, dtype=x.dtype)
            c2, s2 = (
                t.expand(*x.shape[:-1], t.shape[-1]).reshape(*flat.shape[:-1], -1)
                for t in (cos, sin)
            )
            n = self.rotate(flat, c2, s2, layout, buf, threads)
            out.copy_(buf.view(x.shape))
            return n
        if x.stride(-1) != 1 or out.stride(-1) != 1:  # the kernel needs contiguous rows
            buf = x.contiguous() if in_place else torch.empty(x.shape, dtype=x.dtype)
            n = self.rotate(buf if in_place else x.contiguous(), cos, sin, layout, buf, threads)
            out.copy_(buf)
            return n
        r = cos.shape[-1]
        cos = cos if cos.stride(-1) == 1 else cos.contiguous()
        sin = sin if sin.stride(-1) == 1 else sin.contiguous()
        lead = x.shape[:-1]  # (..., s): the rows
        cos_b, sin_b = cos.expand(*lead, r), sin.expand(*lead, r)  # strides 0 where broadcast
        nd = len(lead)
        arr = ctypes.c_int64 * nd
        strides = [arr(*t.stride()[:-1]) for t in (x, out, cos_b, sin_b)]
        lib = self.library()
        assert lib is not None, "NativeKernel.rotate needs a library (see .library())"
        n = lib.rope_rotate(
            KINDS[(x.dtype, cos.dtype)],
            int(layout == "interleaved"),
            int(in_place),
            threads or torch.get_num_threads(),
            x.data_ptr(),
            out.data_ptr(),
            cos_b.data_ptr(),
            sin_b.data_ptr(),
            nd,
            arr(*lead),
            *strides,
            x.shape[-1],
            r,
        )
        if n < 0:
            raise MemoryError("apply_rope's native kernel could not allocate its table buffers")
        return int(n)


kernel = NativeKernel()
