"""A scripted vibe worker: runs its brief line by line (the brief is its last argument, or
its stdin with --stdin). Lines:

    echo TEXT            print TEXT
    stream N SECONDS     print "tick 1" .. "tick N", one every SECONDS
    sleep SECONDS
    ask TOOL [TIER]      ask the parent for permission; print "TOOL allowed" / "TOOL denied: why"
    child                start a grandchild that sleeps (its pid printed as "child PID")
    exit CODE            stop with that exit code (after a line on stderr)
    cat PATH             print the file's content (or "no PATH")
    write PATH TEXT      write TEXT and a newline to PATH (parents made)
    rm PATH              remove the file PATH
    sh COMMAND           run COMMAND in a shell; print its output, then "exit N"
    usage CALLS TOKENS   report its tool calls and tokens so far (the usage protocol line)
    waitfor PATH         wait until PATH exists (at most 30 s)
    anything else        printed back as "brief: LINE"
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    brief = sys.stdin.read() if "--stdin" in sys.argv else sys.argv[-1]
    asked = 0
    for line in brief.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "echo":
            print(rest, flush=True)
        elif word == "stream":
            count, seconds = rest.split()
            for i in range(1, int(count) + 1):
                print(f"tick {i}", flush=True)
                time.sleep(float(seconds))
        elif word == "sleep":
            time.sleep(float(rest))
        elif word == "ask":
            tool, _, tier = rest.partition(" ")
            asked += 1
            ask = {"id": asked, "tool": tool, "tier": tier, "arguments": {"path": "x.py"}}
            print("@tether " + json.dumps({"permission": ask}), flush=True)
            answer = sys.stdin.readline()
            reply = (
                json.loads(answer) if answer.strip() else {"allow": False, "reason": "no answer"}
            )
            verdict = "allowed" if reply["allow"] else f"denied: {reply.get('reason', '')}"
            print(f"{tool} {verdict}", flush=True)
        elif word == "child":
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            print(f"child {child.pid}", flush=True)
        elif word == "cat":
            path = Path(rest)
            print(path.read_text().rstrip("\n") if path.exists() else f"no {rest}", flush=True)
        elif word == "write":
            path, _, text = rest.partition(" ")
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(text + "\n")
        elif word == "rm":
            os.remove(rest)
        elif word == "sh":
            done = subprocess.run(rest, shell=True, capture_output=True, text=True)
            print(done.stdout + done.stderr, flush=True)
            print(f"exit {done.returncode}", flush=True)
        elif word == "usage":
            calls, tokens = rest.split()
            usage = {"tool_calls": int(calls), "tokens": int(tokens)}
            print("@tether " + json.dumps({"usage": usage}), flush=True)
        elif word == "waitfor":
            deadline = time.monotonic() + 30
            while not Path(rest).exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        elif word == "exit":
            print(f"exiting with {rest}", file=sys.stderr, flush=True)
            return int(rest)
        elif line.strip():
            print(f"brief: {line.strip()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
