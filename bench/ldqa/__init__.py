"""long-doc-qa replayer: vLLM's side of LMCache's benchmarking ladder against lmcache-server.
Run ``python3 -m bench.ldqa --help`` from the repository root (see docs/benchmarking.md)."""
