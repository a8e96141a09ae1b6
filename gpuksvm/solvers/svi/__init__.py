"""SVI — support vector identification (SPEC §3): the algorithm and its steps as pure functions."""
