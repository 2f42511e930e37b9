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
aliases, `coproc`, mixed brace expansion — makes the line at least a local mutation. It is still only a reading: it cannot see inside scripts and programs,
rc files, aliases, or what a program does with the data it is given, so `read_only` means
"nothing visible in the command changes anything", not a guarantee. The sandbox is what
enforces limits; this module decides when to ask.

Network access is judged by purpose: tools whose job is to talk to another host (curl, ssh,
ping, `git push`, publishing, cloud CLIs) are remote actions; downloads whose job is to update
local state (`git fetch/pull/clone`, package installs) are local mutations.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import chain
from pathlib import Path
from typing import Callable, Iterable, Sequence

from auger.policy.readonly_options import AWK, SED, TABLES, TAR_LISTING, first_unsafe
from auger.policy.types import Effect

READ_ONLY, LOCAL_MUTATION, REMOTE_ACTION, DESTRUCTIVE = (
    Effect.READ_ONLY, Effect.LOCAL_MUTATION, Effect.REMOTE_ACTION, Effect.DESTRUCTIVE)

EFFECT_ORDER = (READ_ONLY, LOCAL_MUTATION, REMOTE_ACTION, DESTRUCTIVE)
_RANK = {effect: rank for rank, effect in enumerate(EFFECT_ORDER)}

_MAX_DEPTH = 40  # nesting ($(…), groups, sh -c …) beyond which a command is not analysed but refused


def strictest(*effects: str) -> str:
    """The strictest of `effects` (READ_ONLY when given none); unknown effect names raise ValueError."""
    best = READ_ONLY
    for effect in effects:
        rank = _RANK.get(effect)
        if rank is None:
            raise ValueError(f"unknown effect {effect!r}; expected one of {EFFECT_ORDER}")
        if rank > _RANK[best]:
            best = effect
    return best


@dataclass(frozen=True)
class CommandAnalysis:
    effect: str  # strictest over every simple command
    commands: tuple[tuple[str, ...], ...]  # argv of every simple command, in order, nested scripts included
    reasons: tuple[str, ...]  # one short sentence per non-read-only finding
    outside_paths: tuple[str, ...]  # path-like words resolving outside the project root, as written
    parse_error: str | None = None  # set when the line could not be parsed; effect is then >= LOCAL_MUTATION


def analyze_command(command: str, root: Path, cwd: Path | None = None) -> CommandAnalysis:
    """Classify one shell command line; never raises.

    `root` is the resolved project root; relative paths resolve from `cwd` (default `root`).
    The only I/O is path resolution (`os.path.realpath`).
    """
    try:
        root_s = os.fspath(root)
        if not os.path.isabs(root_s):  # documented as resolved; tolerate a relative one
            root_s = os.path.realpath(root_s)
        cwd_s = os.path.realpath(os.path.join(root_s, os.fspath(cwd))) if cwd is not None else root_s
        home = os.environ.get("HOME") or None
        analyzer = _Analyzer(root_s, cwd_s, home)
        errors: list[str] = []
        try:
            notes: list[str] = []
            analyzer.script(_Parser(command, home, 0, errors, notes).parse())
            analyzer.note_constructs(notes)
        except (_TooDeep, RecursionError):
            errors.insert(0, "the command is nested too deeply to analyse")
            analyzer.add(DESTRUCTIVE, "the command is nested too deeply to analyse, so it counts as destructive")
        else:
            errors += analyzer.errors
            if errors:
                analyzer.add(LOCAL_MUTATION, f"the command could not be parsed ({errors[0]}), "
                                             "so it counts as a change")
        return CommandAnalysis(analyzer.effect, tuple(analyzer.commands), tuple(analyzer.reasons),
                               tuple(analyzer.outside), errors[0] if errors else None)
    except Exception as exc:  # a bug here must neither crash the turn nor let the command pass as harmless
        return CommandAnalysis(DESTRUCTIVE, (), (f"the command could not be analysed ({type(exc).__name__}), "
                                                 "so it counts as destructive",), (),
                               f"internal error while analysing: {exc!r}"[:300])


# -- command knowledge ----------------------------------------------------------------------
#
# Everything the classifier knows about particular programs lives in these tables; the code
# below only interprets them. Names are matched on the basename of argv[0] (`/bin/rm` is `rm`).

