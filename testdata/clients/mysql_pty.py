#!/usr/bin/python3
"""Drive the interactive mysql CLI through a pseudo-terminal.

usage: mysql_pty.py MYSQL-ARGV...

Reads the inputs from the JSON file named by $DPPROXY_FLOW
([{"step": "...", "input": "..."}]), types each at the prompt (a tab in an
input triggers the CLI's completion), waits for the next prompt and prints
{"step": ..., "info": {"output": ...}} per input, after a "startup" step
holding everything the CLI printed before its first prompt.
"""
import json
import os
import pty
import re
import select
import sys
import time

PROMPT = re.compile(rb"(MariaDB|MySQL) \[[^\]]*\]> $")


def read_until(fd, timeout=30.0):
    buf = b""
    deadline = time.time() + timeout
    while time.time() < deadline:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
            if PROMPT.search(buf):
                return buf, True
    return buf, False


def emit(step, output):
    text = output.decode("utf-8", "replace").replace("\r\n", "\n")
    print(json.dumps({"step": step, "info": {"output": text}}), flush=True)


def main():
    argv = sys.argv[1:]
    with open(os.environ["DPPROXY_FLOW"]) as f:
        inputs = json.load(f)
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "dumb"
        os.execvp(argv[0], argv)
    out, ok = read_until(fd)
    emit("startup", out)
    if not ok:
        sys.exit("no prompt from the mysql CLI: %r" % out)
    for item in inputs:
        data = item["input"]
        if "\t" in data:
            head, tail = data.split("\t", 1)
            os.write(fd, head.encode() + b"\t")
            time.sleep(0.5)  # let the CLI complete
            os.write(fd, tail.encode() + b"\n")
        else:
            os.write(fd, data.encode() + b"\n")
        out, ok = read_until(fd)
        emit(item["step"], out)
        if not ok:
            sys.exit("no prompt after %r: %r" % (data, out))
    os.write(fd, b"quit\n")
    time.sleep(0.2)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


if __name__ == "__main__":
    main()
