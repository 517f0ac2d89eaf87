"""Where tool calls run beyond this process: implementations of the tool-runner seam.

``planrail.backends.ray.RayRunner`` sends each Python tool call to a Ray cluster (the ``[ray]``
extra). Nothing in planrail's core imports this package.
"""
