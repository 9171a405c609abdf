"""The two graphs, `mailer` and `mailer_guarded`: a ReAct loop of an `agent` node (a scripted offline
chat model) and a `tools` node (the `send_email` tool), each node an activity of
`temporalio.langgraph`. Built at import, in a module the worker and the workflows both import
(LangGraph's plugin wraps the nodes of the graphs it is given; node functions must be module-level).

The model decides from the conversation alone (the plan in the first human message, the tool
messages seen), so an `agent` node re-run on a fresh worker answers the same; its call ids are random,
as a real model's, and history keeps the ones the run saw."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from datetime import timedelta
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage, convert_to_messages
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, MessagesState, StateGraph

from mailroom import Step, next_step
from tools import send_email, send_email_guarded

MODEL_NAME = "scripted-mailer"
# Temporal needs a timeout on every activity; the plugin sets none. No heartbeat timeout and the
# default retry policy, as the framework ships them. 10 s covers the longest think or pace (5 s).
NODE = {"execute_in": "activity", "start_to_close_timeout": timedelta(seconds=10)}


class ScriptedMailer(BaseChatModel):
    """Sends one email per turn through `send_email`, then says how many it sent."""

    @property
    def _llm_type(self) -> str:
        return MODEL_NAME

    def _generate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        step = _decide(messages)
        time.sleep(step.think)  # a model takes a while to answer
        return _answer(messages, step)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        step = _decide(messages)
        await asyncio.sleep(step.think)
        return _answer(messages, step)


def _decide(messages: list[BaseMessage]) -> Step:
    plan = next((m.content for m in messages if isinstance(m, HumanMessage)), None)
    return next_step(plan, sum(isinstance(m, ToolMessage) for m in messages))


def _answer(messages: list[BaseMessage], step: Step) -> ChatResult:
    usage_in = max(1, len(json.dumps([m.content for m in messages], default=str)) // 4)  # a rough count
    if step.text is not None:
        reply = AIMessage(content=step.text)
    else:
        args = {"to": step.to, "body": step.body, "pace": step.pace}
        call = {"name": "send_email", "args": args, "id": f"call_{uuid.uuid4().hex[:24]}", "type": "tool_call"}
        reply = AIMessage(content="", tool_calls=[call])
    usage_out = max(1, len(str(reply.content) + json.dumps(reply.tool_calls)) // 4)
    reply.usage_metadata = {"input_tokens": usage_in, "output_tokens": usage_out, "total_tokens": usage_in + usage_out}
    reply.response_metadata = {"model_name": MODEL_NAME}
    reply.id = f"msg_{uuid.uuid4().hex[:24]}"
    return ChatResult(generations=[ChatGeneration(message=reply)])


def _model() -> Any:
    """The script in this process; with ANTHROPIC_BASE_URL set, LangChain's ChatAnthropic at that server
    (../scripted_model.py plays the same script at its root), the tool's schema bound, where a model
    fault can be put in between (`--model-endpoint ANTHROPIC_BASE_URL=...`)."""
    base = os.environ.get("ANTHROPIC_BASE_URL")
    if not base:
        return ScriptedMailer()
    from langchain_anthropic import ChatAnthropic

    key = os.environ.get("ANTHROPIC_API_KEY") or "unused-by-the-scripted-model"
    return ChatAnthropic(model=MODEL_NAME, base_url=base, api_key=key, max_tokens=1024).bind_tools([send_email])


MODEL = _model()


async def agent(state: MessagesState) -> dict:
    # State crosses the activity boundary as plain dicts: make messages of them again.
    reply = await MODEL.ainvoke(convert_to_messages(state["messages"]))
    return {"messages": [reply]}


async def _run_tools(state: MessagesState, tools: list[BaseTool]) -> dict:
    """Every tool call of the last AI message, in order, each answered by a ToolMessage (what the
    prebuilt ToolNode does, without the config and store it wants from the workflow side)."""
    last = convert_to_messages(state["messages"])[-1]
    by_name = {t.name: t for t in tools}
    replies: list[ToolMessage] = []
    for call in getattr(last, "tool_calls", None) or []:
        chosen = by_name.get(call["name"])
        if chosen is None:  # the model's mistake, told back to it as a real ToolNode does
            replies.append(ToolMessage(f"no tool {call['name']!r}", tool_call_id=call["id"], status="error"))
        else:
            replies.append(await chosen.ainvoke({**call, "type": "tool_call"}))  # injects tool_call_id
    return {"messages": replies}


# One function per graph: the plugin identifies a node by its function's module and name.
async def tools_blind(state: MessagesState) -> dict:
    return await _run_tools(state, [send_email])


async def tools_guarded(state: MessagesState) -> dict:
    return await _run_tools(state, [send_email_guarded])


async def route(state: MessagesState) -> str:
    """To the tools while the model asks for some, else the end. Async: a sync router runs through
    run_in_executor, which a workflow cannot, and fails every workflow task."""
    last = state["messages"][-1]
    calls = last.get("tool_calls") if isinstance(last, dict) else getattr(last, "tool_calls", None)
    return "tools" if calls else END


def build(tools_node: Any) -> StateGraph:
    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent, metadata=dict(NODE))
    graph.add_node("tools", tools_node, metadata=dict(NODE))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph


GRAPHS = {"mailer": build(tools_blind), "mailer_guarded": build(tools_guarded)}
