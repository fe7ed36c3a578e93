"""Step markers for Python programs watched by `leakbound watch` (docs/watch.md).

    import leakbound
    for batch in loader:
        train_step(batch)
        leakbound.step()          # the state after this step is one sample

    for batch in loader:
        with leakbound.step():    # a step ends when the block exits
            train_step(batch)

Pure Python: calls the marker the preload exports (``leakbound_step``) through ctypes. Without
`leakbound watch` every call is a no-op, so the program runs unchanged.

Collections: every 16 steps and before every census point (``leakbound_census_due``), the
module runs a full collection, so that cyclic garbage an earlier block left for the collector is
not counted among that block's survivors, and every block sees the same collections (a full
collection also empties CPython's free lists; docs/watch.md, "Python and the collector"). They
run inside ``leakbound.step()`` (finalizers and ``gc.callbacks`` with them), also in a program
that called ``gc.disable()``. A full collection walks every object the program has (about 90 ms
once torch is imported, where a training step can take 1 ms), so after the first one the module
moves everything live (the imported world, the first step's state) into CPython's permanent
generation (``gc.freeze()``), once; later collections skip it and cost what the program made
since. What was frozen, and anything it references, stays until exit even if it becomes
cyclic garbage. A program that froze objects before the first step is left as it is (no
freeze); one that calls ``gc.unfreeze()`` later unfreezes the module's objects too.
``LEAKBOUND_CENSUS_GC=nofreeze`` collects without freezing; ``LEAKBOUND_CENSUS_GC=0`` collects
nothing; ``LEAKBOUND_CENSUS_GC_EVERY=K`` sets the cadence (0: census points only).

Framework counters: once the program has imported ``torch`` and ``torch.cuda.is_available()``,
each step also sends ``torch.cuda.memory_allocated()`` and ``memory_reserved()`` (exact counters
``torch.allocated_bytes`` / ``torch.reserved_bytes``), read just before the marker. The module
never imports torch itself.
"""

import ctypes as _ctypes
import gc as _gc
import os as _os
import sys as _sys
import threading as _threading

__all__ = ["step", "mark", "note", "role", "watching"]


def _resolve():
    try:
        process = _ctypes.CDLL(None)
        marker = process.leakbound_step
        marker.restype = None
        marker.argtypes = []
        note_fn = process.leakbound_note
        note_fn.restype = None
        note_fn.argtypes = [_ctypes.c_char_p]
        watching_fn = process.leakbound_watching
        watching_fn.restype = _ctypes.c_int
        try:
            counter_fn = process.leakbound_note_counter
            counter_fn.restype = None
            counter_fn.argtypes = [_ctypes.c_char_p, _ctypes.c_ulonglong]
        except AttributeError:
            counter_fn = None
        try:
            census_fn = process.leakbound_census_due
            census_fn.restype = _ctypes.c_int
            census_fn.argtypes = []
        except AttributeError:
            census_fn = None
        try:
            role_fn = process.leakbound_role
            role_fn.restype = None
            role_fn.argtypes = [_ctypes.c_char_p]
        except AttributeError:
            role_fn = None
        return marker, note_fn, watching_fn, counter_fn, census_fn, role_fn
    except (OSError, AttributeError):
        return None, None, None, None, None, None


def _resolve_lines():
    # PyDLL: called with the GIL held (CDLL would drop and retake it on every traced line, and
    # wait for any other busy Python thread each time).
    try:
        process = _ctypes.PyDLL(None)
        tracer = process.leakbound_python_tracer
        tracer.restype = None
        tracer.argtypes = [_ctypes.c_int]
        waiting = process.leakbound_python_sites_waiting
        waiting.restype = _ctypes.c_int
        waiting.argtypes = []
        where = process.leakbound_python_where
        where.restype = None
        where.argtypes = [_ctypes.c_char_p]
        return tracer, waiting, where
    except (OSError, AttributeError):
        return None, None, None


_marker, _note, _watching, _note_counter, _census_due, _role = _resolve()
_py_tracer, _py_waiting, _py_where = _resolve_lines()


