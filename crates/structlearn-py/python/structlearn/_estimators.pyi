from os import PathLike
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
import numpy.typing as npt

from . import _core

LEARNERS: tuple[str, ...]
OracleArg = Union[str, dict[str, Any], Any]

class _StructuredCRF:
    n_states_: int
    history_: list[dict[str, Any]]
    n_iter_: int
    best_iteration_: Optional[int]
    stop_reason_: str
    model_: _core.Model
    def get_params(self, deep: bool = True) -> dict[str, Any]: ...
    def set_params(self, **params: Any) -> _StructuredCRF: ...
    def fit(self, X: Sequence[Any], Y: Sequence[Any], X_val: Optional[Sequence[Any]] = None, Y_val: Optional[Sequence[Any]] = None) -> _StructuredCRF: ...
    def predict(self, X: Sequence[Any]) -> list[npt.NDArray[np.int64]]: ...
    def predict_map(self, X: Sequence[Any], eps_min: float = 0.01) -> list[npt.NDArray[np.int64]]: ...
    def predict_marginals(self, X: Sequence[Any]) -> list[npt.NDArray[np.float64]]: ...
    def score(self, X: Sequence[Any], Y: Sequence[Any]) -> float: ...
    @property
    def model_bytes_(self) -> bytes: ...
    def save(self, path: Union[str, PathLike[str]]) -> None: ...
    @classmethod
    def load(cls, path: Union[str, PathLike[str]], **params: Any) -> Any: ...
    def save_dataset(self, path: Union[str, PathLike[str]], X: Sequence[Any], Y: Optional[Sequence[Any]] = None) -> None: ...

class GraphCRF(_StructuredCRF):
    def __init__(
        self,
        unary: OracleArg = "linear",
        pairwise: OracleArg = "linear",
        eps: float = 0.1,
        learner: str = "algorithm1",
        max_iter: int = 25,
        message_passing_iterations: int = 10,
        n_states: Optional[int] = None,
        patience: Optional[int] = None,
        min_delta: float = 0.0,
        callback: Optional[Callable[[dict[str, Any]], Any]] = None,
        predict_iterations: int = 100,
        predict_tol: Optional[float] = 1e-4,
        random_state: Any = None,
        n_jobs: Optional[int] = None,
        verbose: int = 0,
        checkpoint: Optional[Union[str, PathLike[str]]] = None,
        checkpoint_within: float = 600.0,
    ) -> None: ...

class GridCRF(_StructuredCRF):
    def __init__(
        self,
        unary: OracleArg = "linear",
        pairwise: OracleArg = "linear",
        eps: float = 0.1,
        learner: str = "algorithm1",
        max_iter: int = 25,
        message_passing_iterations: int = 10,
        n_states: Optional[int] = None,
        patience: Optional[int] = None,
        min_delta: float = 0.0,
        callback: Optional[Callable[[dict[str, Any]], Any]] = None,
        predict_iterations: int = 100,
        predict_tol: Optional[float] = 1e-4,
        random_state: Any = None,
        n_jobs: Optional[int] = None,
        verbose: int = 0,
        edge_features: str = "difference",
        checkpoint: Optional[Union[str, PathLike[str]]] = None,
        checkpoint_within: float = 600.0,
    ) -> None: ...
