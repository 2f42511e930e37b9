"""Root cause 3: commands run under bash, so every bash construct the classifier does not follow must
count as at least a local mutation — never read-only, which plan and headless safe mode run unasked.

Each attack creates a file through a construct bash evaluates behind a plain reading of the line
(arithmetic on variable text, array subscripts in names, indirection, prompt expansion, aliases,
traps, rc files, brace expansion …). Judged by effect through the real shell tool; each has a
control proving it writes under plain `bash -c`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from auger.policy.effects import analyze_command
from auger.tools.base import READ_ONLY, REMOTE_ACTION
from tests.redteam.classifier_attacks import HOOK, Attack, control_writes, written_through_tool
from tests.support.redteam_sandbox import KINDS, require

SUB = "a[$(touch {out})]"  # text bash runs when it evaluates it as a variable name or arithmetic

ATTACKS = [
    Attack("arith-variable", f"x='{SUB}'; echo $((x))"),
    Attack("arith-dollar", f"x='{SUB}'; echo $(($x))"),
    Attack("arith-command", f"x='{SUB}'; (( x ))"),
    Attack("arith-for-var", f"for i in '{SUB}'; do echo $((i)); done"),
    Attack("double-bracket-eq", f"x='{SUB}'; [[ $x -eq 0 ]]"),
    Attack("double-bracket-v", f"[[ -v '{SUB}' ]]"),
    Attack("test-v", f"test -v '{SUB}'"),
    Attack("read-subscript", f"read '{SUB}' <<< 1"),
    Attack("printf-v-subscript", f"printf -v '{SUB}' x"),
    Attack("declare-subscript", f"declare '{SUB}=1'"),
    Attack("assignment-subscript", "a['$(touch {out})']=1"),
    Attack("compound-assignment-subscript", "x=(['$(touch {out})']=1)"),
    Attack("old-arith-expansion", f"x='{SUB}'; echo $[x]"),
    Attack("hash-table-array", "BASH_CMDS[ls]=./hook.sh; ls", {"hook.sh": HOOK}, ("hook.sh",)),
    Attack("hash-table-compound", "BASH_CMDS=([ls]=./hook.sh); ls", {"hook.sh": HOOK}, ("hook.sh",)),
    Attack("let-subscript", f"let '{SUB}=1'"),
    Attack("subscript-variable", "i='b[$(touch {out})]'; echo ${a[i]}"),
    Attack("indirect-expansion", f"x='{SUB}'; echo ${{!x}}"),
    Attack("prompt-expansion", "x='$(touch {out})'; echo ${x@P}"),
    Attack("nameref", f"declare -n r='{SUB}'; echo $r"),
    Attack("mapfile-callback", "mapfile -C 'touch {out}; :' -c 1 x <<< a"),
    Attack("compgen-command", "compgen -C 'touch {out}' x"),
    Attack("trap-double-dash", "trap -- 'touch {out}' EXIT"),
    Attack("alias-expansion", "shopt -s expand_aliases\nalias ls='touch {out}'\nls"),
    Attack("brace-program", "{touch,{out}}"),
    Attack("brace-option", "sort {-o,{out}} /dev/null"),
    Attack("ps4-xtrace", "PS4='$(touch {out})'; set -x; :"),
    Attack("set-keyword-env", "set -k; bash -c : BASH_ENV=./hook.sh", {"hook.sh": HOOK}),
    Attack("bash-env-read", "read BASH_ENV <<< ./hook.sh; export BASH_ENV; bash -c :", {"hook.sh": HOOK}),
    Attack("bash-env-prefix", "BASH_ENV=./hook.sh bash -c :", {"hook.sh": HOOK}),
    Attack("sh-env-interactive", "ENV=./hook.sh sh -i < /dev/null", {"hook.sh": HOOK}),
    Attack("bash-rcfile", "bash --rcfile ./hook.sh -i < /dev/null", {"hook.sh": HOOK}),
    Attack("source-script", "source ./hook.sh", {"hook.sh": HOOK}),
    Attack("dot-script", ". ./hook.sh", {"hook.sh": HOOK}),
    Attack("coproc-group", "coproc NAME { touch {out}; }; wait"),
    Attack("function-shadow", "function ls { touch {out}; }; ls"),
    Attack("export-function", "f() { touch {out}; }; export -f f; bash -c f"),
    Attack("ifs-split-name", "IFS=,; c=touch,{out}; $c"),
    Attack("variable-program", "c=touch; $c {out}"),
    Attack("substitution-program", "$(echo touch) {out}"),
    Attack("ansi-c-program", "$'\\x74ouch' {out}"),
    Attack("process-substitution-in", "cat <(touch {out})"),
    Attack("process-substitution-out", "echo x > >(cat > {out})"),
    Attack("here-string-shell", "bash <<< 'touch {out}'"),
    Attack("eval", "eval 'touch {out}'"),
    Attack("builtin-eval", "builtin eval 'touch {out}'"),
    Attack("command-eval", "command eval 'touch {out}'"),
    Attack("exec-named-fd", "exec {fd}>{out}"),
    Attack("clobber-redirect", "echo x >| {out}"),
    Attack("both-redirect", "echo x &> {out}"),
]


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_control_payload_writes_unconfined(attack: Attack, tmp_path: Path):
    assert control_writes(attack, tmp_path), f"the payload no longer works under bash: {attack.line()!r}"


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_classifier_never_calls_the_payload_read_only(attack: Attack, tmp_path: Path):
    attack.build(tmp_path)
    result = analyze_command(attack.line(), tmp_path)
    assert result.effect != READ_ONLY, result


@pytest.mark.parametrize("sandbox", KINDS)
@pytest.mark.parametrize("mode", ["plan", "safe"])
def test_no_payload_writes_through_the_tool(project, server, mode, sandbox):
    require(sandbox)
    assert written_through_tool(project, server, ATTACKS, mode, sandbox) == []


@pytest.mark.parametrize("command", ["cat < /dev/tcp/127.0.0.1/9", "exec 3<>/dev/udp/127.0.0.1/9",
                                     "echo x > /dev/tcp/example.com/80"])
def test_dev_tcp_redirections_are_remote_actions(command, tmp_path):
    assert analyze_command(command, tmp_path).effect == REMOTE_ACTION


@pytest.mark.parametrize("command", [
    "enable -f ./x.so x", "set -o vi", "shopt -s extglob", "x=$'ls\\0'; $x", "declare -i n; n=m",
    "echo ${x:i}", "coproc cat", "unset 'a[$(touch p)]'", "wait -p 'a[$(x)]'", "getopts a 'a[$(x)]'",
    "for PATH in ./bin; do ls; done", "time { rm -rf x; }", "read PAGER < f", "hash -p ./x ls; ls", "echo \"$'x'\"{a,\"b\"}",
])
def test_other_unfollowed_constructs_are_not_read_only(command, tmp_path):
    assert analyze_command(command, tmp_path).effect != READ_ONLY


@pytest.mark.parametrize("command", [
    "echo $((1 + 2)) $((0x1f)) $(($# + 1))", "set -euo pipefail; ls", "echo {1..3} src/{a,b}.py",
    "while IFS= read -r line; do echo \"$line\"; done < f", "[[ -n $x && $x == y ]]", "test -v HOME",
    "read -r a b <<< '1 2'", "printf '%s\\n' \"$x\"", "shopt", "alias", "trap -p", "set -- a b",
    "echo ${a[0]} ${a[@]} ${#a[@]} ${!a[@]} ${x:1:2} ${x:-y} ${#x}", "x=([0]=1 [1]=2)", "echo $[1+2]",
    "time -p ls",
])
def test_ordinary_bash_stays_read_only(command, tmp_path):
    assert analyze_command(command, tmp_path).effect == READ_ONLY