def _hook_objects():
    """Counts Python objects through pymalloc's allocator hooks (the preload's
    ``leakbound_python_hook_objects``), unless they already go to malloc (PYTHONMALLOC=malloc,
    which `leakbound watch` sets unless --keep-pymalloc)."""
    if _os.environ.get("PYTHONMALLOC", "") not in ("", "pymalloc", "pymalloc_debug"):
        return  # malloc (counted already), or an allocator whose blocks may sit 8 bytes apart
    import sysconfig

    # pymalloc with 16-byte size classes (3.8+), not a free-threaded build (mimalloc)
    if (_sys.version_info < (3, 8) or not sysconfig.get_config_var("WITH_PYMALLOC")
            or sysconfig.get_config_var("Py_GIL_DISABLED")):
        return
    try:
        hook = _ctypes.PyDLL(None).leakbound_python_hook_objects
    except (OSError, AttributeError):
        return  # not under watch
    hook.restype = _ctypes.c_int
    hook.argtypes = []
    hook()


_hook_objects()
_torch_cuda = None  # None: not checked yet; False: no torch with CUDA; else torch.cuda


def _framework_counters():
    """Sends torch's caching-allocator counters when torch is imported and CUDA available."""
    global _torch_cuda
    if _torch_cuda is False or _note_counter is None:
        return
    if _torch_cuda is None:
        torch = _sys.modules.get("torch")
        if torch is None:
            return  # not imported (yet): check again at the next step
        try:
            _torch_cuda = torch.cuda if torch.cuda.is_available() else False
        except Exception:  # a broken or CPU-only torch: no framework counters
            _torch_cuda = False
        if _torch_cuda is False:
            return
    try:
        allocated = int(_torch_cuda.memory_allocated())
        reserved = int(_torch_cuda.memory_reserved())
    except Exception:
        return
    _note_counter(b"torch.allocated_bytes", allocated)
    _note_counter(b"torch.reserved_bytes", reserved)


def _every():
    """LEAKBOUND_CENSUS_GC_EVERY=K: also collect every K steps (default 16; 0: census points only)."""
    text = _os.environ.get("LEAKBOUND_CENSUS_GC_EVERY", "16")
    try:
        every = int(text)
    except ValueError:
        every = -1
    if every < 0:
        _sys.stderr.write("leakbound: LEAKBOUND_CENSUS_GC_EVERY must be a whole number of steps "
                          ">= 0, got %r; using 16\n" % text)
        return 16
    return every


def _gc_mode():
    """LEAKBOUND_CENSUS_GC: 1 or unset (collect; freeze after the first), nofreeze, 0 (off)."""
    text = _os.environ.get("LEAKBOUND_CENSUS_GC", "1")
    if text in ("0", "1", "nofreeze"):
        return text
    _sys.stderr.write("leakbound: LEAKBOUND_CENSUS_GC must be 0, 1 or nofreeze, got %r; "
                      "using 1\n" % text)
    return "1"


_gc_every = _every()
_gc_how = _gc_mode()
_froze = False  # the first collection has decided whether to freeze
_marks = 0
# One marker at a time: the count, the collection and the marker stay in step across threads.
# Re-entrant: a finalizer that a collection runs may end a step (``leakbound.step()`` dropped).
_lock = _threading.RLock()


def _new_lock():
    """In a forked child (a DataLoader worker): a lock of its own, since the parent's may have been
    held by a thread the child does not have."""
    global _lock
    _lock = _threading.RLock()


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_new_lock)


def _collect():
    """A full collection; in mode 1 the first one then freezes what survived it (once: freezing
    again would keep every cyclic structure live at that moment until exit, a leak bare CPython
    does not have)."""
    global _froze
    _gc.collect()
    if _gc_how == "1" and not _froze:
        _froze = True
        if _gc.get_freeze_count() == 0:  # else the program manages the permanent generation
            _gc.freeze()


