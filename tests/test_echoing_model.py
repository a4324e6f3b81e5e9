"""A weak model that repeats its own request (issue 31, seen with Gemma 3 270M
and SmolLM2-135M on llama-cpp-python): the coordinator, researcher and
reporter answering with their instructions, the planner returning its
prompt's example, a report in English for a Chinese question, and a
reporter that fails once the research is done (issue 27). Real dev server,
real worker, scripted model over HTTP: what the user gets is never the echo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testkit.llm_server import Reply, last_user
from testkit.research_script import FACT
from testkit.runs import keep_history, start
from workflows.models import RunStatus

QUESTION = "How many ships did the Lantern Rock lighthouse keeper log in 1911?"
QUESTION_ZH = "灯塔看守人在1911年记录了多少艘船只？请说明来源。"
BIN = Path(sys.executable).parent


def instructions(request: dict) -> str:
    """The system prompt the model was sent: what a weak model echoes."""
    return request["messages"][0]["content"]


def run_cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "deepresearch"), *args], env=env, capture_output=True, text=True, timeout=120)


async def test_a_reporter_that_echoes_its_instructions_gives_the_findings_as_the_report(
    temporal_client, task_queue, worker, llm, script
):
    script.reporter = instructions  # every time: "You are the reporter of a deep-research team…"
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    await keep_history(handle, "reporter_echoed")
    assert result.status == "completed"
    report = result.final_report
    assert "You are the reporter" not in report and "## Structure" not in report
    assert report.startswith(f"# {QUESTION}")
    assert "the reporter failed" in report[:800] and "repeated its instructions" in report[:800]
    assert FACT in report  # the researcher's findings, as written
    assert "## Sources the run read" in report and result.citations
    assert result.warnings and "the reporter failed" in result.warnings[0]
    asked = llm.calls("reporter")
    assert len(asked) == 2 and "repeated your instructions" in last_user(asked[1])
    status = await handle.query("status", result_type=RunStatus)
    assert status.warnings == result.warnings


async def test_a_reporter_that_echoes_once_is_asked_again_and_its_report_ships(
    temporal_client, task_queue, worker, llm, script
):
    written = script.reporter
    script.reporter = lambda request: instructions(request) if len(llm.calls("reporter")) == 1 else written(request)
    result = await (await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)).result()
    assert result.status == "completed" and result.final_report.startswith("# Scripted Report")
    assert "You are the reporter" not in result.final_report and not result.warnings


async def test_a_researcher_that_echoes_its_instructions_leaves_no_echo_in_the_findings(
    temporal_client, task_queue, worker, llm, script
):
    script.steps = [("Find the lighthouse fact", "research")]
    script.researcher = instructions
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    await keep_history(handle, "researcher_echoed")
    assert result.status == "completed"
    findings = result.plan.steps[0].execution_res
    assert findings.startswith("(no usable findings") and "You are the researcher" not in findings
    asked = llm.calls("researcher")
    # its first answer came before the step's passages: asked its task again with them,
    # then, an echo again, once more without tools
    assert len(asked) == 3 and "# Evidence gathered for this step" in last_user(asked[1])
    assert asked[2].get("tool_choice") == "none" and "repeated your instructions" in last_user(asked[2])
    assert "You are the researcher" not in last_user(llm.calls("reporter")[0])


async def test_a_coordinator_that_echoes_its_instructions_hands_the_question_off(
    temporal_client, task_queue, worker, llm, script
):
    script.coordinator = instructions  # even to a greeting: the echo must not be the answer
    handle = await start(temporal_client, task_queue, "Hello there!", auto_accept_plan=True)
    result = await handle.result()
    await keep_history(handle, "coordinator_echoed")
    assert "You are the coordinator" not in result.final_report
    assert result.status == "completed" and llm.calls("planner")
    asked = llm.calls("coordinator")
    assert len(asked) == 2 and "repeated your instructions" in last_user(asked[1])


PROMPT_EXAMPLE = {
    "locale": "en-US",
    "has_enough_context": False,
    "thought": "one sentence: what the user needs",
    "title": "a short title for the research",
    "steps": [
        {
            "need_search": True,
            "title": "short name of the step",
            "description": "what to find out, precisely",
            "step_type": "research",
        }
    ],
}


async def test_a_plan_that_copies_the_prompts_example_is_refused(temporal_client, task_queue, worker, llm, script):
    script.planner = lambda request: json.dumps(PROMPT_EXAMPLE)  # twice, as Gemma did
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    assert result.status == "completed"
    assert [(s.title, s.description) for s in result.plan.steps] == [(QUESTION, QUESTION)]
    asked = llm.calls("planner")
    assert len(asked) == 2 and "copies the prompt's example" in last_user(asked[1])
    assert "what to find out" not in last_user(llm.calls("researcher")[0])
    status = await handle.query("status", result_type=RunStatus)
    assert status.note and "as one step" in status.note


def english_report(request: dict) -> str:
    return "# Lighthouse ships\n\n## Key Points\n" + "- The keeper logged 4417 ships in 1911, the log book says.\n" * 8


def chinese_report(request: dict) -> str:
    return "# 灯塔船只\n\n## 要点\n" + "- 看守人在1911年记录了4417艘船只，据航海日志记载。\n" * 8


async def test_a_report_in_the_wrong_language_is_asked_for_again_in_the_runs_language(
    temporal_client, task_queue, worker, llm, script
):
    script.reporter = lambda request: (
        english_report(request) if len(llm.calls("reporter")) == 1 else chinese_report(request)
    )
    handle = await start(temporal_client, task_queue, QUESTION_ZH, auto_accept_plan=True)
    result = await handle.result()
    await keep_history(handle, "report_language_asked_again")
    assert result.locale == "zh-CN" and result.status == "completed"
    assert result.final_report.startswith("# 灯塔船只") and not result.warnings
    asked = llm.calls("reporter")
    assert "Chinese (zh-CN)" in instructions(asked[0])  # the language reaches the prompt by name
    assert len(asked) == 2 and "not written in Chinese (zh-CN)" in last_user(asked[1])


async def test_a_report_still_in_the_wrong_language_is_kept_with_a_warning(
    temporal_client, task_queue, worker, llm, script
):
    script.reporter = english_report
    result = await (await start(temporal_client, task_queue, QUESTION_ZH, auto_accept_plan=True)).result()
    assert result.status == "completed" and result.final_report.startswith("# Lighthouse ships")
    assert any("not written in Chinese (zh-CN)" in w for w in result.warnings)
    assert len(llm.calls("reporter")) == 2


async def test_a_reporter_that_fails_after_the_research_leaves_a_report_for_result(
    temporal_client, task_queue, worker, worker_env, llm, script
):
    script.reporter = lambda request: Reply(status=400, content="this model cannot write reports")
    handle = await start(temporal_client, task_queue, QUESTION, auto_accept_plan=True)
    result = await handle.result()
    await keep_history(handle, "reporter_failed")
    assert result.status == "completed"
    assert (
        "the reporter failed" in result.final_report[:800] and "this model cannot write reports" in result.final_report
    )
    assert FACT in result.final_report

    shown = run_cli(worker_env | {"COLUMNS": "200"}, "result", handle.id)
    assert shown.returncode == 0, shown.stderr
    assert "the reporter failed" in shown.stdout and FACT in shown.stdout
    assert "warning: the reporter failed" in shown.stderr
    as_json = run_cli(worker_env, "result", handle.id, "--json")
    data = json.loads(as_json.stdout)
    assert data["status"] == "completed" and "the reporter failed" in data["warnings"][0]
    assert "the reporter failed" in data["final_report"]


async def test_a_cancelled_run_whose_reporter_fails_still_ends_with_its_findings(
    temporal_client, task_queue, worker, llm, script
):
    from testkit.runs import wait_for_phase

    script.reporter = lambda request: Reply(status=400, content="no reports today")
    script.steps = [("Find the lighthouse fact", "research")]
    handle = await start(temporal_client, task_queue, QUESTION)  # waits for review: cancelled there
    await wait_for_phase(handle, "awaiting_review")
    await handle.cancel()
    result = await handle.result()
    assert result.status == "cancelled"
    assert "the reporter failed" in result.final_report and "the run was cancelled" in result.final_report
