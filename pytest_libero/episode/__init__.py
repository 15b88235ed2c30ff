"""Running one case: the control loop, the case with its evidence, process isolation, the record."""