def _fs(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Read-only programs. Some are read-only only without certain options or operands (sort -o,
# date -s, uniq IN OUT …); their handlers in _HANDLERS take precedence over this list.
_READ_ONLY = _fs("""
    ls dir vdir cat head tail wc grep egrep fgrep rg ag ack fd fdfind tree pwd echo printf which whereis
    type file stat du df uniq cut tr nl cmp diff diff3 comm jq gron basename dirname realpath readlink
    date uname whoami id groups logname hostname printenv true false test [ : sleep seq less more most
    column od hexdump xxd md5sum sha1sum sha224sum sha256sum sha384sum sha512sum b2sum cksum sum shasum
    tac rev fold fmt expand unexpand paste join pr look tsort shuf factor expr numfmt base64 base32
    basenc strings nproc arch getconf locale tty uptime free ps pgrep pidof top htop vmstat iostat lsof
    lscpu lsblk lsusb lspci who w last nm objdump readelf size man info whatis apropos help cal
    zcat gzcat bzcat xzcat zstdcat zgrep zegrep zfgrep bzgrep xzgrep zless zmore zdiff zipinfo bat batcat
    exa eza lsd dust duf tokei cloc scc shellcheck colordiff diffstat uuidgen getent sw_vers lsb_release
    hostid dpkg-query popd dirs unset set shopt alias unalias read wait return exit break continue
    shift getopts let hash jobs fg bg disown umask ulimit times caller compgen complete
""")

# Programs whose only job is to move data across the network; piping their output into a shell
# runs code nobody has reviewed.
_DOWNLOADERS = _fs("curl wget fetch http https xh xhs aria2c curlie lwp-download lwp-request")

_REMOTE: dict[str, str] = {
    **dict.fromkeys(_DOWNLOADERS, "transfers data over the network"),
    **dict.fromkeys("mosh telnet rlogin rsh".split(), "connects to a remote host"),
    **dict.fromkeys("scp sftp ftp tftp lftp rclone s3cmd".split(), "copies files to or from a remote host"),
    **dict.fromkeys("nc ncat netcat socat websocat".split(), "opens network connections"),
    **dict.fromkeys("ping ping6 traceroute tracepath mtr dig nslookup host whois nmap".split(),
                    "contacts remote hosts"),
    **dict.fromkeys("mail mailx sendmail mutt".split(), "sends email"),
    **dict.fromkeys("aws gcloud gsutil bq az heroku vercel netlify fly flyctl firebase doctl wrangler pulumi "
                    "eb sam cdk serverless sls".split(), "acts on a cloud service"),
    **dict.fromkeys("gh glab hub tea".split(), "acts on a code-hosting service"),
}

_DESTRUCTIVE: dict[str, str] = {
    "dd": "dd writes raw data over files or disks",
    "shred": "shred destroys file contents",
    "mkfs": "mkfs formats a filesystem",
    "mke2fs": "mke2fs formats a filesystem",
    "mkswap": "mkswap formats a swap area",
    "newfs": "newfs formats a filesystem",
    "wipefs": "wipefs erases filesystem signatures",
    "blkdiscard": "blkdiscard erases a disk",
    **{name: f"{name} edits disk partitions" for name in "fdisk sfdisk cfdisk gdisk sgdisk parted".split()},
    "killall": "killall kills every process with a name",
    "pkill": "pkill kills every process matching a pattern",
    **{name: f"{name} stops the machine" for name in "reboot shutdown halt poweroff".split()},
}

_MUTATING: dict[str, str] = {
    "cp": "cp copies files", "mv": "mv moves or renames files", "mkdir": "mkdir creates directories",
    "touch": "touch creates or updates files", "ln": "ln creates links", "rmdir": "rmdir removes directories",
    "unlink": "unlink deletes a file", "truncate": "truncate changes file sizes", "install": "install copies files",
    "patch": "patch edits files", "make": "make runs build commands", "split": "split writes files",
    "csplit": "csplit writes files", "mktemp": "mktemp creates files", "gzip": "gzip rewrites files",
    "gunzip": "gunzip rewrites files", "zip": "zip writes an archive", "npx": "npx runs a package's code",
    "pytest": "pytest runs code", "tox": "tox runs code", "chmod": "chmod changes file permissions",
    "chown": "chown changes file ownership", "chgrp": "chgrp changes file ownership",
    "kill": "kill sends a signal to processes", "source": "source runs a script", ".": ". runs a script",
    "ldd": "ldd may run the program's own loader", "enable": "enable -f loads a shared library into the shell",
}

# A command whose only arguments are these prints its version or usage and exits. Short flags are
# trusted only where they are known to mean that: `bash -v` and `ruby -v` go on to run code from
# stdin, and `pytest -v`, `ninja -v` or `rake -v` run the project's tasks verbosely.
_LONG_HELP_FLAGS = _fs("--version --help")
_SHORT_HELP_FLAGS: dict[str, frozenset[str]] = {
    "python": _fs("-V -h"), "node": _fs("-v -h"), "perl": _fs("-v"), "php": _fs("-v"), "lua": _fs("-v"),
    **dict.fromkeys("npm pnpm yarn npx docker podman java javac gcc g++ cc clang clang++ rustc go".split(),
                    _fs("-v -h -V -version -help")),
}
_DEFAULT_SHORT_HELP = _fs("-h")
# Tools that load the project's own code or configuration even to print a version or usage text
# (conftest.py plugins, .mvn/jvm.config, gradle.properties, Rakefiles …): never a harmless query.
_PROJECT_LOADERS = _fs("mvn gradle sbt lein ant bazel bazelisk buck pants rake just invoke nox tox pytest py.test "
                       "jest vitest mocha karma webpack vite tsc eslint prettier playwright cypress phpunit composer "
                       "bundle rails pre-commit")

_OUTPUT_OPERAND = frozenset({"uniq", "xxd"})  # a second operand is an output file

# Variables whose value is run as a command, or that change what code programs load.
_COMMAND_VARS = frozenset("PAGER GIT_PAGER MANPAGER EDITOR VISUAL GIT_EDITOR GIT_SEQUENCE_EDITOR GIT_SSH_COMMAND "
                          "GIT_SSH GIT_EXTERNAL_DIFF GIT_ASKPASS SSH_ASKPASS SUDO_ASKPASS LESSOPEN LESSCLOSE "
                          "PROMPT_COMMAND".split())
_CODE_VARS = frozenset("LD_PRELOAD LD_AUDIT LD_LIBRARY_PATH DYLD_INSERT_LIBRARIES DYLD_LIBRARY_PATH BASH_ENV ENV "
                       "PYTHONSTARTUP PYTHONPATH NODE_OPTIONS PERL5OPT PERL5LIB RUBYOPT RUBYLIB RIPGREP_CONFIG_PATH "
                       "PS0 PS1 PS2 PS3 PS4 SHELLOPTS BASHOPTS GLOBIGNORE LESSKEYIN LESSKEY BASH_CMDS BASH_ALIASES "
                       "BASH_LOADABLES_PATH HOME XDG_CONFIG_HOME GCONV_PATH TAR_OPTIONS LESS MORE MANOPT BROWSER "
                       "BAT_CONFIG_PATH PYTHONHOME PERLLIB PERL5DB NODE_PATH".split())
# git settings that are harmless in an environment assignment; any other GIT_* may re-point the
# repository, its config or the programs git runs (GIT_DIR, GIT_CONFIG_*, GIT_EXEC_PATH, GIT_TRACE=file…)
_GIT_SAFE_VARS = frozenset("GIT_TERMINAL_PROMPT GIT_OPTIONAL_LOCKS GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_AUTHOR_DATE "
                           "GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL GIT_COMMITTER_DATE GIT_LITERAL_PATHSPECS "
                           "GIT_GLOB_PATHSPECS GIT_NOGLOB_PATHSPECS GIT_ICASE_PATHSPECS GIT_FLUSH".split())
# Environment prefixes that configure a tool as fully as its config file would (rustc wrappers,
# npm's browser and script shell, go build flags such as -toolexec).
_CONFIG_VAR_PREFIXES = ("NPM_CONFIG_", "CARGO_", "RUSTC", "GOFLAGS", "GOTOOLCHAIN", "PIP_", "UV_", "YARN_",
                        "PNPM_", "DOCKER_", "KUBE", "HELM_", "TF_", "MAVEN_", "GRADLE_", "JAVA_TOOL_OPTIONS",
                        "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "SYSTEMD_")

# Names whose value, read from input (`read`, `printf -v`, `mapfile`, `for NAME in`), changes what runs.
_RUN_VARS = _COMMAND_VARS | _CODE_VARS | {"PATH", "CDPATH", "HOME"}

_SHELLS = _fs("sh bash zsh dash ksh mksh ash yash posh fish")
_INTERPRETERS = _fs("python pypy node nodejs deno bun ruby perl php lua Rscript tclsh")
_VERSIONED = re.compile(r"(python|pypy|pip|ruby|perl|php|node|lua)[0-9.]*$")


@dataclass(frozen=True)
class _Wrapper:
    """A program that runs another program named in its arguments (`timeout 5 cmd …`)."""

    value_opts: frozenset[str] = frozenset()  # options whose value is the next word
    positionals: int = 0  # operands before the command (timeout's DURATION)
    assignments: bool = False  # NAME=value words may precede the command (env, sudo)
    effect: str = READ_ONLY  # the wrapper's own effect
    reason: str = ""
    stop_opts: frozenset[str] = frozenset()  # options meaning "run nothing" (command -v)
    stop_effect: str = READ_ONLY
    split_opts: frozenset[str] = frozenset()  # options whose value is itself a command line (env -S)
    flags: frozenset[str] = frozenset()  # odd flags that look like operands (env's lone "-")
    write_opts: frozenset[str] = frozenset()  # options that make the wrapper itself write a file (time -o)


_WRAPPERS: dict[str, _Wrapper] = {
    "env": _Wrapper(_fs("-u --unset -C --chdir -S --split-string"), assignments=True,
                    split_opts=_fs("-S --split-string"), flags=_fs("-")),
    "time": _Wrapper(_fs("-f --format -o --output"), write_opts=_fs("-o --output")),
    "nice": _Wrapper(_fs("-n --adjustment")),
    "nohup": _Wrapper(),
    "timeout": _Wrapper(_fs("-s --signal -k --kill-after"), positionals=1),
    "command": _Wrapper(stop_opts=_fs("-v -V")),
    "builtin": _Wrapper(),
    "exec": _Wrapper(_fs("-a")),
    "stdbuf": _Wrapper(_fs("-i -o -e --input --output --error")),
    "ionice": _Wrapper(_fs("-c -n --class --classdata"), stop_opts=_fs("-p -P -u --pid --pgid --uid"),
                       stop_effect=LOCAL_MUTATION),
    "taskset": _Wrapper(positionals=1, stop_opts=_fs("-p --pid"), stop_effect=LOCAL_MUTATION),
    "setsid": _Wrapper(),
    "chronic": _Wrapper(),
    "unbuffer": _Wrapper(),
    "busybox": _Wrapper(),
    "xargs": _Wrapper(_fs("-a --arg-file -d --delimiter -E -I -L -n --max-args -P --max-procs -s --max-chars "
                          "--process-slot-var")),
    "sudo": _Wrapper(_fs("-u -g -C -D -h -p -r -t -U -T --user --group --close-from --chdir --host --prompt "
                         "--role --type --other-user --command-timeout"), assignments=True, effect=DESTRUCTIVE,
                     reason="sudo runs commands with root privileges"),
    "doas": _Wrapper(_fs("-u -C"), effect=DESTRUCTIVE, reason="doas runs commands with root privileges"),
}


@dataclass(frozen=True)
class _Subcommands:
    """A CLI whose effect depends on its subcommand (`npm publish`, `docker system prune`)."""

    default: str
    effects: dict[str, str]  # "sub" or "sub sub" -> effect
    value_opts: frozenset[str] = frozenset()  # global options that take the next word
    bare: str = READ_ONLY  # no subcommand at all (usually prints help; `yarn` installs)
    unsafe_opts: frozenset[str] = frozenset()  # options that make a query run programs (credential plugins)


def _subcommands(default: str, ro: str = "", lm: str = "", remote: str = "", destructive: str = "",
                 value_opts: str = "", bare: str = READ_ONLY, unsafe_opts: str = "") -> _Subcommands:
    """Build a table from comma-separated subcommand lists (entries may be two words)."""
    effects: dict[str, str] = {}
    for effect, names in ((READ_ONLY, ro), (LOCAL_MUTATION, lm), (REMOTE_ACTION, remote),
                          (DESTRUCTIVE, destructive)):
        for name in names.split(","):
            if name.strip():
                effects[" ".join(name.split())] = effect
    return _Subcommands(default, effects, _fs(value_opts), bare, _fs(unsafe_opts))


_NPM = _subcommands(
    LOCAL_MUTATION,
    # not `help TOPIC`: it starts the viewer or browser a project's .npmrc names
    ro="ls, list, ll, la, view, v, info, show, outdated, why, explain, search, s, root, prefix, bin, "
       "config get, config list, config ls, audit, fund, query, cache ls, doctor",
    lm="audit fix",
    remote="publish, unpublish, deprecate, dist-tag add, dist-tag rm, owner add, owner rm, access, adduser, "
           "login, logout, star, unstar, team, token, hook, org, npm publish",
    value_opts="-w --workspace --prefix -C --cwd --filter")
_DOCKER = _subcommands(
    LOCAL_MUTATION,
    ro="ps, images, inspect, logs, version, info, history, top, stats, port, diff, events, search, "
       "image ls, image inspect, image history, container ls, container inspect, container logs, "
       "volume ls, volume inspect, network ls, network inspect, context ls, system df, system info, "
       "compose ps, compose logs, compose config, compose images, compose ls, compose top, manifest inspect",
    remote="push, login, logout, image push, manifest push, trust sign, compose push",
    destructive="system prune, volume rm, volume prune",
    value_opts="-H --host -c --context --config -l --log-level -f --file -p --project-name --project-directory "
               "--env-file --profile",
    unsafe_opts="-H --host --config")  # ssh:// hosts run ssh; a config names credential helpers
_KUBECTL = _subcommands(
    REMOTE_ACTION,
    ro="get, describe, logs, explain, version, api-resources, api-versions, cluster-info, top, diff, events, "
       "wait, completion, config view, config get-contexts, config current-context, config get-clusters, "
       "config get-users, auth can-i, auth whoami, rollout status, rollout history, plugin list, kustomize",
    lm="config",
    value_opts="-n --namespace --context --kubeconfig --cluster --user -s --server -l --selector -o --output "
               "--token -c --container",
    unsafe_opts="--kubeconfig")  # a kubeconfig's exec credential plugin runs a command
_HELM = _subcommands(
    REMOTE_ACTION,
    ro="list, ls, status, get, show, inspect, template, version, search, history, lint, env, repo list, "
       "plugin list, dependency list, verify, completion",
    lm="repo add, repo update, repo remove, repo index, dependency update, dependency build, pull, fetch, "
       "package, plugin, create",
    value_opts="-n --namespace --kube-context --kubeconfig",
    unsafe_opts="--kubeconfig --post-renderer")
_TERRAFORM = _subcommands(  # plan, validate, show … run the provider plugins found in the project's .terraform
    REMOTE_ACTION,
    ro="version, workspace show",
    lm="init, fmt, get, workspace new, workspace select, providers lock, login, logout, plan, show, validate, "
       "output, providers, graph, state list, state show, workspace list, console",
    destructive="destroy")
_SUBCOMMANDS: dict[str, _Subcommands] = {
    "npm": _NPM, "pnpm": _NPM, "yarn": replace(_NPM, bare=LOCAL_MUTATION), "bun": _NPM,
    "docker": _DOCKER, "podman": _DOCKER, "nerdctl": _DOCKER,
    "kubectl": _KUBECTL, "oc": _KUBECTL,
    "helm": _HELM,
    "terraform": _TERRAFORM, "tofu": _TERRAFORM,
    "pip": _subcommands(LOCAL_MUTATION, ro="list, show, freeze, check, help, search, config list, config get, "
                                           "debug, inspect, index versions, cache list, cache dir, hash"),
    "uv": _subcommands(LOCAL_MUTATION, ro="pip list, pip show, pip freeze, pip check, pip tree, tree, version, "
                                          "help, python list, python find, tool list, cache dir",
                       remote="publish"),
    "poetry": _subcommands(LOCAL_MUTATION, ro="show, check, env info, env list, search, about",
                           remote="publish"),
    # tree, metadata … ask rustc about the target, and the project's .cargo/config.toml names rustc
    "cargo": _subcommands(LOCAL_MUTATION, ro="search, locate-project, version, help, info",
                          remote="publish, yank, owner, login, logout"),
    "gem": _subcommands(LOCAL_MUTATION, ro="list, info, search, query, contents, environment, specification, "
                                           "which, help", remote="push, yank, owner, signin, signout"),
    "twine": _subcommands(LOCAL_MUTATION, ro="check", remote="upload, register"),
    "go": _subcommands(LOCAL_MUTATION, ro="version, list, doc, help",
                       unsafe_opts="-toolexec -exec -export -compiled"),  # these build, running the tool chain
    "brew": _subcommands(LOCAL_MUTATION, ro="list, ls, info, search, config, doctor, deps, uses, leaves, outdated, "
                                            "desc, commands, services list"),
    "apt": _subcommands(LOCAL_MUTATION, ro="list, search, show, policy, depends, rdepends"),
    "apt-cache": _subcommands(LOCAL_MUTATION, ro="policy, show, showpkg, showsrc, search, depends, rdepends, madison, "
                                                 "pkgnames, stats, dump, dumpavail, unmet, showauto"),
    "dnf": _subcommands(LOCAL_MUTATION, ro="list, info, search, repolist, provides, repoquery"),
    "yum": _subcommands(LOCAL_MUTATION, ro="list, info, search, repolist, provides"),
    "systemctl": _subcommands(LOCAL_MUTATION, ro="status, show, cat, list-units, list-unit-files, list-timers, "
                                                 "list-sockets, list-dependencies, is-active, is-enabled, "
                                                 "is-failed, is-system-running, get-default",
                              destructive="reboot, poweroff, halt, kexec, soft-reboot",
                              value_opts="-t --type -p --property -H --host -M --machine -n --lines -o --output "
                                         "--state"),
    # every other hg command loads the repository's .hg/hgrc, whose extensions and hooks are code
    "hg": _subcommands(LOCAL_MUTATION, ro="version",
                       remote="push, email"),
    "diskutil": _subcommands(LOCAL_MUTATION, ro="list, info, activity",
                             destructive="eraseDisk, eraseVolume, reformat, zeroDisk, randomDisk, secureErase, "
                                         "partitionDisk"),
}


# -- parse tree ---------------------------------------------------------------------------------


class _TooDeep(Exception):
    """Nesting beyond _MAX_DEPTH: the command is refused rather than half-analysed."""


@dataclass(eq=False, slots=True)
class _Word:
    text: str  # after quote removal; expansions ($x, $(…)) kept as written
    raw: str  # as in the source
    subs: list[_Script]  # command and process substitutions inside the word
    quoted: bool = False
    tilde: bool = False  # starts with an unquoted "~"
    path_text: str | None = None  # text with $HOME expanded; None when other expansions make it unknowable
    glob: bool = False  # unquoted *, ? or [
    brace: bool = False  # an unquoted "{" (brace expansion, when a "," or ".." goes with it)

    @classmethod
    def literal(cls, text: str) -> _Word:
        return cls(text, text, [], path_text=text)


@dataclass(eq=False, slots=True)
class _Redir:
    op: str  # ">", ">>", "<<", "&>", …
    fd: str | None
    target: _Word | None  # the file, fd, here-string or heredoc delimiter
    body: str | None = None  # heredoc body
    body_subs: list[_Script] | None = None  # substitutions expanded in an unquoted heredoc body


@dataclass(eq=False, slots=True)
class _Simple:
    assigns: list[_Word]
    words: list[_Word]
    redirs: list[_Redir]
    keyword: bool = False  # `[[ … ]]`, `(( … ))`, `for x in …`, `case x in`: not a command of its own


@dataclass(eq=False, slots=True)
class _Group:
    body: list[_Pipeline]
    redirs: list[_Redir]
    subshell: bool


@dataclass(eq=False, slots=True)
class _FuncDef:
    name: str
    body: _Simple | _Group | _FuncDef | None


_Node = _Simple | _Group | _FuncDef


@dataclass(eq=False, slots=True)
class _Pipeline:
    elements: list[_Node]
    background: bool = False


@dataclass(eq=False, slots=True)
class _Script:
    pipelines: list[_Pipeline]
    src: str  # source text between the delimiters


# -- tokenizer and parser ---------------------------------------------------------------------

_WORD, _OP, _REDIR, _EOF = range(4)
_OPS_BY_CHAR = {";": (";;&", ";;", ";&", ";"), "&": ("&&", "&"), "|": ("||", "|&", "|"), "(": ("(",), ")": (")",)}
_REDIR_OPS = ("<<<", "<<-", "&>>", "<<", "<>", "<&", ">>", ">|", ">&", "&>", "<", ">")
_SEPARATORS = frozenset({";", "&", "\n", "&&", "||", ";;", ";&", ";;&"})
_SKIP_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "esac",
                            "coproc"})
_ARITH_TESTS = frozenset("-eq -ne -lt -le -gt -ge".split())
_ARITH_NOTE = ("arithmetic reads variables, and bash evaluates a variable's text as arithmetic, where an array "
               "subscript runs commands")
_STOP_PAREN = frozenset({")"})
_STOP_BRACE = frozenset({"}"})
_CASE_STOPS = frozenset({";;", ";&", ";;&", "esac"})
_PLAIN = re.compile(r"[^ \t\n;&|()<>\\'\"`$*?\[]+")
_DQ_PLAIN = re.compile(r"[^\"\\`$]+")
_HEREDOC_PLAIN = re.compile(r"[^\\`$]+")
_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]")
_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_FD_WORD = re.compile(r"[0-9]+|\{[A-Za-z_][A-Za-z0-9_]*\}")
_ANSI_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b",
                 "e": "\x1b", "E": "\x1b", "f": "\f", "v": "\v", "?": "?"}


class _WordBuf:
    """A word under construction: its text, its path text (None once unknowable), substitutions."""

    __slots__ = ("text", "path", "path_ok", "subs", "quoted", "glob", "brace")

    def __init__(self, subs: list[_Script] | None = None) -> None:
        self.text: list[str] = []
        self.path: list[str] = []
        self.path_ok = True
        self.subs: list[_Script] = [] if subs is None else subs
        self.quoted = False
        self.glob = False
        self.brace = False  # an unquoted "{": bash may expand the word into several

    def lit(self, s: str) -> None:
        self.text.append(s)
        self.path.append(s)

    def expansion(self, raw: str, value: str | None = None) -> None:
        self.text.append(raw)
        if value is None:
            self.path_ok = False
        else:
            self.path.append(value)

    def word(self, raw: str, tilde: bool) -> _Word:
        return _Word("".join(self.text), raw, self.subs, self.quoted, tilde,
                     "".join(self.path) if self.path_ok else None, self.glob, self.brace)


