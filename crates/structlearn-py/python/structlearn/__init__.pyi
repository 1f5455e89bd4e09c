from os import PathLike
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt

from . import _core as _core
from . import datasets as datasets
from . import oracles as oracles
from ._estimators import LEARNERS as LEARNERS
from ._estimators import GraphCRF as GraphCRF
from ._estimators import GridCRF as GridCRF

__version__: str

def infer_uai(
    path: Union[str, PathLike[str]],
    eps: float = 1.0,
    iterations: int = 1000,
    tol: Optional[float] = 1e-6,
    evidence: Optional[Union[str, PathLike[str]]] = None,
    *,
    anneal: bool = False,
    eps_min: Optional[float] = None,
    decode_restarts: int = 0,
    max_backtracks: int = 100000,
    polish: int = 2000,
    label_order: Optional[str] = None,
) -> dict[str, Any]: ...
def load_dataset(path: Union[str, PathLike[str]], format: str = "graph") -> tuple[list[Any], list[Optional[npt.NDArray[np.int64]]]]: ...
def oracle_kinds() -> dict[str, str]: ...
