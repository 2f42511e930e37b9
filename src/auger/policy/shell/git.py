"""git: the subcommand decides; most are read-only queries.

Global options that re-point git at another repository or change which programs it runs are judged
first; then each subcommand's classifier returns a finding or None (read-only).
"""

from __future__ import annotations

import os
import re
from typing import Callable, Iterator, Sequence

from auger.policy.shell.analyzer import Analyzer, Handler
from auger.policy.shell.calls import Call, cluster, parse_opts
from auger.policy.shell.programs import fs
from auger.policy.shell.verdict import DESTRUCTIVE, LOCAL_MUTATION, READ_ONLY, REMOTE_ACTION, Finding

_GIT_READ_ONLY = fs("""
    status log diff show rev-parse ls-files ls-tree blame annotate grep describe shortlog cat-file show-ref
    merge-base name-rev rev-list whatchanged version help for-each-ref count-objects check-ignore check-attr
    check-ref-format diff-tree diff-files diff-index var verify-commit verify-tag verify-pack cherry range-diff
    show-branch fsck get-tar-commit-id ls-remote patch-id column
""")
# Global options that only change output or pathspec matching. -C, --git-dir, --work-tree and --bare
# re-point git at another repository (with its own config: core.fsmonitor, core.pager, aliases …);
# --config-env, --exec-path=DIR and most -c keys change which programs git runs.
_GIT_GLOBAL_FLAGS = fs("-p --paginate -P --no-pager --no-replace-objects --literal-pathspecs --glob-pathspecs "
                       "--noglob-pathspecs --icase-pathspecs --no-optional-locks --no-lazy-fetch --no-advice "
                       "--html-path --man-path --info-path --exec-path --version --help")
_GIT_GLOBAL_VALUES = fs("--namespace --list-cmds")
_GIT_SAFE_KEY_PREFIXES = ("color.", "column.", "advice.")
_GIT_SAFE_KEYS = fs("""
    core.quotepath core.abbrev log.date log.decorate log.abbrevcommit log.follow log.showroot diff.noprefix
    diff.mnemonicprefix diff.renames diff.relative diff.context diff.interhunkcontext diff.statgraphwidth
    user.name user.email init.defaultbranch grep.linenumber grep.patterntype grep.extendedregexp status.short
    status.branch status.showuntrackedfiles blame.date format.pretty pretty.oneline
""")
# Options of read-only subcommands that write files or run programs. git's parse-options accepts any
# unique abbreviation (`git grep --open-files=sh`), so a prefix of one counts too.
_GIT_UNSAFE_LONG = ("--output", "--ext-diff", "--open-files-in-pager", "--upload-pack", "--receive-pack",
                    "--exec", "--lost-found", "--web", "--textconv", "--filters")
_GIT_UNSAFE_SHORT = {"grep": "O", "ls-remote": "u", "help": "wim"}


def _git_safe_key(key: str) -> bool:
    key = key.lower()
    return key.startswith(_GIT_SAFE_KEY_PREFIXES) or key in _GIT_SAFE_KEYS


def _git_unsafe_option(sub: str, arg: str) -> bool:
    if arg.startswith("--"):
        option = arg.partition("=")[0]
        return len(option) > 3 and any(u.startswith(option) for u in _GIT_UNSAFE_LONG)
    letters = _GIT_UNSAFE_SHORT.get(sub, "")
    return arg.startswith("-") and any(ch in letters for ch in arg[1:2])


def _other_repository(an: Analyzer) -> str | None:
    """The directory git would take as its repository when it is not the project's own: a `.git` or a
    bare repository between the current directory and the project root, or a directory outside it.
    Its config (core.fsmonitor, aliases, diff drivers) is not protected the way the project's is."""
    if an.cwd == an.root:
        return None
    if not an.inside(an.cwd):
        return an.cwd
    d = an.cwd
    while d != an.root and len(d) > len(an.root):
        if os.path.lexists(os.path.join(d, ".git")) or (
                os.path.isfile(os.path.join(d, "HEAD")) and os.path.isdir(os.path.join(d, "objects"))):
            return d
        d = os.path.dirname(d)
    return None


