"""The decisions behind owners, users and per-user limits, without Temporal:
who may see and act on a run, a review's payload, the report's closing note,
when a run waits for its owner's limits, the users file and its tokens, and
who the desk takes a request to come from."""

from __future__ import annotations

import asyncio
import os
import stat
from datetime import UTC, datetime

import pytest
from starlette.requests import Request
from temporalio.exceptions import ApplicationError

from client.desk.users import (
    Refusal,
    User,
    UsersFile,
    Who,
    hash_token,
    new_user,
    parse_users,
    token_matches,
    trusted_proxies,
    user_line,
)
from client.errors import CliError
from client.users import NAME, cli_user
from infra.errors import ConfigError
from infra.user_limits import UserLimits
from workflows.models import ResearchInput
from workflows.ownership import (
    OwnerUsage,
    access,
    allowance,
    closing_note,
    review_payload,
    start_wait,
    visible_query,
)
from workflows.review import PlanReview
from workflows.user_names import _NAME


def test_who_may_see_and_act_on_a_run():
    shared = ["bob", "team:ops"]
    assert access("alice", shared, "alice", "researcher") == "act"
    assert access("alice", shared, "alice", "reader") == "read"  # a reader's own run (started elsewhere): read only
    assert access("alice", shared, "bob", "researcher") == "read"  # shared with him: read, not act
    assert access("alice", shared, "dan", "reader", ("ops",)) == "read"  # through his team
    assert access("alice", shared, "erin", "researcher", ("sales",)) == "none"
    assert access("alice", [], "carol", "admin") == "act"
    assert access(None, [], "bob", "researcher") == "none"  # a run from before owners: an admin's
    assert access(None, [], "carol", "admin") == "act"
    assert visible_query("dan", ("ops",)) == '(ResearchOwner = "dan" OR ResearchShared IN ("dan", "team:ops"))'


def test_a_review_is_a_plain_string_or_an_object_naming_who():
    assert review_payload("[ACCEPTED]") == ("[ACCEPTED]", None, None)  # the stock CLI's
    assert review_payload({"feedback": "[ACCEPTED]", "by": "alice"}, 3) == ("[ACCEPTED]", 3, "alice")
    assert review_payload({"feedback": "[ACCEPTED]", "by": "alice", "plan_version": 2}) == ("[ACCEPTED]", 2, "alice")
    with pytest.raises(ApplicationError, match="the acting user 'a b' is not a user name"):
        PlanReview.unpack({"feedback": "[ACCEPTED]", "by": "a b"})
    with pytest.raises(ApplicationError, match="the acting user int is not a user name"):
        PlanReview.unpack({"feedback": "[ACCEPTED]", "by": 7})


def test_the_reports_closing_note_names_who_accepted_and_who_steered():
    assert closing_note(None) == ""
    assert closing_note("alice").endswith("*Research run: plan accepted by alice.*")
    assert closing_note("alice", ["bob", "bob", "carol"]).endswith(
        "*Research run: plan accepted by alice; steered by bob, carol.*"
    )


def test_a_run_waits_for_its_owners_limits():
    now = datetime(2025, 5, 6, 22, 30, tzinfo=UTC)
    assert start_wait(OwnerUsage(), "alice", now, 0) is None  # limits off
    busy = OwnerUsage(max_runs=2, runs_before=2)
    seconds, why = start_wait(busy, "alice", now, 0)
    assert seconds == 15 and "alice has 2 run(s) going and the limit is 2 per user" in why
    assert [start_wait(busy, "alice", now, n)[0] for n in (1, 2, 5, 20)] == [30, 60, 300, 300]  # doubles, bounded
    assert start_wait(OwnerUsage(max_runs=2, runs_before=1), "alice", now, 0) is None
    spent = OwnerUsage(daily_tokens=1000, tokens_today=1200, resets_at="2025-05-07T00:00:00+00:00")
    seconds, why = start_wait(spent, "alice", now, 0)
    assert seconds == 90 * 60 + 1 and "starts after 2025-05-07 00:00 UTC" in why
    assert allowance(OwnerUsage(daily_tokens=1000, tokens_today=300)) == 700
    assert allowance(spent) == 0 and allowance(OwnerUsage()) is None


def test_limits_are_off_unless_set(monkeypatch):
    assert not UserLimits.from_env({}).any
    limits = UserLimits.from_env({"DEEPRESEARCH_USER_MAX_RUNS": "3", "DEEPRESEARCH_USER_DAILY_TOKENS": "2_000_000"})
    assert (limits.max_runs, limits.daily_tokens) == (3, 2_000_000)
    assert UserLimits.from_env({"DEEPRESEARCH_USER_MAX_RUNS": "0"}).max_runs is None
    with pytest.raises(ConfigError, match="DEEPRESEARCH_USER_DAILY_TOKENS='lots': give a whole number"):
        UserLimits.from_env({"DEEPRESEARCH_USER_DAILY_TOKENS": "lots"})


def test_owners_and_shares_are_names():
    assert ResearchInput(
        question="q", owner="alice@example.com", shared_with=["bob", "team:ops", "bob"]
    ).shared_with == [
        "bob",
        "team:ops",
    ]
    for bad in ({"owner": 'a"b'}, {"owner": ""}, {"shared_with": ["team:"]}, {"shared_with": ["a b"]}):
        with pytest.raises(ValueError, match="is not a user name"):
            ResearchInput(question="q", **bad)
    assert NAME.pattern == _NAME.pattern  # the CLI's copy of the rule is the workflow's


