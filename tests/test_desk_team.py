"""A team on one desk, in a real browser: Debian's Chromium driven by
Playwright, each user signed in through a signing-in proxy (testkit's, as
oauth2-proxy would be) that tells the desk who they are by a header, the
desk as `deepresearch ui` in its own process, a real dev server and worker.

Two researchers (alice, bob), an admin (carol) and a reader (dan, team ops):
each sees only their own runs and those shared with them; every route that
acts on a run refuses anyone but its owner or an admin (403 where they may
read it, the same 404 as a made-up id where they may not); the user header
from anywhere but the proxy is refused."""

from __future__ import annotations

from contextlib import asynccontextmanager
from urllib.parse import quote

import httpx
import pytest

from testkit.auth_proxy import HEADER, SOURCE, AuthProxy
from testkit.research_script import FACT
from tests.test_desk import CHROMIUM, FLAGS, WAIT, phase_is, playwright_api
from tests.test_desk_guard import desk_process

expect = playwright_api.expect
PATIENCE = 30_000  # ms
QUESTION = "Tell me about Lantern Rock"
PASSWORDS = {name: f"pw-{name}" for name in ("alice", "bob", "carol", "dan")}
ACTS = ["review", "answer", "cancel", "ask", "slides", "podcast", "steer"]  # every route that acts on a run


@pytest.fixture(autouse=True)
def patient_expect():
    """Every check of the page waits up to ``PATIENCE`` (not Playwright's 5 s):
    a page reads its run after it loads, and on a loaded CI machine that took
    longer (CI31: the report of a just-completed run still empty at 5 s)."""
    expect.set_options(timeout=PATIENCE)
    yield
    expect.set_options(timeout=None)  # Playwright's default again


@pytest.fixture
def team(worker_env, tmp_path):
    """The desk behind the signing-in proxy; yields (proxy, desk) base URLs."""
    users = tmp_path / "users"
    users.write_text("alice researcher -\nbob researcher -\ncarol admin -\ndan reader - ops\n")
    proxy = AuthProxy("http://unset", PASSWORDS)
    env = worker_env | {
        "DEEPRESEARCH_UI_USER_HEADER": HEADER,
        "DEEPRESEARCH_UI_TRUSTED_PROXIES": SOURCE,
        "DEEPRESEARCH_UI_USERS": str(users),
        "DEEPRESEARCH_UI_HOSTS": f"127.0.0.1:{proxy.port}",  # the name the browser uses: the proxy's
    }
    with desk_process(env, tmp_path) as (desk, _port):
        proxy.upstream = desk
        with proxy:
            yield proxy.base, desk


@pytest.fixture
async def signed_in():
    """``signed_in(name)``: a browser page signed in as ``name`` (the proxy asks, the browser answers)."""
    async with playwright_api.async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)

        @asynccontextmanager
        async def page_of(name: str, **options):
            credentials = {"username": name, "password": PASSWORDS[name]}
            context = await chromium.new_context(http_credentials=credentials, **options)
            try:
                yield await context.new_page()
            finally:
                await context.close()

        yield page_of
        await chromium.close()


def row(page, run_id: str):
    return page.locator(f'[data-testid="run-row"][data-run-id="{run_id}"]')


async def start_on_page(page, base: str, *, share: str = "", auto: bool = False) -> str:
    await page.goto(base)
    await page.get_by_test_id("question-input").fill(QUESTION)
    if share or auto:
        await page.locator("summary").click()
        await page.get_by_test_id("share-input").fill(share)
        if auto:
            await page.locator("#auto-accept").check()
    await page.get_by_test_id("start-button").click()
    await page.wait_for_url("**/runs/*")
    return page.url.rsplit("/", 1)[1]


async def acts(page, base: str, run_id: str) -> dict[str, tuple[int, str]]:
    """What each acting route answers ``page``'s user on ``run_id``."""
    bodies = {"review": {"feedback": "[ACCEPTED]"}, "answer": {"answer": "x"}, "ask": {"question": "why?"}}
    out = {}
    for act in ACTS:
        reply = await page.request.post(f"{base}/api/runs/{quote(run_id, safe='')}/{act}", data=bodies.get(act, {}))
        out[act] = (reply.status, (await reply.json())["error"])
    return out


