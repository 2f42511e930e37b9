"""`auger serve`: the engine over HTTP (app.py), its event streams (events.py, sse.py), who may reach it
(auth.py), the sessions it runs (sessions.py), ACP over WebSocket (acp_ws.py) and the web UI's files (static/)."""
