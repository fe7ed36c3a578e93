"""Python lines under `leakbound watch` without torch (watch/tests/watch_test.sh, cases
py_lines_*): `py_lines.py MODE`, 300 steps marked with leakbound.step().

MODE: leak (each step keeps a 512-byte bytearray, made by keep(); a 64-byte one made by churn()
dies every step) | own_tracer (the same leak; at step 2, before any site is sampled, the program
installs a tracer of its own, as a debugger or coverage would, which traces the lines of churn()
only: it must stay, get every one of churn's lines, and no frame may keep watch's trace function
after the run; the line comes from watch's profile hook) | own_hooks (the same, with a profile hook of its own as well: both
must stay; the line is the loop's, that calls keep()) | busy_thread (the same leak, while another Python thread runs
Python code without pause) | fork (the parent keeps a bytearray a step made by keep() for 120
steps, long enough for its samples to be read, then forks; the child keeps one a step made by
child_keep(), marks 300 steps of its own and exits: the child's line is child_keep's, never the
parent's).
"""
import os
import sys
import threading

import leakbound

MODE = sys.argv[1]
kept = []


def keep():
    kept.append(bytearray(512))  # the leaking line


def churn():
    return len(bytearray(64))


def child_keep():
    kept.append(bytearray(768))  # the child's leaking line


churn_lines = 0  # line events the program's own tracer got in churn()
churn_calls = 0  # calls of churn() while it was installed


def count_churn_lines(frame, event, arg):
    global churn_lines
    if event == "line":
        churn_lines += 1
    return count_churn_lines


def own_tracer(frame, event, arg):
    return count_churn_lines if frame.f_code is churn.__code__ else None


def own_profiler(frame, event, arg):
    return None


def spin(stop):
    n = 0
    while not stop.is_set():
        n += 1


stop = threading.Event()
if MODE == "busy_thread":
    threading.Thread(target=spin, args=(stop,), daemon=True).start()

if MODE == "fork":
    for _ in range(120):
        churn()
        keep()
        leakbound.step()
    pid = os.fork()
    if pid == 0:
        for _ in range(300):
            churn()
            child_keep()
            leakbound.step()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))

for step in range(300):
    if MODE in ("own_tracer", "own_hooks") and step == 2:
        sys.settrace(own_tracer)
    if MODE == "own_hooks" and step == 2:
        sys.setprofile(own_profiler)
    churn_calls += sys.gettrace() is own_tracer
    churn()
    keep()  # the call of the leaking function
    leakbound.step()
stop.set()
if MODE in ("own_tracer", "own_hooks") and sys.gettrace() is not own_tracer:
    sys.exit(7)  # the program's own tracer was replaced
if MODE == "own_hooks" and sys.getprofile() is not own_profiler:
    sys.exit(8)  # the program's own profile hook was replaced
if MODE in ("own_tracer", "own_hooks"):
    if churn_lines != churn_calls:  # churn() is one line
        sys.exit(9)  # the program's tracer lost (or was given more) line events
    frame = sys._getframe()
    while frame is not None:
        if frame.f_trace is not None and frame.f_trace.__module__ == "leakbound":
            sys.exit(10)  # watch's trace function left on a frame of the program
        frame = frame.f_back
