"""The workloads the lab runs, one module each, behind one adapter (base.py): checkpoint-tui's own agent
loop (agent_loop.py, the tutorial workload) and a user's workflow on their own worker
(user_workflow.py, agent frameworks included). Only here is a workload's kind ever asked."""

from checkpoint_tui.workloads.agent_loop import AgentLoopWorkload
from checkpoint_tui.workloads.base import Adapter, Counts
from checkpoint_tui.workloads.user_workflow import UserWorkflow

__all__ = ["Adapter", "AgentLoopWorkload", "Counts", "UserWorkflow"]
