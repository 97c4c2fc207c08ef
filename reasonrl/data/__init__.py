"""Data: the verl/Reasoning360 row schema, file I/O, procedural tasks, prompt sampling."""