class _Parser:
    """A tolerant recursive-descent reader of POSIX/bash command lines.

    It never raises on bad input (except _TooDeep): problems are appended to `errors` and
    parsing continues, so a line with an unbalanced quote is still analysed as far as it goes.
    Tokens are read lazily because substitutions are parsed by re-entering the parser in the
    middle of a word.
    """

    def __init__(self, src: str, home: str | None, depth: int, errors: list[str],
                 notes: list[str] | None = None) -> None:
        self.s = src
        self.n = len(src)
        self.i = 0
        self.home = home
        self.depth = depth
        self.errors = errors
        self.notes: list[str] = [] if notes is None else notes  # constructs that make the reading unsure
        self.pending: list[_Redir] = []  # heredocs whose bodies start after the next newline
        self.tok: tuple | None = None  # the peeked token: (kind, value, start, end)
        self.count = 0  # tokens consumed, to guarantee progress

    def parse(self) -> list[_Pipeline]:
        return self.parse_list(frozenset())

    # tokens

    def _error(self, message: str) -> None:
        if len(self.errors) < 5 and message not in self.errors:
            self.errors.append(message)

    def _note(self, message: str) -> None:
        """A construct bash gives a meaning this reading does not follow: the line is at least a change."""
        if message not in self.notes:
            self.notes.append(message)

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _TooDeep

    def _peek(self) -> tuple:
        if self.tok is None:
            self.tok = self._lex()
        return self.tok

    def _advance(self) -> tuple:
        tok = self._peek()
        self.tok = None
        self.count += 1
        return tok

    def _lex(self) -> tuple:
        s, n = self.s, self.n
        while True:
            i = self.i
            while i < n and s[i] in " \t":
                i += 1
            if s.startswith("\\\n", i):
                self.i = i + 2
                continue
            self.i = i
            if i >= n:
                return (_EOF, None, i, i)
            c = s[i]
            if c == "#":
                j = s.find("\n", i)
                self.i = n if j < 0 else j
                continue
            if c == "\n":
                self.i = i + 1
                if self.pending:
                    self._read_heredocs()
                return (_OP, "\n", i, i + 1)
            if c in "<>":
                if s.startswith("(", i + 1):
                    return self._word_token()
                return self._redir_token(None, i)
            if c == "&" and s.startswith(">", i + 1):
                return self._redir_token(None, i)
            if c in _OPS_BY_CHAR:
                for op in _OPS_BY_CHAR[c]:
                    if s.startswith(op, i):
                        self.i = i + len(op)
                        return (_OP, op, i, self.i)
            return self._word_token()

    def _redir_token(self, fd: str | None, start: int) -> tuple:
        for op in _REDIR_OPS:
            if self.s.startswith(op, self.i):
                self.i += len(op)
                return (_REDIR, (op, fd), start, self.i)
        raise AssertionError("unreachable: caller saw a redirection character")

    def _word_token(self) -> tuple:
        start = self.i
        word = self._read_word()
        s = self.s
        if (self.i < self.n and s[self.i] in "<>" and not s.startswith("(", self.i + 1)
                and _FD_WORD.fullmatch(word.raw)):
            return self._redir_token(word.raw, start)  # `2>file`: an fd number, not a word
        return (_WORD, word, start, self.i)

    def _read_word(self) -> _Word:
        s, n = self.s, self.n
        start = self.i
        b = _WordBuf()
        while self.i < n:
            m = _PLAIN.match(s, self.i)
            if m:
                b.lit(m.group())
                b.brace = b.brace or "{" in m.group()
                self.i = m.end()
                continue
            c = s[self.i]
            if c in " \t\n;&|()":
                break
            if c in "<>":
                if s.startswith("(", self.i + 1):  # process substitution <(…) / >(…)
                    raw_start = self.i
                    self.i += 2
                    script = self._substitution()
                    b.subs.append(script)
                    b.expansion(s[raw_start:self.i])
                    continue
                break
            if c == "\\":
                if self.i + 1 < n:
                    if s[self.i + 1] != "\n":
                        b.lit(s[self.i + 1])
                        b.quoted = True
                    self.i += 2
                else:
                    b.lit("\\")
                    self.i += 1
            elif c == "'":
                j = s.find("'", self.i + 1)
                if j < 0:
                    self._error("unterminated single quote")
                    j = n
                b.lit(s[self.i + 1:j])
                b.quoted = True
                self.i = min(j + 1, n)
            elif c == '"':
                self.i += 1
                b.quoted = True
                self._read_dq(b, '"')
            elif c == "`":
                self._backtick(b, in_dq=False)
            elif c == "$":
                self._dollar(b, in_dq=False)
            else:  # *, ?, [
                b.glob = True
                b.lit(c)
                self.i += 1
        return b.word(s[start:self.i], s.startswith("~", start))

    def _read_dq(self, b: _WordBuf, term: str | None) -> None:
        """Double-quoted text up to `term` ('"'), or a whole unquoted heredoc body (term None)."""
        s, n = self.s, self.n
        plain = _DQ_PLAIN if term else _HEREDOC_PLAIN
        escapable = '$`"\\' if term else "$`\\"
        while self.i < n:
            m = plain.match(s, self.i)
            if m:
                b.lit(m.group())
                self.i = m.end()
                continue
            c = s[self.i]
            if c == '"':
                self.i += 1
                return
            if c == "\\":
                nxt = s[self.i + 1:self.i + 2]
                if nxt == "\n":
                    self.i += 2
                elif nxt and nxt in escapable:
                    b.lit(nxt)
                    self.i += 2
                else:
                    b.lit("\\")
                    self.i += 1
            elif c == "`":
                self._backtick(b, in_dq=True)
            else:
                self._dollar(b, in_dq=True)
        if term:
            self._error("unterminated double quote")

    def _dollar(self, b: _WordBuf, in_dq: bool) -> None:
        s, i = self.s, self.i
        nxt = s[i + 1:i + 2]
        if nxt == "(":
            if s.startswith("((", i + 1) and self._arith(b, i + 3):
                b.expansion(s[i:self.i])
            else:  # `$((cmd) …)` is a command substitution holding a subshell, as in bash
                self.i = i + 2
                b.subs.append(self._substitution())
                b.expansion(s[i:self.i])
        elif nxt == "{":
            self.i = i + 2
            self._param(b, i, in_dq)
        elif nxt == "[" and _arith_reads_variables(s[i + 2:].partition("]")[0]):
            self._note(_ARITH_NOTE)  # `$[…]`, bash's old arithmetic expansion
            b.lit("$")
            self.i = i + 1
        elif nxt == "'" and not in_dq:
            self.i = i + 2
            self._ansi_c(b)
        elif nxt == '"' and not in_dq:
            self.i = i + 2
            b.quoted = True
            self._read_dq(b, '"')
        else:
            m = _VAR.match(s, i + 1)
            if m:
                self.i = m.end()
                name = m.group()
                b.expansion(s[i:self.i], self.home if name == "HOME" else None)
            else:
                b.lit("$")
                self.i = i + 1

    def _substitution(self) -> _Script:
        """The script of `$(…)` or `<(…)`, read by re-entering the parser; consumes the `)`."""
        self._enter()
        try:
            start = self.i
            body = self.parse_list(_STOP_PAREN)
            kind, value, tok_start, _ = self._peek()
            if kind == _OP and value == ")":
                self._advance()
            else:
                self._error("unterminated $(…)")
                self.tok = None
            return _Script(body, self.s[start:tok_start])
        finally:
            self.depth -= 1

    def _backtick(self, b: _WordBuf, in_dq: bool) -> None:
        s, n = self.s, self.n
        start = self.i
        i = start + 1
        out: list[str] = []
        while i < n:
            c = s[i]
            if c == "\\" and i + 1 < n:
                nx = s[i + 1]
                out.append(nx if nx in "$`\\" or (in_dq and nx == '"') else c + nx)
                i += 2
                continue
            if c == "`":
                break
            out.append(c)
            i += 1
        else:
            self._error("unterminated backquote")
        self.i = min(i + 1, n)
        b.subs.append(self._child("".join(out)))
        b.expansion(s[start:self.i])

    def _child(self, text: str) -> _Script:
        self._enter()
        try:
            return _Script(_Parser(text, self.home, self.depth, self.errors, self.notes).parse(), text)
        finally:
            self.depth -= 1

    def _param(self, b: _WordBuf, start: int, in_dq: bool) -> None:
        """`${…}`: only `${HOME}` has a known value; substitutions inside are still found."""
        self._enter()
        try:
            s, n = self.s, self.n
            sink = _WordBuf(b.subs)
            content_start = self.i
            while self.i < n:
                c = s[self.i]
                if c == "}":
                    break
                if c == "\\":
                    self.i += 2
                elif c == "'" and not in_dq:
                    j = s.find("'", self.i + 1)
                    self.i = n if j < 0 else j + 1
                elif c == '"':
                    self.i += 1
                    self._read_dq(sink, '"')
                elif c == "$":
                    self._dollar(sink, in_dq=True)
                elif c == "`":
                    self._backtick(sink, in_dq=True)
                else:
                    self.i += 1
            else:
                self._error("unterminated ${…}")
            content = s[content_start:min(self.i, n)]
            self.i = min(self.i + 1, n)
            risk = _param_risk(content)
            if risk:
                self._note(risk)
            b.expansion(s[start:self.i], self.home if content == "HOME" else None)
        finally:
            self.depth -= 1

    def _arith(self, b: _WordBuf, start: int) -> bool:
        """Arithmetic from `start` (just after `$((` or `((`): not commands, though substitutions
        inside still run. Returns False, having consumed and recorded nothing, when the parens do
        not close with `))` — bash then reads nested subshells, and so must the caller."""
        self._enter()
        subs_before, errors_before, origin = len(b.subs), len(self.errors), self.i
        try:
            s, n = self.s, self.n
            self.i = start
            sink = _WordBuf(b.subs)
            depth = 0
            while self.i < n:
                c = s[self.i]
                if c == "(":
                    depth += 1
                    self.i += 1
                elif c == ")":
                    if depth == 0:
                        if s.startswith("))", self.i):
                            if _arith_reads_variables(s[start:self.i]):
                                self._note(_ARITH_NOTE)
                            self.i += 2
                            return True
                        break
                    depth -= 1
                    self.i += 1
                elif c == "$":
                    self._dollar(sink, in_dq=True)
                elif c == "`":
                    self._backtick(sink, in_dq=True)
                elif c == '"':
                    self.i += 1
                    self._read_dq(sink, '"')
                elif c == "\\":
                    self.i += 2
                else:
                    self.i += 1
            del b.subs[subs_before:]
            del self.errors[errors_before:]
            self.i = origin
            return False
        finally:
            self.depth -= 1

    def _ansi_c(self, b: _WordBuf) -> None:
        """`$'…'` with its backslash escapes decoded."""
        s, n = self.s, self.n
        i = self.i
        out: list[str] = []
        while i < n:
            c = s[i]
            if c == "'":
                break
            if c == "\\" and i + 1 < n:
                nx = s[i + 1]
                i += 2
                if nx in _ANSI_ESCAPES:
                    out.append(_ANSI_ESCAPES[nx])
                    continue
                digits, base, limit = "", 16, 0
                if nx in "xuU":
                    limit = {"x": 2, "u": 4, "U": 8}[nx]
                    while len(digits) < limit and i < n and s[i] in "0123456789abcdefABCDEF":
                        digits += s[i]
                        i += 1
                elif nx in "01234567":
                    base, digits = 8, nx
                    while len(digits) < 3 and i < n and s[i] in "01234567":
                        digits += s[i]
                        i += 1
                elif nx == "c" and i < n:
                    out.append(chr(ord(s[i]) & 0x1F))
                    i += 1
                    continue
                if digits:
                    code = int(digits, base)
                    if code == 0:  # bash ends the word's text at a NUL
                        out.append("\x00")
                        continue
                    out.append(chr(code) if code <= 0x10FFFF else "?")
                else:
                    out.append("\\" + nx)
                continue
            out.append(c)
            i += 1
        else:
            self._error("unterminated $'…'")
        self.i = min(i + 1, n)
        b.lit("".join(out).partition("\x00")[0])
        b.quoted = True

    def _read_heredocs(self) -> None:
        """After a newline, the bodies of the heredocs opened on that line, in order. An unquoted
        body still expands `$(…)`, so its substitutions are kept for analysis."""
        s, n = self.s, self.n
        for r in self.pending:
            delim = r.target.text if r.target else ""
            lines: list[str] = []
            while self.i < n:
                j = s.find("\n", self.i)
                j = n if j < 0 else j
                line = s[self.i:j]
                self.i = min(j + 1, n)
                if r.op == "<<-":
                    line = line.lstrip("\t")
                if line == delim:
                    break
                lines.append(line)
            r.body = "".join(line + "\n" for line in lines)
            if r.target is not None and not r.target.quoted:
                self._enter()
                try:
                    sink = _WordBuf()
                    _Parser(r.body, self.home, self.depth, self.errors, self.notes)._read_dq(sink, None)
                    r.body_subs = sink.subs
                finally:
                    self.depth -= 1
        self.pending.clear()

    # grammar

    def parse_list(self, stops: frozenset[str]) -> list[_Pipeline]:
        """Pipelines separated by ; & && || and newlines, up to EOF or a token in `stops` (left unread).
        Control flow is flattened: for analysis every branch and loop body may run."""
        pipelines: list[_Pipeline] = []
        while True:
            kind, value, _, _ = self._peek()
            if kind == _EOF:
                break
            if kind == _OP:
                if value in stops:
                    break
                if value in _SEPARATORS:
                    self._advance()
                    if value == "&" and pipelines:
                        pipelines[-1].background = True
                    continue
                if value != "(":
                    self._error(f"unexpected '{value}'")
                    self._advance()
                    continue
            elif kind == _WORD and not value.quoted and value.text in stops:
                break
            before = self.count
            pipeline = self._pipeline(stops)
            if pipeline.elements:
                pipelines.append(pipeline)
            if self.count == before:
                self._advance()
        return pipelines

    def _pipeline(self, stops: frozenset[str]) -> _Pipeline:
        elements: list[_Node] = []
        while True:
            element = self._command(stops)
            if element is not None:
                elements.append(element)
            kind, value, _, _ = self._peek()
            if kind == _OP and value in ("|", "|&"):
                self._advance()
                self._skip_newlines()
                if self._peek()[0] == _EOF:
                    self._error(f"nothing after '{value}'")
                continue
            return _Pipeline(elements)

    def _skip_newlines(self) -> None:
        while self._peek()[:2] == (_OP, "\n"):
            self._advance()

    def _command(self, stops: frozenset[str]) -> _Node | None:
        """One pipeline element: a group, a compound form, a function definition or a simple command.
        Keywords such as if/then/do/done only delimit commands here, so they are skipped."""
        while True:
            kind, value, start, end = self._peek()
            if (kind == _WORD and not value.quoted and value.text in _SKIP_KEYWORDS
                    and value.text not in stops):
                self._advance()
                if value.text == "coproc":
                    self._coproc_name()
                continue
            if kind == _WORD and not value.quoted and value.text == "time" and "time" not in stops:
                self._advance()  # bash's `time` keyword times a whole pipeline, groups included
                kind, value, _, _ = self._peek()
                if kind == _WORD and not value.quoted and value.text in ("-p", "--"):
                    self._advance()
                continue
            break
        if kind == _OP and value == "(":
            self._advance()
            if self.tok is None and self.i == end and self.s.startswith("(", end):  # ((arithmetic))?
                b = _WordBuf()
                if self._arith(b, end + 1):
                    return _Simple([], [_Word.literal("(("), b.word(self.s[start:self.i], False)],
                                   self._redirs(), True)
            self._enter()
            try:
                body = self.parse_list(_STOP_PAREN)
                self._expect(_OP, ")", "unterminated '('")
            finally:
                self.depth -= 1
            return _Group(body, self._redirs(), True)
        if kind == _WORD and not value.quoted:
            text = value.text
            if text == "{":
                self._advance()
                self._enter()
                try:
                    body = self.parse_list(_STOP_BRACE)
                    self._expect(_WORD, "}", "unterminated '{'")
                finally:
                    self.depth -= 1
                return _Group(body, self._redirs(), False)
            if text == "[[":
                return self._double_bracket()
            if text in ("for", "select"):
                return self._for()
            if text == "case":
                return self._case()
            if text == "function":
                return self._function(stops)
        if kind in (_WORD, _REDIR):
            return self._simple(stops)
        return None

    def _coproc_name(self) -> None:
        """`coproc NAME { …; }`: the name is not a command. The coprocess outlives the statement."""
        self._note("coproc starts a process that keeps running beside the shell")
        kind, value, _, _ = self._peek()
        if kind == _WORD and not value.quoted and value.text not in ("{", "(") and \
                self.s[self.i:].lstrip(" \t").startswith(("{", "(")):
            self._advance()

    def _expect(self, kind: int, value: str, message: str) -> None:
        tok = self._peek()
        if tok[0] == kind and (tok[1] == value if kind == _OP else (tok[1].text == value and not tok[1].quoted)):
            self._advance()
        else:
            self._error(message)

    def _simple(self, stops: frozenset[str]) -> _Node:
        """Leading NAME=value words, then argv words, with redirections anywhere among them."""
        assigns: list[_Word] = []
        words: list[_Word] = []
        redirs: list[_Redir] = []
        while True:
            kind, value, _, end = self._peek()
            if kind == _WORD:
                self._advance()
                if not words and _ASSIGN.match(value.raw):
                    assigns.append(value)
                    if value.raw.endswith("=") and self.i == end and self.s.startswith("(", end):
                        self._array(value)
                    continue
                words.append(value)
            elif kind == _REDIR:
                self._advance()
                redirs.append(self._redir(*value))
            elif kind == _OP and value == "(" and len(words) == 1 and not assigns and not redirs:
                self._advance()  # name() body: a function definition
                self._expect(_OP, ")", "expected ')' after '(' in a function definition")
                self._skip_newlines()
                self._enter()
                try:
                    return _FuncDef(words[0].text, self._command(stops))
                finally:
                    self.depth -= 1
            else:
                if any(w.brace for w in words):
                    words = self._expand_braces(words)
                return _Simple(assigns, words, redirs)

    def _expand_braces(self, words: list[_Word]) -> list[_Word]:
        """Brace expansion, as bash does it before running the command: `{rm,-rf,x}` is `rm -rf x`, and
        `sort {-o,out}` passes `-o out`. Words that mix braces with quotes or expansions are kept as
        written, with a note, since their expansion is not followed here."""
        out: list[_Word] = []
        for w in words:
            expanded = _brace_expand(w.text) if w.brace else [w.text]
            if expanded == [w.text]:
                out.append(w)
                continue
            if not expanded or w.quoted or w.path_text is None or w.subs:
                self._note(f"the brace expansion in '{w.raw}' is too large or mixed with quoting or expansions")
                out.append(w)
                continue
            out.extend(_Word(t, t, [], False, t.startswith("~"), t, w.glob) for t in expanded)
        return out

    def _array(self, word: _Word) -> None:
        """`name=(a b c)`: keep the substitutions of the elements with the assignment."""
        self._advance()
        while True:
            kind, value, _, _ = self._peek()
            if kind == _EOF:
                self._error("unterminated array assignment")
                return
            self._advance()
            if kind == _OP and value == ")":
                return
            if kind == _WORD:
                word.subs.extend(value.subs)
                if value.text.startswith("[") and _name_risk("a" + value.text.partition("=")[0], frozenset()):
                    self._note("an array subscript in a compound assignment is arithmetic on text")

    def _redir(self, op: str, fd: str | None) -> _Redir:
        kind, value, _, _ = self._peek()
        if kind != _WORD:
            self._error(f"missing target after '{op}'")
            return _Redir(op, fd, None)
        self._advance()
        redir = _Redir(op, fd, value)
        if op in ("<<", "<<-"):
            self.pending.append(redir)
        return redir

    def _redirs(self) -> list[_Redir]:
        redirs = []
        while self._peek()[0] == _REDIR:
            redirs.append(self._redir(*self._advance()[1]))
        return redirs

    def _double_bracket(self) -> _Simple:
        words = [_Word.literal(self._advance()[1].text)]
        while True:
            kind, value, _, _ = self._peek()
            if kind == _EOF:
                self._error("unterminated [[")
                break
            self._advance()
            if kind == _WORD:
                words.append(value)
                if not value.quoted and value.text == "]]":
                    break
            else:
                words.append(_Word.literal(value if kind == _OP else (value[1] or "") + value[0]))
        return _Simple([], words, self._redirs(), True)

    def _for(self) -> _Simple:
        words = [_Word.literal(self._advance()[1].text)]
        kind, value, start, end = self._peek()
        if kind == _OP and value == "(" and self.i == end and self.s.startswith("(", end):  # for ((…; …; …))
            self._advance()
            b = _WordBuf()
            if not self._arith(b, end + 1):
                self._error("unterminated for ((…))")
            words.append(b.word(self.s[start:self.i], False))
            return _Simple([], words, [], True)
        while True:
            kind, value, _, _ = self._peek()
            if kind != _WORD or (not value.quoted and value.text == "do"):
                return _Simple([], words, [], True)
            words.append(self._advance()[1])

    def _case(self) -> _Group:
        words = [_Word.literal(self._advance()[1].text)]
        if self._peek()[0] == _WORD:
            words.append(self._advance()[1])
        self._skip_newlines()
        kind, value, _, _ = self._peek()
        body = [_Pipeline([_Simple([], words, [], True)])]
        if not (kind == _WORD and value.text == "in"):
            self._error("expected 'in' after 'case'")
            return _Group(body, [], False)
        self._advance()
        self._enter()
        try:
            while True:
                self._skip_newlines()
                kind, value, _, _ = self._peek()
                if kind == _EOF:
                    self._error("unterminated case")
                    break
                if kind == _WORD and not value.quoted and value.text == "esac":
                    self._advance()
                    break
                if kind == _OP and value == "(":
                    self._advance()
                while True:  # the pattern, up to its ')'
                    kind, value, _, _ = self._peek()
                    if kind == _EOF:
                        break
                    self._advance()
                    if kind == _OP and value == ")":
                        break
                    if kind == _WORD:
                        words.extend([value])
                body.extend(self.parse_list(_CASE_STOPS))
                kind, value, _, _ = self._peek()
                if kind == _OP and value in (";;", ";&", ";;&"):
                    self._advance()
        finally:
            self.depth -= 1
        return _Group(body, self._redirs(), False)

    def _function(self, stops: frozenset[str]) -> _FuncDef:
        self._advance()
        name = self._advance()[1].text if self._peek()[0] == _WORD else ""
        kind, value, _, _ = self._peek()
        if kind == _OP and value == "(":
            self._advance()
            self._expect(_OP, ")", "expected ')' after '(' in a function definition")
        self._skip_newlines()
        self._enter()
        try:
            return _FuncDef(name, self._command(stops))
        finally:
            self.depth -= 1


