"""What can be evaluated: the frozen catalog, selection scopes and shards, the inventory check."""
