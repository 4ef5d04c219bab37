#!/bin/sh
# bubblewrap lets the agent's bash run sandboxed (SPEC §3), and its tests run instead of
# skipping. Install it where this machine lets us (root or password-less sudo, apt-get);
# anywhere else say so and carry on: breakwater then falls back on its own.
command -v bwrap >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ]; then as_root=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then as_root="sudo -n"
else echo "note: bubblewrap is not installed and cannot be installed here (not root); bash will run unsandboxed"; exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "note: bubblewrap is not installed (no apt-get here; install the bubblewrap package to sandbox bash)"; exit 0
fi
$as_root apt-get install -y -q bubblewrap >/dev/null 2>&1 ||
	{ $as_root apt-get update -q >/dev/null 2>&1 && $as_root apt-get install -y -q bubblewrap >/dev/null 2>&1; } ||
	echo "note: apt-get could not install bubblewrap; bash will run unsandboxed"
exit 0