# Python lines (docs/watch.md, "Python lines"): once the marker has asked for samples of a call
# site that keeps growing, the next steps run traced (sys.settrace, the program's own frames
# only) so that each sampled block carries the line of the program that was running; at most
# _LINES_BUDGET steps per process, then no more tracing. LEAKBOUND_PYTHON_LINES=0: never. A
# program that traces itself (a debugger, coverage) keeps its tracer: the steps run under a
# profile hook instead (sys.setprofile: calls and returns), which also gives a frame of the
# program's own code that its tracer does not trace line by line (f_trace None) our local trace
# function: the program's tracer hands that frame's line events to it. In a frame the program
# does trace, the line is that of its last call. While the module traces (at most
# _LINES_BUDGET steps), a debugger built on bdb that steps out into such a frame misses the
# caller's lines (it sets its trace on a caller only when f_trace is None); the module takes its
# function off the running frames when it stops, and any other frame drops it at its next line.
_LINES_BUDGET = 16
_LINES_ON = _os.environ.get("LEAKBOUND_PYTHON_LINES", "1") != "0"
_lines_left = _LINES_BUDGET if _LINES_ON else 0
_lines_state = None  # None: not registered yet; "idle", "tracing", "done"
# How "tracing" runs: "trace" (our tracer), "profile" (our profile hook; the program traces),
# "frames" (only our local trace on the frames that run at the step: the program holds both).
_lines_hook = "trace"
# Function entries one traced stretch may see before the tracer stops for good: a program that
# stops marking steps while traced (its loop ended, an exception) is not traced to its end.
_CALLS_BUDGET = 200000
_calls_left = 0
_line_texts = {}  # (code, line) -> b"FILE:LINE in FUNCTION", kept alive: the preload holds them
_user_files = {}  # co_filename -> whether it is the program's own code
_here = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
_stdlib = _os.path.dirname(_os.path.abspath(_os.__file__))
_not_user = tuple(p + _os.sep for p in (_here, _stdlib))


def _is_user(code):
    filename = code.co_filename
    user = _user_files.get(filename)
    if user is None:
        user = not (filename.startswith(_not_user) or "/site-packages/" in filename or
                    "/dist-packages/" in filename or filename.startswith("<frozen"))
        _user_files[filename] = user
    return user


def _line_of(frame):
    """The innermost frame of the program's own code at or above `frame`, as the preload keeps it."""
    while frame is not None and not _is_user(frame.f_code):
        frame = frame.f_back
    if frame is None:
        return None
    key = (frame.f_code, frame.f_lineno)
    text = _line_texts.get(key)
    if text is None:
        filename = frame.f_code.co_filename
        if not filename.startswith("<"):
            filename = _os.path.abspath(filename)
        text = ("%s:%d in %s" % (filename, frame.f_lineno, frame.f_code.co_name)).encode(
            "utf-8", "backslashreplace")[:180].decode("utf-8", "ignore").encode("utf-8")
        _line_texts[key] = text
    return text


def _local_trace(frame, event, arg):
    if _lines_state != "tracing":
        frame.f_trace = None  # returning None would leave it in place under a program's tracer
        return None
    if event == "line":
        _py_where(_line_of(frame))
    elif event == "return":
        _py_where(_line_of(frame.f_back))
    return _local_trace


def _global_trace(frame, event, arg):
    global _calls_left
    if _lines_state != "tracing":
        return None
    _calls_left -= 1
    if _calls_left <= 0:
        _lines_stop("done")
        return None
    if not _is_user(frame.f_code):
        return None
    _py_where(_line_of(frame))
    return _local_trace


def _profile_hook(frame, event, arg):
    """The profile hook's line: at a call of a C function (where most blocks are made) the
    caller's line, at a Python call the callee's first line, at a return the caller's line."""
    global _calls_left
    if _lines_state != "tracing":
        return
    if event == "c_call":
        _py_where(_line_of(frame))
    elif event == "call":
        _calls_left -= 1
        if _calls_left <= 0:
            _lines_stop("done")
            return
        if frame.f_trace is None and _is_user(frame.f_code):
            frame.f_trace = _local_trace  # its lines, through the program's tracer
        _py_where(_line_of(frame))
    elif event == "return":
        _py_where(_line_of(frame.f_back))


