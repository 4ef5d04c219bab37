#!/bin/sh
# Headless Chromium opens the pages `breakwater export` writes in the tests (issue 42), driven by
# Playwright with the distribution's browser (Playwright's own download needs a network no machine
# here has).
exec "$(dirname "$0")/install_deb.sh" chromium chromium "the browser tests will skip"
