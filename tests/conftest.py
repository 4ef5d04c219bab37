"""Every test's caches (tiktoken's files, the count store, the models' windows) in a folder of the run's
own: never the user's ~/.cache, and no count stored by an earlier run or another helper's tests."""

import os
import shutil
import tempfile


def pytest_configure(config):
    cache = tempfile.mkdtemp(prefix="breakwater-test-cache-")
    os.environ["BREAKWATER_CACHE_DIR"] = cache
    config.add_cleanup(lambda: shutil.rmtree(cache, ignore_errors=True))
