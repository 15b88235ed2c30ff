"""What this run does: operator options (the only home of defaults), profiles, the plan, workers."""
