"""`auger demo`: a scripted session, replayed from a bundled cassette against a bundled sample project."""