# -- static helpers over the tree -------------------------------------------------------------

_BRACE_LIMIT = 256
_SEQUENCE = re.compile(r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?|([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?")


def _brace_expand(text: str) -> list[str]:
    """bash's brace expansion of unquoted text: [text] when there is none, [] when it yields more than
    _BRACE_LIMIT words (then the caller does not follow it)."""
    i = 0
    while True:
        i = text.find("{", i)
        if i < 0:
            return [text]
        if i > 0 and text[i - 1] == "$":
            i += 1
            continue
        depth, commas, j = 0, [], i
        while j < len(text):
            c = text[j]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
            elif c == "," and depth == 1:
                commas.append(j)
            j += 1
        if j >= len(text):
            return [text]
        body = text[i + 1:j]
        if commas:
            cuts = [i, *commas, j]
            alternatives = [text[a + 1:b] for a, b in zip(cuts, cuts[1:])]
        else:
            alternatives = _brace_sequence(body)
            if alternatives is None:
                i += 1
                continue
        pre, results = text[:i], []
        tails = _brace_expand(text[j + 1:])
        for alternative in alternatives:
            for head in _brace_expand(alternative) if commas else [alternative]:
                results.extend(pre + head + tail for tail in tails)
                if len(results) > _BRACE_LIMIT or not tails:
                    return []
        return results


def _brace_sequence(body: str) -> list[str] | None:
    """`{1..5}`, `{a..e}`, `{10..1..3}`: the words, or None when `body` is not a sequence."""
    m = _SEQUENCE.fullmatch(body)
    if m is None:
        return None
    if m.group(1) is not None:
        first, last, step = int(m.group(1)), int(m.group(2)), abs(int(m.group(3) or 1)) or 1
        if abs(last - first) // step >= _BRACE_LIMIT:
            return []
        width = len(m.group(1)) if m.group(1).lstrip("-").startswith("0") and len(m.group(1)) > 1 else 0
        values = range(first, last + (1 if last >= first else -1), step if last >= first else -step)
        return [str(v).zfill(width) for v in values]
    first, last, step = ord(m.group(4)), ord(m.group(5)), abs(int(m.group(6) or 1)) or 1
    values = range(first, last + (1 if last >= first else -1), step if last >= first else -step)
    return [chr(v) for v in values]


_SAFE_SUBSCRIPT = re.compile(r"[0-9@*]*")
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-]")


def _param_risk(content: str) -> str | None:
    """Why `${content}` may run commands in bash: indirection (`${!x}`), prompt expansion (`${x@P}`),
    or arithmetic on variable text (subscripts, `${x:offset}`); None when it cannot."""
    if content.startswith("!") and not content.endswith(("*", "@", "[@]", "[*]")):
        return "indirect expansion (${!name}) expands a name taken from a variable's text"
    if content.endswith("@P"):
        return "prompt expansion (${name@P}) runs the command substitutions in a variable's text"
    body = content[1:] if content.startswith(("#", "!")) and len(content) > 1 else content
    m = _PARAM_NAME.match(body)
    if m is None:
        return None
    rest = body[m.end():]
    if rest.startswith("["):
        close = rest.find("]")
        if close < 0 or not _SAFE_SUBSCRIPT.fullmatch(rest[1:close]):
            return "an array subscript is arithmetic on variable text, which can run commands"
        rest = rest[close + 1:]
    if rest.startswith(":") and rest[1:2] not in ("-", "=", "+", "?") and _arith_reads_variables(rest[1:]):
        return "a substring offset is arithmetic on variable text, which can run commands"
    return None


_NUMERIC_LITERALS = re.compile(r"0[xX][0-9A-Fa-f]+|[0-9]+#[0-9A-Za-z@_]+|\$[#?$!0-9-]")


def _arith_reads_variables(text: str) -> bool:
    """Does this arithmetic text name a variable (bare or with $)? Literal numbers and `$#`/`$?` do not."""
    return bool(re.search(r"[A-Za-z_]", _NUMERIC_LITERALS.sub("0", text)))


def _basename(text: str) -> str:
    name = text.rsplit("/", 1)[-1]
    m = _VERSIONED.fullmatch(name)
    if m:
        return m.group(1)
    if name.startswith("mkfs."):
        return "mkfs"
    return name


def _version_query(program: str, name: str, args: Sequence[str]) -> bool:
    """Do these arguments only ask for a version or usage text (`python --version`, `node -v`)? Never
    for a program named by a path (`./configure --help` runs the project's script) or one that loads
    the project's code or configuration first."""
    if "/" in program or name in _PROJECT_LOADERS:
        return False
    short = _SHORT_HELP_FLAGS.get(name)
    if short is None:
        short = frozenset() if name in _SHELLS or name in _INTERPRETERS or name in _DESTRUCTIVE else \
            _DEFAULT_SHORT_HELP
    return all(a in _LONG_HELP_FLAGS or a in short for a in args)


def _wrapped_command(texts: Sequence[str], i: int, end: int, wrapper: _Wrapper) -> tuple[int, str | None]:
    """Where the command run by the wrapper at `i` starts: (index, None), or (index of the option, "stop"
    or "split") when the wrapper runs nothing or runs a command line given as one word."""
    j = i + 1
    remaining = wrapper.positionals
    while j < end:
        a = texts[j]
        if a == "--":
            j += 1
            break
        if a in wrapper.stop_opts:
            return j, "stop"
        if a in wrapper.split_opts or any(a.startswith(o + "=") for o in wrapper.split_opts if o.startswith("--")):
            return j, "split"
        if a in wrapper.flags:
            j += 1
            continue
        if a.startswith("-") and len(a) > 1:
            j += 2 if a in wrapper.value_opts else 1
            continue
        if wrapper.assignments and _ASSIGN.match(a):
            j += 1
            continue
        if remaining:
            remaining -= 1
            j += 1
            continue
        break
    return j, None


def _real_name(texts: Sequence[str]) -> str | None:
    """The program a simple command finally runs, looking through wrappers (`sudo timeout 5 curl`)."""
    i = 0
    while i < len(texts):
        name = _basename(texts[i])
        wrapper = _WRAPPERS.get(name)
        if wrapper is None:
            return name
        i, special = _wrapped_command(texts, i, len(texts), wrapper)
        if special:
            return None
    return None


def unwrap(argv: Sequence[str]) -> tuple[str, ...]:
    """The command a simple command finally runs, for matching exec-policy rules:
    `nohup env X=1 timeout 5 /usr/bin/git push` → ("git", "push"). A wrapper that runs
    nothing or a whole command line of its own (`command -v`, `env -S`) is kept as written."""
    i = 0
    while i < len(argv) and _ASSIGN.match(argv[i]):
        i += 1
    while i < len(argv):
        wrapper = _WRAPPERS.get(_basename(argv[i]))
        if wrapper is None:
            break
        i, special = _wrapped_command(argv, i, len(argv), wrapper)
        if special:
            return tuple(argv)
    rest = tuple(argv[i:])
    return (_basename(rest[0]), *rest[1:]) if rest else tuple(argv)


def _downloads(script: _Script) -> bool:
    return any(_node_downloads(el) for pl in script.pipelines for el in pl.elements)


def _node_downloads(node: _Node | None) -> bool:
    """Does this part of the tree fetch something from the network (so its output is untrusted code)?"""
    if isinstance(node, _Simple):
        if _real_name([w.text for w in node.words]) in _DOWNLOADERS:
            return True
        words = chain(node.assigns, node.words, (r.target for r in node.redirs if r.target is not None))
        bodies = chain.from_iterable(r.body_subs or () for r in node.redirs)
        return any(_downloads(s) for s in chain(bodies, (s for w in words for s in w.subs)))
    if isinstance(node, _Group):
        return any(_node_downloads(el) for pl in node.body for el in pl.elements)
    if isinstance(node, _FuncDef):
        return _node_downloads(node.body)
    return False


def _self_calls(node: _Node | None, name: str, background: bool = False) -> tuple[int, bool]:
    """How often `name` is called inside `node`, and whether any call is backgrounded."""
    if isinstance(node, _Simple):
        hit = not node.keyword and bool(node.words) and node.words[0].text == name
        return int(hit), hit and background
    if isinstance(node, _Group):
        total, bg = 0, False
        for pl in node.body:
            for el in pl.elements:
                count, b = _self_calls(el, name, background or pl.background)
                total, bg = total + count, bg or b
        return total, bg
    return 0, False


def _literal_output(node: _Node) -> tuple[str, list[_Script]] | None:
    """The text a plain `echo '…'`, `printf '…'` or `cat <<EOF` prints, with the substitutions
    already expanded into it; None when the output cannot be known."""
    if not isinstance(node, _Simple) or node.keyword or not node.words:
        return None
    if node.words[0].text == "cat" and len(node.words) == 1:
        bodies = [r for r in node.redirs if r.op in ("<<", "<<-", "<<<")]
        if len(bodies) == 1:
            r = bodies[0]
            if r.op == "<<<":
                return (r.target.text, r.target.subs) if r.target else None
            return (r.body, r.body_subs or []) if r.body is not None else None
        return None
    if node.words[0].text not in ("echo", "printf") or any(w.subs for w in node.words):
        return None
    args = [w.text for w in node.words[1:]]
    if node.words[0].text == "echo":
        while args and re.fullmatch(r"-[neE]+", args[0]):
            args.pop(0)
    return " ".join(args).replace("\\n", "\n"), []


def _parse_opts(args: Sequence[str], short_values: str = "", long_values: Iterable[str] = ()
                ) -> tuple[set[str], list[int]]:
    """Split getopt-style arguments into option names ('-r', '--force'; clusters split, '--x=y' as
    '--x') and the indices of the operands."""
    long_values = frozenset(long_values)
    flags: set[str] = set()
    operands: list[int] = []
    k, n = 0, len(args)
    while k < n:
        a = args[k]
        if a == "--":
            operands.extend(range(k + 1, n))
            break
        if a.startswith("--"):
            name, eq, _ = a.partition("=")
            flags.add(name)
            k += 2 if not eq and name in long_values else 1
            continue
        if a.startswith("-") and len(a) > 1:
            for m, ch in enumerate(a[1:], 1):
                flags.add("-" + ch)
                if ch in short_values:
                    if m == len(a) - 1:
                        k += 1
                    break
            k += 1
            continue
        operands.append(k)
        k += 1
    return flags, operands


def _cluster(args: Sequence[str], letters: str, default: str) -> str:
    """The option as written that carries one of `letters` (for reasons: 'rm -rf', not 'rm -r')."""
    for a in args:
        if a.startswith("-") and not a.startswith("--") and any(ch in a[1:] for ch in letters):
            return a
    return default


_BLOCK_DEVICE = re.compile(r"/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|rdisk\d|md\d|dm-\d|"
                           r"loop\d|mapper/|mem$|kmem$|port$)")
_DISCARD_TARGETS = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty")
_HARMLESS_DEVICES = _DISCARD_TARGETS + ("/dev/stdin", "/dev/zero", "/dev/random", "/dev/urandom")
_WRITE_REDIRS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})


