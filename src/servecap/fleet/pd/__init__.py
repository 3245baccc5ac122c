"""Disaggregated prefill and decode: roles, the KV link, the P/D fleet (docs/fleet.md)."""
