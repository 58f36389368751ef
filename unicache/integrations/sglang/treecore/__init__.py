"""Tree core ``"unicache"``: unicache's own tree, engine-owned stores and leases behind SGLang's interface.

`UnicacheTreeCore` (in `core`) implements SGLang 0.5.23's
`UnifiedTreeCoreInterface` directly (no subclass of SGLang's Python tree
core). Modules, one concept each: `refusals` (the configurations it does
not cover, refused at construction), `receipts` (the lock receipt SGLang
holds and the owners of every other lease), `errors` (typed misuse
errors), `values` (tensor <-> index-list conversions at the boundary),
`core` (the class SGLang sees, with its design essay) and its parts over
the shared `state`: `locks`, `sizes`, `match`, `inserts` and `walk`,
`eviction`, `host_eviction`, `backup`, `load_back`, `views`, `sanity`,
`unsupported`; auxiliary components: `part` (the interface), `mamba`;
the tools: `record` (the last acks and refused load-backs), `corestate`
(what the tools read of the core), `dump` (the core as a crash dump the
REPL opens), `failures` (a dump on a lease error or failed sanity check),
`livedump` (a dump on SIGUSR1), `metrics` (its metrics in SGLang's
``/metrics``).
"""