def _is_device(path: str, devices: tuple[str, ...]) -> bool:
    return path in devices or path.startswith("/dev/fd/")


@lru_cache(maxsize=8)
def _temp_dirs(gettempdir: str) -> tuple[str, ...]:
    """The system temp dir, and /tmp on POSIX (macOS's gettempdir() is elsewhere, yet /tmp is scratch too)."""
    dirs = {os.path.realpath(gettempdir)}
    if os.name == "posix":
        dirs.add(os.path.realpath("/tmp"))
    return tuple(sorted(dirs))


# -- analysis ----------------------------------------------------------------------------------


class _Call:
    """One simple command being classified: its words, redirections and what feeds its stdin."""

    __slots__ = ("words", "texts", "redirs", "upstream", "nonpath", "extra")

    def __init__(self, words: list[_Word], redirs: list[_Redir], upstream: list[_Node] | None) -> None:
        self.words = words
        self.texts = [w.text for w in words]
        self.redirs = redirs
        self.upstream = upstream
        self.nonpath: set[int] = set()  # indices not checked as paths (command names, scripts)
        self.extra = False  # more arguments are appended when it runs (xargs)

    def option_view(self, start: int, end: int) -> list[str | None]:
        """The arguments as an option allow-list sees them: None where the text is only known when the
        command runs (an expansion, a glob that a file named `-o` would match, xargs' input)."""
        view: list[str | None] = [None if _unknowable(w) else w.text for w in self.words[start:end]]
        return view + [None] if self.extra else view


def _unknowable(word: _Word) -> bool:
    return word.path_text is None or (word.glob and word.text[:1] in ("*", "?", "["))


def _name_risk(text: str, dangerous: frozenset[str]) -> str | None:
    """Why setting the variable named `text` (from input, or exported) may run commands: an array
    subscript bash evaluates as arithmetic, or a name in `dangerous`."""
    base, bracket, rest = text.partition("[")
    if bracket and not _SAFE_SUBSCRIPT.fullmatch(rest[:-1] if rest.endswith("]") else rest):
        return f"the array subscript in '{text}' is arithmetic on text, which can run commands"
    if base in dangerous or (base.startswith("GIT_") and base not in _GIT_SAFE_VARS) or (
            dangerous and base.upper().startswith(_CONFIG_VAR_PREFIXES)):
        return f"it sets {base}, which changes what runs"
    return None


Handler = Callable[["_Analyzer", _Call, int, int, str], None]


class _Analyzer:
    """Walks the parse tree, classifying simple commands and collecting the findings."""

    def __init__(self, root: str, cwd: str, home: str | None, depth: int = 0) -> None:
        self.root = root
        self.root_prefix = root if root.endswith(os.sep) else root + os.sep
        self.home = home
        self._real: dict[str, str | None] = {}  # realpath memo for this one analysis
        self.home_real = self._realpath(home) if home else None
        self.tmp_dirs = _temp_dirs(tempfile.gettempdir())
        self.effect = READ_ONLY
        self.call_effect = READ_ONLY  # effect found for the simple command being analysed
        self.reasons: list[str] = []
        self.commands: list[tuple[str, ...]] = []
        self.outside: list[str] = []
        self.errors: list[str] = []
        self.functions: set[str] = set()
        self.downloaded: set[str] = set()  # files written by a download earlier in the line
        self.known: frozenset[str] = frozenset()  # substitutions already analysed (see run_script)
        self.depth = depth
        self.cwd = cwd
        self.cwd_outside = False
        self.set_cwd(cwd)

    # findings

    def add(self, effect: str, reason: str = "") -> None:
        rank = _RANK[effect]
        if rank > _RANK[self.effect]:
            self.effect = effect
        if rank > _RANK[self.call_effect]:
            self.call_effect = effect
        if reason and effect != READ_ONLY and reason not in self.reasons:
            self.reasons.append(reason)

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _TooDeep

    def note_constructs(self, notes: Iterable[str]) -> None:
        """Constructs the parser saw but does not follow (bash may run commands through them)."""
        for note in notes:
            self.add(LOCAL_MUTATION, f"{note}, so the command counts as a change")

    # paths

    def inside(self, real: str) -> bool:
        return real == self.root or real.startswith(self.root_prefix)

    def in_temp(self, real: str) -> bool:
        """Under the temp dir — but an ancestor of the project is never scratch space."""
        if self.root == real or self.root.startswith(real.rstrip("/") + "/"):
            return False
        return any(real == t or real.startswith(t.rstrip("/") + "/") for t in self.tmp_dirs)

    def set_cwd(self, real: str) -> None:
        self.cwd = real
        self.cwd_outside = not self.inside(real) and not self.in_temp(real)

    def resolve_text(self, path: str, tilde: bool) -> str | None:
        """The real path `path` names from the current directory; None when it cannot be known."""
        if "\x00" in path:
            return None
        if tilde and path.startswith("~"):
            head, sep, rest = path.partition("/")
            if head != "~" or not self.home:
                return None
            path = self.home + sep + rest
        return self._realpath(path if os.path.isabs(path) else os.path.join(self.cwd, path))

    def _realpath(self, path: str) -> str | None:
        if path not in self._real:
            try:
                self._real[path] = os.path.realpath(path)
            except (ValueError, OSError):  # NUL bytes, unencodable text
                self._real[path] = None
        return self._real[path]

    def resolve(self, word: _Word) -> str | None:
        return None if word.path_text is None else self.resolve_text(word.path_text, word.tilde)

    def check_path(self, word: _Word, force: bool = False) -> None:
        """Report `word` if it names a path outside the project (redirect and cd targets: `force`)."""
        text, path, tilde = word.text, word.path_text, word.tilde
        if path is None or not text or text == "-" or "\x00" in text:
            return
        if not force:
            if text.startswith("-") or _ASSIGN.match(text):  # --opt=VALUE, if=VALUE: only the value
                name, eq, value = text.partition("=")
                if not eq or (text.startswith("-") and not name.startswith("--")):
                    return
                text, path, tilde = value, path.partition("=")[2], value.startswith("~")
                if not text:
                    return
            looks = (text.startswith(("/", "~", "./", "../")) or "/" in text or text in ("..", "~"))
            if "://" in text or not (looks or self.cwd_outside):
                return
        if tilde and path.startswith("~") and path != "~" and not path.startswith("~/"):
            self.note_outside(text)  # ~user: another account's home
            return
        if path.startswith("/") and _is_device(os.path.normpath(path), _HARMLESS_DEVICES):
            return
        real = self.resolve_text(path, tilde)
        if real is None or self.inside(real) or self.in_temp(real) or _is_device(real, _HARMLESS_DEVICES):
            return
        self.note_outside(text)

    def note_outside(self, text: str) -> None:
        if text not in self.outside:
            self.outside.append(text)

    def critical(self, word: _Word) -> str | None:
        """A description of `word` when removing or re-permissioning it would be a disaster: `/`, a
        top-level directory, the home directory or an ancestor of it or of the project, or `*` there."""
        if word.path_text is None:
            return None
        head, sep, last = word.path_text.rpartition("/")
        if word.glob and last in ("*", ".*", "*.*", "**", ".[!.]*"):
            shown = word.text.rpartition("/")[0] or "/" if sep else "."
            directory = self.resolve_text(head or "/" if sep else ".", word.tilde)
            if directory and (directory == self.root or self._critical_dir(directory)):
                return f"everything in '{shown}'"
            return None
        real = self.resolve(word)
        if real and self._critical_dir(real):
            return f"'{word.text}'"
        return None

    def _critical_dir(self, real: str) -> bool:
        if real == "/" or real.count("/") == 1:
            return True
        prefix = real + "/"
        if self.home_real and (real == self.home_real or self.home_real.startswith(prefix)):
            return True
        return self.root.startswith(prefix)

    # walking the tree

    def script(self, pipelines: list[_Pipeline], upstream: list[_Node] | None = None) -> None:
        for pipeline in pipelines:
            for k, element in enumerate(pipeline.elements):
                self.node(element, pipeline.elements[:k] if k else upstream)

    def node(self, node: _Node | None, upstream: list[_Node] | None) -> None:
        if isinstance(node, _Simple):
            self.simple(node, upstream)
        elif isinstance(node, _Group):
            self._enter()
            saved = self.cwd
            self.script(node.body, upstream)
            if node.subshell:
                self.set_cwd(saved)
            self.depth -= 1
            self.redirects(node.redirs)
        elif isinstance(node, _FuncDef):
            self.functions.add(node.name)
            count, background = _self_calls(node.body, node.name)
            if count >= 2 or background:
                self.add(DESTRUCTIVE, f"function '{node.name}' spawns copies of itself (a fork bomb)")
            saved = self.cwd
            self._enter()
            self.node(node.body, None)
            self.depth -= 1
            self.set_cwd(saved)

    def subs(self, scripts: Iterable[_Script] | None) -> None:
        """Analyse command substitutions (they run, whatever the outer command does)."""
        for script in scripts or ():
            if script.src in self.known:
                continue
            self._enter()
            saved = self.cwd
            self.script(script.pipelines)
            self.set_cwd(saved)
            self.depth -= 1

    def simple(self, node: _Simple, upstream: list[_Node] | None) -> None:
        saved_effect, self.call_effect = self.call_effect, READ_ONLY
        if node.words and not node.keyword:
            self.commands.append(tuple(w.text for w in node.words))
        for word in chain(node.assigns, node.words):
            self.subs(word.subs)
        for r in node.redirs:
            self.subs(r.target.subs if r.target else None)
            self.subs(r.body_subs)
        if node.keyword:
            self.keyword(node.words)
        else:
            call = _Call(node.words, node.redirs, upstream)
            for word in node.assigns:
                self.assignment(word)
            if node.words:
                self.classify(call, 0, len(node.words))
            own = self.call_effect
            for index, word in enumerate(node.words):
                if index in call.nonpath:
                    continue
                self.check_path(word)
                if own != READ_ONLY and word.path_text and _BLOCK_DEVICE.match(os.path.normpath(word.path_text)):
                    self.add(DESTRUCTIVE, f"{call.texts[0]} writes to the disk device '{word.text}'")
        self.redirects(node.redirs, node)
        self.call_effect = strictest(saved_effect, self.call_effect)

    def keyword(self, words: list[_Word]) -> None:
        """`[[ … ]]` and `for NAME in`: bash evaluates `-eq` operands and `-v` names as arithmetic, and a
        loop variable can be one that changes what runs (PATH)."""
        texts = [w.text for w in words]
        if texts[:1] == ["[["]:
            for k, text in enumerate(texts):
                if text in _ARITH_TESTS and not words[k].quoted:
                    operands = words[k - 1:k] + words[k + 1:k + 2]
                    if any(w.path_text is None or not re.fullmatch(r"-?[0-9]+", w.text) for w in operands):
                        self.add(LOCAL_MUTATION, f"[[ … {text} … ]] evaluates its operands as arithmetic, where "
                                                 "an array subscript in a variable's text runs commands")
                elif text == "-v" and k + 1 < len(words):
                    self.name_target("[[ -v", words[k + 1], frozenset())
        elif texts[:1] in (["for"], ["select"]) and len(words) > 1 and not texts[1].startswith("(("):
            self.name_target(texts[0], words[1], _RUN_VARS)

    def name_target(self, what: str, word: _Word, dangerous: frozenset[str]) -> None:
        """A word naming a variable that `what` sets or reads."""
        if word.path_text is None:
            self.add(LOCAL_MUTATION, f"{what} names a variable only known when it runs")
            return
        risk = _name_risk(word.text, dangerous)
        if risk:
            self.add(LOCAL_MUTATION, f"{what}: {risk}")

    def redirects(self, redirs: list[_Redir], node: _Simple | None = None) -> None:
        for r in redirs:
            target = r.target
            if target is None or r.op in ("<<", "<<-", "<<<", "<&"):
                continue
            if target.path_text and os.path.normpath(target.path_text).startswith(("/dev/tcp/", "/dev/udp/")):
                self.add(REMOTE_ACTION, f"the redirection to '{target.text}' opens a network connection")
                continue
            if r.op == ">&" and (target.text.isdigit() or target.text == "-"):
                continue  # 2>&1: duplicates a descriptor
            if target.raw.startswith(("<(", ">(")):
                continue  # process substitution, analysed with the substitutions
            self.check_path(target, force=True)
            if r.op not in _WRITE_REDIRS:
                continue
            path = os.path.normpath(target.path_text) if target.path_text else None
            if path and _is_device(path, _DISCARD_TARGETS):
                continue
            if path and _BLOCK_DEVICE.match(path):
                self.add(DESTRUCTIVE, f"output redirected to the disk device '{target.text}'")
                continue
            self.add(LOCAL_MUTATION, f"output redirected to file '{target.text}'")
            if node is not None and _real_name([w.text for w in node.words]) in _DOWNLOADERS:
                self.note_download(target)

    def note_download(self, word: _Word) -> None:
        """Remember a file a download writes: running it later in the line runs unreviewed code."""
        real = self.resolve(word)
        if real:
            self.downloaded.add(real)

    def was_downloaded(self, word: _Word) -> bool:
        return bool(self.downloaded) and self.resolve(word) in self.downloaded

    def assignment(self, word: _Word | str) -> None:
        """`NAME=value` before a command, after env/sudo, or in export: some names change what runs."""
        text = word if isinstance(word, str) else word.text
        name, _, value = text.partition("=")
        risk = _name_risk(name.rstrip("+"), frozenset())
        if risk:
            self.add(LOCAL_MUTATION, f"assignment: {risk}")
        name = name.rstrip("+").split("[", 1)[0]
        if name.startswith("GIT_") and name not in _GIT_SAFE_VARS and name not in _COMMAND_VARS:
            self.add(LOCAL_MUTATION, f"setting {name} changes which repository, settings or programs git uses")
        elif name.upper().startswith(_CONFIG_VAR_PREFIXES):
            self.add(LOCAL_MUTATION, f"setting {name} changes a tool's configuration, including programs it runs")
        elif name in _COMMAND_VARS or name.endswith(("PAGER", "EDITOR")):  # as strict as the command it names (PAGER=cat stays read-only)
            self.run_script(value, [word] if isinstance(word, _Word) else [])
        elif name in _CODE_VARS:
            self.add(LOCAL_MUTATION, f"setting {name} changes what code programs load")
        elif name == "PATH":
            for entry in value.split(":"):
                if entry.startswith("$"):
                    continue
                real = self.resolve_text(entry, entry.startswith("~")) if entry.startswith(("/", "~")) else None
                if not entry.startswith(("/", "~")) or (real and self.inside(real)):
                    self.add(LOCAL_MUTATION, f"PATH includes '{entry or '.'}', so project files may run as "
                                             "commands")
                    break

    def run_script(self, text: str, words: Iterable[_Word] = (), known: Iterable[_Script] = ()) -> None:
        """Parse and analyse a script given as a string (`sh -c`, `eval`, heredoc bodies …).

        Substitutions in the words the string came from were analysed already; re-parsing finds
        them again, so they are skipped (counted once in `commands`) — though a command name that
        comes from a download is still recognised, from the tree.
        """
        self._enter()
        saved_known = self.known
        self.known = saved_known.union(s.src for w in words for s in w.subs).union(s.src for s in known)
        try:
            errors: list[str] = []
            notes: list[str] = []
            tree = _Parser(text, self.home, self.depth, errors, notes).parse()
            for error in errors:
                message = f"in an embedded script: {error}"
                if message not in self.errors:
                    self.errors.append(message)
            self.script(tree)
            self.note_constructs(notes)
        finally:
            self.known = saved_known
            self.depth -= 1

    def side_analysis(self, text: str) -> tuple[str, tuple[str, ...]]:
        """Classify a script that runs elsewhere (ssh's remote command): effect only, no paths."""
        other = _Analyzer(self.root, self.root, self.home, self.depth + 1)
        notes: list[str] = []
        other.script(_Parser(text, self.home, self.depth + 1, other.errors, notes).parse())
        other.note_constructs(notes)
        return other.effect, tuple(other.reasons)

    def classify(self, call: _Call, i: int, end: int) -> None:
        """Classify the command whose name is word `i` (its arguments end before `end`)."""
        if i >= end:
            return
        word = call.words[i]
        call.nonpath.add(i)
        if word.subs:
            if any(_downloads(s) for s in word.subs):
                self.add(DESTRUCTIVE, "a downloaded text is run as a command")
            else:
                self.add(LOCAL_MUTATION, f"the command name '{word.text}' is computed when it runs")
            return
        if word.path_text is None:
            self.add(LOCAL_MUTATION, f"the command name '{word.text}' comes from a variable")
            return
        if "/" in word.text and self.was_downloaded(word):
            self.add(DESTRUCTIVE, f"'{word.text}' was just downloaded and is run")
            return
        name = _basename(word.text)
        if name in self.functions:
            return  # its body was analysed where it was defined
        args = call.texts[i + 1:end]
        wrapper = _WRAPPERS.get(name)
        if wrapper is not None:
            self.wrapper(call, i, end, name, wrapper)
            return
        if args and _version_query(word.text, name, args):
            return
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(self, call, i, end, name)
        elif name in _SUBCOMMANDS:
            _subcommand(self, call, i, end, name)
        elif name in _DESTRUCTIVE:
            self.add(DESTRUCTIVE, _DESTRUCTIVE[name])
        elif name in _REMOTE:
            self.add(REMOTE_ACTION, f"{name} {_REMOTE[name]}")
        elif name in _READ_ONLY:
            pass
        elif name in _MUTATING:
            self.add(LOCAL_MUTATION, _MUTATING[name])
        else:
            self.add(LOCAL_MUTATION, f"unknown command '{name or word.text}' may change files")

    def wrapper(self, call: _Call, i: int, end: int, name: str, wrapper: _Wrapper) -> None:
        if wrapper.effect != READ_ONLY:
            self.add(wrapper.effect, wrapper.reason)
        j, special = _wrapped_command(call.texts, i, end, wrapper)
        for k in range(i + 1, min(j, end)):
            if wrapper.assignments and _ASSIGN.match(call.texts[k]):
                call.nonpath.add(k)
                self.assignment(call.words[k])
        written = next((a for a in call.texts[i + 1:j] if a.partition("=")[0] in wrapper.write_opts), None)
        if written:
            self.add(LOCAL_MUTATION, f"{name} {written} writes a file")
        if special == "stop":
            self.add(wrapper.stop_effect, f"{name} {call.texts[j]} changes running processes")
        elif special == "split":  # env -S 'cmd args' more args
            option = call.texts[j]
            value_at = j if "=" in option else j + 1
            text = option.partition("=")[2] if "=" in option else (call.texts[j + 1] if j + 1 < end else "")
            call.nonpath.update(range(j, end))
            if "\\" in text or "$" in text:  # env's own escapes and ${VAR} are not shell syntax
                self.add(LOCAL_MUTATION, f"{name} -S expands escapes and variables of its own")
            self.run_script(" ".join([text, *call.texts[value_at + 1:end]]), call.words[j:end])
        elif j < end:
            if name == "xargs":
                call.extra = True
            self.classify(call, j, end)

    def stdin_code(self, call: _Call, name: str, shell: bool) -> None:
        """A shell or interpreter reading its program from stdin: judge what feeds it."""
        for r in call.redirs:
            if r.op in ("<<", "<<-") and r.body is not None:
                if shell:
                    self.run_script(r.body, known=r.body_subs or ())
                else:
                    self.add(LOCAL_MUTATION, f"{name} runs code from a heredoc")
                return
            if r.op == "<<<" and r.target is not None:
                if shell:
                    self.run_script(r.target.text, [r.target])
                else:
                    self.add(LOCAL_MUTATION, f"{name} runs code from a here-string")
                return
            if r.op == "<" and r.target is not None:
                self.script_file(name, r.target)
                return
        if call.upstream:
            if any(_node_downloads(el) for el in call.upstream):
                self.add(DESTRUCTIVE, f"downloaded code is piped into {name}")
                return
            literal = _literal_output(call.upstream[-1])
            if literal is not None and shell:
                self.run_script(literal[0], known=literal[1])
                return
            self.add(LOCAL_MUTATION, f"piped input runs as {name} code")
            return
        self.add(LOCAL_MUTATION, f"{name} runs commands from its input")

    def script_file(self, name: str, word: _Word) -> None:
        if any(_downloads(s) for s in word.subs):
            self.add(DESTRUCTIVE, f"{name} runs a downloaded script")
        elif self.was_downloaded(word):
            self.add(DESTRUCTIVE, f"{name} runs '{word.text}', which was just downloaded")
        else:
            self.add(LOCAL_MUTATION, f"{name} runs the script '{word.text}'")


