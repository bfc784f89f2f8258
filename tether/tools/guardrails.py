"""Guardrails every call passes before its handler: workspace confinement and approval.

Confinement (DESIGN.md invariant 5): a tool touches no path outside the run's working
directory unless the host allowed an extra root. A path argument is refused when it is
absolute and outside the allowed roots, when `..` climbs out, or when a symlink on the
way points out (the check is made on the fully resolved path, so all three are one rule).
Protected paths (`.git` by default) are refused even inside the workspace: a model that
edits `.git/config` or rewrites refs can do damage no diff review shows. A path that names
a FIFO, socket or device is refused here too, by a stat and before any tool opens it:
opening a FIFO with no writer blocks its caller forever, and a device reads without end.

Approval: the host picks, per tier, `allow`, `ask` (a permission card through the
question port) or `deny`. With no policy every tier is allowed: the host opts into
prompts, and the tier still decides what each surface sees. Asking fails closed: no
port, no human connected, a skip or a timeout all mean "no".
"""

from __future__ import annotations

import contextlib
import enum
import errno
import functools
import os
import stat
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tether import beneath
from tether.tools.spec import Tier

DEFAULT_PROTECTED = (".git",)


class GuardrailError(Exception):
    """A call refused by a guardrail; the message says why and what to do instead."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Confinement:
    """The roots a run may touch and the paths it may not."""

    workdir: Path
    extra_roots: tuple[Path, ...] = ()
    protected: tuple[str, ...] = DEFAULT_PROTECTED

    @classmethod
    def build(
        cls,
        workdir: str | os.PathLike[str],
        extra_roots: Iterable[str | os.PathLike[str]] = (),
        protected: Iterable[str] = DEFAULT_PROTECTED,
    ) -> Confinement:
        return cls(
            workdir=Path(workdir).resolve(),
            extra_roots=tuple(Path(r).resolve() for r in extra_roots),
            protected=tuple(p.strip("/") for p in protected if p.strip("/")),
        )

    def roots(self) -> tuple[Path, ...]:
        return (self.workdir, *self.extra_roots)

    @functools.cached_property
    def _root_texts(self) -> tuple[str, ...]:
        return tuple(str(r) for r in self.roots())

    def resolve(self, rel: str, argument: str = "path") -> Path:
        """The resolved path of `rel`, or GuardrailError saying why it is refused.
        (On every call with a path: done on strings, one Path made at the end.)"""
        if not isinstance(rel, str):
            raise GuardrailError(
                f"`{argument}` must be a workspace-relative path string, got {type(rel).__name__}"
            )
        if rel == "" or rel.strip() == "":
            raise GuardrailError(
                f"`{argument}` is empty: give a path relative to the workspace root, "
                "e.g. 'src/app.py'"
            )
        if "\x00" in rel:
            raise GuardrailError(f"`{argument}` contains a NUL character: {rel!r}")
        raw = os.path.expanduser(rel) if rel.startswith("~") else rel
        candidate = os.path.join(self._root_texts[0], raw)  # (an absolute `raw` stays as is)
        resolved = beneath.real_path(candidate)
        root = self._root_of(resolved)
        if root is None:
            raise GuardrailError(self._escape_message(rel, raw, candidate, resolved, argument))
        self._check_protected(rel, resolved, root, argument)
        # The lexical path may name a protected directory that a symlink hides.
        lexical = os.path.normpath(candidate)
        if lexical != resolved and _under(lexical, root):
            self._check_protected(rel, lexical, root, argument)
        _check_file_type(rel, resolved, argument)
        return Path(resolved)

    def _root_of(self, resolved: str) -> str | None:
        return next((r for r in self._root_texts if _under(resolved, r)), None)

    def relative(self, path: Path) -> str:
        """A resolved path as the model should see it: relative to the workdir if inside."""
        try:
            return path.relative_to(self.workdir).as_posix() or "."
        except ValueError:
            return str(path)

    def _escape_message(
        self, rel: str, raw: str, candidate: str, resolved: str, argument: str
    ) -> str:
        if os.path.isabs(raw):
            why = "is an absolute path outside the workspace"
        elif ".." in raw.split("/") and self._root_of(os.path.normpath(candidate)) is None:
            why = "climbs out of the workspace with '..'"
        else:
            why = f"leads out of the workspace through a symlink (to {resolved})"
        allowed = ", ".join(str(r) for r in self.roots())
        return (
            f"refused: `{argument}` {rel!r} {why}. Tools may only touch paths under {allowed}; "
            "give a path relative to the workspace root, e.g. 'src/app.py'."
        )

    def _check_protected(self, rel: str, path: str, root: str, argument: str) -> None:
        inner = path[len(root) :].lstrip("/") or "."
        parts = inner.split("/")
        for entry in self.protected:
            hit = (
                entry in parts
                if "/" not in entry
                else (inner == entry or inner.startswith(entry + "/"))
            )
            if hit:
                raise GuardrailError(
                    f"refused: `{argument}` {rel!r} is inside the protected path '{entry}/', "
                    "which tools may not read or change. Work on the files of the project "
                    "instead; the host decides what is protected."
                )


SPECIAL_FILES = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def special_file(mode: int) -> str | None:
    """What a file of this st_mode is when it is neither a regular file nor a directory."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((what for test, what in SPECIAL_FILES if test(mode)), "not a regular file")


