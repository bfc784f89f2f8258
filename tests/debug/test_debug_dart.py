"""debug with the Dart SDK's adapter (`dart debug_adapter`). No Debian, PyPI or npm
package ships the SDK, so this skips (naming dart and how to install it) where no `dart`
is on PATH; `adapters` says the same."""

from __future__ import annotations

from tests.debug.support import ok


def test_dart_breakpoint_locals_and_exit(runtime, dart_project) -> None:
    run = runtime.open_run("dart", workdir=str(dart_project))
    ok(run, {"op": "breakpoints", "file": "main.dart", "lines": [2]})
    res = ok(run, {"op": "launch", "program": "main.dart", "wait": 60})
    assert res.text.startswith("stopped at main.dart:2 (breakpoint)"), res.text
    assert res.data["frames"][0]["name"].startswith("add"), res.text
    done = ok(run, {"op": "continue"})
    assert done.data["outcome"] == "exited" and "hello 3" in done.text, done.text
    ok(run, {"op": "terminate"})


def test_adapters_say_why_dart_is_missing(runtime, tmp_path) -> None:
    import shutil

    (tmp_path / "pubspec.yaml").write_text("name: demo\n")
    run = runtime.open_run("dart-why", workdir=str(tmp_path))
    line = next(r for r in ok(run, {"op": "adapters"}).text.splitlines() if r.startswith("dart:"))
    if shutil.which("dart"):
        assert line.startswith("dart: usable"), line
        return
    assert "not packaged for Debian, PyPI or npm" in line and "dart.dev/get-dart" in line, line
    assert "root marker" not in line  # pubspec.yaml is there: only the binary is missing
