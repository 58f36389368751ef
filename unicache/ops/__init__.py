"""The cache's operations, one concept per module; `UniCache` binds them as its methods.

Each function takes the cache as its first argument and reaches the others
through it (`cache._evict_dev(...)`), so every operation has one entry point.
"""
