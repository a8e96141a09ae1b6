"""Solver functions shared by the estimators (no estimators live here).

* :mod:`gpuksvm.solvers.linear` — linear SVM: the problem, its data and its
  solutions, shared by primal Newton (:mod:`gpuksvm.solvers.newton`, in memory
  :mod:`gpuksvm.solvers.newton_memory`, out of core
  :mod:`gpuksvm.solvers.newton_stream`), dual coordinate descent
  (:mod:`gpuksvm.solvers.dual_cd`) and selective block minimization
  (:mod:`gpuksvm.solvers.sbm`);
* :mod:`gpuksvm.solvers.smo` — kernel SVM dual by SMO, batched;
* :mod:`gpuksvm.solvers.meb` — minimum enclosing ball on the simplex (CVM);
* :mod:`gpuksvm.solvers.svi` — support vector identification (SVI): the
  algorithm, with its steps as pure functions in :mod:`gpuksvm.solvers.svi_steps`.
"""
