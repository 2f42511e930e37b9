"""The shell command classifier's public face, kept where callers have always imported it from.

The classifier itself is the `auger.policy.shell` package, split by job (syntax, lexer, parser,
program tables, analyzer, per-program handlers, git); see its docstring for what it decides and why.
"""

from auger.policy.shell import (
    DESTRUCTIVE,
    EFFECT_ORDER,
    LOCAL_MUTATION,
    READ_ONLY,
    REMOTE_ACTION,
    CommandAnalysis,
    analyze_command,
    strictest,
    unwrap,
)

__all__ = ["DESTRUCTIVE", "EFFECT_ORDER", "LOCAL_MUTATION", "READ_ONLY", "REMOTE_ACTION", "CommandAnalysis",
           "analyze_command", "strictest", "unwrap"]
