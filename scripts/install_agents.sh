#!/bin/sh
# The real agent CLIs the proxy's tests run (Claude Code, Codex, pi), at the versions pinned in
# tests/agents/package.json and package-lock.json, installed from the npm registry with `npm ci`.
# Cached: a stamp newer than the lock file skips it. Without node or npm say so and carry on: those
# tests then skip, each with the reason.
cd "$(dirname "$0")/../tests/agents" || exit 0
stamp=node_modules/.breakwater-installed
[ -f "$stamp" ] && [ "$stamp" -nt package-lock.json ] && exit 0
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
	echo "note: node/npm not found; the proxy's real-agent tests will skip (install Node 20 to run them)"; exit 0
fi
if npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>npm-ci.log; then
	rm -f npm-ci.log
	touch "$stamp"
else
	echo "note: npm ci failed in tests/agents (see tests/agents/npm-ci.log); the real-agent tests will skip"
fi
exit 0
