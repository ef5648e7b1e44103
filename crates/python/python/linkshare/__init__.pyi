import os
from concurrent.futures import Executor
from typing import Any, Callable, List, Mapping, Optional, Sequence, Union

import pandas as pd

ScenarioLike = Union[str, os.PathLike[str], Mapping[str, Any]]

class Diagnostic:
    severity: str
    file: str
    line: int
    col: int
    message: str
    help: Optional[str]
    def __init__(
        self, severity: str, file: str, line: int, col: int, message: str, help: Optional[str] = ...
    ) -> None: ...

class LinkshareError(Exception):
    diagnostics: List[Diagnostic]
    def __init__(self, message: str, diagnostics: Sequence[Diagnostic] = ...) -> None: ...

class ScenarioError(LinkshareError, ValueError): ...
class SimulationError(LinkshareError, RuntimeError): ...

class SweepError(LinkshareError):
    failures: List[dict]
    frame: pd.DataFrame

class Result:
    @property
    def summary(self) -> dict: ...
    @property
    def classes(self) -> pd.DataFrame: ...
    @property
    def flows(self) -> pd.DataFrame: ...
    @property
    def timeseries(self) -> pd.DataFrame: ...
    @property
    def rtt(self) -> pd.DataFrame: ...
    def arrow(self, table: str) -> Any: ...
    def report(self, dir: Union[str, os.PathLike[str]]) -> List[str]: ...

def simulate(
    scenario: ScenarioLike,
    *,
    seed: Optional[int] = ...,
    overrides: Optional[Mapping[str, Any]] = ...,
) -> Result: ...
def check(policy: ScenarioLike) -> List[Diagnostic]: ...
def sweep(
    scenario: ScenarioLike,
    grid: Optional[Mapping[str, Sequence[Any]]] = ...,
    *,
    seeds: Union[None, int, Sequence[int]] = ...,
    overrides: Optional[Mapping[str, Any]] = ...,
    executor: Union[None, Executor, str, Any] = ...,
    campaign: Union[None, str, os.PathLike[str]] = ...,
    progress: Union[None, bool, Callable[[int, int], None]] = ...,
    errors: str = ...,
    chunksize: Optional[int] = ...,
) -> pd.DataFrame: ...
def summarize(
    df: pd.DataFrame, figures: Optional[Sequence[str]] = ..., *, ci: float = ...
) -> pd.DataFrame: ...