def _git(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    args = call.texts[i + 1:end]
    view = call.option_view(i + 1, end)
    other = _other_repository(an)
    if other is not None:
        yield Finding(LOCAL_MUTATION, f"git would use the repository at '{other}', whose settings can run programs")
    k = 0
    while k < len(args):
        a = view[k]
        if a is None:
            yield Finding(LOCAL_MUTATION, "a git argument is only known when it runs (it could be any option)")
            k += 1
            continue
        if a == "-c":
            if k + 1 < len(args) and not ((key := view[k + 1]) and _git_safe_key(key.partition("=")[0])):
                yield Finding(LOCAL_MUTATION,
                              f"git -c {args[k + 1].partition('=')[0]} can change which programs git runs")
            k += 2
            continue
        if a in _GIT_GLOBAL_VALUES:
            k += 2
            continue
        if a.startswith("-"):
            if a not in _GIT_GLOBAL_FLAGS and a.partition("=")[0] not in _GIT_GLOBAL_VALUES:
                yield Finding(LOCAL_MUTATION, f"git {a} points git at other repositories, settings or programs")
                k += 2 if a in ("-C", "--git-dir", "--work-tree", "--config-env", "--super-prefix") else 1
                continue
            k += 1
            continue
        break
    if k >= len(args):
        return
    sub, rest = args[k], args[k + 1:]
    if rest in (["--help"], ["-h"]):
        return
    for m in range(i + 2 + k, end - 1):  # messages are text, not paths
        if call.texts[m] in ("-m", "--message"):
            call.nonpath.add(m + 1)
    if any(re.match(r"[A-Za-z][A-Za-z0-9+.-]*::", a) for a in rest):
        yield Finding(LOCAL_MUTATION, f"git {sub} with a transport::address URL runs a helper program")
    if sub in _GIT_READ_ONLY:
        unknown = None in view[k + 1:]
        unsafe = next((a for a in rest if _git_unsafe_option(sub, a)), None)
        if unknown:
            yield Finding(LOCAL_MUTATION, f"a git {sub} argument is only known when it runs (it could be any option)")
        if unsafe:
            yield Finding(LOCAL_MUTATION, f"git {sub} {unsafe.partition('=')[0]} writes a file or runs another program")
        return
    handler = _GIT_SUBCOMMANDS.get(sub)
    if handler is None:
        yield Finding(LOCAL_MUTATION, f"git {sub} may change the repository")
        return
    result = handler(an, rest)
    if result:
        yield Finding(*result)


def _first(args: Sequence[str]) -> str | None:
    return next((a for a in args if not a.startswith("-")), None)


def _git_branch(an: Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, operands = parse_opts(args, "u", {"--contains", "--no-contains", "--merged", "--no-merged",
                                             "--points-at", "--sort", "--format", "--set-upstream-to"})
    deleting = flags & {"-d", "--delete", "-D"}
    if "-D" in flags or (deleting and flags & {"-f", "--force"}):
        return DESTRUCTIVE, "git branch -D deletes a branch even when it is not merged"
    if deleting:
        return LOCAL_MUTATION, "git branch -d deletes a branch"
    if flags & {"-m", "-M", "-c", "-C", "--move", "--copy", "-u", "--set-upstream-to", "--unset-upstream",
                "--edit-description", "-f", "--force", "-t", "--track", "--no-track"}:
        return LOCAL_MUTATION, "git branch changes branches"
    if operands and not flags & {"-l", "--list"}:
        return LOCAL_MUTATION, "git branch creates a branch"
    return None


def _git_tag(an: Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, operands = parse_opts(args, "mFu", {"--contains", "--no-contains", "--merged", "--no-merged",
                                               "--points-at", "--sort", "--format", "--message", "--file",
                                               "--local-user", "--cleanup"})
    if flags & {"-d", "--delete"}:
        return LOCAL_MUTATION, "git tag -d deletes a tag"
    if flags & {"-a", "-s", "-u", "-m", "-F", "-f", "-e", "--annotate", "--sign", "--force", "--message",
                "--file", "--edit", "--local-user"}:
        return LOCAL_MUTATION, "git tag creates a tag"
    if operands and not flags & {"-l", "--list"}:
        return LOCAL_MUTATION, "git tag creates a tag"
    return None


def _git_config(an: Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, operands = parse_opts(args, "f", {"--file", "--blob", "--type", "--default", "--comment"})
    if flags & {"--unset", "--unset-all", "--add", "--replace-all", "--rename-section", "--remove-section",
                "--edit", "-e"}:
        return LOCAL_MUTATION, "git config changes settings"
    if flags & {"--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l", "--get-color",
                "--get-colorbool"}:
        return None
    first = args[operands[0]] if operands else None
    if first in ("get", "list"):
        return None
    if first in ("set", "unset", "edit", "rename-section", "remove-section") or len(operands) >= 2:
        return LOCAL_MUTATION, "git config changes settings"
    return None


def _git_stash(an: Analyzer, args: list[str]) -> tuple[str, str] | None:
    sub = _first(args)
    if sub in ("list", "show"):
        return None
    if sub in ("drop", "clear"):
        return DESTRUCTIVE, f"git stash {sub} discards stashed changes"
    return LOCAL_MUTATION, "git stash changes the working tree"


def _git_reflog(an: Analyzer, args: list[str]) -> tuple[str, str] | None:
    sub = _first(args)
    if sub in ("expire", "delete"):
        return DESTRUCTIVE, f"git reflog {sub} discards recovery points"
    return None


def _git_reset(an: Analyzer, args: list[str]) -> tuple[str, str] | None:
    if "--hard" in args:
        return DESTRUCTIVE, "git reset --hard discards uncommitted changes"
    return LOCAL_MUTATION, "git reset moves HEAD or unstages changes"


def _git_clean(an: Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, _ = parse_opts(args, "e", {"--exclude"})
    if flags & {"-n", "--dry-run"}:
        return None
    if flags & {"-f", "--force"}:
        return DESTRUCTIVE, f"git clean {cluster(args, 'f', '--force')} deletes untracked files"
    return LOCAL_MUTATION, "git clean deletes untracked files"


def _git_checkout(an: Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, operands = parse_opts(args, "bB", {"--orphan", "--conflict", "--pathspec-from-file"})
    if flags & {"-f", "--force"}:
        return DESTRUCTIVE, "git checkout --force discards local changes"
    if "--" in args and args.index("--") < len(args) - 1:
        return DESTRUCTIVE, "git checkout -- <paths> discards uncommitted changes"
    if any(args[k] in (".", ":/", "*", "./") for k in operands):
        return DESTRUCTIVE, "git checkout . discards uncommitted changes"
    return LOCAL_MUTATION, "git checkout switches branches or restores files"


def _git_restore(an: Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, _ = parse_opts(args, "s", {"--source", "--pathspec-from-file"})
    if flags & {"-S", "--staged"} and not flags & {"-W", "--worktree"}:
        return LOCAL_MUTATION, "git restore --staged unstages changes"
    return DESTRUCTIVE, "git restore discards uncommitted changes"


def _git_switch(an: Analyzer, args: list[str]) -> tuple[str, str] | None:
    if set(args) & {"-f", "--force", "--discard-changes"}:
        return DESTRUCTIVE, "git switch --discard-changes discards local changes"
    return LOCAL_MUTATION, "git switch changes branches"


def _git_push(an: Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, operands = parse_opts(args, "o", {"--repo", "--receive-pack", "--exec", "--push-option"})
    if flags & {"-n", "--dry-run"}:
        return None
    force = flags & {"-f", "--force", "--force-with-lease", "--force-if-includes", "--mirror"}
    if force:
        return DESTRUCTIVE, f"git push {cluster(args, 'f', sorted(force)[0])} overwrites remote history"
    if any(args[k].startswith("+") for k in operands[1:]):
        return DESTRUCTIVE, "git push +<ref> overwrites remote history"
    if flags & {"-d", "--delete", "--prune"} or any(args[k].startswith(":") and len(args[k]) > 1
                                                     for k in operands[1:]):
        return DESTRUCTIVE, "git push deletes remote branches"
    return REMOTE_ACTION, "git push publishes to a remote"


def _git_rm(an: Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, _ = parse_opts(args, "", {"--pathspec-from-file"})
    if "--cached" in flags:
        return LOCAL_MUTATION, "git rm --cached unstages files"
    if flags & {"-f", "--force"}:
        return DESTRUCTIVE, "git rm -f deletes files even with uncommitted changes"
    return LOCAL_MUTATION, "git rm deletes tracked files"


def _git_listing(*read_only: str) -> Callable[[Analyzer, list[str]], tuple[str, str] | None]:
    """A subcommand that only reads with no subcommand of its own or one of `read_only`."""
    def classify(an: Analyzer, args: list[str]) -> tuple[str, str] | None:
        sub = _first(args)
        return None if sub is None or sub in read_only else (LOCAL_MUTATION, f"git {sub} changes the repository")
    return classify


def _git_remote(an: Analyzer, args: list[str]) -> tuple[str, str] | None:
    sub = _first(args)
    return None if sub in (None, "show", "get-url") else (LOCAL_MUTATION, f"git remote {sub} changes remotes")


def _git_submodule(an: Analyzer, args: list[str]) -> tuple[str, str] | None:
    sub = _first(args)
    if sub in (None, "status", "summary"):
        return None
    if sub == "foreach":
        script = [a for a in args[args.index("foreach") + 1:] if a != "--recursive"]
        an.run_script(" ".join(script))
        return LOCAL_MUTATION, "git submodule foreach runs a command in every submodule"
    return LOCAL_MUTATION, f"git submodule {sub} changes submodules"


def _git_fixed(effect: str, reason: str) -> Callable[[Analyzer, list[str]], tuple[str, str]]:
    return lambda an, args: (effect, reason)


_GIT_SUBCOMMANDS: dict[str, Callable[[Analyzer, list[str]], tuple[str, str] | None]] = {
    "branch": _git_branch, "tag": _git_tag, "config": _git_config, "stash": _git_stash, "reflog": _git_reflog,
    "reset": _git_reset, "clean": _git_clean, "checkout": _git_checkout, "restore": _git_restore,
    "switch": _git_switch, "push": _git_push, "rm": _git_rm, "remote": _git_remote, "submodule": _git_submodule,
    "notes": _git_listing("list", "show"),
    "bisect": _git_listing("log", "visualize", "view", "terms"),
    "symbolic-ref": lambda an, args: (None if len(parse_opts(args)[1]) <= 1 and "-d" not in args
                                      and "--delete" not in args else
                                      (LOCAL_MUTATION, "git symbolic-ref changes a ref")),
    "hash-object": lambda an, args: (LOCAL_MUTATION, "git hash-object -w writes objects") if "-w" in args else None,
    "archive": lambda an, args: ((REMOTE_ACTION, "git archive --remote contacts a remote")
                                 if any(a.startswith("--remote") for a in args) else
                                 (LOCAL_MUTATION, "git archive writes an archive file")
                                 if any(a.startswith(("-o", "--output")) for a in args) else None),
    "filter-branch": _git_fixed(DESTRUCTIVE, "git filter-branch rewrites history"),
    "prune": _git_fixed(DESTRUCTIVE, "git prune deletes unreachable objects"),
    "update-ref": lambda an, args: ((DESTRUCTIVE, "git update-ref -d deletes a ref")
                                    if {"-d", "--stdin"} & set(args) else
                                    (LOCAL_MUTATION, "git update-ref changes a ref")),
    "gc": lambda an, args: ((DESTRUCTIVE, "git gc --prune deletes unreachable objects")
                            if any(a.startswith("--prune") for a in args) else
                            (LOCAL_MUTATION, "git gc repacks the repository")),
    "worktree": lambda an, args: ((DESTRUCTIVE, "git worktree remove --force discards a worktree's changes")
                                  if _first(args) == "remove" and {"-f", "--force"} & set(args) else
                                  _git_listing("list")(an, args)),
    "filter-repo": _git_fixed(DESTRUCTIVE, "git filter-repo rewrites history"),
    "send-email": _git_fixed(REMOTE_ACTION, "git send-email sends email"),
    "request-pull": _git_fixed(READ_ONLY, ""),
    "svn": lambda an, args: ((REMOTE_ACTION, "git svn dcommit publishes to a Subversion remote")
                             if _first(args) == "dcommit" else (LOCAL_MUTATION, "git svn changes the repository")),
    "lfs": lambda an, args: ((REMOTE_ACTION, "git lfs push publishes to a remote") if _first(args) == "push" else
                             None if _first(args) in (None, "ls-files", "status", "env", "version") else
                             (LOCAL_MUTATION, "git lfs changes the repository")),
    **{sub: _git_fixed(LOCAL_MUTATION, f"git {sub} downloads from a remote and changes the repository")
       for sub in ("fetch", "pull", "clone")},
}


HANDLERS: dict[str, Handler] = {"git": _git}
