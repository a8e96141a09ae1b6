"""Solver functions shared by the estimators (no estimators live here).

* :mod:`gpuksvm.solvers.linear.problem` — linear SVM: the problem, its data and its
  solutions, shared by primal Newton (:mod:`gpuksvm.solvers.linear.newton`, in memory
  :mod:`gpuksvm.solvers.linear.newton_memory`, out of core
  :mod:`gpuksvm.solvers.linear.newton_stream`), dual coordinate descent
  (:mod:`gpuksvm.solvers.linear.dual_cd`) and selective block minimization
  (:mod:`gpuksvm.solvers.linear.sbm`);
* :mod:`gpuksvm.solvers.smo.engines` — kernel SVM dual by SMO, batched;
* :mod:`gpuksvm.solvers.cvm.meb` — minimum enclosing ball on the simplex (CVM);
* :mod:`gpuksvm.solvers.svi.algorithm` — support vector identification (SVI): the
  algorithm, with its steps as pure functions in :mod:`gpuksvm.solvers.svi.steps`.
"""
