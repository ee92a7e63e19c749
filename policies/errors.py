"""The one hierarchy of isofabric's domain errors.

    IsofabricError
    ├── InputFormatError          a document (ibnetdiscover text, partitions.conf) does not parse
    ├── ValidationError           a value is outside what the domain allows
    │   └── UnsupportedMediaTypeError  the body's format does not fit the target resource
    ├── NotFoundError             a named resource does not exist
    ├── ConflictError             the request contradicts current state
    │   ├── PoolExhaustedError    no free identifier is left in a fabric's range
    │   └── IsolationViolationError  the change would break isolation (carries counterexamples)
    ├── AuthenticationError       no or wrong credentials
    ├── ForbiddenError            the caller's role may not do this
    └── ArtifactHazardError       a rendered file would be misread by the software consuming it

`api/problems.py` maps each class to an RFC 9457 problem type in one table; tenancy raises these,
never HTTP errors.
"""

from __future__ import annotations

from typing import Any


class IsofabricError(Exception):
    """Base of every domain error; `detail` is safe to show to the caller."""

    def __init__(self, detail: str, **extensions: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extensions = extensions


class InputFormatError(IsofabricError):
    """A document does not parse; `line` is the 1-based line the problem was found on."""

    def __init__(self, detail: str, *, line: int | None = None, **extensions: Any) -> None:
        if line is not None:
            detail = f"line {line}: {detail}"
            extensions["line"] = line
        super().__init__(detail, **extensions)
        self.line = line


class ValidationError(IsofabricError):
    """A value is syntactically fine but outside what the domain allows."""


class NotFoundError(IsofabricError):
    """A named resource does not exist (or is not visible to the caller)."""


class ConflictError(IsofabricError):
    """The request contradicts the current state (name taken, node already allocated, ...)."""


class PoolExhaustedError(ConflictError):
    """No free identifier is left in the fabric's range."""


class IsolationViolationError(ConflictError):
    """A mutation was refused because the resulting snapshot would not be isolated."""


class AuthenticationError(IsofabricError):
    """The request carries no credentials or wrong ones."""


class ArtifactHazardError(IsofabricError):
    """A rendered artifact failed its own safety check (an engine defect, never user input)."""


class UnsupportedMediaTypeError(ValidationError):
    """The request body's format does not fit the resource (e.g. JSON for an InfiniBand fabric)."""


class ForbiddenError(IsofabricError):
    """The caller is authenticated but its role does not allow the request (403)."""
