"""What a command in the sandbox is shown: an allowlist (issue 35 item 1).

A denylist of secrets in $HOME (~/.ssh, ~/.aws, rc files...) left open everything nobody listed:
~/.codex/auth.json, keyrings, cargo and Hugging Face tokens, shell histories, a `.env` in the
workspace's parent folders. So bubblewrap starts from an empty root and shows only

- the system folders, read-only: /usr, /bin, /sbin, /lib*, /opt, /etc and /sys, less what in /etc
  only root may read (shadow, gshadow, sudoers, private keys: `etc_secrets`);
- the toolchains the tools' PATH names, read-only (`toolchains`): a PATH folder itself, or the root
  of the version manager it belongs to (~/.pyenv, ~/.nvm, ~/.rustup...: they hold programs, not
  credentials), and where a program on PATH is a link, the toolchain it points into; never a whole
  dot-folder of $HOME (~/.cargo holds credentials.toml: only ~/.cargo/bin is shown);
- what the user names in `tool_read_paths`, read-only;
- the workspace, read-write (the sandbox module binds it).

$HOME and the folders on the way to the workspace or a toolchain exist, empty; /tmp and /var/tmp
are private. Nothing else of the machine is there: not /root, /home, /var, /srv, /mnt or /run.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable

# top-level folders shown read-only; a link among them (/bin -> usr/bin) is recreated as a link
SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "opt", "etc", "sys")
SYSTEM_DIRS = tuple(Path("/", name) for name in SYSTEM)

# in /etc, secrets even where their modes were loosened; the walk also hides whatever else
# is not world-readable (ssh host keys, ssl/private, a database's pg_hba.conf...)
ETC_SECRETS = ("shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d", "ssl/private",
               "security/opasswd", "krb5.keytab", "apt/auth.conf", "apt/auth.conf.d", "ppp/chap-secrets",
               "ppp/pap-secrets", "NetworkManager/system-connections", "wpa_supplicant")
ETC_WALK_LIMIT = 50_000     # entries; /etc holds a few thousand

# Version managers that keep programs, not credentials, under one root: a PATH folder inside one
# shows the root (pyenv's shims need its versions, nvm's node its lib). Matched as consecutive parts
# of the path, anywhere (a HOME of another user, a toolchain under /srv).
TOOLCHAIN_ROOTS = ((".pyenv",), (".nvm",), (".rustup",), (".rbenv",), (".nodenv",), (".goenv",), (".jenv",),
                   (".asdf",), (".volta",), (".bun",), (".deno",), (".sdkman",), (".juliaup",), (".ghcup",),
                   (".elan",), (".pixi",), ("miniconda3",), ("anaconda3",), ("miniforge3",), ("mambaforge",),
                   (".local", "share", "mise"), (".local", "share", "pnpm"), (".local", "share", "fnm"),
                   (".local", "share", "uv", "python"), (".local", "share", "uv", "tools"))
# a bin folder whose programs need another folder: rustup's proxies in ~/.cargo/bin run toolchains
# kept in ~/.rustup (beside ~/.cargo, or $RUSTUP_HOME)
COMPANIONS = {(".cargo", "bin"): ".rustup"}
LINKS_PER_FOLDER = 4_096    # programs looked at in one PATH folder for links into a toolchain


def system_args() -> list[str]:
    """bwrap arguments that show the system folders read-only."""
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    return args


def shown_by_system(path: Path) -> bool:
    """Whether `path` lies in a system folder (through a link like /bin -> /usr/bin too)."""
    return any(path.is_relative_to(d) for d in SYSTEM_DIRS)


def etc_secrets(root: Path = Path("/etc")) -> tuple[tuple[Path, ...], tuple[Path, ...]]:
    """(files, folders) in `root` to hide: the named secrets and whatever others may not read."""
    files: list[Path] = []
    dirs: list[Path] = []
    seen = 0
    for top, subdirs, names in os.walk(root):
        kept = []
        for name in (*subdirs, *names):
            path = Path(top, name)
            try:
                mode = path.lstat().st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode) and (mode & 0o005) != 0o005:
                dirs.append(path)           # not descended into: hidden whole
            elif stat.S_ISREG(mode) and not mode & 0o004:
                files.append(path)
            elif stat.S_ISDIR(mode):
                kept.append(name)
        subdirs[:] = kept
        seen += len(subdirs) + len(names)
        if seen > ETC_WALK_LIMIT:
            break
    for rel in ETC_SECRETS:
        path = root / rel
        if path.is_symlink() or not path.exists() or path in files or any(path.is_relative_to(d) for d in dirs):
            continue
        (dirs if path.is_dir() else files).append(path)
    return tuple(sorted(files)), tuple(sorted(dirs))


def toolchains(path_env: str | None, home: Path | None) -> tuple[Path, ...]:
    """The folders to show read-only so the programs on `path_env` (a PATH value) run: for each
    PATH folder outside the system folders its toolchain root or itself, and for each program in any
    PATH folder that is a link out of the system folders, the toolchain it points into."""
    found: list[Path] = []
    for entry in (path_env or "").split(os.pathsep):
        if not entry.startswith("/"):
            continue        # "" and relative entries mean the working directory: the workspace
        folder = Path(os.path.normpath(entry))
        if not folder.is_dir():
            continue
        for each in (folder, folder.resolve()):
            if not shown_by_system(each):
                _add(found, _root_of(each, home, is_bin_folder=True), home)
        for target in _link_targets(folder):
            if not shown_by_system(target):
                _add(found, _root_of(target.parent, home, is_bin_folder=True), home)
    return tuple(found)


def _link_targets(folder: Path) -> list[Path]:
    """Where the links among the first LINKS_PER_FOLDER entries of `folder` point (pipx's and uv's
    programs in ~/.local/bin, a /usr/local/bin/python3 made by hand)."""
    out = []
    try:
        with os.scandir(folder) as entries:
            for n, entry in enumerate(entries):
                if n >= LINKS_PER_FOLDER:
                    break
                if entry.is_symlink():
                    target = Path(os.path.realpath(entry.path))
                    if target.is_file():
                        out.append(target)
    except OSError:
        pass
    return out


def _root_of(folder: Path, home: Path | None, is_bin_folder: bool) -> Path | None:
    """What to show for the programs in `folder`; None where that would show too much."""
    parts = folder.parts
    for pattern in TOOLCHAIN_ROOTS:
        for i in range(1, len(parts) - len(pattern) + 1):
            if parts[i:i + len(pattern)] == pattern:
                return Path(*parts[:i + len(pattern)])
    if is_bin_folder and folder.name == "bin" and (folder.parent / "pyvenv.cfg").is_file():
        return folder.parent            # a virtual environment: its python needs its lib
    if home is not None and folder.parent == home and folder.name.startswith("."):
        return None                     # ~/.cargo on PATH: a dot-folder of $HOME may hold credentials
    return folder


def _add(found: list[Path], path: Path | None, home: Path | None) -> None:
    """Add `path` unless it is already shown, or holds $HOME (a PATH of "/" or "~")."""
    if path is None or path == Path("/") or (home is not None and home.is_relative_to(path)):
        return
    if any(path.is_relative_to(f) for f in found):
        return
    found[:] = [f for f in found if not f.is_relative_to(path)]
    found.append(path)
    companion = COMPANIONS.get(path.parts[-2:])
    if companion is not None:
        rustup = os.environ.get("RUSTUP_HOME")
        other = Path(rustup) if rustup else path.parent.parent / companion
        if other.is_dir():
            _add(found, other, home)


def read_paths(paths: Iterable[str | os.PathLike], home: Path | None) -> tuple[Path, ...]:
    """The user's `tool_read_paths` that exist, `~` expanded against `home`, both ends of a link."""
    out: list[Path] = []
    for raw in paths:
        text = str(raw)
        if text == "~" or text.startswith("~/"):
            text = str(home or Path.home()) + text[1:]
        path = Path(os.path.normpath(os.path.expanduser(text)))
        for each in (path, path.resolve()):
            if each.exists() and each not in out:
                out.append(each)
    return tuple(out)


def named_after(path: Path) -> list[Path]:
    """`path` and the files beside it named after it: an editor's backups of a config file that
    holds the key (`bw.toml~`, `bw.toml.bak`, `.bw.toml.swp`, `#bw.toml#`)."""
    found = [path] if path.exists() or path.is_symlink() else []
    try:
        with os.scandir(path.parent) as entries:
            for n, entry in enumerate(entries):
                if n >= LINKS_PER_FOLDER:
                    break
                if entry.name != path.name and path.name in entry.name and entry.is_file(follow_symlinks=False):
                    found.append(Path(entry.path))
    except OSError:
        pass
    return found
