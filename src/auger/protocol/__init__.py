"""The contract between the engine and every front end: pure data with a JSON form."""