async def test_each_user_sees_and_acts_on_only_what_they_should(team, signed_in, worker, script):
    base, desk = team
    async with signed_in("alice") as alice, signed_in("bob") as bob, signed_in("carol") as carol:
        mine = await start_on_page(alice, base)
        await expect(alice.get_by_test_id("whoami")).to_have_text("alice (researcher)")
        await phase_is(alice, "awaiting_review")
        shared = await start_on_page(bob, base, share="alice, team:ops", auto=True)
        await phase_is(bob, "completed")

        # Lists: alice sees hers and the one bob shared; bob only his; carol (admin) both.
        await expect(row(alice, shared)).to_be_visible(timeout=WAIT)
        await expect(row(alice, mine)).to_be_visible(timeout=WAIT)
        await bob.reload()
        await expect(row(bob, shared)).to_be_visible(timeout=WAIT)  # (the list is read again every 5 s)
        await expect(row(bob, mine)).to_have_count(0)
        await carol.goto(base)
        await expect(row(carol, mine)).to_be_visible(timeout=WAIT)
        await expect(row(carol, shared)).to_be_visible(timeout=WAIT)

        # Bob on alice's run: nothing is there for him, exactly as for an id nobody used.
        await bob.goto(f"{base}/runs/{mine}")
        await expect(bob.locator("#notice")).to_have_text(f"there is no run with id '{mine}'")
        for path in ("", "/events", "/report.md", "/slides"):
            reply = await bob.request.get(f"{base}/api/runs/{mine}{path}")
            assert (reply.status, (await reply.json())["error"]) == (404, f"there is no run with id '{mine}'"), path
        assert set((await acts(bob, base, mine)).values()) == {(404, f"there is no run with id '{mine}'")}
        assert set((await acts(bob, base, "research-nobody")).values()) == {
            (404, "there is no run with id 'research-nobody'")
        }

        # Alice on bob's shared run: she reads it (page, stream, downloads) and may do nothing to it.
        await alice.goto(f"{base}/runs/{shared}")
        await expect(alice.get_by_test_id("report")).to_contain_text(FACT)
        await expect(alice.get_by_test_id("read-only")).to_be_visible()
        await expect(alice.get_by_test_id("owner")).to_have_text("· bob's run, shared with alice, team:ops")
        await expect(alice.get_by_test_id("ask-button")).to_be_hidden()
        assert (await alice.request.get(f"{base}/api/runs/{shared}/report.md")).status == 200
        async with httpx.AsyncClient(auth=("alice", PASSWORDS["alice"]), timeout=30) as http:
            async with http.stream("GET", f"{base}/api/runs/{shared}/events") as stream:
                assert stream.status_code == 200  # (through the proxy, streamed)
        for act, (status, error) in (await acts(alice, base, shared)).items():
            assert status == 403, (act, error)
            assert error.startswith(f"run {shared} is bob's: alice (researcher) may read it but not "), error
        assert (await bob.request.get(f"{base}/api/runs/{shared}")).status == 200

        # Carol, an admin, accepts alice's plan: the run says who did.
        await carol.goto(f"{base}/runs/{mine}")
        await carol.get_by_test_id("accept-button").click()
        await phase_is(carol, "completed")
        await alice.goto(f"{base}/runs/{mine}")
        await expect(alice.get_by_test_id("report")).to_contain_text("plan accepted by carol")
        shown = await (await alice.request.get(f"{base}/api/runs/{mine}")).json()
        assert shown["result"]["plan_accepted_by"] == "carol" and shown["owner"] == "alice" and shown["may_act"]


async def test_a_reader_reads_and_a_spoofed_header_is_refused(team, signed_in, worker, script):
    base, desk = team
    async with signed_in("bob") as bob, signed_in("dan") as dan:
        shared = await start_on_page(bob, base, share="team:ops", auto=True)
        await dan.goto(base)
        await expect(dan.get_by_test_id("whoami")).to_have_text("dan (reader)")
        await expect(dan.get_by_test_id("start-button")).to_be_hidden()
        await expect(row(dan, shared)).to_be_visible(timeout=WAIT)  # shared with his team
        reply = await dan.request.post(f"{base}/api/runs", data={"question": QUESTION})
        assert reply.status == 403 and (await reply.json())["error"].startswith("dan is a reader: readers read runs")
        assert {status for status, _ in (await acts(dan, base, shared)).values()} == {403}

    # The header sent by the browser itself: dropped by the proxy, refused by the desk.
    async with signed_in("dan", extra_http_headers={HEADER: "carol"}) as posing:
        health = await (await posing.request.get(f"{base}/api/health")).json()
        assert (health["user"], health["role"]) == ("dan", "reader")
    # The same header straight to the desk, not through the proxy: refused, page and API alike.
    async with signed_in("dan", extra_http_headers={HEADER: "carol"}) as direct:
        page = await direct.goto(desk)
        assert page.status == 403 and HEADER in await page.text()
    async with httpx.AsyncClient(timeout=30, trust_env=False) as http:
        # (also when it claims to come through the proxy: the desk never reads X-Forwarded-For)
        proxy_host = {"Host": base.removeprefix("http://"), "X-Forwarded-For": SOURCE}
        for path in ("/api/runs", f"/api/runs/{shared}", f"/api/runs/{shared}/report.md"):
            reply = await http.get(desk + path, headers=proxy_host | {HEADER: "carol"})
            assert reply.status_code == 403, path
            assert reply.json()["error"] == f"the {HEADER} header is taken only from the desk's trusted proxies"
        reply = await http.post(f"{desk}/api/runs/{shared}/cancel", json={}, headers=proxy_host | {HEADER: "bob"})
        assert reply.status_code == 403
        assert (await http.get(desk + "/api/runs", headers=proxy_host)).status_code == 401  # and nobody else gets in
