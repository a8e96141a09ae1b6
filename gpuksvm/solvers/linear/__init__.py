"""Linear SVM solvers: the problem (:mod:`~gpuksvm.solvers.linear.problem`), dual coordinate
descent, primal Newton in memory and streamed, selective block minimization, online learners."""
