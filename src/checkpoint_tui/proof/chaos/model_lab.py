"""What chaos adds for an agent's model endpoints (--model-endpoint NAME=URL): a model proxy in front of
each (proof/nemeses/model_proxy.py; the workers get NAME pointing at it), the model-* nemeses fired
through it, and the report's `fleet.models`: per endpoint, its requests and, per fault, what it cost,
from the proxy's record of every request:

- `met`: the requests that met the fault; `statuses`, what they got (`None`: no answer at all, held),
  and `broken`, how many answers broke off (cut);
- `tokens_billed`: the tokens the endpoint reported for those requests (an answer cut, slowed or
  garbled was billed, whatever the agent made of it; a stream cut before its usage came says none);
- `asked_after`: the requests (any run's) from the moment the fault stopped meeting requests to the
  first answer an agent could use (a 2xx passed on whole), that one included;
- `recovered_s`: the fault's start to that answer (null: none came before chaos ended).

Whether a tool ran again because of a fault is the audit's (re-executed activities and their causes),
read from history as for any other nemesis."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, replace

from checkpoint_tui.proof.chaos.schedule import ChaosEvent
from checkpoint_tui.proof.nemeses.model_faults import FAULTS, Fault
from checkpoint_tui.proof.nemeses.model_proxy import Exchange, ModelProxy
from checkpoint_tui.proof.nemeses.records import Hit, Miss
from checkpoint_tui.settings import Settings


@dataclass(frozen=True)
class _Spell:
    """One fault as it was in force on one endpoint."""

    endpoint: str
    kind: str
    began: float  # wall time
    stopped: float  # it stopped meeting requests: its last one, or the end of its time
    met: int


class ModelLab:
    def __init__(self) -> None:
        self.proxies: dict[str, ModelProxy] = {}
        self.spells: list[_Spell] = []

    async def start(self, settings: Settings) -> Settings:
        """Before the supervisor: each endpoint behind its proxy; the settings the workers get."""
        routed = []
        for name, url in settings.model_endpoints:
            proxy = self.proxies[name] = ModelProxy(name, url)
            routed.append((name, await proxy.start()))
        return replace(settings, model_endpoints=tuple(routed)) if routed else settings

    async def strike(self, ev: ChaosEvent) -> Hit | Miss | None:
        """A model fault, for its requests or its duration; None: not a model fault."""
        if ev.kind not in FAULTS:
            return None
        opts = dict(ev.opts)
        name = str(opts.get("endpoint") or next(iter(self.proxies)))
        proxy = self.proxies[name]
        fault = Fault(
            ev.kind,
            status=_whole(opts.get("status"), 503),
            retry_after_s=_whole(opts.get("retry_after_s"), 1),
            piece_delay_ms=_whole(opts.get("piece_delay_ms"), 200),
        )
        requests = _whole(opts.get("requests"), 0) or None
        began = time.time()
        try:
            spell = await proxy.fault(fault, requests, ev.duration_s)
        except RuntimeError as err:  # two faults of one endpoint overlap in the schedule: said, not a crash
            return Miss(str(err)[:200])
        if not spell.met:  # a fault that met no request proved nothing: not fired, so no verdict leans on it
            return Miss(f"no model request came to {name} while it was in force")
        self.spells.append(_Spell(name, ev.kind, began, spell.stopped, spell.met))
        detail = {"endpoint": name, "fault": ev.kind, "held_until": time.time(), "met": spell.met}
        return Hit(began, None, detail={**detail, **({"requests": requests} if requests is not None else {})})

    def figures(self) -> dict[str, dict[str, object]] | None:
        """The report's `fleet.models` (see the module's docstring)."""
        if not self.proxies:
            return None
        out: dict[str, dict[str, object]] = {}
        for name, proxy in self.proxies.items():
            spells = [_cost(s, proxy.exchanges) for s in self.spells if s.endpoint == name]
            out[name] = {**proxy.stats(), "spells": spells}
        return out

    async def close(self) -> None:
        for proxy in self.proxies.values():
            with contextlib.suppress(Exception):
                await proxy.close()


def _whole(value: object, default: int) -> int:
    """A schedule's number (checked when it was read: fleet_events.opts_of), or the default."""
    return int(value) if isinstance(value, int | float) else default


def _cost(spell: _Spell, exchanges: list[Exchange]) -> dict[str, object]:
    met = [e for e in exchanges if e.fault == spell.kind and spell.began <= e.at <= spell.stopped]
    statuses: dict[str, int] = {}
    for e in met:
        statuses[str(e.status)] = statuses.get(str(e.status), 0) + 1
    billed = sum((e.prompt_tokens or 0) + (e.completion_tokens or 0) for e in met)
    after = sorted((e for e in exchanges if e.at >= spell.stopped and e.fault != spell.kind), key=lambda e: e.at)
    ok = next((i for i, e in enumerate(after) if e.usable), None)
    recovered = after[ok] if ok is not None else None
    return {
        "fault": spell.kind,
        "began": spell.began,
        "stopped": spell.stopped,
        "met": spell.met,
        "statuses": statuses,
        "broken": sum(e.broken for e in met),
        "tokens_billed": billed,
        "asked_after": ok + 1 if ok is not None else len(after),
        "recovered_s": round(recovered.at + recovered.seconds - spell.began, 3) if recovered is not None else None,
    }
