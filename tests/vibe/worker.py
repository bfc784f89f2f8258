"""A scripted vibe worker: runs its brief line by line (the brief is its last argument, or
its stdin with --stdin). Lines:

    echo TEXT            print TEXT
    stream N SECONDS     print "tick 1" .. "tick N", one every SECONDS
    sleep SECONDS
    ask TOOL [TIER]      ask the parent for permission; print "TOOL allowed" / "TOOL denied: why"
    child                start a grandchild that sleeps (its pid printed as "child PID")
    exit CODE            stop with that exit code (after a line on stderr)
    anything else        printed back as "brief: LINE"
"""

import json
import subprocess
import sys
import time


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
        elif word == "exit":
            print(f"exiting with {rest}", file=sys.stderr, flush=True)
            return int(rest)
        elif line.strip():
            print(f"brief: {line.strip()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
