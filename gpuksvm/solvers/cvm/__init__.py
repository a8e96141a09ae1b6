"""The Core Vector Machine as a minimum enclosing ball: the furthest-point search, the core-set
QP on the simplex and its K̃ row cache (SPEC §2)."""
