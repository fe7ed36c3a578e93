"""A terminal for the watch cases that need one (watch_test.sh: hostile_read_tty,
hostile_tty_quit, hostile_job_stop): runs a command on a new pseudo-terminal as its session
leader, reads what it writes there and types into it, as a person at a terminal would."""
import os
import pty
import select
import sys
import time


class Terminal:
    def __init__(self, argv, env=None):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            try:
                os.execve(argv[0], argv, env if env is not None else os.environ)
            finally:
                os._exit(127)
        self.seen = b""
        self.mark = 0  # expect() looks only past what an earlier expect() matched
        self.status = None

    def _drain(self, seconds):
        if select.select([self.fd], [], [], seconds)[0]:
            try:
                self.seen += os.read(self.fd, 65536)
            except OSError:  # the other end is closed
                time.sleep(seconds)
        if self.status is None:
            done, code = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.status = os.waitstatus_to_exitcode(code)

    def expect(self, text, seconds=30):
        """Waits for `text` (bytes) on the terminal; False after `seconds`."""
        deadline = time.time() + seconds
        while time.time() < deadline:
            at = self.seen.find(text, self.mark)
            if at >= 0:
                self.mark = at + len(text)
                return True
            if self.status is not None:
                self._drain(0)
                if self.seen.find(text, self.mark) < 0:
                    return False
            self._drain(0.1)
        return False

    def type(self, data):
        os.write(self.fd, data)

    def wait(self, seconds=30):
        """The command's exit status (an exit code, or -N for signal N); None after `seconds`."""
        deadline = time.time() + seconds
        while self.status is None and time.time() < deadline:
            self._drain(0.1)  # keep the terminal drained: a full one would block the command
        return self.status

    def fail(self, why):
        if self.status is None:
            os.kill(self.pid, 9)
        sys.exit("%s; the terminal said: %r" % (why, self.seen[-400:]))
