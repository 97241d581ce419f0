# A partial stub for chex, read by mypy only (pyproject.toml's [tool.mypy]
# mypy_path). chex ships annotations but no py.typed marker. Following them
# (mypy's follow_untyped_imports) makes chex.Array a union with NumPy's scalar
# types, which are neither indexable nor arrays, and gives some 120 false
# errors on code that indexes arrays. So the array aliases stay untyped (Any)
# as for a library without types, and only chex.dataclass is typed: as what
# it is, a dataclass transform, so that the fields of every chex dataclass are
# checked where one is made, read or changed (`dataclasses.replace`; chex's
# own `.replace` method, like its Mapping methods, is not declared).
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform, overload

_T = TypeVar('_T')

Array = Any
ArrayTree = Any
PRNGKey = Any
Numeric = Any
Scalar = Any

@overload
@dataclass_transform()
def dataclass(cls: type[_T], /) -> type[_T]: ...
@overload
@dataclass_transform()
def dataclass(
  *,
  init: bool = ...,
  repr: bool = ...,
  eq: bool = ...,
  order: bool = ...,
  unsafe_hash: bool = ...,
  frozen: bool = ...,
  kw_only: bool = ...,
  mappable_dataclass: bool = ...,
) -> Callable[[type[_T]], type[_T]]: ...

# Everything else (the assertions, the other aliases): untyped.
def __getattr__(name: str) -> Any: ...
