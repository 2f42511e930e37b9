"""Root cause 4: "read-only" programs were trusted with options the tables did not know.

A read-only verdict must come from an allow-list of known-safe options and subcommands per
program; an unknown option, an abbreviation, or an argument only known when the command runs is at
least a local mutation. Each attack below creates a file through an option of a program that is
read-only by default (or through git's config channels). Judged by effect through the real shell
tool in plan and headless safe mode, with a control proving it writes under plain `bash -c`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from auger.policy.effects import analyze_command
from auger.tools.base import DESTRUCTIVE, READ_ONLY
from tests.redteam.classifier_attacks import HOOK, Attack, control_writes, git_repo, written_through_tool
from tests.support.redteam_sandbox import KINDS, require

FSMONITOR = "touch {out}; false"


def _tar_fixture(root: Path) -> None:
    import tarfile

    (root / "member.txt").write_text("member\n")
    with tarfile.open(root / "x.tar", "w") as tar:
        tar.add(root / "member.txt", arcname="member.txt")


def _repo(root: Path) -> None:
    git_repo(root)


def _nested_repo(directory: str, out: str):
    """A repository inside the project (a vendored copy, an unpacked archive) whose config runs a program."""
    def setup(root: Path) -> None:
        git_repo(root / directory, config=f"[core]\n\tfsmonitor = \"touch ../{out}; false\"\n")
    return setup


ATTACKS = [
    Attack("sort-abbreviated-output", "sort --outp={out} /dev/null"),
    Attack("sort-option-in-variable", "o=-o; sort $o {out} /dev/null"),
    Attack("sort-option-from-glob", "sort -- /dev/null; sort *", {"--output={out}": "x\n"}),
    Attack("xargs-appends-options", "echo -o {out} | xargs sort /dev/null"),
    Attack("rg-preprocessor", "rg --pre ./hook.sh needle data.txt", {"hook.sh": HOOK, "data.txt": "needle\n"},
           ("hook.sh",), needs=("rg",)),
    Attack("rg-config-path", "RIPGREP_CONFIG_PATH=./rgrc rg needle data.txt",
           {"rgrc": "--pre=./hook.sh\n", "hook.sh": HOOK, "data.txt": "needle\n"}, ("hook.sh",), needs=("rg",)),
    Attack("tar-list-checkpoint-exec", "tar -t --checkpoint=1 --checkpoint-action=exec='touch {out}' -f x.tar",
           setup=_tar_fixture),
    Attack("tar-list-compress-program", "tar -tf x.tar -I ./hook.sh", {"hook.sh": "#!/bin/sh\ntouch {out}\ncat\n"},
           ("hook.sh",), setup=_tar_fixture),
    Attack("time-output", "command time -o {out} true", needs=("time",)),
    Attack("file-compile-magic", "file -C -m magic", {"magic": "0 string PWN pwn\n"}, needs=("file",),
           creates="magic.mgc"),
    Attack("find-action-in-variable", "a=-fls; find . -maxdepth 0 $a {out}"),
    Attack("sed-execute-in-variable", "c='1e touch {out}'; sed -n \"$c\" data.txt", {"data.txt": "line\n"}),
    Attack("awk-option-program", "awk -W exec prog.awk", {"prog.awk": "BEGIN { system(\"touch {out}\") }\n"},
           needs=("mawk",)),
    Attack("env-split-string", "env -S 'sort\\_-o\\_{out}\\_/dev/null'"),
    Attack("git-config-fsmonitor", f"git -c core.fsmonitor='{FSMONITOR}' status", setup=_repo),
    Attack("git-config-env", f"X='{FSMONITOR}' git --config-env=core.fsmonitor=X status", setup=_repo),
    Attack("git-config-variables", f"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.fsmonitor "
                                   f"GIT_CONFIG_VALUE_0='{FSMONITOR}' git status", setup=_repo),
    Attack("git-upload-pack", "git ls-remote --upload-pack='touch {out}; false' .", setup=_repo),
    Attack("git-grep-pager-abbreviated", "git grep --open-files='touch {out}' one", setup=_repo),
    Attack("npm-run-with-help-argument", "npm run pwn -- --help",
           {"package.json": '{"name": "x", "version": "1.0.0", "scripts": {"pwn": "touch {out}; true"}}'},
           needs=("npm",)),
    Attack("project-script-help", "./configure --help", {"configure": HOOK}, ("configure",)),
    Attack("pytest-help-loads-conftest", "pytest --help",
           {"conftest.py": "open('{out}', 'w').close()\n"}, needs=("pytest",)),
    Attack("cargo-metadata-rustc-wrapper", "cargo metadata --offline --format-version 1",
           {".cargo/config.toml": '[build]\nrustc-wrapper = "./hook.sh"\n',
            "hook.sh": '#!/bin/sh\ntouch {out}\nexec "$@"\n', "src/main.rs": "fn main() {}\n",
            "Cargo.toml": '[package]\nname = "x"\nversion = "0.1.0"\nedition = "2021"\n'},
           ("hook.sh",), needs=("cargo",)),
    Attack("git-C-hostile-repository", "git -C vendored status", setup=_nested_repo("vendored", "pwned-git-C"),
           creates="pwned-git-C"),
    Attack("git-in-hostile-repository", "cd unpacked && git status", setup=_nested_repo("unpacked", "pwned-git-cd"),
           creates="pwned-git-cd"),
    Attack("git-home-config", "HOME=. git status", {".gitconfig": f"[core]\n\tfsmonitor = \"{FSMONITOR}\"\n"},
           setup=_repo),
    Attack("tar-options-variable", "TAR_OPTIONS='--checkpoint=1 --checkpoint-action=exec=./hook.sh' tar -tf x.tar",
           {"hook.sh": HOOK}, ("hook.sh",), setup=_tar_fixture),
]


def _runnable(attacks: list[Attack]) -> list[Attack]:
    for attack in attacks:
        if attack.missing():
            print(f"skipping {attack.name}: {', '.join(attack.missing())} not installed")
    return [a for a in attacks if not a.missing()]


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_control_payload_writes_unconfined(attack: Attack, tmp_path: Path):
    if attack.missing():
        pytest.skip(f"{', '.join(attack.missing())} not installed")
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
    assert written_through_tool(project, server, _runnable(ATTACKS), mode, sandbox) == []


@pytest.mark.parametrize("command", [
    "less -o log f", "less '+!touch p' f", "man -P 'touch p' ls", "man -H ls", "tree -o out", "tree -R -H . x",
    "info -o out ls", "date 010100002030", "date -s now", "hostname -F name", "hostname newname", "ldd ./x",
    "tar tvf host:x.tar", "rg --hostname-bin ./x foo", "gawk -l ./x.so 1", "gawk -i ./lib.awk 1",
    "gawk -o out 1", "awk -f prog.awk", "sed --debug -s 'w out' f", "git help -w log", "git fsck --lost-found",
    "git show --ext-diff", "git log --output=out", "git grep -Ocmd x", "git --git-dir=x log",
    "git --work-tree=x status", "git --exec-path=./x log", "git --bare log", "GIT_DIR=x git log",
    "GIT_EXEC_PATH=./x git status", "git log $(cat refs)", "git ls-remote 'ext::sh -c x' ", "yq -s out f",
    "nm --plugin ./x.so y", "objdump --plugin ./x.so y", "zstdcat -o out x.zst", "bat cache --build",
    "cloc --vcs='touch p' .", "cloc --report-file=out .", "scc --output out", "compgen -F f x",
    "find . -newer x -okdir rm {} ;", "find . -fprint0 out", "sort --compress-program=x f", "shuf -o out f",
    "sort --output out f", "xargs tar", "git config --edit", "git config alias.x '!sh'",
    "cargo run -- --help", "docker run img --help", "npm exec evil --help", "git log --output=p --help",
    "pytest -v", "ninja -v", "rake -v", "mvn --version", "./gradlew --version",
    "kubectl get pods --kubeconfig=./kc", "KUBECONFIG=./kc kubectl get pods", "helm template x --post-renderer ./x",
    "terraform plan", "docker -H ssh://host ps", "npm help install", "cargo tree", "hg status",
    "go list -toolexec ./x ./...", "GOFLAGS=-toolexec=./x go list", "RUSTC_WRAPPER=./x cargo search x",
    "SYSTEMD_PAGER='touch p' systemctl status", "npm_config_browser=./x npm view x", "brew home x",
    "JAVA_TOOL_OPTIONS=-javaagent:x.jar java -version", "read DOCKER_HOST < f; export DOCKER_HOST; docker ps",
])
def test_unsafe_options_are_not_read_only(command, tmp_path):
    assert analyze_command(command, tmp_path).effect != READ_ONLY


@pytest.mark.parametrize("command", [
    "find . -name '*.pyc' -delete", "git update-ref -d HEAD", "git update-ref --stdin", "git gc --prune=now",
    "git prune", "git reflog expire --all", "git reflog delete HEAD@{1}", "git branch -D x", "git stash drop",
    "git stash clear", "git worktree remove --force x",
])
def test_data_losing_commands_are_destructive(command, tmp_path):
    assert analyze_command(command, tmp_path).effect == DESTRUCTIVE


@pytest.mark.parametrize("command", [
    "rg -n needle src --glob '*.py' -C 3", "rg --files", "rg -tpy -l TODO", "grep -rn --include='*.py' x .",
    "sort -u -k2,2 f | uniq -c | sort -rn", "find . -name '*.py' -not -path './.venv/*' -type f",
    "find . -maxdepth 2 -newermt 2020-01-01 -print", "tar -tzf x.tgz", "tar tvf x.tar", "file -b --mime-type x",
    "less -R f", "man -k printf", "date -u +%Y-%m-%d", "git log --oneline --graph --decorate -n 20",
    "git diff --stat HEAD~3..HEAD -- src", "git grep -n foo -- '*.py'", "git -c color.ui=never log -1",
    "git --no-pager diff", "git status --porcelain=v1", "git diff --output-indicator-new=+ HEAD",
    "sed -n '10,20p' f", "awk -F, '{print $2}' f", "xargs grep -l foo", "head -5 f", "tail -n +3 f",
    "git config --get remote.origin.url", "git ls-remote origin", "cd src && rg foo", "env -S 'ls -la'",
    "time ls", "hostname", "git worktree list", "git gc --help", "git push --help", "docker run --help",
    "gcc --version", "rustc -V", "node -v", "npm -v", "make --version", "python3 -V", "kubectl -n prod get pods",
    "terraform version", "docker ps", "npm --help", "go list ./...", "PAGER=cat git log",
])
def test_known_safe_options_stay_read_only(command, tmp_path):
    assert analyze_command(command, tmp_path).effect == READ_ONLY
