#!/bin/sh
# Headless Chromium opens the pages `breakwater export` writes in the tests (issue 42), driven by
# Playwright with the distribution's browser (Playwright's own download needs a network no machine
# here has). Installed where this machine lets us (root or password-less sudo, apt-get); anywhere
# else say so and carry on: those tests then skip, saying why.
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = 0 ]; then as_root=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then as_root="sudo -n"
else echo "note: chromium is not installed and cannot be installed here (not root); the browser tests will skip"; exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "note: chromium is not installed (no apt-get here; install the chromium package for the browser tests)"; exit 0
fi
$as_root apt-get install -y -q chromium >/dev/null 2>&1 ||
	{ $as_root apt-get update -q >/dev/null 2>&1 && $as_root apt-get install -y -q chromium >/dev/null 2>&1; } ||
	echo "note: apt-get could not install chromium; the browser tests will skip"
exit 0