def _check_file_type(rel: str, resolved: str, argument: str) -> None:
    """Refuse an existing path that is neither a regular file nor a directory (a stat, which
    never blocks, unlike the open that would follow), and a symlink loop."""
    try:
        mode = os.stat(resolved).st_mode
    except OSError as e:
        if e.errno == errno.ELOOP:  # (realpath leaves a loop's link unresolved)
            raise GuardrailError(
                f"`{argument}` {rel!r} cannot be resolved: a symlink loop ({resolved}); "
                "give a path that leads to a file."
            ) from e
        return  # missing (a write may create it) or unreadable: the tool says which
    what = special_file(mode)
    if what is not None:
        raise GuardrailError(
            f"refused: `{argument}` {rel!r} is {what}, not a regular file. Tools read and "
            "change regular files only (opening this one could block or never end); "
            "give the path of a regular file."
        )


def _under(path: str, root: str) -> bool:
    """`path` is `root` or beneath it (both absolute and normalised)."""
    return path == root or path.startswith(root if root.endswith("/") else root + "/")


class Approval(enum.Enum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


ApprovalPolicy = Mapping[Tier, Approval]


def make_policy(policy: Mapping[Tier | str, Approval | str] | None) -> dict[Tier, Approval] | None:
    """Normalize a host's policy ({"write": "ask", Tier.EXEC: Approval.DENY}); None = allow all.

    Raises ValueError naming the bad tier or decision and the valid ones.
    """
    if policy is None:
        return None
    out: dict[Tier, Approval] = {}
    for tier, decision in policy.items():
        try:
            t = tier if isinstance(tier, Tier) else Tier(str(tier).lower())
        except ValueError:
            valid = ", ".join(t.value for t in Tier)
            raise ValueError(f"approval policy: unknown tier {tier!r} (valid: {valid})") from None
        try:
            d = decision if isinstance(decision, Approval) else Approval(str(decision).lower())
        except ValueError:
            valid = ", ".join(a.value for a in Approval)
            raise ValueError(
                f"approval policy: tier {t.value!r} has unknown decision {decision!r} "
                f"(valid: {valid})"
            ) from None
        out[t] = d
    return out


def decide(policy: ApprovalPolicy | None, tier: Tier) -> Approval:
    """What the policy says for `tier`; tiers it does not mention are allowed."""
    if policy is None:
        return Approval.ALLOW
    return policy.get(tier, Approval.ALLOW)


class Busy(GuardrailError):
    """A serial tool is still busy with an earlier call of the same run."""


class SerialLocks:
    """One call at a time of a tool that is not parallel-safe (debug, eval), per run.
    Re-entrant, so the eval bridge may call back into the tool from the handler's own
    thread; a call that waits longer than `timeout` for the previous one gets an error."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._locks: dict[str, threading.RLock] = {}
        self._guard = threading.Lock()

    @contextlib.contextmanager
    def hold(self, name: str) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(name, threading.RLock())
        if not lock.acquire(timeout=self.timeout):
            raise Busy(
                f"{name}: another {name} call on this run has been running for more than "
                f"{self.timeout:g} s; wait for it to finish (calls of {name} run one "
                "at a time) and try again."
            )
        try:
            yield
        finally:
            lock.release()
