"""Doctor's fixes, in the words of the framework the workflow runs on."""

from __future__ import annotations


def heartbeat_fix(cls: str, framework: str | None) -> str:
    """How to make a killed worker's attempt of this class (model, tool...) fail fast, in the framework's words."""
    if framework == "pydantic-ai":
        if cls == "model":
            return (
                "TemporalAgent(..., model_activity_config=ActivityConfig(heartbeat_timeout=timedelta(seconds=5)))"
                ": its activities already heartbeat in the background"
            )
        return (
            "TemporalAgent(..., toolset_activity_config={'<toolset id>': ActivityConfig("
            "heartbeat_timeout=timedelta(seconds=5))}): pydantic-ai sets none on tools by default, though "
            "its activities heartbeat in the background"
        )
    if framework == "openai-agents":
        if cls == "model":
            return (
                "the plugin's model activity does not heartbeat: keep ModelActivityParameters("
                "start_to_close_timeout=...) near your longest model call, and let the lab's supervisor "
                "fail a dead worker's attempt early"
            )
        return (
            "heartbeat from the tool's activity (activity.heartbeat() about every second) and pass "
            "heartbeat_timeout=timedelta(seconds=5) to activity_as_tool(...)"
        )
    if framework == "strands":
        if cls == "model":
            return (
                "TemporalAgent(..., heartbeat_timeout=timedelta(seconds=5)): its model activity already "
                "heartbeats, only the timeout is missing"
            )
        return (
            "heartbeat from the tool's activity (activity.heartbeat() about every second) and pass "
            "heartbeat_timeout=timedelta(seconds=5) to activity_as_tool(...)"
        )
    if framework == "langgraph":
        return (
            "heartbeat from the node (activity.heartbeat() about every second) and put "
            "heartbeat_timeout=timedelta(seconds=5) in the node's metadata, beside execute_in='activity'"
        )
    return (
        "heartbeat from the activity (activity.heartbeat() about every second) "
        "and schedule it with heartbeat_timeout=timedelta(seconds=2..10)"
    )
