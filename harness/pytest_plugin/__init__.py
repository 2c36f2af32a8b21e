"""The pytest adapter: the plugin, the fixture and the per-build run state and setup."""
