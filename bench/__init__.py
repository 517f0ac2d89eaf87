"""planrail benchmarks: scheduling quality and overhead against other DAG executors.

Run everything with ``python -m bench.run_all [--quick]``; see ``bench/README.md``.
"""