def test_the_cli_user_is_deepresearch_user_or_the_os_user(monkeypatch):
    assert cli_user({"DEEPRESEARCH_USER": "alice"}) == "alice"
    with pytest.raises(CliError, match="DEEPRESEARCH_USER='a b' is not a user name"):
        cli_user({"DEEPRESEARCH_USER": "a b"})
    monkeypatch.setattr("getpass.getuser", lambda: "osuser")
    assert cli_user({}) == "osuser"


def test_tokens_are_kept_hashed_and_the_users_file_says_what_is_wrong(tmp_path):
    token = "alice.s3cret"
    hashed = hash_token(token)
    assert hashed.startswith("scrypt$16384$8$1$") and token not in hashed
    assert token_matches(token, hashed) and not token_matches("alice.other", hashed)
    assert hash_token(token) != hashed  # salted
    users = parse_users(f"# team\n{user_line('alice', 'admin', token, ('ops',))}\ndan reader - ops,sales\n")
    assert users["alice"].role == "admin" and users["alice"].teams == ("ops",)
    assert users["dan"].hashed is None and users["dan"].teams == ("ops", "sales")
    for text, why in (
        ("alice boss -", "line 1: role 'boss' is not one of reader, researcher, admin"),
        ("alice admin", "line 1: write NAME ROLE HASH [TEAMS], not 2 fields"),
        ("a'b admin -", 'line 1: user name "a\'b" is not a user name'),
        ("alice admin plain-token", "line 1: the hash must be scrypt$"),
        ("alice admin -\nalice reader -", "line 2: alice is listed twice"),
    ):
        with pytest.raises(ValueError, match=None) as err:
            parse_users(text)
        assert why in str(err.value), (text, str(err.value))

    path = tmp_path / "users"
    token, line = new_user("bob", "researcher", ("ops",), str(path))
    assert token.startswith("bob.") and path.read_text() == line + "\n"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with pytest.raises(ValueError, match="bob is already in"):
        new_user("bob", "reader", (), str(path))
    assert token_matches(token, UsersFile(path).get("bob").hashed)


def request(peer: str, headers: dict[str, str] | None = None, query: str = "") -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/api/runs",
        "query_string": query.encode(),
        "headers": raw,
        "client": (peer, 50000),
        "server": ("127.0.0.1", 8765),
    }
    return Request(scope)


def identify(who: Who, *args, **kwargs) -> User | Refusal:
    return asyncio.run(who.identify(request(*args, **kwargs)))


def test_who_is_asking(tmp_path):
    users = tmp_path / "users"
    token, line = new_user("bob", "researcher", (), None)
    users.write_text(f"{line}\ncarol admin -\n")
    who = Who(
        local_user="desk",
        shared_token="shared-secret",
        users=UsersFile(users),
        header="X-Forwarded-User",
        proxies=trusted_proxies("10.0.0.5, 172.18.0.0/16"),
    )
    # From the proxy: its header says who; the users file gives the role (others: researcher).
    assert identify(who, "172.18.0.9", {"X-Forwarded-User": "carol"}) == User("carol", "admin")
    assert identify(who, "10.0.0.5", {"X-Forwarded-User": "erin"}) == User("erin", "researcher")
    assert identify(who, "::ffff:10.0.0.5", {"X-Forwarded-User": "erin"}) == User("erin", "researcher")
    # The same header from anyone else is refused, whatever else the request carries.
    spoofed = identify(who, "127.0.0.1", {"X-Forwarded-User": "carol", "Authorization": f"Bearer {token}"})
    assert spoofed == Refusal("the X-Forwarded-User header is taken only from the desk's trusted proxies", 403)
    assert identify(who, "10.0.0.5").status == 401  # the proxy did not say who
    assert identify(who, "10.0.0.5", {"X-Forwarded-User": "a b"}).status == 403
    # Tokens: a user's own, or the shared one (an admin, as the desk's own user).
    assert identify(who, "127.0.0.1", {"Authorization": f"Bearer {token}"}) == User("bob", "researcher", token=token)
    assert identify(who, "127.0.0.1", query="token=shared-secret") == User("desk", "admin", token="shared-secret")
    assert identify(who, "127.0.0.1", {"Cookie": f"desk_token={token}"}).name == "bob"
    assert identify(who, "127.0.0.1", {"Authorization": "Bearer bob.wrong"}).status == 401
    assert identify(who, "127.0.0.1", {"Authorization": "Bearer carol.anything"}).status == 401  # proxy-only user
    assert identify(who, "127.0.0.1").status == 401
    # Nothing configured: the desk's own user, an admin (a desk on loopback for one person).
    assert identify(Who(local_user="me"), "127.0.0.1") == User("me", "admin")


def test_a_proxy_header_needs_its_proxies():
    with pytest.raises(ValueError, match="DEEPRESEARCH_UI_USER_HEADER needs DEEPRESEARCH_UI_TRUSTED_PROXIES"):
        Who.from_env({"DEEPRESEARCH_UI_USER_HEADER": "X-Forwarded-User"}, "me", None)
    with pytest.raises(ValueError, match="'proxy.local' is not an address or network"):
        trusted_proxies("proxy.local")
