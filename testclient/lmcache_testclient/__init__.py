"""Python test client for lmcache-server: builds requests exactly as LMCache's MP client does.

Importing this package puts ``testclient/stubs`` first on ``sys.path`` so that the wrapper
classes pickled into REGISTER_KV_CACHE come from the stand-in ``lmcache`` tree (same module paths
as the real one). Only the standard library is imported here, so the CLI can report a missing
third-party package with exit code 2 instead of a traceback.
"""

import os
import sys

STUBS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "stubs")
REPO_ROOT = os.path.dirname(os.path.dirname(STUBS_DIR))

if STUBS_DIR not in sys.path:
    sys.path.insert(0, STUBS_DIR)


def check_stubs() -> None:
    """Fail if ``lmcache`` resolves to anything but our stubs (e.g. a real install imported first)."""
    import lmcache

    if not getattr(lmcache, "LMCACHE_TESTCLIENT_STUB", False):
        raise ImportError(
            f"'lmcache' resolves to {getattr(lmcache, '__file__', '?')}, not the test-client stubs "
            f"in {STUBS_DIR}; the pickled wrappers would not be built by the stand-in classes"
        )
