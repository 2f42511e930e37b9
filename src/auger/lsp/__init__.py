"""Code intelligence: language servers as a managed, sandboxed resource, and what the session does with them.

    servers.py      which servers exist: the defaults found on the machine, the user's [lsp.NAME] tables
    jsonrpc.py      JSON-RPC over a server's stdin/stdout (LSP's framing), bounded
    client.py       one running server: started in the session's sandbox (read-only, offline), its documents,
                    its diagnostics asked for the way it answers them
    manager.py      the session's servers: started on first need, shared, started again, stopped when idle
    diagnostics.py  the errors a change introduced: before and after, capped, within a bounded wait
    files.py        the project's files as these parts read them (beneath the root, bounded)
    nav.py          code_nav: definition, references, hover, symbols, rename previews (tree-sitter without one)
    tags.py         tree-sitter definitions and references by name (the `lsp` extra)
    repo_map.py     a ranked outline of the project within a token budget, cached and updated incrementally

Nothing here is imported before a session first needs it (engine/session/code_intel.py), and no server starts
before a change or a code_nav call needs one.
"""
