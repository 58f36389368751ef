"""The cache's operations, each owned by one object that `UniCache` composes.

Owners get their collaborators at construction (tree, component stores,
ticket table, ledger, counters, reasons, engine) and expose public methods;
none reads another's private state. See docs/architecture.md for the list.
"""
