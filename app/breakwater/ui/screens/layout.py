"""What the screens' layouts share: the replay and the comparison lay themselves out alike on a
short terminal (see breakwater.tcss and CompareScreen's CSS)."""

SHORT_ROWS = 48        # a terminal with fewer rows lays the screen out for them
