"""Which options leave a "read-only" program read-only: an allow-list per program.

Many programs that only read by default write files or run other programs when given the right
option (`sort -o`, `rg --pre`, `less -o`, `tar --to-command`, `file -C`, `man -P`, `gawk -l`).
A deny-list of such options always misses one (and GNU getopt accepts any unique abbreviation:
`sort --outp=x` is `sort --output=x`), so a read-only verdict for these programs needs every
option to be one this table knows to be harmless. Anything else — an unknown option, an
abbreviation, or an argument whose text is only known when the command runs (`sort $opts`, a glob
such as `*` that a file named `-o` would turn into an option) — makes the command a change.

Programs not listed here are judged by their own handler (`files`, `builtins`, `git`: find, sed,
awk, git, tar, the shells and builtins), or are on the plain read-only list in `programs` because
none of their options writes a file or runs a program (`cat`, `ls`, `grep`, `diff`, `wc`, `jq`,
checksums, …): review a program's options before adding it there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

UNKNOWN = None  # an argument whose text is only known when the command runs


@dataclass(frozen=True)
class Options:
    flags: frozenset[str]  # short option letters without a value
    values: frozenset[str]  # short option letters that take a value (attached or the next word)
    long_flags: frozenset[str]  # long options without a value (`--x=v` is accepted too: optional values)
    long_values: frozenset[str]  # long options that take a value (`--x=v` or `--x v`)
    digits: bool = False  # `-5` (head, grep context)
    plus_is_option: bool = False  # `+cmd` is an option (less runs it as a command)


def options(flags: str = "", values: str = "", long_flags: str = "", long_values: str = "",
            digits: bool = False, plus_is_option: bool = False) -> Options:
    """Build a table: short letters as strings, long options as space-separated names."""
    return Options(frozenset(flags), frozenset(values), frozenset(long_flags.split()),
                   frozenset(long_values.split()), digits, plus_is_option)


def first_unsafe(spec: Options, args: Sequence[str | None]) -> str | None:
    """The first argument that is not a known-safe option or an operand, described for a reason;
    None when every option is known. UNKNOWN entries could be any option."""
    k, n = 0, len(args)
    while k < n:
        a = args[k]
        k += 1
        if a is UNKNOWN:
            return "an argument only known when it runs (it could be any option)"
        if a == "--":
            return None
        if a.startswith("--"):
            name, eq, _ = a.partition("=")
            if name in spec.long_values:
                k += 0 if eq else 1
            elif name not in spec.long_flags:
                return f"option '{name}'"
            continue
        if a.startswith("+") and spec.plus_is_option and len(a) > 1:
            return f"option '{a}'"
        if not a.startswith("-") or a == "-":
            continue
        if spec.digits and a[1:].isdigit():
            continue
        for m, ch in enumerate(a[1:], 1):
            if ch in spec.values:
                if m == len(a) - 1:
                    k += 1  # the value is the next word, whatever it says
                break
            if ch not in spec.flags:
                return f"option '-{ch}'"
    return None


_LESS = options(
    "aBcCdeEfFgGiIJKLmMnNqQrRsSuUVwWX~", "bhjpPtxyz#",
    "--chop-long-lines --clear-screen --dumb --quit-at-eof --QUIT-AT-EOF --quit-if-one-screen --hilite-search "
    "--HILITE-SEARCH --ignore-case --IGNORE-CASE --status-column --long-prompt --LONG-PROMPT --line-numbers "
    "--LINE-NUMBERS --quiet --QUIET --silent --SILENT --raw-control-chars --RAW-CONTROL-CHARS --squeeze-blank-lines "
    "--underline-special --UNDERLINE-SPECIAL --hilite-unread --HILITE-UNREAD --no-init --no-keypad "
    "--follow-name --use-color --mouse --incsearch --help --version --no-lessopen --tilde",
    "--buffers --max-back-scroll --window --pattern --prompt --tag --shift --tabs --max-forw-scroll --jump-target",
    digits=True, plus_is_option=True)

_MAN = options(
    "adDfhikKlVwWZ7u?", "eELmMpRsST",
    "--all --catman --debug --default --whatis --help --apropos --global-apropos --local-file --where --path "
    "--location --where-cat --location-cat --version --ditroff --no-hyphenation --no-justification --regex "
    "--wildcard --names-only --no-subpages --update --ascii --match-case --no-match-case --usage",
    "--extension --encoding --locale --systems --manpath --preprocessor --recode --sections --troff-device")

_BAT = options("ApnPuV", "lHrmd", "--show-all --plain --number --unbuffered --list-languages --list-themes "
                                   "--diff --help --version --no-config",
               "--language --highlight-line --line-range --map-syntax --style --color --theme --wrap --tabs "
               "--paging --decorations --italic-text --terminal-width --file-name --diff-context")

TABLES: dict[str, Options] = {
    "sort": options(
        "bdfgiMhnRrVcCmsuz", "ktST",
        "--ignore-leading-blanks --dictionary-order --ignore-case --general-numeric-sort --ignore-nonprinting "
        "--month-sort --human-numeric-sort --numeric-sort --random-sort --reverse --version-sort --check --merge "
        "--stable --unique --zero-terminated --debug --help --version",
        "--key --field-separator --buffer-size --temporary-directory --parallel --sort --random-source "
        "--files0-from"),
    "shuf": options("erz", "inn", "--echo --repeat --zero-terminated --help --version",
                    "--input-range --head-count --random-source"),
    "tree": options(
        "adlfxpsugDFqNQrtvUCASJXhicn", "LPIH",
        "--noreport --inodes --device --dirsfirst --filesfirst --du --si --prune --matchdirs --ignore-case "
        "--gitignore --info --help --version --fromfile --fflinks --noreport --metafirst",
        "--charset --filelimit --timefmt --sort --gitfile --hintro --houtro"),
    "file": options(
        "bcdEhiklLNnprsSvzZ0", "efFmP",
        "--brief --checking-printout --debug --extension --mime --mime-type --mime-encoding --apple "
        "--keep-going --list --dereference --no-dereference --no-pad --no-buffer --preserve-date --raw "
        "--special-files --no-sandbox --uncompress --uncompress-noreport --print0 --help --version",
        "--exclude --exclude-quiet --files-from --separator --magic-file --parameter"),
    "date": options("uRI", "dfr", "--utc --universal --rfc-email --iso-8601 --debug --help --version --rfc-3339",
                    "--date --file --reference"),
    "hostname": options("aAdfiIsyv", "", "--alias --all-fqdns --domain --fqdn --long --ip-address "
                                          "--all-ip-addresses --short --yp --nis --verbose --help --version"),
    "less": _LESS, "more": _LESS, "most": _LESS, "zless": _LESS, "zmore": _LESS,
    "man": _MAN,
    "info": options("akwO", "dfn", "--all --where --show-options --usage --vi-keys --help --version "
                                   "--raw-escapes --no-raw-escapes",
                    "--apropos --directory --file --node --index-search"),
    "whatis": options("dvrwelV?", "smML", "--debug --verbose --regex --wildcard --exact --long --help --version",
                      "--sections --section --systems --manpath --locale"),
    "apropos": options("dvrwealV?", "smML", "--debug --verbose --regex --wildcard --exact --and --long --help "
                                            "--version", "--sections --section --systems --manpath --locale"),
    "rg": options(
        "aiSswxvclnNHIopqUuzbFL0.", "efgtTmABCjMrE",
        "--ignore-case --smart-case --case-sensitive --word-regexp --line-regexp --invert-match --count "
        "--count-matches --files-with-matches --files-without-match --line-number --no-line-number "
        "--with-filename --no-filename --only-matching --pretty --quiet --unrestricted --multiline "
        "--multiline-dotall --search-zip --text --byte-offset --fixed-strings --follow --pcre2 --null --hidden "
        "--no-hidden --no-ignore --no-ignore-vcs --no-ignore-parent --no-ignore-dot --no-ignore-global "
        "--no-ignore-exclude --no-ignore-files --no-messages --no-heading --heading --json --vimgrep --column "
        "--no-column --trim --files --stats --sort-files --no-config --passthru --passthrough --crlf --no-unicode "
        "--binary --debug --trace --type-list --help --version --glob-case-insensitive --one-file-system "
        "--no-require-git --unicode --null-data --auto-hybrid-regex --max-columns-preview --line-buffered "
        "--block-buffered --no-follow --no-text --invert-match --include-zero --no-ignore-messages "
        "--files-with-matches --no-pcre2-unicode --mmap --no-mmap --color --colour",
        "--regexp --file --glob --iglob --type --type-not --type-add --type-clear --max-count --after-context "
        "--before-context --context --threads --max-columns --replace --encoding --max-depth --max-filesize "
        "--sort --sortr --colors --path-separator --context-separator --field-match-separator "
        "--field-context-separator --engine --dfa-size-limit --regex-size-limit --ignore-file --color --colour"),
    "ag": options("aiQsSwvcloLnUuzGfg0", "ABCmtp",
                  "--all-types --ignore-case --literal --case-sensitive --smart-case --word-regexp --invert-match "
                  "--count --files-with-matches --files-without-matches --line-numbers --no-numbers --hidden "
                  "--unrestricted --search-zip --follow --nocolor --color --noheading --heading --vimgrep "
                  "--column --nogroup --group --null --silent --stats --one-device --help --version",
                  "--after --before --context --max-count --file-search-regex --ignore --ignore-dir --depth "
                  "--path-to-ignore"),
    "ack": options("iIwvclLhHnQsof", "ABCmg",
                   "--ignore-case --smart-case --word-regexp --invert-match --count --files-with-matches "
                   "--files-without-matches --with-filename --no-filename --literal --nocolor --noenv "
                   "--column --nogroup --group --help --version --noheading --heading",
                   "--after-context --before-context --context --max-count --type --ignore-dir"),
    "bat": _BAT, "batcat": _BAT,
    "nm": options("AaBCDglnoPprSsuvV", "tf", "--defined-only --demangle --dynamic --extern-only --line-numbers "
                                            "--numeric-sort --portability --print-file-name --print-size "
                                            "--reverse-sort --size-sort --undefined-only --no-sort --help "
                                            "--version --print-armap --no-demangle --special-syms",
                  "--format --radix"),
    "objdump": options("adDfgGhprRsStTxClwzFWe", "jMbm",
                       "--disassemble --disassemble-all --all-headers --section-headers --headers --syms "
                       "--dynamic-syms --full-contents --source --demangle --line-numbers --wide "
                       "--private-headers --file-headers --reloc --dynamic-reloc --no-show-raw-insn "
                       "--archive-headers --debugging --help --version --no-addresses",
                       "--start-address --stop-address --section --disassembler-options --architecture "
                       "--target --prefix --prefix-strip --insn-width --dwarf"),
    "readelf": options("ahlSgtesnruVdAIWDHzTw", "xpR",
                       "--all --file-header --program-headers --segments --section-headers --sections "
                       "--section-groups --section-details --headers --syms --symbols --dyn-syms --notes "
                       "--relocs --unwind --dynamic --version-info --arch-specific --histogram --wide "
                       "--use-dynamic --help --version --decompress",
                       "--hex-dump --string-dump --relocated-dump --debug-dump"),
    "size": options("ABGdoxt", "", "--totals --common --help --version", "--format --radix"),
    "cloc": options("v", "", "--by-file --by-file-by-lang --quiet --json --yaml --csv --md --xml --hide-rate "
                             "--skip-uniqueness --no-autogen --counted --found --ignored --help --version "
                             "--list-file --follow-links --exclude-content --git --diff",
                    "--exclude-dir --exclude-ext --exclude-lang --include-ext --include-lang --match-f "
                    "--not-match-f --match-d --not-match-d --fullpath --max-file-size --timeout"),
    "scc": options("fwcviz", "MxsS", "--by-file --wide --no-cocomo --no-complexity --no-duplicates "
                                     "--no-gitignore --no-ignore --no-large --ci --debug --verbose --uloc "
                                     "--dryness --help --version --no-min-gen --no-gen",
                   "--format --include-ext --not-match --exclude-ext --exclude-dir --sort"),
    "zstdcat": options("cdfkqvh", "TD", "--long --quiet --verbose --force --help --version", "--memory"),
    "yq": options("rjCMNPeynYS", "oIp", "--raw-output --tojson --colors --no-colors --no-doc --prettyPrint "
                                        "--exit-status --null-input --yaml-output --yaml-roundtrip --help "
                                        "--version --unwrapScalar",
                  "--output-format --input-format --indent --arg --argjson --expression"),
    "hash": options("rdtl"),
    "compgen": options("abcdefgjksuv", "AGWXPS", "", ""),
    "complete": options("abcdefgjksuvprDEI", "AGWXPSo", "", ""),
}

# `tar` in listing mode (-t / --list); every other mode writes anyway.
TAR_LISTING = options(
    "tvzjJaZPRiBw", "fCTXb",
    "--list --verbose --gzip --gunzip --ungzip --bzip2 --xz --lzma --lzip --lzop --zstd --auto-compress --compress "
    "--uncompress --wildcards --no-wildcards --anchored --no-anchored --ignore-case --no-ignore-case --full-time "
    "--numeric-owner --utc --null --no-null --verbatim-files-from --absolute-names --block-number --ignore-zeros "
    "--show-transformed-names --show-stored-names --no-recursion --recursion --wildcards-match-slash "
    "--no-wildcards-match-slash --unquote --no-unquote --force-local --help --version --usage",
    "--file --directory --files-from --exclude --exclude-from --blocking-factor --strip-components --quoting-style "
    "--transform --xform --warning --occurrence")

# sed and awk: their programs (w, e, system(), print >) and -i/-f are judged by their handlers in
# `files`; these are the options that may go with a read-only verdict.
SED = options("nErszu", "elif",
              "--in-place --follow-symlinks --quiet --silent --regexp-extended --separate --null-data "
              "--zero-terminated --unbuffered --posix --debug --sandbox --help --version --binary",
              "--expression --line-length --file")
AWK = options("bcChnNPrsStVMO", "Fvef",
              "--characters-as-bytes --traditional --copyright --help --non-decimal-data --bignum --optimize "
              "--posix --re-interval --no-optimize --sandbox --lint --lint-old --version --use-lc-numeric --csv",
              "--field-separator --assign --source --file")
