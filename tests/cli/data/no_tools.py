"""A module with no @planrail.tool in it: ``--tools`` on it is a usage error."""

VALUE = 1
