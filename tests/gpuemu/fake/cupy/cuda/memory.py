class OutOfMemoryError(MemoryError):
    pass
