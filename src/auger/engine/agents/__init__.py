"""Other agents a session runs: its sub-agents, an agent that runs its turns over ACP, the review session."""
