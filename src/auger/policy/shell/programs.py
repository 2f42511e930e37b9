"""What the classifier knows about particular programs, as tables.

Everything the classifier knows about programs lives here (and in `readonly_options`, the option
allow-lists); the code elsewhere only interprets it. Names are matched on the basename of argv[0]
(`/bin/rm` is `rm`). Programs whose effect depends on their arguments also have a handler
(`files`, `builtins`, `git`), which takes precedence over these lists.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from auger.lazy_regex import lazy_compile
from auger.policy.shell.verdict import DESTRUCTIVE, LOCAL_MUTATION, READ_ONLY, REMOTE_ACTION


def fs(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Read-only programs. Some are read-only only without certain options or operands (sort -o,
# date -s, uniq IN OUT …); their handlers in HANDLERS take precedence over this list.
READ_ONLY_PROGRAMS = fs("""
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
DOWNLOADERS = fs("curl wget fetch http https xh xhs aria2c curlie lwp-download lwp-request")

REMOTE_PROGRAMS: dict[str, str] = {
    **dict.fromkeys(DOWNLOADERS, "transfers data over the network"),
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

DESTRUCTIVE_PROGRAMS: dict[str, str] = {
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

MUTATING_PROGRAMS: dict[str, str] = {
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
LONG_HELP_FLAGS = fs("--version --help")
SHORT_HELP_FLAGS: dict[str, frozenset[str]] = {
    "python": fs("-V -h"), "node": fs("-v -h"), "perl": fs("-v"), "php": fs("-v"), "lua": fs("-v"),
    **dict.fromkeys("npm pnpm yarn npx docker podman java javac gcc g++ cc clang clang++ rustc go".split(),
                    fs("-v -h -V -version -help")),
}
DEFAULT_SHORT_HELP = fs("-h")
# Tools that load the project's own code or configuration even to print a version or usage text
# (conftest.py plugins, .mvn/jvm.config, gradle.properties, Rakefiles …): never a harmless query.
PROJECT_LOADERS = fs("mvn gradle sbt lein ant bazel bazelisk buck pants rake just invoke nox tox pytest py.test "
                     "jest vitest mocha karma webpack vite tsc eslint prettier playwright cypress phpunit composer "
                     "bundle rails pre-commit")

OUTPUT_OPERAND = frozenset({"uniq", "xxd"})  # a second operand is an output file

# Variables whose value is run as a command, or that change what code programs load.
COMMAND_VARS = frozenset("PAGER GIT_PAGER MANPAGER EDITOR VISUAL GIT_EDITOR GIT_SEQUENCE_EDITOR GIT_SSH_COMMAND "
                         "GIT_SSH GIT_EXTERNAL_DIFF GIT_ASKPASS SSH_ASKPASS SUDO_ASKPASS LESSOPEN LESSCLOSE "
                         "PROMPT_COMMAND".split())
CODE_VARS = frozenset("LD_PRELOAD LD_AUDIT LD_LIBRARY_PATH DYLD_INSERT_LIBRARIES DYLD_LIBRARY_PATH BASH_ENV ENV "
                      "PYTHONSTARTUP PYTHONPATH NODE_OPTIONS PERL5OPT PERL5LIB RUBYOPT RUBYLIB RIPGREP_CONFIG_PATH "
                      "PS0 PS1 PS2 PS3 PS4 SHELLOPTS BASHOPTS GLOBIGNORE LESSKEYIN LESSKEY BASH_CMDS BASH_ALIASES "
                      "BASH_LOADABLES_PATH HOME XDG_CONFIG_HOME GCONV_PATH TAR_OPTIONS LESS MORE MANOPT BROWSER "
                      "BAT_CONFIG_PATH PYTHONHOME PERLLIB PERL5DB NODE_PATH".split())
# git settings that are harmless in an environment assignment; any other GIT_* may re-point the
# repository, its config or the programs git runs (GIT_DIR, GIT_CONFIG_*, GIT_EXEC_PATH, GIT_TRACE=file…)
GIT_SAFE_VARS = frozenset("GIT_TERMINAL_PROMPT GIT_OPTIONAL_LOCKS GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_AUTHOR_DATE "
                          "GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL GIT_COMMITTER_DATE GIT_LITERAL_PATHSPECS "
                          "GIT_GLOB_PATHSPECS GIT_NOGLOB_PATHSPECS GIT_ICASE_PATHSPECS GIT_FLUSH".split())
# Environment prefixes that configure a tool as fully as its config file would (rustc wrappers,
# npm's browser and script shell, go build flags such as -toolexec).
CONFIG_VAR_PREFIXES = ("NPM_CONFIG_", "CARGO_", "RUSTC", "GOFLAGS", "GOTOOLCHAIN", "PIP_", "UV_", "YARN_",
                       "PNPM_", "DOCKER_", "KUBE", "HELM_", "TF_", "MAVEN_", "GRADLE_", "JAVA_TOOL_OPTIONS",
                       "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "SYSTEMD_")

# Names whose value, read from input (`read`, `printf -v`, `mapfile`, `for NAME in`), changes what runs.
RUN_VARS = COMMAND_VARS | CODE_VARS | {"PATH", "CDPATH", "HOME"}

SHELLS = fs("sh bash zsh dash ksh mksh ash yash posh fish")
INTERPRETERS = fs("python pypy node nodejs deno bun ruby perl php lua Rscript tclsh")
VERSIONED = lazy_compile(r"(python|pypy|pip|ruby|perl|php|node|lua)[0-9.]*$")


@dataclass(frozen=True)
class Wrapper:
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


WRAPPERS: dict[str, Wrapper] = {
    "env": Wrapper(fs("-u --unset -C --chdir -S --split-string"), assignments=True,
                   split_opts=fs("-S --split-string"), flags=fs("-")),
    "time": Wrapper(fs("-f --format -o --output"), write_opts=fs("-o --output")),
    "nice": Wrapper(fs("-n --adjustment")),
    "nohup": Wrapper(),
    "timeout": Wrapper(fs("-s --signal -k --kill-after"), positionals=1),
    "command": Wrapper(stop_opts=fs("-v -V")),
    "builtin": Wrapper(),
    "exec": Wrapper(fs("-a")),
    "stdbuf": Wrapper(fs("-i -o -e --input --output --error")),
    "ionice": Wrapper(fs("-c -n --class --classdata"), stop_opts=fs("-p -P -u --pid --pgid --uid"),
                      stop_effect=LOCAL_MUTATION),
    "taskset": Wrapper(positionals=1, stop_opts=fs("-p --pid"), stop_effect=LOCAL_MUTATION),
    "setsid": Wrapper(),
    "chronic": Wrapper(),
    "unbuffer": Wrapper(),
    "busybox": Wrapper(),
    "xargs": Wrapper(fs("-a --arg-file -d --delimiter -E -I -L -n --max-args -P --max-procs -s --max-chars "
                        "--process-slot-var")),
    "sudo": Wrapper(fs("-u -g -C -D -h -p -r -t -U -T --user --group --close-from --chdir --host --prompt "
                       "--role --type --other-user --command-timeout"), assignments=True, effect=DESTRUCTIVE,
                    reason="sudo runs commands with root privileges"),
    "doas": Wrapper(fs("-u -C"), effect=DESTRUCTIVE, reason="doas runs commands with root privileges"),
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
    return _Subcommands(default, effects, fs(value_opts), bare, fs(unsafe_opts))


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
SUBCOMMANDS: dict[str, _Subcommands] = {
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


