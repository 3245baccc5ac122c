"""Pure capacity arithmetic: no I/O, clock, randomness or globals. Every formula cites its source."""
