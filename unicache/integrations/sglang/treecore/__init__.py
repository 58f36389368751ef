"""Tree core ``"unicache"``: unicache's own tree, engine-owned stores and leases behind SGLang's interface.

`UnicacheTreeCore` (in `core`) implements SGLang 0.5.23's
`UnifiedTreeCoreInterface` directly (no subclass of SGLang's Python tree
core). Modules, one concept each: `refusals` (the configurations it does
not cover, refused at construction), `receipts` (the lock receipt SGLang
holds and the owners of every other lease), `errors` (typed misuse
errors), `values` (tensor <-> index-list conversions at the boundary),
`core` (the class SGLang sees, with its design essay: `unguarded` with the
failure guards), `unguarded` (the parts joined) and the parts over the
shared `state`: `locks`, `sizes`, `match`, `inserts` and `walk`,
`eviction`, `host_eviction`, `backup`, `load_back`, `views`, `sanity`,
`unsupported`; auxiliary components: `part` (the interface), `mamba`;
the tools: `record` (the last acks and refused load-backs), `corestate`
(what the tools read of the core), `dump` (the core as a crash dump the
REPL opens), `failures` (a dump on a lease error or failed sanity check),
`livedump` (a dump on SIGUSR1), `metrics` (its metrics in SGLang's
``/metrics``).

Compiled build (`make setup-sglang`, docs/sglang.md): mypyc compiles no
multiple inheritance of native classes, so `state.TreeState` and every part
the core class inherits (any new one too, e.g. an SWA part's mixin) is a
``@trait`` with ``@mypyc_attr(allow_interpreted_subclasses=True)`` (both from
`mypy_extensions`, no-ops when interpreted), listed in pyproject.toml's
`[tool.unicache.compiled.sglang]`; `unguarded.UnguardedTreeCore` allows
interpreted subclasses (`core`'s guarded class, the tests' inspector).
Auxiliary components (`part.ComponentPart` subclasses such as `mamba`) are
plain classes.
"""
