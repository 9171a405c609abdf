"""The proving tools: `--verify` and its scenarios, `chaos`, the audit, the naive-vs-durable comparison.
Everything they present as proof is read back from the ledger, the artifact files or Temporal."""
