"""Exhaustive small-scope checking: every interleaving of cache operations over a tiny configuration.

`scope` says what is explored (a tiny cache, a token alphabet, bounds), `actions`
which REPL commands are enabled in a state, `canonical` when two states are the
same up to ids, `search` the breadth-first search that checks every state, and
`command` the `unicache explore` command. The action alphabet is REPL script
lines, so a violation's path is a script `unicache repl --script` replays.
"""