def _our_hook_left():
    """Whether the hook we set is still the thread's (the program may replace it)."""
    if _lines_hook == "profile":
        return _sys.getprofile() is _profile_hook
    if _lines_hook == "frames":
        return _sys.gettrace() is not None  # the program's tracer hands on our frames' lines
    return _sys.gettrace() is _global_trace


def _untrace_running_frames():
    """Takes our local trace function off the frames that run now: under a program's own tracer
    it would keep receiving their lines (a frame's f_trace outlives our hooks)."""
    frame = _sys._getframe(1)
    while frame is not None:
        if frame.f_trace is _local_trace:
            frame.f_trace = None
        frame = frame.f_back


def _lines_stop(state):
    global _lines_state
    if _sys.gettrace() is _global_trace:
        _sys.settrace(None)
    if _sys.getprofile() is _profile_hook:
        _sys.setprofile(None)
    _untrace_running_frames()
    _lines_state = state
    _py_tracer(0 if state == "idle" else -1)


def _lines_after_fork():
    """A forked child (a DataLoader worker) registers again at its first step, with a budget of
    its own; a tracer inherited from a traced step is removed."""
    global _lines_state, _lines_left
    if _sys.gettrace() is _global_trace:
        _sys.settrace(None)
    if _sys.getprofile() is _profile_hook:
        _sys.setprofile(None)
    _untrace_running_frames()
    _lines_state = None
    _lines_left = _LINES_BUDGET if _LINES_ON else 0


if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_lines_after_fork)


def _trace_running_frames(untraced_only):
    """Our local trace function on the frames of the program's own code that run now (the step's
    caller and up): with untraced_only, only on those the program's tracer leaves alone. Returns
    how many frames got it."""
    given = 0
    frame = _sys._getframe(2)
    while frame is not None:
        if _is_user(frame.f_code) and not (untraced_only and frame.f_trace is not None):
            frame.f_trace = _local_trace
            given += 1
        frame = frame.f_back
    return given


def _lines_after_mark():
    """After a marker: trace the next step while sites wait for samples, within the budget."""
    global _lines_state, _lines_left, _calls_left, _lines_hook
    if _lines_state is None:
        # Registered at the first step, so that samples wait for the tracer from the start.
        _lines_state = "idle" if _lines_left > 0 else "done"
        _py_tracer(0 if _lines_state == "idle" else -1)
        return
    if _lines_state == "done":
        return
    waiting = _py_waiting() > 0
    if _lines_state == "tracing":
        _lines_left -= 1
        if not _our_hook_left():
            _lines_stop("done")  # the program (a debugger, a profiler) took the hook
        elif not waiting or _lines_left <= 0:
            _lines_stop("idle" if _lines_left > 0 else "done")
        return
    if not waiting:
        return
    _calls_left = _CALLS_BUDGET
    _lines_state = "tracing"
    if _sys.gettrace() is None:
        _lines_hook = "trace"
        _sys.settrace(_global_trace)
        _trace_running_frames(untraced_only=False)
    elif _sys.getprofile() is None:
        # A tracer of the program's own (a debugger, coverage) stays; the profile hook runs.
        _lines_hook = "profile"
        _sys.setprofile(_profile_hook)
        _trace_running_frames(untraced_only=True)
    else:
        # The program holds both hooks: the frames that run now, where its tracer leaves them
        # untraced, still give their lines (a function they call is named by its call's line).
        # None may get them (its tracer traces them all, or is a C tracer that never reads
        # f_trace): then no line, rather than the step's line for every sample.
        _lines_hook = "frames"
        if _trace_running_frames(untraced_only=True) == 0:
            _lines_stop("done")
            return
        _py_where(None)  # until a line event of those frames says where
        _py_tracer(1)
        return
    _py_where(_line_of(_sys._getframe(1)))
    _py_tracer(1)


def mark():
    """Marks the end of one step now."""
    global _marks
    if _marker is None:
        return
    with _lock:
        _marks += 1
        if _census_due is not None and _gc_how != "0" and (
                _census_due() or (_gc_every > 0 and _marks % _gc_every == 0)):
            _collect()
        _framework_counters()
        _marker()
        if _py_tracer is not None and _threading.current_thread() is _threading.main_thread():
            _lines_after_mark()