# -- handlers for programs whose effect depends on their arguments ----------------------------


def _rm(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    args = call.texts[i + 1:end]
    flags, operands = _parse_opts(args)
    destructive = False
    if flags & {"-r", "-R", "--recursive"}:
        an.add(DESTRUCTIVE, f"rm {_cluster(args, 'rR', '--recursive')} removes files recursively")
        destructive = True
    if "--no-preserve-root" in flags:
        an.add(DESTRUCTIVE, "rm --no-preserve-root may remove the whole filesystem")
        destructive = True
    for k in operands:
        what = an.critical(call.words[i + 1 + k])
        if what:
            an.add(DESTRUCTIVE, f"rm removes {what}")
            destructive = True
    if not destructive:
        an.add(LOCAL_MUTATION, "rm deletes files")


def _chmod(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    args = call.texts[i + 1:end]
    flags, operands = _parse_opts(args, long_values={"--reference", "--from"})
    if flags & {"-R", "--recursive"}:
        for k in operands:
            what = an.critical(call.words[i + 1 + k])
            if what:
                an.add(DESTRUCTIVE, f"{name} -R changes {what}")
                return
    an.add(LOCAL_MUTATION, _MUTATING[name])


_FIND_VALUES = _fs("-name -iname -path -ipath -wholename -iwholename -regex -iregex -regextype -type -xtype -size "
                   "-newer -anewer -cnewer -mtime -mmin -atime -amin -ctime -cmin -perm -user -group -uid -gid "
                   "-links -inum -samefile -lname -ilname -maxdepth -mindepth -used -fstype -context -printf "
                   "-files0-from")
_FIND_FLAGS = _fs("-empty -nouser -nogroup -readable -writable -executable -depth -d -mount -xdev -follow -noleaf "
                  "-ignore_readdir_race -noignore_readdir_race -daystart -print -print0 -ls -prune -quit -true "
                  "-false -not -a -and -o -or -help --help -version --version -warn -nowarn")
_FIND_ACTIONS = _fs("-exec -execdir -ok -okdir -delete -fprint -fprint0 -fprintf -fls")  # judged one by one


def _find(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    args = call.texts[i + 1:end]
    n = len(args)
    k = 0
    while k < n and (args[k] in ("-H", "-L", "-P") or args[k].startswith("-O") or args[k] == "-D"):
        k += 2 if args[k] == "-D" else 1
    starts = []
    view = call.option_view(i + 1, end)
    if call.extra or None in view[:k]:
        an.add(LOCAL_MUTATION, "a find argument is only known when it runs (it could be -delete)")
    while k < n and not args[k].startswith("-") and args[k] not in ("(", "!", ")", ","):
        if view[k] is None:
            an.add(LOCAL_MUTATION, "a find argument is only known when it runs (it could be -delete)")
        starts.append(i + 1 + k)
        k += 1
    while k < n:
        a = args[k]
        if view[k] is None:
            an.add(LOCAL_MUTATION, "a find argument is only known when it runs (it could be -delete)")
        elif a in _FIND_VALUES or re.fullmatch(r"-newer[aBcmt][aBcmt]", a):
            k += 2
            continue
        elif a.startswith("-") and a not in _FIND_FLAGS and a not in _FIND_ACTIONS:
            an.add(LOCAL_MUTATION, f"find {a} is not known to leave it read-only")
        if a in ("-exec", "-execdir", "-ok", "-okdir"):
            j = k + 1
            while j < n and not (args[j] == ";" or (args[j] == "+" and args[j - 1] == "{}")):
                j += 1
            an.add(LOCAL_MUTATION, f"find {a} runs a command on each file")
            an.classify(call, i + 1 + k + 1, i + 1 + j)
            k = j + 1
            continue
        if a == "-delete":
            what = next((w for w in (an.critical(call.words[s]) for s in starts) if w), None)
            an.add(DESTRUCTIVE, f"find -delete removes files in {what}" if what else
                   "find -delete deletes every file its expression matches")
        elif a in ("-fprint", "-fprint0", "-fprintf", "-fls"):
            an.add(LOCAL_MUTATION, f"find {a} writes to a file")
        k += 1


def _fd(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    for k in range(i + 1, end):
        if call.texts[k] in ("-x", "--exec", "-X", "--exec-batch"):
            an.add(LOCAL_MUTATION, f"{name} {call.texts[k]} runs a command on each file")
            stop = next((j for j in range(k + 1, end) if call.texts[j] == ";"), end)
            an.classify(call, k + 1, stop)
            return


def _sed(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    args = call.texts[i + 1:end]
    view = call.option_view(i + 1, end)
    if None in view:
        an.add(LOCAL_MUTATION, f"{name}'s script or options are only known when it runs")
    else:
        unsafe = first_unsafe(SED, view)  # -i and -f are allowed there: they are judged below
        if unsafe:
            an.add(LOCAL_MUTATION, f"{name}: {unsafe} is not known to leave it read-only")
    scripts: list[str] = []
    in_place = script_file = False
    k = 0
    while k < len(args):
        a = args[k]
        if a == "--":
            break
        if a.startswith("--"):
            opt, eq, value = a.partition("=")
            if opt == "--in-place":
                in_place = True
            elif opt == "--expression":
                scripts.append(value if eq else (args[k + 1] if k + 1 < len(args) else ""))
                call.nonpath.add(i + 1 + k + (0 if eq else 1))
                k += 0 if eq else 1
            elif opt == "--file":
                script_file = True
                k += 0 if eq else 1
            elif opt in ("--line-length",) and not eq:
                k += 1
        elif a.startswith("-") and len(a) > 1:
            for m, ch in enumerate(a[1:], 1):
                if ch == "i":
                    in_place = True
                    break  # the rest is a backup suffix
                if ch in "efl":
                    rest = a[m + 1:]
                    if not rest:
                        k += 1
                        rest = args[k] if k < len(args) else ""
                        call.nonpath.add(i + 1 + k)
                    if ch == "e":
                        scripts.append(rest)
                    elif ch == "f":
                        script_file = True
                    break
        elif not scripts and not script_file:
            scripts.append(a)
            call.nonpath.add(i + 1 + k)
        k += 1
    if in_place:
        an.add(LOCAL_MUTATION, "sed -i edits files in place")
    if script_file:
        an.add(LOCAL_MUTATION, "sed -f runs a script file that may write files")
    if any(_sed_program_writes(s) for s in scripts):
        an.add(LOCAL_MUTATION, "the sed script writes files or runs commands")


def _skip_delimited(s: str, i: int, delim: str) -> int:
    n = len(s)
    while i < n:
        if s[i] == "\\":
            i += 2
            continue
        if s[i] == delim:
            return i + 1
        i += 1
    return n


def _sed_program_writes(script: str) -> bool:
    """Can this sed program write files or run commands (`w`, `W`, `e`, `s///w`, `s///e`)?"""
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c in " \t\n;{}!" or c.isdigit() or c in "$,~+":
            i += 1
        elif c == "/" or c == "\\":
            if c == "\\":
                if i + 1 >= n:
                    break
                delim, i = script[i + 1], i + 2
            else:
                delim, i = "/", i + 1
            i = _skip_delimited(script, i, delim)
            while i < n and script[i] in "IM":
                i += 1
        elif c in "wWe":
            return True
        elif c in "sy":
            if i + 1 >= n or script[i + 1] in "\n\\":
                return False
            delim = script[i + 1]
            j = _skip_delimited(script, _skip_delimited(script, i + 2, delim), delim)
            if c == "s":
                while j < n and (script[j].isdigit() or script[j] in "gpiImMe"):
                    if script[j] == "e":
                        return True
                    j += 1
                if j < n and script[j] == "w":
                    return True
            i = j
        elif c in "aicrR#:":  # text, file name or label to the end of the line
            j = script.find("\n", i)
            i = n if j < 0 else j
        elif c in "btT":
            j = i + 1
            while j < n and script[j] not in ";\n":
                j += 1
            i = j
        else:
            i += 1
    return False


_AWK_UNSAFE = re.compile(r"\bsystem\s*\(|\|\s*&|\|\s*getline|\bprintf?\b[^;{}\n]*?[>|]")


def _awk(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    args = call.texts[i + 1:end]
    view = call.option_view(i + 1, end)
    if None in view:
        an.add(LOCAL_MUTATION, f"the {name} program or options are only known when it runs")
    else:
        unsafe = first_unsafe(AWK, view)  # -f is allowed there: it is judged below
        if unsafe:
            an.add(LOCAL_MUTATION, f"{name}: {unsafe} is not known to leave it read-only")
    programs: list[str] = []
    k = 0
    while k < len(args):
        a = args[k]
        if a == "--":
            k += 1
            break
        if not a.startswith("-") or a == "-":
            break
        value = args[k + 1] if k + 1 < len(args) else ""
        opt, eq, attached = a.partition("=")
        if opt in ("-f", "--file") or a.startswith("-f"):
            an.add(LOCAL_MUTATION, f"{name} -f runs a program file that may write files")
            return
        if opt in ("-i", "--include") and (attached or a[2:] or value) in ("inplace", "inplace.awk"):
            an.add(LOCAL_MUTATION, f"{name} -i inplace edits files in place")
        if opt in ("-e", "--source"):
            programs.append(attached if eq else value)
        if len(a) == 2 and a[1] in "FvfieEWl" or opt in ("--field-separator", "--assign", "--source",
                                                         "--include", "--load"):
            if not eq:
                k += 1
                call.nonpath.add(i + 1 + k)
        k += 1
    if not programs and k < len(args):
        programs.append(args[k])
        call.nonpath.add(i + 1 + k)
    if any(_AWK_UNSAFE.search(p) for p in programs):
        an.add(LOCAL_MUTATION, f"the {name} program writes files or runs commands")


def _allow_listed(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    """A program that only reads with the options in its allow-list (readonly_options.TABLES)."""
    unsafe = first_unsafe(TABLES[name], call.option_view(i + 1, end))
    if unsafe:
        an.add(LOCAL_MUTATION, f"{name}: {unsafe} is not known to leave it read-only")
    args = call.texts[i + 1:end]
    if name == "date" and any(not args[k].startswith("+")
                              for k in _parse_opts(args, "dfr", {"--date", "--file", "--reference"})[1]):
        an.add(LOCAL_MUTATION, "date with a time operand sets the system clock")
    elif name == "hostname" and _parse_opts(args)[1]:
        an.add(LOCAL_MUTATION, "hostname with an argument renames the machine")
    elif name in ("bat", "batcat") and args[:1] == ["cache"]:
        an.add(LOCAL_MUTATION, f"{name} cache rebuilds its cache files")


def _output_operand(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    flags, operands = _parse_opts(call.texts[i + 1:end], "fsw" if name == "uniq" else "cgnlos")
    if len(operands) >= 2 and call.texts[i + 1 + operands[1]] != "-":
        an.add(LOCAL_MUTATION, f"{name} writes its output to '{call.texts[i + 1 + operands[1]]}'")


def _tee(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    _, operands = _parse_opts(call.texts[i + 1:end], long_values={"--output-error"})
    for k in operands:
        word = call.words[i + 1 + k]
        path = os.path.normpath(word.path_text) if word.path_text else None
        if path and _is_device(path, _DISCARD_TARGETS):
            continue
        if path and _BLOCK_DEVICE.match(path):
            an.add(DESTRUCTIVE, f"tee writes to the disk device '{word.text}'")
        else:
            an.add(LOCAL_MUTATION, f"tee writes to '{word.text}'")


def _tar(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    """Listing an archive reads; every other mode writes. Listing stays read-only only with options
    that cannot run programs (`--to-command`, `-I PROG`, `--checkpoint-action=exec=…`, `-f host:file`)."""
    view = call.option_view(i + 1, end)
    if view and view[0] is not None and not view[0].startswith("-"):
        view[0] = "-" + view[0]  # the old style: `tar tvf x.tar`
    shorts = "".join(a[1:] for a in view if a and a.startswith("-") and not a.startswith("--"))
    if not ("t" in shorts or "--list" in view):
        an.add(LOCAL_MUTATION, f"{name} writes files")
        return
    unsafe = first_unsafe(TAR_LISTING, view)
    if unsafe:
        an.add(LOCAL_MUTATION, f"{name}: {unsafe} is not known to leave a listing read-only")
    elif "--force-local" not in view and any(a and re.match(r"[^/.-][^/]*:", a) for a in view):
        an.add(LOCAL_MUTATION, f"{name} with host:file runs a remote shell")


def _unzip(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    flags, _ = _parse_opts(call.texts[i + 1:end], "dx")
    if not flags & {"-l", "-t", "-v", "-Z", "-z"}:
        an.add(LOCAL_MUTATION, f"{name} extracts files")


def _journalctl(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    for a in call.texts[i + 1:end]:
        option = a.partition("=")[0]
        if option in ("--vacuum-size", "--vacuum-time", "--vacuum-files", "--rotate", "--flush"):
            an.add(LOCAL_MUTATION, f"journalctl {option} deletes or moves logs")
            return


def _download(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    """curl, wget …: remote; the files they write are remembered (running one later is destructive)."""
    an.add(REMOTE_ACTION, f"{name} {_REMOTE[name]}")
    for k in range(i + 1, end):
        option, eq, value = call.texts[k].partition("=")
        if option in ("-o", "--output", "-O", "--output-document"):
            if eq:
                an.note_download(_Word.literal(value))
            elif k + 1 < end:
                an.note_download(call.words[k + 1])


def _kill(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    args = call.texts[i + 1:end]
    if args and args[0] in ("-l", "-L"):
        return
    k = 2 if args and args[0] in ("-s", "-n") else 1 if args and args[0].startswith("-") and args[0] != "--" else 0
    if args[k:k + 1] == ["--"]:
        k += 1
    if "-1" in args[k:]:
        an.add(DESTRUCTIVE, "kill -1 signals every process you can reach")
    else:
        an.add(LOCAL_MUTATION, _MUTATING["kill"])


def _crontab(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    flags, _ = _parse_opts(call.texts[i + 1:end], "u")
    if "-r" in flags:
        an.add(DESTRUCTIVE, "crontab -r removes every scheduled job")
    elif "-l" not in flags:
        an.add(LOCAL_MUTATION, "crontab replaces scheduled jobs")


def _cd(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    """cd changes where later relative paths in the line resolve from."""
    k = i + 1
    while k < end and call.texts[k].startswith("-") and call.texts[k] != "-":
        k += 1
        if call.texts[k - 1] == "--":
            break
    if k >= end:
        if name == "cd" and an.home_real:
            an.set_cwd(an.home_real)
        return
    word = call.words[k]
    call.nonpath.add(k)
    if word.text == "-" or word.glob:
        return
    an.check_path(word, force=True)
    real = an.resolve(word)
    if real is not None:
        an.set_cwd(real)


def _declare(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    """declare/typeset/local/export/readonly: assignments are judged by name and value; -n (a name
    reference), -i (arithmetic on every assignment) and exporting functions are changes."""
    flags: set[str] = set()
    for k in range(i + 1, end):
        text = call.texts[k]
        call.nonpath.add(k)
        if text[:1] in ("-", "+") and len(text) > 1 and text != "--":
            flags.update(text[1:])
        elif _ASSIGN.match(text):
            an.assignment(call.words[k])
        elif text != "--":
            an.name_target(name, call.words[k], _COMMAND_VARS | _CODE_VARS)
    if "n" in flags:
        an.add(LOCAL_MUTATION, f"{name} -n makes a name reference, which expands a name from a variable's text")
    if "i" in flags:
        an.add(LOCAL_MUTATION, f"{name} -i evaluates every value as arithmetic, where an array subscript runs commands")
    if "f" in flags and (name == "export" or "x" in flags):
        an.add(LOCAL_MUTATION, f"{name} -f exports functions to every child shell")


@dataclass(frozen=True)
class _NameBuiltin:
    """A builtin that sets variables named in its arguments (`read NAME`, `printf -v NAME`)."""

    values: str  # option letters that take a value
    name_opts: str  # option letters whose value is a variable name
    operands: bool  # are its operands variable names?
    unsafe: str = ""  # option letters that run code
    first_operand: int = 0  # operands before this index are not names (getopts OPTSTRING)


_NAME_BUILTINS: dict[str, _NameBuiltin] = {
    "read": _NameBuiltin("adinNptu", "a", True),
    "printf": _NameBuiltin("v", "v", False),
    "mapfile": _NameBuiltin("dnOsuCc", "", True, unsafe="C"),
    "readarray": _NameBuiltin("dnOsuCc", "", True, unsafe="C"),
    "getopts": _NameBuiltin("", "", True, first_operand=1),
    "wait": _NameBuiltin("p", "p", False),
    "unset": _NameBuiltin("", "", True),
}


def _name_builtin(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    spec = _NAME_BUILTINS[name]
    names: list[_Word] = []
    operands = 0
    k = i + 1
    while k < end:
        text = call.texts[k]
        if text == "--":
            k += 1
            break
        if not text.startswith("-") or len(text) == 1 or (name == "printf" and not text.startswith("-v")):
            break
        for m, ch in enumerate(text[1:], 1):
            if ch in spec.unsafe:
                an.add(LOCAL_MUTATION, f"{name} -{ch} runs a command")
            if ch in spec.values:
                value_at, attached = (k, text[m + 1:]) if m < len(text) - 1 else (k + 1, None)
                if ch in spec.name_opts and value_at < end:
                    names.append(_Word.literal(attached) if attached is not None else call.words[value_at])
                k = value_at
                break
        k += 1
    if spec.operands:
        for k in range(k, end):
            if operands >= spec.first_operand:
                names.append(call.words[k])
            operands += 1
    for word in names:
        an.name_target(name, word, _RUN_VARS if name != "unset" else frozenset())


def _test(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    """`test -v NAME` / `[ -v NAME ]` evaluates an array subscript in NAME."""
    for k in range(i + 1, end - 1):
        if call.texts[k] == "-v":
            an.name_target(f"{name} -v", call.words[k + 1], frozenset())


def _let(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    if any(w.path_text is None or _arith_reads_variables(w.text) for w in call.words[i + 1:end]):
        an.add(LOCAL_MUTATION, f"let: {_ARITH_NOTE}")


# `set` options that only make a script stricter or chattier; others change how later commands are
# parsed or run (-k: assignments anywhere; -T: traps inherited; posix, vi …).
_SET_FLAGS = frozenset("aeuxvfCnbhmBHPE")
_SET_NAMES = _fs("allexport errexit nounset xtrace verbose noglob noclobber noexec pipefail notify hashall monitor "
                 "braceexpand histexpand physical errtrace")


def _set(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    args = call.texts[i + 1:end]
    k = 0
    while k < len(args):
        a = args[k]
        if a in ("--", "-") or a[:1] not in ("-", "+"):
            return  # the rest sets the positional parameters
        letters = set(a[1:])
        if not letters - {"o"} <= _SET_FLAGS:
            an.add(LOCAL_MUTATION, f"set {a} changes how bash runs later commands")
        if "o" in letters:  # `set -o NAME`, `set -euo pipefail`
            if k + 1 < len(args) and args[k + 1] not in _SET_NAMES:
                an.add(LOCAL_MUTATION, f"set {a} {args[k + 1]} changes how bash runs later commands")
            k += 1
        k += 1


def _shopt(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    flags, _ = _parse_opts(call.texts[i + 1:end])
    if flags & {"-s", "-u", "-o"}:
        an.add(LOCAL_MUTATION, "shopt changes how bash parses and expands later commands (aliases, globs)")


def _alias(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    if any("=" in w.text or w.path_text is None for w in call.words[i + 1:end]):
        an.add(LOCAL_MUTATION, "alias defines a command that later lines run instead of the one they name")


def _eval(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    call.nonpath.update(range(i + 1, end))
    an.run_script(" ".join(call.texts[i + 1:end]), call.words[i + 1:end])


def _trap(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    """`trap ACTION SIGNAL…` runs ACTION later (EXIT, DEBUG, ERR …): it is judged like any script."""
    k = i + 1
    while k < end and call.texts[k].startswith("-") and call.texts[k] != "-":
        if call.texts[k] == "--":
            k += 1
            break
        if call.texts[k] in ("-p", "-l", "-P"):
            return  # prints
        k += 1
    if end - k >= 2 and call.texts[k] != "-":
        call.nonpath.add(k)
        an.run_script(call.texts[k], call.words[k:k + 1])


def _source(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    if i + 1 < end:
        an.script_file(name, call.words[i + 1])
    else:
        an.add(LOCAL_MUTATION, _MUTATING["source"])


def _su(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    an.add(DESTRUCTIVE, "su runs commands as another user")
    for k in range(i + 1, end):
        a = call.texts[k]
        if a in ("-c", "--command") and k + 1 < end:
            call.nonpath.add(k + 1)
            an.run_script(call.texts[k + 1], call.words[k + 1:k + 2])
        elif a.startswith("--command="):
            call.nonpath.add(k)
            an.run_script(a.partition("=")[2], call.words[k:k + 1])


_SHELL_FLAGS = _SET_FLAGS | frozenset("cs")
_SHELL_LONG = _fs("--norc --noprofile --posix --noediting --restricted --verbose --version --help")


def _shell(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    """sh/bash/zsh …: `-c SCRIPT` is analysed; a script file is a change; stdin is judged by its source."""
    args = call.texts[i + 1:end]
    has_c = from_stdin = False
    k = 0
    while k < len(args):
        a = args[k]
        if a in ("--", "-"):
            from_stdin = from_stdin or a == "-"
            k += 1
            break
        if a.startswith("--"):
            if a not in _SHELL_LONG:
                an.add(LOCAL_MUTATION, f"{name} {a} runs start-up files or changes how the shell runs")
            k += 2 if a in ("--rcfile", "--init-file") else 1
            continue
        if a[:1] in ("-", "+") and len(a) > 1:
            has_c = has_c or "c" in a[1:]
            from_stdin = from_stdin or "s" in a[1:]
            if not set(a[1:]) <= _SHELL_FLAGS:  # -i and -l read start-up files; -O/-o change parsing
                an.add(LOCAL_MUTATION, f"{name} {a} runs start-up files or changes how the shell runs")
            k += 2 if ("o" in a[1:] or "O" in a[1:]) else 1
            continue
        break
    if has_c:
        if k < len(args):
            call.nonpath.add(i + 1 + k)
            an.run_script(args[k], call.words[i + 1 + k:i + 2 + k])
        return
    if k < len(args) and not from_stdin:
        an.script_file(name, call.words[i + 1 + k])
        return
    an.stdin_code(call, name, shell=True)


def _interpreter(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    """python/node/perl …: inline code and script files are changes; code from a download is destructive."""
    args = call.texts[i + 1:end]
    if any(_downloads(s) for w in call.words[i + 1:end] for s in w.subs):
        an.add(DESTRUCTIVE, f"{name} runs downloaded code")
        return
    k = 0
    while k < len(args):
        a = args[k]
        if a == "-m" and name == "python" and k + 1 < len(args):
            module = args[k + 1]
            call.nonpath.update((i + 1 + k, i + 2 + k))
            known = _HANDLERS.get(module) or module in _SUBCOMMANDS or module in _READ_ONLY or module in _REMOTE
            if known:
                words = [_Word.literal(module), *call.words[i + 3 + k:end]]
                an.classify(_Call(words, call.redirs, call.upstream), 0, len(words))
            else:
                an.add(LOCAL_MUTATION, f"python -m {module} runs code that may change files")
            return
        if a == "--" or a == "-":
            k += 1
            break
        if a.startswith("-") and len(a) > 1:
            if a in ("-e", "-c", "-E", "--eval", "-p", "--print") or (
                    not a.startswith("--") and any(ch in a[1:] for ch in "ceE")):
                call.nonpath.update(range(i + 1 + k, end))
                an.add(LOCAL_MUTATION, f"{name} runs inline code")
                return
            k += 2 if a in ("-W", "-X", "-I", "-r", "--require", "-M", "-Q") else 1
            continue
        an.script_file(name, call.words[i + 1 + k])
        return
    if k < len(args):
        an.script_file(name, call.words[i + 1 + k])
        return
    an.stdin_code(call, name, shell=False)


def _ssh(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    an.add(REMOTE_ACTION, "ssh connects to a remote host")
    args = call.texts[i + 1:end]
    k = 0
    while k < len(args):
        a = args[k]
        if a == "--":
            k += 1
            break
        if not a.startswith("-") or len(a) == 1:
            break
        for m, ch in enumerate(a[1:], 1):
            if ch in "BbcDEeFIiJLlmOoPpQRSWw":
                if m == len(a) - 1:
                    k += 1
                break
        k += 1
    call.nonpath.update(range(i + 1 + k, end))  # the host and the remote command name remote things
    remote = args[k + 1:]
    if remote:
        effect, reasons = an.side_analysis(" ".join(remote))
        if effect == DESTRUCTIVE:
            an.add(DESTRUCTIVE, f"ssh runs a destructive command on a remote host ({reasons[0]})" if reasons
                   else "ssh runs a destructive command on a remote host")


def _rsync(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    args = call.texts[i + 1:end]
    flags, operands = _parse_opts(args, "eBfT", {"--rsh", "--filter", "--exclude", "--include", "--files-from",
                                                 "--exclude-from", "--include-from", "--temp-dir", "--partial-dir"})
    if any(f.startswith("--delete") or f == "--remove-source-files" for f in flags):
        an.add(DESTRUCTIVE, "rsync --delete removes files that are not in the source")
    if any(re.match(r"[^/]*::|rsync://|[^/]+:", args[k]) for k in operands):
        an.add(REMOTE_ACTION, "rsync copies files to or from a remote host")
        call.nonpath.update(i + 1 + k for k in operands if ":" in args[k])
    else:
        an.add(LOCAL_MUTATION, "rsync copies files")


def _subcommand(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    table = _SUBCOMMANDS[name]
    args = call.texts[i + 1:end]
    words: list[str] = []
    k = 0
    while k < len(args) and len(words) < 2:
        a = args[k]
        if a == "--":
            break
        if a.startswith("-"):
            k += 2 if a in table.value_opts else 1
            continue
        words.append(a)
        k += 1
    if args[-1:] == ["--help"] and args[:-1] == words and (len(words) < 2 or " ".join(words) in table.effects):
        return  # `docker run --help`; but `docker run img --help` runs img, and `cargo run -- --help` runs code
    if not words:
        if table.bare != READ_ONLY:
            an.add(table.bare, f"{name} without a subcommand may change local files or state")
        return
    key = " ".join(words)
    effect = table.effects.get(key) or table.effects.get(words[0]) or table.default
    unsafe = next((a for a in args if a.partition("=")[0] in table.unsafe_opts), None)
    if unsafe and effect == READ_ONLY:
        an.add(LOCAL_MUTATION, f"{name} {unsafe.partition('=')[0]} can make it run other programs")
    sub = key if key in table.effects else words[0]
    if effect == LOCAL_MUTATION:
        an.add(effect, f"{name} {sub} may change local files or state")
    elif effect == REMOTE_ACTION:
        an.add(effect, f"{name} {sub} acts on a remote service")
    elif effect == DESTRUCTIVE:
        an.add(effect, f"{name} {sub} deletes data that is hard to restore")


# git: the subcommand decides; most are read-only queries.

_GIT_READ_ONLY = _fs("""
    status log diff show rev-parse ls-files ls-tree blame annotate grep describe shortlog cat-file show-ref
    merge-base name-rev rev-list whatchanged version help for-each-ref count-objects check-ignore check-attr
    check-ref-format diff-tree diff-files diff-index var verify-commit verify-tag verify-pack cherry range-diff
    show-branch fsck get-tar-commit-id ls-remote patch-id column
""")
# Global options that only change output or pathspec matching. -C, --git-dir, --work-tree and --bare
# re-point git at another repository (with its own config: core.fsmonitor, core.pager, aliases …);
# --config-env, --exec-path=DIR and most -c keys change which programs git runs.
_GIT_GLOBAL_FLAGS = _fs("-p --paginate -P --no-pager --no-replace-objects --literal-pathspecs --glob-pathspecs "
                        "--noglob-pathspecs --icase-pathspecs --no-optional-locks --no-lazy-fetch --no-advice "
                        "--html-path --man-path --info-path --exec-path --version --help")
_GIT_GLOBAL_VALUES = _fs("--namespace --list-cmds")
_GIT_SAFE_KEY_PREFIXES = ("color.", "column.", "advice.")
_GIT_SAFE_KEYS = _fs("""
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


def _other_repository(an: _Analyzer) -> str | None:
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


def _git(an: _Analyzer, call: _Call, i: int, end: int, name: str) -> None:
    args = call.texts[i + 1:end]
    view = call.option_view(i + 1, end)
    other = _other_repository(an)
    if other is not None:
        an.add(LOCAL_MUTATION, f"git would use the repository at '{other}', whose settings can run programs")
    k = 0
    while k < len(args):
        a = view[k]
        if a is None:
            an.add(LOCAL_MUTATION, "a git argument is only known when it runs (it could be any option)")
            k += 1
            continue
        if a == "-c":
            if k + 1 < len(args) and not (view[k + 1] and _git_safe_key(view[k + 1].partition("=")[0])):
                an.add(LOCAL_MUTATION, f"git -c {args[k + 1].partition('=')[0]} can change which programs git runs")
            k += 2
            continue
        if a in _GIT_GLOBAL_VALUES:
            k += 2
            continue
        if a.startswith("-"):
            if a not in _GIT_GLOBAL_FLAGS and a.partition("=")[0] not in _GIT_GLOBAL_VALUES:
                an.add(LOCAL_MUTATION, f"git {a} points git at other repositories, settings or programs")
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
        an.add(LOCAL_MUTATION, f"git {sub} with a transport::address URL runs a helper program")
    if sub in _GIT_READ_ONLY:
        unknown = None in view[k + 1:]
        unsafe = next((a for a in rest if _git_unsafe_option(sub, a)), None)
        if unknown:
            an.add(LOCAL_MUTATION, f"a git {sub} argument is only known when it runs (it could be any option)")
        if unsafe:
            an.add(LOCAL_MUTATION, f"git {sub} {unsafe.partition('=')[0]} writes a file or runs another program")
        return
    handler = _GIT_SUBCOMMANDS.get(sub)
    if handler is None:
        an.add(LOCAL_MUTATION, f"git {sub} may change the repository")
        return
    result = handler(an, rest)
    if result:
        an.add(*result)


def _first(args: Sequence[str]) -> str | None:
    return next((a for a in args if not a.startswith("-")), None)


def _git_branch(an: _Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, operands = _parse_opts(args, "u", {"--contains", "--no-contains", "--merged", "--no-merged",
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


def _git_tag(an: _Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, operands = _parse_opts(args, "mFu", {"--contains", "--no-contains", "--merged", "--no-merged",
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


def _git_config(an: _Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, operands = _parse_opts(args, "f", {"--file", "--blob", "--type", "--default", "--comment"})
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


def _git_stash(an: _Analyzer, args: list[str]) -> tuple[str, str] | None:
    sub = _first(args)
    if sub in ("list", "show"):
        return None
    if sub in ("drop", "clear"):
        return DESTRUCTIVE, f"git stash {sub} discards stashed changes"
    return LOCAL_MUTATION, "git stash changes the working tree"


def _git_reflog(an: _Analyzer, args: list[str]) -> tuple[str, str] | None:
    sub = _first(args)
    if sub in ("expire", "delete"):
        return DESTRUCTIVE, f"git reflog {sub} discards recovery points"
    return None


def _git_reset(an: _Analyzer, args: list[str]) -> tuple[str, str] | None:
    if "--hard" in args:
        return DESTRUCTIVE, "git reset --hard discards uncommitted changes"
    return LOCAL_MUTATION, "git reset moves HEAD or unstages changes"


def _git_clean(an: _Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, _ = _parse_opts(args, "e", {"--exclude"})
    if flags & {"-n", "--dry-run"}:
        return None
    if flags & {"-f", "--force"}:
        return DESTRUCTIVE, f"git clean {_cluster(args, 'f', '--force')} deletes untracked files"
    return LOCAL_MUTATION, "git clean deletes untracked files"


def _git_checkout(an: _Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, operands = _parse_opts(args, "bB", {"--orphan", "--conflict", "--pathspec-from-file"})
    if flags & {"-f", "--force"}:
        return DESTRUCTIVE, "git checkout --force discards local changes"
    if "--" in args and args.index("--") < len(args) - 1:
        return DESTRUCTIVE, "git checkout -- <paths> discards uncommitted changes"
    if any(args[k] in (".", ":/", "*", "./") for k in operands):
        return DESTRUCTIVE, "git checkout . discards uncommitted changes"
    return LOCAL_MUTATION, "git checkout switches branches or restores files"


def _git_restore(an: _Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, _ = _parse_opts(args, "s", {"--source", "--pathspec-from-file"})
    if flags & {"-S", "--staged"} and not flags & {"-W", "--worktree"}:
        return LOCAL_MUTATION, "git restore --staged unstages changes"
    return DESTRUCTIVE, "git restore discards uncommitted changes"


def _git_switch(an: _Analyzer, args: list[str]) -> tuple[str, str] | None:
    if set(args) & {"-f", "--force", "--discard-changes"}:
        return DESTRUCTIVE, "git switch --discard-changes discards local changes"
    return LOCAL_MUTATION, "git switch changes branches"


def _git_push(an: _Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, operands = _parse_opts(args, "o", {"--repo", "--receive-pack", "--exec", "--push-option"})
    if flags & {"-n", "--dry-run"}:
        return None
    force = flags & {"-f", "--force", "--force-with-lease", "--force-if-includes", "--mirror"}
    if force:
        return DESTRUCTIVE, f"git push {_cluster(args, 'f', sorted(force)[0])} overwrites remote history"
    if any(args[k].startswith("+") for k in operands[1:]):
        return DESTRUCTIVE, "git push +<ref> overwrites remote history"
    if flags & {"-d", "--delete", "--prune"} or any(args[k].startswith(":") and len(args[k]) > 1
                                                     for k in operands[1:]):
        return DESTRUCTIVE, "git push deletes remote branches"
    return REMOTE_ACTION, "git push publishes to a remote"


def _git_rm(an: _Analyzer, args: list[str]) -> tuple[str, str] | None:
    flags, _ = _parse_opts(args, "", {"--pathspec-from-file"})
    if "--cached" in flags:
        return LOCAL_MUTATION, "git rm --cached unstages files"
    if flags & {"-f", "--force"}:
        return DESTRUCTIVE, "git rm -f deletes files even with uncommitted changes"
    return LOCAL_MUTATION, "git rm deletes tracked files"


def _git_listing(*read_only: str) -> Callable[[_Analyzer, list[str]], tuple[str, str] | None]:
    """A subcommand that only reads with no subcommand of its own or one of `read_only`."""
    def classify(an: _Analyzer, args: list[str]) -> tuple[str, str] | None:
        sub = _first(args)
        return None if sub is None or sub in read_only else (LOCAL_MUTATION, f"git {sub} changes the repository")
    return classify


def _git_remote(an: _Analyzer, args: list[str]) -> tuple[str, str] | None:
    sub = _first(args)
    return None if sub in (None, "show", "get-url") else (LOCAL_MUTATION, f"git remote {sub} changes remotes")


def _git_submodule(an: _Analyzer, args: list[str]) -> tuple[str, str] | None:
    sub = _first(args)
    if sub in (None, "status", "summary"):
        return None
    if sub == "foreach":
        script = [a for a in args[args.index("foreach") + 1:] if a != "--recursive"]
        an.run_script(" ".join(script))
        return LOCAL_MUTATION, "git submodule foreach runs a command in every submodule"
    return LOCAL_MUTATION, f"git submodule {sub} changes submodules"


def _git_fixed(effect: str, reason: str) -> Callable[[_Analyzer, list[str]], tuple[str, str]]:
    return lambda an, args: (effect, reason)


_GIT_SUBCOMMANDS: dict[str, Callable[[_Analyzer, list[str]], tuple[str, str] | None]] = {
    "branch": _git_branch, "tag": _git_tag, "config": _git_config, "stash": _git_stash, "reflog": _git_reflog,
    "reset": _git_reset, "clean": _git_clean, "checkout": _git_checkout, "restore": _git_restore,
    "switch": _git_switch, "push": _git_push, "rm": _git_rm, "remote": _git_remote, "submodule": _git_submodule,
    "notes": _git_listing("list", "show"),
    "bisect": _git_listing("log", "visualize", "view", "terms"),
    "symbolic-ref": lambda an, args: (None if len(_parse_opts(args)[1]) <= 1 and "-d" not in args
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


_HANDLERS: dict[str, Handler] = {
    "rm": _rm, "chmod": _chmod, "chown": _chmod, "chgrp": _chmod, "find": _find, "fd": _fd, "fdfind": _fd,
    "sed": _sed, "gsed": _sed, "awk": _awk, "gawk": _awk, "mawk": _awk, "nawk": _awk,
    **dict.fromkeys(TABLES, _allow_listed),
    **dict.fromkeys(_OUTPUT_OPERAND, _output_operand), **dict.fromkeys(_NAME_BUILTINS, _name_builtin),
    "set": _set, "shopt": _shopt, "alias": _alias, "let": _let, "test": _test, "[": _test,
    "tee": _tee, "tar": _tar, "bsdtar": _tar, "gtar": _tar, "unzip": _unzip,
    "kill": _kill, "crontab": _crontab, "journalctl": _journalctl, **dict.fromkeys(_DOWNLOADERS, _download),
    "cd": _cd, "pushd": _cd,
    **dict.fromkeys(("export", "declare", "typeset", "local", "readonly"), _declare),
    "eval": _eval, "trap": _trap, "source": _source, ".": _source, "su": _su,
    **dict.fromkeys(_SHELLS, _shell), **dict.fromkeys(_INTERPRETERS, _interpreter),
    "ssh": _ssh, "rsync": _rsync, "git": _git,
}
