"""Where the chaos workload writes, and the files it writes: each one proves what it is.

By default the harness works on a scratch copy of the directory it is pointed at (the
copy lives in the system's temporary directory and is removed at the end, so the
directory itself is never changed). With `in_place`, it works in the directory itself
but writes only inside a subdirectory of its own (`tether-chaos-<id>/`), removed at the
end: the project's files are read, never written.

Every file the workload writes is rendered by `render(conversation, index, version,
generation)`: a header naming its conversation and index, `GENERATION = g` (the line a
multi-file ast_edit rewrites, all files of a conversation or none), some padding (so a
torn write is a different length, not just a different byte), and a tag function
returning "<conversation>-<index>-v<version>" (what write and edit bump). `parse` reads
those four values back and accepts the text only if rendering them gives the very same
text, so any partial or mixed write is caught by one comparison.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

PADDING = 60  # small functions between GENERATION and the tag (~1.5 KB per file)
FILES = 3  # scratch files per conversation
COPY_IGNORE = shutil.ignore_patterns(".git", "node_modules", "__pycache__", ".venv", "*.pyc")
MARKER = '[project]\nname = "tether-chaos-scratch"\nversion = "0"\n'  # (a root for basedpyright)
PROGRAM = 'TAG = "tok_{run}_debug"\nprint(TAG)\nprint("done")\n'  # the debug target
PROGRAM_LINE = 2

_PARSE = re.compile(
    r'^"""tether chaos: conversation (?P<run>\w+), file (?P<index>\d+)\..*?'
    r"^GENERATION = (?P<generation>\d+)$.*?"
    r'^    return "\w+-\d+-v(?P<version>\d+)"$',
    re.S | re.M,
)


def render(run: str, index: int, version: int, generation: int) -> str:
    padding = "".join(f"def pad_{i}():\n    return {i}\n\n\n" for i in range(PADDING))
    return (
        f'"""tether chaos: conversation {run}, file {index}. A scratch file the chaos '
        'harness rewrites."""\n\n'
        f"GENERATION = {generation}\n\n\n{padding}"
        f"def {tag_function(run, index)}():\n"
        f'    return "{tag(run, index, version)}"\n'
    )


def tag_function(run: str, index: int) -> str:
    return f"tag_{run}_{index}"


def tag(run: str, index: int, version: int) -> str:
    return f"{run}-{index}-v{version}"


TAG_LINE = render("c", 0, 0, 0).count("\n") - 1  # the `def tag_...` line, 1-based


@dataclass(frozen=True)
class Parsed:
    run: str
    index: int
    version: int
    generation: int


def parse(text: str) -> Parsed | None:
    """The values `text` was rendered from, or None when it is not exactly a rendering
    (a partial write, two versions mixed, anything else)."""
    found = _PARSE.search(text)
    if found is None:
        return None
    parsed = Parsed(
        found["run"], int(found["index"]), int(found["version"]), int(found["generation"])
    )
    if render(parsed.run, parsed.index, parsed.version, parsed.generation) != text:
        return None
    return parsed


class Workspace:
    """The run's working directory (`root`) and the harness's own directory in it."""

    def __init__(self, directory: Path, in_place: bool, keep: bool = False):
        directory = directory.resolve()
        if not directory.is_dir():
            raise ValueError(f"--workdir {str(directory)!r} is not a directory")
        self.in_place = in_place
        self.keep = keep
        self.source = directory
        self._scratch: Path | None = None
        if in_place:
            self.root = directory
        else:
            self._scratch = Path(tempfile.mkdtemp(prefix="tether-chaos-"))
            self.root = self._scratch / directory.name
            shutil.copytree(directory, self.root, symlinks=True, ignore=COPY_IGNORE)
        self.own = self.root / f"tether-chaos-{uuid.uuid4().hex[:8]}"
        self.own.mkdir()
        (self.own / "pyproject.toml").write_text(MARKER)

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.root))

    def conversation_dir(self, run: str) -> Path:
        return self.own / run

    def file(self, run: str, index: int) -> Path:
        return self.conversation_dir(run) / f"f{index}.py"

    def outside(self, name: str) -> Path | None:
        """A path just outside the working directory that is still the harness's own (in
        the scratch directory), for a write that must be refused; None in place (an
        escape that got through would write beside the user's directory)."""
        return None if self._scratch is None else self._scratch / name

    def read(self, run: str, index: int) -> str:
        """A scratch file as it is on disk now (what the partial-write checks look at)."""
        return self.file(run, index).read_text()

    def plant(self, run: str) -> None:
        """A conversation's scratch files at version 0, generation 0, and its debug target."""
        folder = self.conversation_dir(run)
        folder.mkdir()
        for index in range(FILES):
            self.file(run, index).write_text(render(run, index, 0, 0))
        (folder / "prog.py").write_text(PROGRAM.format(run=run))

    def cleanup(self) -> None:
        if self.keep:
            return
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
        else:
            shutil.rmtree(self.own, ignore_errors=True)

    def describe(self) -> str:
        if self.keep:
            where = f"kept at {self.own if self.in_place else self.root}"
        else:
            where = "removed at the end"
        if self.in_place:
            return f"in {self.root} itself, writing only in {self.own.name}/ ({where})"
        return f"on a scratch copy of {self.source} at {self.root} ({where})"
