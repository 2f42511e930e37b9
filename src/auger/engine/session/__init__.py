"""A session: opened, resumed and forked by its manager (sessions.py); ops in, envelopes out (session.py);
what it sets up as it opens (setup.py) and keeps for its turns."""
