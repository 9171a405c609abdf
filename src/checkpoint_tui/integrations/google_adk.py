"""The exactly-once key of a Google ADK tool call under `temporalio.google_adk`.

`temporalio.google_adk.workflow.activity_as_tool(fn)` hands an activity that declares a parameter
`tool_context: ToolContextSnapshot` a snapshot of ADK's tool context (hidden from the model, like a
native tool's `tool_context`), whose `function_call_id` is the id of the function call being run:

    @activity.defn
    async def send_email_guarded(to: str, body: str, tool_context: ToolContextSnapshot) -> str:
        return await exactly_once(kind="email", payload=line, write=send, key=tool_call_key(tool_context))

`tool_call_key(tool_context)` is `google-adk:<workflow id>:<function call id>`. The id is the model's
(made inside the `invoke_model` activity, whose result history keeps) or, when the model gives none,
ADK's `adk-<uuid>` made in the workflow from `workflow.uuid4()` (the plugin installs it), so replay
makes the same one. The snapshot is in the tool activity's input, so:
- an activity retry (a killed worker, a timeout) has the same key (`recovered` or `skipped`);
- a reset to between the model request and the tool call keeps the request's result and so a model's
  id (`skipped`); a reset to before the request runs it again and the model makes a new id (a new
  key: the tool sends again). An id ADK made after the reset point may differ too (a reset reseeds
  the workflow's randomness);
- a continue-as-new starts a new ADK run, whose model requests make new ids (the workflow id stays).
A model that repeats ids makes one key of all its calls. Duck-typed: imports no ADK.
"""

from __future__ import annotations

from checkpoint_tui.integrations._keys import call_key

FRAMEWORK = "google-adk"


def tool_call_key(tool_context: object) -> str:
    """The key of this tool call: workflow id + the function call id of `tool_context` (a
    `ToolContextSnapshot`, or the id itself as a string; see the module doc). Raises EffectRefused
    outside an activity or without a usable id."""
    call_id = tool_context if isinstance(tool_context, str) else getattr(tool_context, "function_call_id", None)
    return call_key(FRAMEWORK, call_id)
