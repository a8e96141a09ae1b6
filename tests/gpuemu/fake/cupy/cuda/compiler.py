class CompileException(Exception):
    """NVRTC rejected a source (as cupy.cuda.compiler.CompileException)."""

    def __init__(self, msg, source="", name="", options=(), backend="nvrtc"):
        super().__init__(msg)
        self.source, self.name, self.options, self.backend = source, name, options, backend
