"""Other coding agents as backends of an auger session, spoken to over the Agent Client Protocol.

A session's turn is run either by the native engine (engine/turn/turn.py) or by a backend agent
(engine/agents/backend_turn.py); both record the same items and emit the same events. This package holds
what a backend is (base.py), how one is configured and found (config.py, status.py), the ACP client
side (acp.py, acp_client.py), the checks its requests pass (permissions.py, files.py) and the pool
that keeps agents warm and reaps them (pool.py). The SDK (`agent-client-protocol`, the `acp` extra)
is imported only when an agent is started or probed.
"""
