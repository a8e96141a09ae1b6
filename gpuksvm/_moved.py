"""Module paths of the previous layout, kept importable for one release (with a FutureWarning, as scikit-learn warns of what users must change).

The package is laid out by layer (``array``, ``kernels``, ``solvers``, ``estimators``,
``persistence``, ``scaleout``, ``cli``).  Code that imports a module by its previous path —
``from gpuksvm.llsvm import LLSVM``, ``python -m gpuksvm.demo``, or a pickle that names
``gpuksvm.llsvm.LLSVM`` — gets the module at its present path, and a ``FutureWarning`` naming it.  The public
names (``gpuksvm.LLSVM``, ``gpuksvm.save``, ...) and model files are not affected.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import CodeType, ModuleType

__all__ = ["MOVED_MODULES", "install"]

#: previous module path -> present module path (``gpuksvm.doctor`` is not here: that name is the
#: public function :func:`gpuksvm.doctor`, which an alias module would replace on the package)
MOVED_MODULES: dict[str, str] = {
    "gpuksvm._cuda": "gpuksvm.array.cuda_sources",
    "gpuksvm._gpu_probe": "gpuksvm.array.gpu_probe",
    "gpuksvm.backend": "gpuksvm.array.backend",
    "gpuksvm.base": "gpuksvm.estimators.base",
    "gpuksvm.blocks": "gpuksvm.data.blocks",
    "gpuksvm.calibration": "gpuksvm.estimators.calibration",
    "gpuksvm.cluster": "gpuksvm.solvers.nystrom.kmeans",
    "gpuksvm.command": "gpuksvm.cli.contract",
    "gpuksvm.cvm": "gpuksvm.estimators.cvm",
    "gpuksvm.cvm_base": "gpuksvm.estimators.cvm_base",
    "gpuksvm.demo": "gpuksvm.cli.demo",
    "gpuksvm.distributed": "gpuksvm.scaleout.previous_api",
    "gpuksvm.files": "gpuksvm.data.files",
    "gpuksvm.io": "gpuksvm.persistence.io",
    "gpuksvm.kernel_svc": "gpuksvm.estimators.kernel_svc",
    "gpuksvm.linalg": "gpuksvm.array.linalg",
    "gpuksvm.linear_svm": "gpuksvm.estimators.linear_svm",
    "gpuksvm.llsvm": "gpuksvm.estimators.llsvm",
    "gpuksvm.model_archive": "gpuksvm.persistence.archive",
    "gpuksvm.model_format": "gpuksvm.persistence.model_format",
    "gpuksvm.model_format.consistency": "gpuksvm.persistence.model_format.consistency",
    "gpuksvm.model_format.decode": "gpuksvm.persistence.model_format.decode",
    "gpuksvm.model_format.describe": "gpuksvm.persistence.model_format.describe",
    "gpuksvm.model_format.encode": "gpuksvm.persistence.model_format.encode",
    "gpuksvm.model_format.registry": "gpuksvm.persistence.model_format.registry",
    "gpuksvm.model_format.specs": "gpuksvm.persistence.model_format.specs",
    "gpuksvm.model_format.v1": "gpuksvm.persistence.model_format.v1",
    "gpuksvm.multiclass": "gpuksvm.solvers.multiclass",
    "gpuksvm.nystrom": "gpuksvm.solvers.nystrom.maps",
    "gpuksvm.okfeb": "gpuksvm.estimators.okfeb",
    "gpuksvm.okfeb_extractor": "gpuksvm.estimators.okfeb_extractor",
    "gpuksvm.params": "gpuksvm.estimators.params",
    "gpuksvm.progress": "gpuksvm.solvers.progress",
    "gpuksvm.solvers._blas": "gpuksvm.array.blas_threads",
    "gpuksvm.solvers.dual_cd": "gpuksvm.solvers.linear.dual_cd",
    "gpuksvm.solvers.ktilde_cache": "gpuksvm.solvers.cvm.ktilde_cache",
    "gpuksvm.solvers.meb": "gpuksvm.solvers.cvm.meb",
    "gpuksvm.solvers.meb_scan": "gpuksvm.solvers.cvm.scan",
    "gpuksvm.solvers.newton": "gpuksvm.solvers.linear.newton",
    "gpuksvm.solvers.newton_memory": "gpuksvm.solvers.linear.newton_memory",
    "gpuksvm.solvers.newton_stream": "gpuksvm.solvers.linear.newton_stream",
    "gpuksvm.solvers.okfeb_learners": "gpuksvm.solvers.okfeb.learners",
    "gpuksvm.solvers.okfeb_stream": "gpuksvm.solvers.okfeb.stream",
    "gpuksvm.solvers.online": "gpuksvm.solvers.linear.online",
    "gpuksvm.solvers.sbm": "gpuksvm.solvers.linear.sbm",
    "gpuksvm.solvers.simplex_qp": "gpuksvm.solvers.cvm.simplex_qp",
    "gpuksvm.solvers.smo_cuda": "gpuksvm.solvers.smo.cuda_launch",
    "gpuksvm.solvers.smo_host": "gpuksvm.solvers.smo.host",
    "gpuksvm.solvers.smo_working_set": "gpuksvm.solvers.smo.working_set",
    "gpuksvm.solvers.svi_steps": "gpuksvm.solvers.svi.steps",
    "gpuksvm.svc_surface": "gpuksvm.estimators.svc_surface",
    "gpuksvm.svi": "gpuksvm.estimators.svi",
    "gpuksvm.validation": "gpuksvm.array.validation",
}


class _MovedModuleLoader(importlib.abc.Loader):
    """Loads a previous path as the module at its present path (the same module object)."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def _warn(self) -> None:
        warnings.warn(f"{self.old} has moved to {self.new}; the previous path is removed in the next release",
                      FutureWarning, stacklevel=4)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        self._warn()
        module = importlib.import_module(self.new)
        self._own_spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import machinery has set __spec__ to the alias's spec: give the module its own back
        module.__spec__ = self._own_spec

    def get_code(self, fullname: str) -> CodeType | None:
        """The present module's code, so that ``python -m <previous path>`` still runs."""
        self._warn()
        spec = importlib.util.find_spec(self.new)
        return spec.loader.get_code(self.new)  # type: ignore[union-attr]


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None):
        new = MOVED_MODULES.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedModuleLoader(fullname, new))


_FINDER = _MovedModuleFinder()


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once).

    First, because a previous path below a moved package (``gpuksvm.model_format.consistency``)
    would otherwise be found as a file through the package's present ``__path__`` and loaded a
    second time, as a second module.  The finder answers only the exact names of
    :data:`MOVED_MODULES`, none of which is a present module (``tests/test_moved_modules.py``).
    """
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _FINDER)
