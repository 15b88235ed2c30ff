"""The protocol: fixed values, budgets, hashing, identity, and why cases error."""
