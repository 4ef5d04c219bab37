"""How much one bash call may take: processes, memory, file size (issue 27 item 4).

Time is bounded by bash.py. The rest is set where the command starts, before bubblewrap runs:
a small shell joins fresh cgroups (pids, memory) when this machine lets us make them — as root,
where RLIMIT_NPROC does not apply at all — sets rlimits (file size always; processes and address
space when no cgroup holds them) and then execs the command. So no process of the call runs a
single instruction outside its bounds. Afterwards the cgroups' counters say which bound was hit.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
MB = 1 << 20
_counter = iter(range(1 << 62))

# $1: the cgroup.procs files to join, then "--", then the ulimit options, then "--", then the command
_JOIN = ('while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; '
         'while [ "$1" != -- ]; do ulimit "$1" "$2" || exit 125; shift 2; done; shift; exec "$@"')


@dataclass(frozen=True, slots=True)
class Bounds:
    """The policy's tool_max_procs, tool_max_memory_mb and tool_max_file_mb (which sets their defaults)."""

    max_procs: int
    max_memory_mb: int
    max_file_mb: int            # any one file the command writes, and the sandbox's own /tmp

    @classmethod
    def from_policy(cls, policy) -> "Bounds":
        return cls(policy.tool_max_procs, policy.tool_max_memory_mb, policy.tool_max_file_mb)


class Confinement:
    """The bounds of one run: its cgroups while it lives, what they counted when it is over."""

    def __init__(self, bounds: Bounds):
        self.bounds = bounds
        self.cgroups: dict[str, Path] = {}
        name = f"breakwater-{os.getpid()}-{next(_counter)}"
        for controller, limits in (("pids", {"pids.max": str(bounds.max_procs)}),
                                   ("memory", {"memory.limit_in_bytes": str(bounds.max_memory_mb * MB),
                                               "memory.max": str(bounds.max_memory_mb * MB),
                                               "memory.swap.max": "0"})):
            group = _make_cgroup(controller, name, limits)
            if group is not None:
                self.cgroups[controller] = group
        self._start = {c: _count(g, c) for c, g in self.cgroups.items()}

    def wrap(self, argv: list[str]) -> list[str]:
        limits = ["-f", str(self.bounds.max_file_mb * 1024)]     # bash counts 1 KiB blocks
        if "memory" not in self.cgroups:
            limits += ["-v", str(self.bounds.max_memory_mb * 1024)]
        if "pids" not in self.cgroups and os.geteuid() != 0:
            # RLIMIT_NPROC counts every process of the user, not only this call's
            limits += ["-u", str(self.bounds.max_procs + _processes_of(os.getuid()))]
        joins = [str(g / "cgroup.procs") for g in self.cgroups.values()]
        return ["/bin/bash", "-c", _JOIN, "bounds", *joins, "--", *limits, "--", *argv]

    def hit(self, output_tail: bytes, returncode: int | None) -> list[str]:
        """The bounds this run ran into, as the result should name them."""
        b = self.bounds
        out = []
        if _count(self.cgroups.get("pids"), "pids") > self._start.get("pids", 0) or \
                ("pids" not in self.cgroups and b"fork: Resource temporarily unavailable" in output_tail):
            out.append(f"the process bound (tool_max_procs = {b.max_procs})")
        if _count(self.cgroups.get("memory"), "memory") > self._start.get("memory", 0) or \
                ("memory" not in self.cgroups and (b"Cannot allocate memory" in output_tail
                                                   or b"MemoryError" in output_tail)):
            out.append(f"the memory bound (tool_max_memory_mb = {b.max_memory_mb})")
        if returncode in (-25, 128 + 25) or b"File size limit exceeded" in output_tail:
            out.append(f"the file size bound (tool_max_file_mb = {b.max_file_mb})")
        return out

    def close(self) -> None:
        for group in self.cgroups.values():
            for _ in range(50):             # the last processes of the call may still be exiting
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _own_cgroup(controller: str) -> Path | None:
    """Where this process sits in the hierarchy of `controller` (cgroup v1) or the unified one (v2)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return CGROUP_ROOT / controller / path.lstrip("/")
    if (CGROUP_ROOT / "cgroup.controllers").exists():
        for line in lines:
            if line.startswith("0::"):
                return CGROUP_ROOT / line[3:].lstrip("/")
    return None


def _make_cgroup(controller: str, name: str, limits: dict[str, str]) -> Path | None:
    parent = _own_cgroup(controller)
    if parent is None:
        return None
    group = parent / name
    try:
        group.mkdir()
    except OSError:
        return None
    wrote = False
    for file, value in limits.items():
        try:
            (group / file).write_text(value)
            wrote = True
        except OSError:
            continue            # v1 or v2 spelling, or no swap accounting
    if not wrote:
        try:
            group.rmdir()
        except OSError:
            pass
        return None
    return group


def _count(group: Path | None, controller: str) -> int:
    """How often the bound of `group` refused something: pids.events `max`, an OOM kill."""
    if group is None:
        return 0
    for file, key in (("pids.events", "max"),) if controller == "pids" else \
            (("memory.events", "oom_kill"), ("memory.oom_control", "oom_kill"), ("memory.failcnt", None)):
        try:
            text = (group / file).read_text()
        except OSError:
            continue
        if key is None:
            return int(text.strip() or 0)
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key:
                return int(parts[1])
    return 0


def _processes_of(uid: int) -> int:
    count = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                count += os.stat(f"/proc/{pid}").st_uid == uid
            except OSError:
                pass
    return count
