"""`auger users add|list|revoke`: the people of an `auger serve`, kept in its database (`--db`, as the
server's). `add` prints the user's token once — the store keeps only its hash — and `revoke` takes
effect at the next request of every server on that database, open event streams included."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable

from auger.frontends.cli_support import CliError, local_user, with_store as _with_store


def add_commands(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> None:
    from auger.frontends.users import ROLES

    p_users = sub.add_parser("users", help="the people who may use `auger serve`: add, list, revoke")
    users_sub = p_users.add_subparsers(dest="users_command", required=True)
    add = users_sub.add_parser("add", help="add a user and print their token (shown once)")
    add.add_argument("name", help="1-32 lower-case letters, digits or '._-', starting with a letter")
    add.add_argument("--role", required=True, choices=ROLES,
                     help="viewer: reads; member: + sessions, ops and tasks; approver: + answers approvals; "
                          "admin: + users, providers and the audit")
    users_sub.add_parser("list", help="every user: name, role, when added and by whom, revoked or not")
    revoke = users_sub.add_parser("revoke", help="revoke a user's token at once (their browsers too)")
    revoke.add_argument("name")
    for command in users_sub.choices.values():
        command.add_argument("--json", action="store_true", help="print JSON")
        store_opts(command)
    p_users.set_defaults(run=_cmd_users)


def _cmd_users(args: argparse.Namespace) -> int:
    from auger.frontends.users import UserError, check_user, new_token, token_hash
    from auger.store.base import UserExists

    command = args.users_command
    if command == "add":
        try:
            check_user(args.name, args.role)
        except UserError as exc:
            raise CliError(str(exc)) from None
        token = new_token()

        async def add(store: Any) -> Any:
            try:
                return await store.add_user(args.name, args.role, token_hash(token), local_user())
            except UserExists as exc:
                raise CliError(str(exc)) from None

        user = _with_store(args, add)
        if args.json:
            print(json.dumps({**_user_json(user), "token": token}, indent=2))
        else:
            print(token)
            print(f"auger: {user.name} ({user.role}) added; give them this token once — it is not shown again",
                  file=sys.stderr)
        return 0
    if command == "list":
        users = _with_store(args, lambda store: store.list_users())
        if args.json:
            print(json.dumps([_user_json(u) for u in users], indent=2))
        elif not users:
            print("No users: the server's own token is its owner's (an admin). Add one with `auger users add`.")
        for user in [] if args.json else users:
            state = "revoked " + _when(user.revoked) if user.revoked else "active"
            print(f"{user.name:<16} {user.role:<9} added {_when(user.created)} by {user.created_by or '?':<20} {state}")
        return 0
    revoked = _with_store(args, lambda store: store.revoke_user(args.name))
    if revoked is None:
        raise CliError(f"no active user named {args.name!r} (list them with `auger users list`)")
    print(json.dumps(_user_json(revoked), indent=2) if args.json else f"{revoked.name} revoked")
    return 0


def _user_json(user: Any) -> dict[str, Any]:
    return {"name": user.name, "role": user.role, "created": user.created, "created_by": user.created_by,
            "revoked": user.revoked}


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp or 0))
