"""Layer 1: the plan model, references, tools and catalogs, graph algorithms and validation.

Pure: no network, no database, no clock. (Reading a plan or catalog file is the only I/O.)
"""
