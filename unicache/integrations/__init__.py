"""Optional integrations of the lease machinery into other serving engines.

Nothing here is imported by `unicache` itself; each subpackage needs its
engine installed (see the extras in pyproject.toml).
"""
