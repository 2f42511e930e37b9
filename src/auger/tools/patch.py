"""The `apply_patch` tool: the patch envelope OpenAI-family models are trained to write.

The parsing and all-or-nothing application live in `auger.changes.apply_patch`; this module only
adapts them to a tool: the session's root handle (the file tools' one, so the same confinement
applies), the approval preview (the diff the patch would make, computed without writing), and the
files the session created (so the file tracker knows them). A model that sends the patch through
`shell` as `apply_patch <<'EOF' … EOF` (after `cd dir &&`, its paths are relative to `dir`) reaches
`run_patch` too (tools/shell.py), never bash. Protected files (tools/protection.py) are refused — all of
those a patch names at once, before anything is read — for the patch and for its preview alike.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from auger.policy.types import Classification
from auger.tools.base import LOCAL_MUTATION, ToolContext, ToolError, ToolResult, ToolSpec
from auger.tools.files import root_handle
from auger.tools.protection import refuse_protected
from auger.tools.threads import in_thread

if TYPE_CHECKING:
    from auger.changes.apply_patch import Reveal

NAME = "apply_patch"


async def run_patch(patch: str, ctx: ToolContext, workdir: str | None = None) -> ToolResult:
    """Apply `patch` beneath the root (its paths relative to `workdir`, a directory inside it, when
    given); a patch that does not apply changes nothing and says why."""
    from auger.changes.apply_patch import PatchError, apply_patch

    handle = root_handle(ctx)

    def work() -> Any:
        _refuse_protected(ctx, patch, workdir)
        return apply_patch(handle, patch, workdir, _reveal(ctx), _guard(ctx))

    try:
        result = await in_thread(work)
    except PatchError as exc:
        raise ToolError(f"apply_patch: {exc}. No file was changed.") from None
    for rel in result.added:
        ctx.state.created_files.add(ctx.root / rel)
    return ToolResult(f"Applied the patch:\n{result.summary()}",
                      metadata={"added": result.added, "modified": result.modified, "deleted": result.deleted,
                                "moved": [list(pair) for pair in result.moved]})


def _reveal(ctx: ToolContext) -> Reveal | None:
    """What puts back the values of the secret markers a patch keeps in a file, refusing one it cannot
    (auger/secrets/redact.py `reveal`): a patch never writes a marker into a file."""
    secrets = ctx.secrets
    if secrets is None:
        return None
    from auger.changes.apply_patch import PatchError
    from auger.secrets.redact import Unrestorable

    def reveal(text: str, original: str, path: str) -> str:
        try:
            return secrets.reveal(text, original)
        except Unrestorable as exc:
            raise PatchError(exc.explain(path)) from None

    return reveal


def classify(args: dict[str, Any], root: Path) -> Classification:
    """A local change whose subject names the files: what the user approves, and what an approval
    "for this session" covers (exactly these files, not every later patch)."""
    from auger.changes.apply_patch import PatchError, UpdateFile, parse_patch

    try:
        ops = parse_patch(args["patch"])
    except PatchError:
        return Classification(LOCAL_MUTATION, "a patch that does not parse")
    paths: list[str] = []
    for op in ops:
        paths.append(op.path)
        if isinstance(op, UpdateFile) and op.move_to:
            paths.append(op.move_to)
    return Classification(LOCAL_MUTATION, ", ".join(dict.fromkeys(paths)))


def _guard(ctx: ToolContext) -> Any:
    """What the patch shows each existing file before reading it: a protected one is refused."""

    def guard(rel: str, raw: str, st: os.stat_result) -> None:
        refuse_protected(ctx, NAME, [(rel, st), (os.path.normpath(raw), None)])

    return guard


def _refuse_protected(ctx: ToolContext, patch: str, workdir: str | None) -> None:
    """Refuse every protected file the patch names that exists, in one refusal (so one approval covers the
    patch); a patch that does not parse is left to the patch itself to explain."""
    from auger.changes.apply_patch import PatchError, op_paths, patch_ops

    handle = root_handle(ctx)
    try:
        paths = op_paths(patch_ops(handle, patch, workdir))
    except PatchError:
        return
    named: list[tuple[str, os.stat_result | None]] = []
    for raw in paths:
        named.append((os.path.normpath(raw), None))
        try:
            where = handle.resolve(raw)
        except (OSError, ValueError):
            continue
        try:
            st = os.stat(where.name, dir_fd=where.parent_fd, follow_symlinks=False) if where.name else None
        except OSError:
            st = None
        finally:
            os.close(where.parent_fd)
        if st is not None:  # a file the patch would create may have a protected name
            named.append((where.rel, st))
    refuse_protected(ctx, NAME, [(rel, st) for rel, st in named if st is not None or _exists(handle, rel)])


def _exists(handle: Any, rel: str) -> bool:
    try:
        os.close(handle.open(rel, os.O_PATH, follow=False))
    except (OSError, ValueError):
        return False
    return True


async def _apply(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return await run_patch(args["patch"], ctx)


async def preview_patch(patch: str, ctx: ToolContext, workdir: str | None = None) -> str:
    """The unified diff the patch would make, computed in memory (for approvals)."""
    from auger.changes.apply_patch import PatchError, plan_patch_text

    def work() -> str:
        _refuse_protected(ctx, patch, workdir)
        plan, _ = plan_patch_text(root_handle(ctx), patch, workdir, _reveal(ctx), _guard(ctx))
        out: list[str] = []
        for rel, new in plan.new.items():
            old = plan.before.get(rel)
            old_text = "" if old is None else old[0].decode("utf-8", "replace")
            new_text = "" if new is None else new.decode("utf-8", "replace")
            out.extend(difflib.unified_diff(old_text.splitlines(keepends=True), new_text.splitlines(keepends=True),
                                            "/dev/null" if old is None else f"a/{rel}",
                                            "/dev/null" if new is None else f"b/{rel}"))
        return "".join(line if line.endswith("\n") else line + "\n" for line in out)

    try:
        return await in_thread(work)
    except (PatchError, ToolError) as exc:
        return f"(no preview: {exc})"


async def _preview(args: dict[str, Any], ctx: ToolContext) -> str:
    return await preview_patch(args["patch"], ctx)


APPLY_PATCH = ToolSpec(
    name=NAME,
    description=(
        "Edit files with a patch: add, delete, update or move files in one all-or-nothing change. Format:\n"
        "*** Begin Patch\n*** Add File: path\n+line\n*** Update File: path\n*** Move to: new/path (optional)\n"
        "@@ optional context line\n context\n-removed\n+added\n*** Delete File: path\n*** End Patch\n"
        "Paths are relative to the project root. A hunk that does not match changes nothing; the error "
        "shows the nearest matching lines."
    ),
    parameters={
        "type": "object",
        "properties": {"patch": {"type": "string", "description": "The whole patch, Begin to End Patch."}},
        "required": ["patch"],
    },
    handler=_apply,
    effect=LOCAL_MUTATION,
    previewer=_preview,
    classifier=classify,
    parallel_safe=False,
)

TOOLS = [APPLY_PATCH]