def note(text):
    """Adds a line to the report (e.g. what a step is)."""
    if _note is not None:
        _note(_text(text))


def _text(text):
    """At most 180 bytes of UTF-8, cut at a character boundary (never mid-character)."""
    return str(text).encode("utf-8", "replace")[:180].decode("utf-8", "ignore").encode("utf-8")


def role(text):
    """Names what this process is in the job ("DataLoader worker 1"), for the report."""
    if _role is not None:
        _role(_text(text))


def _role_of(process):
    """The role of a multiprocessing child from what it runs: DataLoader workers and the ranks
    of torch.multiprocessing.spawn by name, any other by its process name."""
    target = getattr(process, "_target", None)
    module = getattr(target, "__module__", "") or ""
    name = getattr(target, "__qualname__", "") or ""
    args = tuple(getattr(process, "_args", ()) or ())
    if module == "torch.utils.data._utils.worker" and name == "_worker_loop" and len(args) > 10:
        return "DataLoader worker %s" % (args[10],)
    if module == "torch.multiprocessing.spawn" and name == "_wrap" and len(args) > 1:
        return "rank %s" % (args[1],)
    return "multiprocessing %s" % (getattr(process, "name", "") or "process")


def _mark_batches():
    """In a DataLoader worker: each batch it fetches is one of its steps, so that its series (and
    the collections at its census points) follow its own work, not the trainer's."""
    fetch = _sys.modules.get("torch.utils.data._utils.fetch")
    for name in ("_MapDatasetFetcher", "_IterableDatasetFetcher"):
        cls = getattr(fetch, name, None)
        original = getattr(cls, "fetch", None) if cls is not None else None
        if original is None or getattr(original, "__leakbound_step__", False):
            continue

        def fetched(self, *args, _original=original, **kwargs):
            batch = _original(self, *args, **kwargs)  # the end of the data is not a step
            mark()
            return batch

        fetched.__leakbound_step__ = True
        cls.fetch = fetched


def _patch_multiprocessing(module):
    """Wraps BaseProcess._bootstrap, which runs first in every multiprocessing child (fork,
    spawn, forkserver), so that the child says what it is before it runs its target."""
    base = getattr(module, "BaseProcess", None)
    original = getattr(base, "_bootstrap", None)
    if original is None or getattr(original, "__leakbound_role__", False):
        return

    def _bootstrap(self, *args, **kwargs):
        try:
            text = _role_of(self)
            role(text)
            if text.startswith("DataLoader worker "):
                _mark_batches()
        except Exception:  # never in the way of the program
            pass
        return original(self, *args, **kwargs)

    _bootstrap.__leakbound_role__ = True
    base._bootstrap = _bootstrap


class _RoleHook:
    """Patches multiprocessing.process when the program imports it (importing it here would
    cost 40 ms of start-up in every Python process)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "multiprocessing.process":
            return None
        for finder in _sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                loader = spec.loader
                original_exec = loader.exec_module

                def exec_module(module, _original=original_exec):
                    _original(module)
                    _patch_multiprocessing(module)

                try:
                    loader.exec_module = exec_module
                except (AttributeError, TypeError):
                    return None
                return spec
            if spec is not None:
                return None
        return None


if _role is not None and _watching is not None and _watching():
    if "multiprocessing.process" in _sys.modules:
        _patch_multiprocessing(_sys.modules["multiprocessing.process"])
    else:
        _sys.meta_path.insert(0, _RoleHook())


def watching():
    """True in the process `leakbound watch` follows."""
    return bool(_watching is not None and _watching())


class step:
    """``leakbound.step()`` marks a step when the call's result is dropped (at once, in CPython);
    ``with leakbound.step():`` marks it when the block exits, even by an exception."""

    __slots__ = ("_pending",)

    def __init__(self):
        self._pending = True

    def __enter__(self):
        self._pending = False
        return self

    def __exit__(self, *exc):
        mark()
        return False

    def __del__(self):
        if self._pending:
            self._pending = False
            mark()
