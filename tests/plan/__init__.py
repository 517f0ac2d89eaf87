"""Tests of the plan layer: model, references, tools, catalogs, graph, validation, repair."""
