"""Every error the API answers, in one JSON shape: ``error`` (one line saying what happened), ``field`` when
one field of the request is to blame, and the keys clients already read (``detail`` as FastAPI writes it,
``message`` on a 422).

A client (or an operator reading a log) should never have to guess from a bare ``Internal Server Error``:
a database that cannot write (a full disk, a read-only file system, a lost PostgreSQL) is a 503 that says
so, and the job it was asked to store was not stored (the transaction rolled back before anything was
answered). A body that is not JSON at all (truncated, not UTF-8) is a 400, a body whose fields are wrong a
422 naming the field.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from sqlalchemy.exc import DatabaseError, IntegrityError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from dlsched.core import InputError
from dlsched.service.spec import JobSubmission, describe_error

_log = logging.getLogger("dlsched.service.api")
#: Longest ``error`` line sent (a database's message can be long; the log keeps the whole of it).
MAX_ERROR_CHARS = 500
#: Validation error types that mean the body could not be read as JSON at all (answered 400, not 422).
_UNREADABLE = frozenset({"json_invalid", "json_type"})


def one_line(text: object) -> str:
    """``text`` on one line (runs of white space, newlines included, become one space), bounded."""
    line = " ".join(str(text).split()) or "error"
    return line if len(line) <= MAX_ERROR_CHARS else line[:MAX_ERROR_CHARS - 3] + "..."


def error_body(error: object, *, field: str | None = None, **extra: Any) -> dict[str, Any]:
    """The error shape: ``error``, ``field`` when given, and ``detail`` (the same line unless given)."""
    body: dict[str, Any] = {"error": one_line(error)}
    if field is not None:
        body["field"] = field
    body.setdefault("detail", body["error"])
    body.update(extra)
    return body


def error_response(status_code: int, error: object, *, field: str | None = None,
                   headers: dict[str, str] | None = None, **extra: Any) -> JSONResponse:
    return JSONResponse(status_code=status_code, content=jsonable_encoder(error_body(error, field=field, **extra)),
                        headers=headers)


def input_refusal(error: InputError, status_code: int = 422) -> JSONResponse:
    """A request refused for what it asks, naming the field: ``message`` the one line (as the CLI prints
    it), ``detail`` in FastAPI's list form on a 422 (as a validation error's)."""
    field = error.field
    extra: dict[str, Any] = {"message": str(error)}
    if status_code == 422:
        text = str(error).removeprefix(f"field '{field}': ") if field else str(error)
        extra["detail"] = [{"loc": ["body", field or "spec"], "msg": text, "type": "value_error"}]
    return error_response(status_code, str(error), field=field, **extra)


def database_error(exc: Exception) -> str:
    """What a database failure says, on one line, without the SQL statement SQLAlchemy appends."""
    orig = getattr(exc, "orig", None)
    reason = one_line(orig if orig is not None else exc)
    return f"the database cannot {'write' if _is_write_failure(reason) else 'answer'}: {reason}"


def _is_write_failure(reason: str) -> bool:
    lowered = reason.lower()
    return any(w in lowered for w in ("full", "read-only", "readonly", "no space", "disk i/o", "quota"))


async def _validation_message(request: Request, errors: list[Any]) -> tuple[str, str | None]:
    """The first problem in one line naming the field, and the field (the job spec's own wording for a
    bad submission, as the CLI phrases it)."""
    if not errors:
        return "invalid request", None
    first = errors[0]
    loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "header", "path")]
    field = ".".join(loc) or None
    if first.get("loc", ("",))[0] == "body":
        try:  # re-validate the body alone to phrase it as the CLI does
            JobSubmission.model_validate(await request.json())
        except ValidationError as verr:
            field, text = describe_error(verr)
            return f"field '{field}': {text}", field
        except Exception:  # noqa: BLE001 - a body that is not JSON at all
            pass
    return f"{field or 'request'}: {first.get('msg', 'invalid')}", field


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error raised by a route (or by the router: an unknown path, a wrong method) in the
    error shape."""

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail
        error = detail if isinstance(detail, str) else (str(detail) if detail else "error")
        return error_response(exc.status_code, error, headers=dict(exc.headers or {}),
                              **({} if isinstance(detail, str) else {"detail": detail}))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        """FastAPI's 422 body, plus ``message`` and ``error``: the first problem in one line naming the
        field. A body that is not JSON at all is a 400 (nothing in it could be checked)."""
        errors = list(exc.errors())
        detail = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
                  for e in errors]
        if errors and str(errors[0].get("type")) in _UNREADABLE:
            return error_response(400, f"the body is not valid JSON: {errors[0].get('msg', 'decode error')}",
                                  detail=detail)
        message, field = await _validation_message(request, errors)
        return error_response(422, message, field=field, detail=detail, message=message)

    @app.exception_handler(InputError)
    async def _input(request: Request, exc: InputError) -> JSONResponse:
        return input_refusal(exc)

    @app.exception_handler(IntegrityError)
    async def _integrity(request: Request, exc: IntegrityError) -> JSONResponse:
        return error_response(500, f"the request conflicts with what the database holds: {one_line(exc.orig)}")

    @app.exception_handler(OperationalError)
    @app.exception_handler(DatabaseError)
    async def _database(request: Request, exc: Exception) -> JSONResponse:
        """The database could not answer or write: nothing was stored, and the client may retry later."""
        return error_response(503, database_error(exc), headers={"Retry-After": "5"})

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        """A bug: the client learns its kind, the service's log the traceback (not the client: it may
        name paths and values of the service's)."""
        _log.error("internal error answering %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(500, f"internal error ({type(exc).__name__}); the service's log has the details")
