"""Injected by `leakbound watch --step-on QUALNAME` (docs/watch.md): marks a step each time the
named callable returns, with no change to the program.

QUALNAME is module.attr[.attr...]: the longest importable prefix is the module, the rest is
looked up on it. A method of a class is patched on that class and on every subclass that
overrides it, now and later (``torch.optim.Optimizer.step`` covers SGD, Adam, ...); nested calls
(an override calling ``super().step()``) mark once. The module is patched as soon as it is
imported (a meta-path hook), never imported early. If the name never resolves, the report says
why. A sitecustomize of the program's own further down the path is still run.
"""

import atexit
import functools
import importlib
import os
import sys
import threading

import leakbound

_QUALNAME = os.environ.get("LEAKBOUND_STEP_ON", "")
_PARTS = _QUALNAME.split(".")
_state = threading.local()
_resolved = []
_last_error = ["no module of %r was ever imported" % _QUALNAME]
_MARK = "__leakbound_step_on__"


def _wrap(function):
    if getattr(function, _MARK, False):
        return function

    @functools.wraps(function)
    def marked(*args, **kwargs):
        depth = getattr(_state, "depth", 0)
        _state.depth = depth + 1
        try:
            return function(*args, **kwargs)
        finally:
            _state.depth = depth
            if depth == 0:
                leakbound.mark()

    setattr(marked, _MARK, True)
    return marked


def _patch_class(cls, name, seen):
    if cls in seen:
        return 0
    seen.add(cls)
    patched = 0
    if name in cls.__dict__:
        raw = cls.__dict__[name]
        if isinstance(raw, (staticmethod, classmethod)):
            setattr(cls, name, type(raw)(_wrap(raw.__func__)))
        else:
            setattr(cls, name, _wrap(raw))
        patched = 1
    for sub in cls.__subclasses__():
        patched += _patch_class(sub, name, seen)
    return patched


def _watch_subclasses(cls, name):
    original = cls.__dict__.get("__init_subclass__")

    def __init_subclass__(sub, **kwargs):
        if original is not None:
            original.__func__(sub, **kwargs)
        else:
            super(cls, sub).__init_subclass__(**kwargs)
        _patch_class(sub, name, set())

    cls.__init_subclass__ = classmethod(__init_subclass__)


def _try_resolve():
    if _resolved:
        return True
    for split in range(len(_PARTS) - 1, 0, -1):
        module = sys.modules.get(".".join(_PARTS[:split]))
        if module is None:
            continue
        owner, path = module, _PARTS[split:]
        try:
            for attr in path[:-1]:
                owner = getattr(owner, attr)
            target = getattr(owner, path[-1])
        except AttributeError as error:
            _last_error[0] = "%s: %s" % (".".join(_PARTS[:split]), error)
            continue
        if isinstance(owner, type):
            count = _patch_class(owner, path[-1], set())
            _watch_subclasses(owner, path[-1])
            what = "%s and %d override(s)" % (_QUALNAME, max(count - 1, 0))
        elif callable(target):
            setattr(owner, path[-1], _wrap(target))
            what = _QUALNAME
        else:
            _last_error[0] = "%s is not callable" % _QUALNAME
            continue
        _resolved.append(what)
        leakbound.note("step-on: patched " + what)
        return True
    return False


class _AfterImport:
    """Lets the import happen as usual, then tries to resolve once a prefix module ran.

    A meta-path finder by protocol (find_spec), not a subclass of importlib.abc.MetaPathFinder:
    importing importlib.abc pulls in importlib.resources, pathlib, tempfile and typing, ~15 ms of
    every watched Python process's start (python -X importtime) and modules a program that does
    not import them would not have."""

    _prefixes = {".".join(_PARTS[:i]) for i in range(1, len(_PARTS))}

    def find_spec(self, fullname, path=None, target=None):
        if _resolved or fullname not in self._prefixes:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original_exec = loader.exec_module

        def exec_module(module, _original=original_exec):
            _original(module)
            _try_resolve()

        try:
            loader.exec_module = exec_module
        except AttributeError:
            pass
        return spec


def _report_unresolved():
    if not _resolved:
        leakbound.note("step-on: %s never resolved (%s); no step was marked" %
                       (_QUALNAME, _last_error[0]))
        # On the terminal only from the process watch started: the other Python processes of a
        # job (a launcher, multiprocessing's resource tracker) say it in the report.
        if os.environ.get("LEAKBOUND_WATCH_PARENT") == str(os.getppid()):
            sys.stderr.write("leakbound watch: --step-on %s never resolved: %s\n" %
                             (_QUALNAME, _last_error[0]))


def _chain_user_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    this = sys.modules.pop("sitecustomize", None)
    saved = sys.path[:]
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    finally:
        sys.path[:] = saved
        if this is not None:
            sys.modules["sitecustomize"] = this


if len(_PARTS) >= 2 and leakbound.watching():
    if not _try_resolve():
        sys.meta_path.insert(0, _AfterImport())
    atexit.register(_report_unresolved)
_chain_user_sitecustomize()
