from breakwater.cli import run

raise SystemExit(run())
