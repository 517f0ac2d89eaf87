"""A real local model in the loop: the goal set, its tools, the evaluation and the ReAct loop.

``make test-llm`` runs :mod:`bench.local_llm.evaluate` against llama.cpp's OpenAI-compatible
server with a small registry model; ``--base-url`` points it at any other server.
"""
