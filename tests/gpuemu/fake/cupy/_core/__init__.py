"""cupy._core: only ``core.compile_with_cache`` (what ``RawModule`` compiles with)."""
