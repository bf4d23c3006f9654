"""Executes atomic jobs: repetition, timeouts, interruption, recording."""
