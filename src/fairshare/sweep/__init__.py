"""Sweeps: variants of the policy and cluster files replayed on the same arrivals, in parallel, and the
decision report that answers the design's five decisions and capacity (docs/decisions.md)."""
