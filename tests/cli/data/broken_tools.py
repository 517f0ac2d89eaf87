"""A module that cannot be imported: ``--tools`` on it is a usage error."""

raise RuntimeError("this tools module is broken on purpose")
