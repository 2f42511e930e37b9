"""`auger serve`: the engine over HTTP. app.py (routes → ops and snapshots), sessions.py (the sessions it runs),
events.py + sse.py (event streams by seq), wire.py (what clients send, checked), providers.py (provider and
agent statuses), acp_ws.py (ACP over WebSocket), openapi.py, command.py, static/ (the web UI's files); the
shared frontends/http_guard.py checks who may talk to it (token, pairing, Host/Origin). See docs/server.md."""
