"""The fleet from everywhere: a task submitted over HTTP (`POST /api/fleet/tasks`) or from the public API
(`auger.connect(...).submit(...)`) is checked and recorded as `auger submit` records it — data only, once
per submission id, refused for a viewer — and names who submitted it."""

from __future__ import annotations

import asyncio

import auger
from tests.support.fleet import make_repo
from tests.support.serve import served
from tests.test_server_team import add_user, user_client


def test_tasks_are_submitted_over_http_and_from_the_library_once_and_as_data(project, server, tmp_path,
                                                                            postgres_url):
    repo = make_repo(tmp_path / "repo")
    spec = {"prompt": "task over http", "repo": str(repo), "mode": "safe", "labels": ["nightly"],
            "submission_id": "ci-1"}

    async def main():
        async with served(project, server, postgres_url) as srv:
            member_token = await add_user(srv, "alice", "member")
            alice = user_client(srv, member_token)
            viewer = user_client(srv, await add_user(srv, "vic", "viewer"))
            out = {"first": await alice.post("/api/fleet/tasks", json=spec),
                   "again": await alice.post("/api/fleet/tasks", json=spec),
                   "other": await alice.post("/api/fleet/tasks", json={**spec, "prompt": "something else"}),
                   "viewer": await viewer.post("/api/fleet/tasks", json={**spec, "submission_id": "v-1"}),
                   "overrides": await alice.post("/api/fleet/tasks", json={**spec, "submission_id": "o-1",
                                                                          "overrides": ["notify=[\"sh\"]"]}),
                   "base_url": await alice.post("/api/fleet/tasks", json={**spec, "submission_id": "b-1",
                                                                         "base_url": "http://evil/v1"}),
                   "unknown": await alice.post("/api/fleet/tasks", json={**spec, "submission_id": "u-1", "x": 1}),
                   "bad_ref": await alice.post("/api/fleet/tasks", json={**spec, "submission_id": "r-1",
                                                                        "ref": "--upload-pack=x"})}
            task_id = out["first"].json()["id"]
            out["shown"] = (await viewer.get(f"/api/fleet/tasks/{task_id}")).json()
            async with auger.connect(srv.url, token=member_token, name="script") as client:
                made = await client.submit("task from the library", repo=str(repo), labels=["lib"],
                                           submission_id="lib-1")
                again = await client.submit("task from the library", repo=str(repo), labels=["lib"],
                                            submission_id="lib-1")
                try:
                    await client.submit("task another", repo=str(repo), submission_id="lib-1")
                    conflict = None
                except auger.Refused as exc:
                    conflict = str(exc)
                fetched = await client.task(made.id)
            audit = (await srv.client.get("/api/audit", params={"action": "task"})).json()["entries"]
            listed = (await alice.get("/api/fleet")).json()
            return out, made, again, conflict, fetched, audit, listed

    out, made, again, conflict, fetched, audit, listed = asyncio.run(main())
    first = out["first"].json()
    assert out["first"].status_code == 201 and first["submitted_by"] == "alice" and first["state"] == "queued"
    assert first["spec"]["labels"] == ["nightly"] and first["spec"]["mode"] == "safe"
    assert out["again"].status_code == 200 and out["again"].json()["id"] == first["id"]
    assert out["other"].status_code == 409 and "already used for another task" in out["other"].json()["error"]
    assert out["viewer"].status_code == 403
    for refused in ("overrides", "base_url"):
        assert out[refused].status_code == 400 and "carries data, never configuration" in out[refused].json()["error"]
    assert out["unknown"].status_code == 400 and out["bad_ref"].status_code == 400
    assert out["shown"]["id"] == first["id"] and out["shown"]["result"] is None
    assert isinstance(made, auger.Task) and made.state == "queued" and made.submitted_by == "alice"
    assert again.id == made.id and conflict and "already used" in conflict
    assert fetched.id == made.id and fetched.prompt == "task from the library"
    assert [t["id"] for t in listed["tasks"]] == [made.id, first["id"]]  # nothing refused was queued
    assert {(e["actor"], e["status"]) for e in audit} >= {("alice", 201), ("alice", 200), ("alice", 409),
                                                          ("alice", 400), ("vic", 403)}
