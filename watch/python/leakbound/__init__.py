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
"""

import ctypes as _ctypes

__all__ = ["step", "mark", "note", "watching"]


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
        return marker, note_fn, watching_fn
    except (OSError, AttributeError):
        return None, None, None


_marker, _note, _watching = _resolve()


def mark():
    """Marks the end of one step now."""
    if _marker is not None:
        _marker()


def note(text):
    """Adds a line to the report (e.g. what a step is)."""
    if _note is not None:
        _note(str(text).encode("utf-8", "replace")[:180])


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
