"""The exactly-once key of a LangChain Deep Agents tool call under `temporalio.deepagents`.

    @tool
    async def send_email(to: str, body: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        return await exactly_once(kind="email", payload=line, write=send, key=tool_call_key(tool_call_id))

    SEND_EMAIL = tool_as_activity(send_email, start_to_close_timeout=timedelta(seconds=10))

`tool_call_key(tool_call_id)` is `deepagents:<workflow id>:<tool call id>`. Not LangGraph's key: the
id a tool wrapped by `tool_as_activity` gets through `InjectedToolCallId` is the plugin's own, drawn
in the workflow by `workflow.uuid4()` when it schedules the `deepagents.invoke_tool` activity and
kept in that activity's input (`tool_call_id`); the model's id (`call_...`) rides in the input's
`args` and is overwritten by the injection (measured with temporalio-deepagents 0.0.3). So:
- an activity retry (a killed worker, a timeout) has the same key (`recovered` or `skipped`), and so
  has a replay of the workflow (the same seed draws the same id);
- a workflow reset to any point before the tool call was scheduled, including the workflow task right
  after the model request that asked for it, runs on a new random seed: a new id, a new key, and the
  tool sends again (measured: tests/test_deepagents_classify.py). A write that checks for itself (as
  the example's append does) is the only guard across a reset;
- a continue-as-new (`run_deep_agent`) carries the conversation, not the calls: a call made after it is
  a new call with a new key (read in temporalio-deepagents 0.0.3, not measured).
A tool given by `activity_as_tool` is the user's own activity and receives no call id at all.
Duck-typed on a string: it imports neither Deep Agents nor LangChain. One key per tool call: a tool
with two effects suffixes it.
"""

from __future__ import annotations

from checkpoint_tui.integrations._keys import call_key

FRAMEWORK = "deepagents"


def tool_call_key(tool_call_id: object) -> str:
    """The key of this tool call: workflow id + the plugin's tool call id (see the module doc); raises
    EffectRefused outside an activity or without a usable id."""
    return call_key(FRAMEWORK, tool_call_id)
