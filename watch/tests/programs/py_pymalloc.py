"""Python objects counted through pymalloc's allocator hooks (`leakbound watch --keep-pymalloc`,
no PYTHONMALLOC=malloc): `py_pymalloc.py leak|clean STEPS`, run under
`--step-on py_pymalloc.Trainer.step` (the script imports itself, so that the name resolves).
Each step makes a bytes object (PyObject_Malloc) and an array.array whose buffer is
PyMem_Malloc's; in `leak` mode the step keeps both, exactly the bytes `sys.getsizeof` says
(printed first: "expect N B/step"), in a list sized beforehand.
"""
import array
import os
import sys


class Trainer:
    def __init__(self, leak, steps):
        self.leak = leak
        self.steps = 0
        self.kept = [None] * (2 * steps)

    def step(self):
        made = (bytes(200), array.array("b", bytes(300)))
        if self.leak:
            self.kept[2 * self.steps] = made[0]
            self.kept[2 * self.steps + 1] = made[1]
        self.steps += 1


def main():
    mode, steps = sys.argv[1], int(sys.argv[2])
    each = sys.getsizeof(bytes(200)) + sys.getsizeof(array.array("b", bytes(300)))
    print("expect %d B/step" % each)
    print("PYTHONMALLOC=%s" % os.environ.get("PYTHONMALLOC"))
    sys.stdout.flush()
    trainer = Trainer(mode == "leak", steps)
    for _ in range(steps):
        trainer.step()


if __name__ == "__main__":
    import py_pymalloc

    py_pymalloc.main()
