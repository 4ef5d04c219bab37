#!/bin/sh
# tmux runs the workbench in a real terminal in the tests (a large session's load, quit with ctrl+q
# mid-way: issue 35 item 7), as a person at a terminal meets it.
exec "$(dirname "$0")/install_deb.sh" tmux tmux "the real-terminal tests will skip"
