"""One turn (turn.py): its frozen context and its host, the model call, the one tool runtime, the history
it reads, compaction and its accounting."""
