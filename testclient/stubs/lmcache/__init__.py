"""Stand-in for the ``lmcache`` package, for the test client only.

Only the wrapper classes that travel pickled inside msgpack ext type 1 live here, at their real
module paths, so that Python's own pickle names the same globals as LMCache's client does. They
hold data only: nothing here maps shared memory or opens CUDA handles.
"""

# The test client checks this marker so that a real LMCache install can never shadow the stubs
# (a real wrapper class would pickle the same global but is built from live tensors).
LMCACHE_TESTCLIENT_STUB = True
