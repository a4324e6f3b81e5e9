"""The desk's users without a proxy, over plain HTTP against `deepresearch ui`
in its own process: each user signs in with their own token from the users
file (`deepresearch ui --new-user` makes one), sees their own runs only, and
the shared DEEPRESEARCH_UI_TOKEN is an admin. (Through a signing-in proxy, in
a browser: tests/test_desk_team.py.)"""

from __future__ import annotations

import asyncio

import httpx

from testkit.runs import polled
from tests.test_desk_guard import CLI, QUESTION, desk_process, http  # noqa: F401 - http: the fixture
from tests.test_research_goes_on import cli


def new_user(env: dict[str, str], name: str, *options: str) -> str:
    done = cli(env, "ui", "--new-user", name, *options)
    assert done.returncode == 0, done.stderr
    assert f"added {name}" in done.stdout
    return done.stdout.rsplit(": ", 1)[1].strip()


async def test_each_user_signs_in_with_their_own_token(worker_env, tmp_path, http):  # noqa: F811
    env = worker_env | {"DEEPRESEARCH_UI_USERS": str(tmp_path / "users"), "DEEPRESEARCH_UI_TOKEN": "shared-secret"}
    alice = await asyncio.to_thread(new_user, env, "alice")
    bob = await asyncio.to_thread(new_user, env, "bob", "--role", "reader")
    assert alice.startswith("alice.") and alice not in (tmp_path / "users").read_text()  # kept hashed
    with desk_process(env, tmp_path, token=alice) as (base, _port):
        as_alice, as_bob = {"Authorization": f"Bearer {alice}"}, {"Authorization": f"Bearer {bob}"}
        started = await http.post(f"{base}/api/runs", json={"question": QUESTION}, headers=as_alice)
        assert started.status_code == 200, started.text
        run_id = started.json()["id"]

        async def listed_runs(headers) -> list[dict]:
            return (await http.get(f"{base}/api/runs", headers=headers)).json()["runs"]

        # (visibility learns of a new run a moment late)
        listed = await polled(lambda: listed_runs(as_alice), lambda runs: run_id in [r["id"] for r in runs])
        assert [(r["id"], r["owner"]) for r in listed if r["id"] == run_id] == [(run_id, "alice")]

        # Bob: not his, not shared with him: it is not there.
        assert run_id not in [r["id"] for r in await listed_runs(as_bob)]
        hidden = await http.get(f"{base}/api/runs/{run_id}", headers=as_bob)
        assert (hidden.status_code, hidden.json()["error"]) == (404, f"there is no run with id '{run_id}'")
        refused = await http.post(f"{base}/api/runs", json={"question": QUESTION}, headers=as_bob)
        assert refused.status_code == 403 and "readers" in refused.json()["error"]

        # The page keeps the token that signed in as a cookie; a wrong token gets nobody in.
        page = await http.get(f"{base}/", params={"token": alice})
        assert page.status_code == 200 and page.cookies.get("desk_token") == alice
        async with httpx.AsyncClient(timeout=30, trust_env=False, cookies={"desk_token": alice}) as browser:
            health = (await browser.get(f"{base}/api/health")).json()
            assert (health["user"], health["role"]) == ("alice", "researcher")
        http.cookies.clear()  # (it kept the page's cookie, which would let it in)
        wrong = await http.get(f"{base}/api/runs", headers={"Authorization": f"Bearer {alice}x"})
        assert wrong.status_code == 401

        # The shared token is an admin's: every run, and it may act on alice's.
        as_admin = {"Authorization": "Bearer shared-secret"}
        assert (await http.get(f"{base}/api/runs/{run_id}", headers=as_admin)).status_code == 200
        cancelled = await http.post(f"{base}/api/runs/{run_id}/cancel", json={}, headers=as_admin)
        assert cancelled.status_code == 200, cancelled.text
