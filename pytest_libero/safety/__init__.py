"""The safety axis: side effects on the task's objects, scored apart from native success."""
