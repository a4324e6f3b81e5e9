"""Who the CLI acts as: ``DEEPRESEARCH_USER``, else the operating system's
user name. The runs it starts are theirs (``ResearchInput.owner``), and the
reviews and cancels it sends name them (workflows/ownership.py).

The CLI talks to Temporal directly, so this name is what the user says it
is: a deployment shared by a team needs Temporal's own authorization (see
docs/deploy.md, "A team on one deployment")."""

from __future__ import annotations

import getpass
import os
import re
from collections.abc import Mapping

from client.errors import CliError

USER_ENV = "DEEPRESEARCH_USER"
# workflows/user_names.py's rule, copied: `review` and `cancel` load nothing of
# workflows/ (tests/test_cli_imports.py); tests/test_ownership_unit.py checks the two agree.
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._@+-]{0,127}")
NAME_RULE = "letters, digits and . _ @ + - (not first), at most 128"


def cli_user(env: Mapping[str, str] | None = None) -> str:
    """The user the CLI acts as; one clear line when there is none usable."""
    env = os.environ if env is None else env
    given = (env.get(USER_ENV) or "").strip()
    if given:
        if not NAME.fullmatch(given):
            raise CliError(f"{USER_ENV}={given[:60]!r} is not a user name ({NAME_RULE})")
        return given
    try:
        name = getpass.getuser()
    except (OSError, KeyError):  # no user name for this uid (e.g. in a container)
        raise CliError(f"this process has no user name: set {USER_ENV} to the name runs are started as") from None
    if not NAME.fullmatch(name):
        raise CliError(f"the user name {name[:60]!r} cannot own runs: set {USER_ENV} to a name ({NAME_RULE})")
    return name


def acting(payload: dict, env: Mapping[str, str] | None = None) -> dict:
    """``payload`` naming the CLI's user as the one acting (``"by"``)."""
    return {**payload, "by": cli_user(env)}


async def cancel_as(client, workflow_id: str, user: str, via: str) -> None:
    """Cancel ``workflow_id`` naming who asked: the cancel request's identity
    and reason, which its history keeps (the WorkflowExecutionCancelRequested
    event's ``identity`` and ``cause``, shown by the Temporal UI)."""
    import uuid

    from temporalio.api.common.v1 import WorkflowExecution
    from temporalio.api.workflowservice.v1 import RequestCancelWorkflowExecutionRequest

    await client.workflow_service.request_cancel_workflow_execution(
        RequestCancelWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=workflow_id),
            identity=f"{user} ({via})"[:200],
            request_id=str(uuid.uuid4()),
            reason=f"cancelled by {user}"[:200],
        ),
        retry=True,
    )
