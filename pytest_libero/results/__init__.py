"""The run folder: results.jsonl, summaries, gates, merging; written on the controller only."""
