"""The exactly-once key of a LangGraph tool call under `temporalio.langgraph`.

    @tool("send_email")
    async def send_email(to: str, body: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        return await exactly_once(kind="email", payload=line, write=send, key=tool_call_key(tool_call_id))

`tool_call_key(tool_call_id)` is `langgraph:<workflow id>:<tool call id>`. The tool runs inside the
node that executes tool calls (an activity, `<graph>.tools`), whose input is the graph's state: the
call id is the one the model node's activity made and history keeps in its result, so:
- an activity retry of the tools node (a killed worker, a timeout) has the same key (`recovered` or
  `skipped`); a tools node that runs several calls re-runs them all, those done skipped by their keys;
- a workflow reset to between the model node and the tools node keeps the call id (skipped); a reset
  to before the model node runs it again and the model makes a new call id (a new key: it sends
  again). Both measured (tests/test_langgraph_classify.py);
- a continue-as-new keeps the workflow id; a node the plugin's task cache carries over
  (`temporalio.langgraph.graph(name, cache=cache())`, keyed by the node and its input) is not run
  again, so its calls keep their ids and keys; a graph that starts over makes new calls, new keys
  (read in temporalio-langgraph 0.1.0, not measured).
Duck-typed on a string: it imports neither LangGraph nor LangChain. One key per tool call: a tool with
two effects suffixes it.
"""

from __future__ import annotations

from checkpoint_tui.integrations._keys import call_key

FRAMEWORK = "langgraph"


def tool_call_key(tool_call_id: object) -> str:
    """The key of this tool call: workflow id + the model's tool call id (see the module doc); raises
    EffectRefused outside an activity or without a usable id."""
    return call_key(FRAMEWORK, tool_call_id)
