#!/bin/sh
# install_deb.sh COMMAND PACKAGE WHY: install the Debian PACKAGE that provides COMMAND where this
# machine lets us (root or password-less sudo, apt-get); anywhere else say so and carry on, saying
# what then does without it (WHY). Used for bubblewrap (the agent's bash runs sandboxed, SPEC §3, and
# its tests run instead of skipping) and chromium (the exported pages are opened in a real browser,
# issue 42).
command=$1 package=$2 why=$3
command -v "$command" >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ]; then as_root=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then as_root="sudo -n"
else echo "note: $package is not installed and cannot be installed here (not root); $why"; exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "note: $package is not installed (no apt-get here; install the $package package); $why"; exit 0
fi
$as_root apt-get install -y -q "$package" >/dev/null 2>&1 ||
	{ $as_root apt-get update -q >/dev/null 2>&1 && $as_root apt-get install -y -q "$package" >/dev/null 2>&1; } ||
	echo "note: apt-get could not install $package; $why"
exit 0
