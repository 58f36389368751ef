"""SGLang 0.5.23 integration: a tree core whose every load-back pin is a lease.

Select it in an SGLang server with ``--radix-cache-backend leases`` (the
lease core in `LeaseUnifiedRadixCache`) or ``SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND=leases``
(or ``CacheInitParams.tree_core_backend="leases"``: the core alone); installing
this package with the ``sglang`` extra registers both through SGLang's plugin
entry points.
Importing this package registers the backend too. See docs/sglang.md.
"""

from unicache.integrations.sglang.plugin import BACKEND_NAME, register

register()

__all__ = ["BACKEND_NAME", "register"]
