"""What could this shell command do? A static reading of a command line before it runs.

The shell tool hands a model-chosen command line to bash. Before it does, the trust mode
needs one of four effects, least to most strict:

- `read_only`: cannot change anything (`ls`, `cat`, `git status`);
- `local_mutation`: changes files or state on this machine — the default for anything unknown;
- `remote_action`: acts on, or sends data to, something outside this machine (`git push`, `curl`);
- `destructive`: hard to undo (`rm -rf`, `git reset --hard`, `sudo`, `curl … | sh`).

`analyze_command` parses the line with a small shell parser of its own (stdlib `shlex` cannot
see `$(…)`, backticks inside double quotes, `&&` versus `&`, heredocs or redirections), finds
every simple command — including those inside substitutions, `sh -c` scripts, `eval`, `xargs`,
`find -exec` and behind wrappers such as `env`, `timeout` or `sudo` — classifies each from the
tables below, and reports the strictest. It also lists path-like words that resolve outside the
project root, because touching them needs the user's attention even when the effect is mild.

The reading is conservative where it cannot be precise: an unknown command is a local
mutation; a line that does not parse is at least a local mutation; input nested too deeply to
analyse is destructive. A read-only verdict needs every option of a program that has dangerous
ones to be on its allow-list (`readonly_options`), and any bash construct the parser sees but
does not follow — arithmetic on variable text, array subscripts in names, `${!x}`, `${x@P}`,
aliases, `coproc`, mixed brace expansion — makes the line at least a local mutation. It is still
only a reading: it cannot see inside scripts and programs, rc files, aliases, or what a program
does with the data it is given, so `read_only` means "nothing visible in the command changes
anything", not a guarantee. The sandbox is what enforces limits; this package decides when to ask.

Network access is judged by purpose: tools whose job is to talk to another host (curl, ssh,
ping, `git push`, publishing, cloud CLIs) are remote actions; downloads whose job is to update
local state (`git fetch/pull/clone`, package installs) are local mutations.
"""

from auger.policy.shell.calls import unwrap
from auger.policy.shell.classify import analyze_command
from auger.policy.shell.verdict import (
    DESTRUCTIVE,
    EFFECT_ORDER,
    LOCAL_MUTATION,
    READ_ONLY,
    REMOTE_ACTION,
    CommandAnalysis,
    strictest,
)

__all__ = ["DESTRUCTIVE", "EFFECT_ORDER", "LOCAL_MUTATION", "READ_ONLY", "REMOTE_ACTION", "CommandAnalysis",
           "analyze_command", "strictest", "unwrap"]
