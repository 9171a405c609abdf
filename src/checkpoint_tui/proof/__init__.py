"""The proving tools, one folder a job: `verify/` (`--verify` and each workload's scenarios), `chaos/` (the
engine, its targets, schedules, shrinking, coverage), `nemeses/` (what breaks a run and where it lands),
`replay/`, `bundle/`, `measure/` (doctor --measure, compare); the checks and their JUnit at the root.
Everything they present as proof is read back from the ledger, the artifact files or Temporal."""
