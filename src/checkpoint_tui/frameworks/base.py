"""What a framework module is: the interface every agent framework's module declares (ours in this
package, another's in a package of its own registered under the entry-point group
`checkpoint_tui.frameworks`). A module is the implementation: its constants and functions are the
members below (PEP 544 modules as implementations of protocols).

`recognises` says how specific its evidence is, so that no framework's word depends on the order they
are asked in: a type only one integration makes (Deep Agents' `deepagents.invoke_tool`) outranks a
shape others share (LangGraph's `<graph>.<node>`), and a type two integrations make (Strands' and
Google ADK's `invoke_model`) is told apart by the one that reads the payloads, which outranks both.
Where two are equally sure, the activity says nothing and the next one is asked."""

from __future__ import annotations

from typing import Protocol

from checkpoint_tui.frameworks.units import ActivitySeen, UnitInfo

# recognises(): not its own; a shape of type others' may share; a type only its integration makes; a type
# another integration makes too, told apart by the payloads
NO, BY_SHAPE, BY_TYPE, BY_PAYLOAD = 0, 1, 2, 3
LANGUAGES = ("python", "typescript")  # a worker's language: the words doctor's advice is written in
PYTHON_HEARTBEAT_FIX = (
    "heartbeat from the activity (activity.heartbeat() about every second) "
    "and schedule it with heartbeat_timeout=timedelta(seconds=2..10)"
)
# Doctor's advice in the worker's own language, for a worker no framework module speaks for.
ADVICE: dict[str, dict[str, str]] = {
    "python": {
        "heartbeat": PYTHON_HEARTBEAT_FIX,
        "retries": "allow retries (RetryPolicy(maximum_attempts=3) or more)",
        "local": "run side effects as regular activities (workflow.execute_activity) with a heartbeat timeout",
    },
    "typescript": {
        "heartbeat": "heartbeat from the activity (heartbeat() of @temporalio/activity about every second) "
        "and schedule it with heartbeatTimeout: '2s'..'10s' in proxyActivities",
        "retries": "allow retries (retry: { maximumAttempts: 3 } or more in proxyActivities)",
        "local": "run side effects as regular activities (proxyActivities, not proxyLocalActivities) "
        "with a heartbeatTimeout",
    },
}
# A worker command's program (its first word, a wrapper's name included) that runs JavaScript or TypeScript.
NODE_PROGRAMS = frozenset({"node", "npm", "npx", "yarn", "pnpm", "tsx", "ts-node", "bun", "deno"})


# Programs that run another command (its words follow): the language is the one that command's program speaks.
_RUNNERS = frozenset({"env", "sh", "bash", "dash", "zsh", "nice", "nohup", "exec", "uv", "poetry", "pipenv", "run"})


def language_of(cmd: tuple[str, ...] | list[str] | None) -> str:
    """The language of a worker command (one of LANGUAGES): TypeScript when its program is a node
    program, also behind `env VAR=...`, a shell's `-c` or a runner (`uv run`), else Python."""
    words = [w for arg in (cmd or ())[:16] for w in str(arg).split()[:16]][:64]
    for word in words:
        name = word.rsplit("/", 1)[-1]
        if name in NODE_PROGRAMS:
            return "typescript"
        if name in _RUNNERS or word.startswith("-") or ("=" in word and not word.startswith("/")):
            continue  # a wrapper, its flag (sh -c) or an assignment (env VAR=1): the program is further on
        return "python"
    return "python"


class Framework(Protocol):
    """One agent framework's Temporal integration, as its workflows' histories show it."""

    NAME: str  # as --framework spells it: lower case, digits and '-'
    LANGUAGE: str  # one of LANGUAGES: the language of the workers that run it

    def recognises(self, seen: ActivitySeen) -> int:
        """NO, BY_SHAPE, BY_TYPE or BY_PAYLOAD: whether, and how surely, this activity is one this framework's
        integration makes."""
        ...

    def classify(self, seen: list[ActivitySeen]) -> list[UnitInfo]:
        """One unit per activity, in order: a model request, a tool call (its name, its call id), an MCP
        call, or other. Reads untrusted decoded payloads: never raises on what it finds."""
        ...

    def heartbeat_fix(self, cls: str) -> str:
        """Doctor's advice, in the framework's words, for an activity of this class (model, tool, ...)
        whose killed attempt waits out a long timeout."""
        ...
