"""OK-FEB (SPEC §4): the online subspace, its streaming pass, and the linear learners on its
features."""
