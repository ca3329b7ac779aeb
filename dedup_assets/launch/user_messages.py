"""Problems a user can fix, and how they reach the user: one clear paragraph, not a traceback."""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager

import duckdb
from dagster import DagsterEventType, DagsterInvariantViolationError, Failure, OpExecutionContext

from ..core.util.errors import DedupError
from ..core.storage.store import out_of_memory
from .entry_point import how_to_fix

FAILURE_CLASS = "Failure"  # the class name Dagster records for a Failure raised by a step


@contextmanager
def user_errors():
    """Report a problem the user can fix as a Dagster failure carrying only its message, and its
    fix written for the command that started the run."""
    try:
        yield
    except DedupError as error:
        raise refusal(refusal_text(error)) from None
    except duckdb.OutOfMemoryException as error:  # a limit the user sets: what to raise
        try:
            step = OpExecutionContext.get().op.name
        except DagsterInvariantViolationError:
            step = None
        raise refusal(str(out_of_memory(error, step))) from None


def refusal(description: str) -> Failure:
    """A Failure for a problem the user can fix (``description`` says what to do), which the
    step's log (it records the failure) keeps without a stack trace."""
    try:
        hide_refusal_tracebacks(OpExecutionContext.get().log)
    except DagsterInvariantViolationError:  # not in an asset's code: a test calling it, or an IO manager's
        pass
    return Failure(description=description)


def refusal_text(error: DedupError) -> str:
    """``error``'s message, then its fix (``error.fix``, ``error.select``) for this entry point."""
    if not (error.fix or error.select):
        return str(error)
    return f"{error}\n{how_to_fix(error.fix, error.select, partition=_partition())}"


def _partition() -> str | None:
    """The partition (a batch's key) of the step that raised, if it has one: the UI and Python
    name it, as their command has no --partition to keep."""
    try:
        context = OpExecutionContext.get()
    except DagsterInvariantViolationError:
        return None
    return context.partition_key if context is not None and context.has_partition_key else None


def last_sentence(text: str) -> str:
    """An error's own words: its last line before any stack trace, without the class name
    (``<module>.Failure: <description>`` -> the description) or
    pydantic's trimmings (``Value error, <message> [type=value_error, ...]``)."""
    lines = [
        line.strip()
        for line in text.split("Stack Trace:")[0].strip().splitlines()
        if line.strip() and not line.strip().startswith("For further information visit")
    ]
    last = lines[-1] if lines else text.strip()
    last = re.sub(r"^([A-Za-z_][\w.]*(Error|Exception|Failure)): ", "", last)
    return re.sub(r"\s*\[type=.*\]$", "", re.sub(r"^Value error, ", "", last))


def _failure_text(message: str) -> str:
    """A Failure's description from its recorded message, every line of it (a fix spans lines)."""
    return re.sub(r"^[\w.]*Failure: ", "", message.split("\nStack Trace:")[0].strip())


def user_message(error) -> str:
    """The sentence a user can act on from a Dagster error: a Failure's description, or the
    innermost error's text."""
    while error.cause is not None and error.cls_name != FAILURE_CLASS:
        error = error.cause
    return _failure_text(error.message) if error.cls_name == FAILURE_CLASS else last_sentence(error.message)


def hide_refusal_tracebacks(log: logging.Logger) -> None:
    """Record and print ``log``'s refusals without a stack trace (:class:`RefusalsWithoutTraceback`):
    a step's log, where its failure is logged (``refusal``; an IO manager's context's), and the
    run's (the definitions' executor), where the run's failure repeats it."""
    if not any(isinstance(existing, RefusalsWithoutTraceback) for existing in log.filters):
        log.addFilter(RefusalsWithoutTraceback())


def refused(error) -> bool:
    """Whether a Dagster error is a refusal: a Failure, or one of our DedupErrors (raised where no
    ``user_errors`` turns it into one, as in a resource's set-up), anywhere in its causes."""
    names = {FAILURE_CLASS}
    pending = [DedupError]
    while pending:
        kind = pending.pop()
        names.add(kind.__name__)
        pending += kind.__subclasses__()
    while error is not None:
        if error.cls_name in names:
            return True
        error = error.cause
    return False


class RefusalsWithoutTraceback(logging.Filter):
    """On a run's log manager: a step failure or run failure whose error is a ``Failure`` (a
    refusal, whose description says what to do) is recorded and printed without Dagster's stack
    trace of its own frames, which says nothing to the user. Any other error keeps its trace.

    Dagster offers no switch for this: it writes the error of a failure event, trace and all,
    into the message every logger prints, and a logger of the definitions' own is used only when
    the run config names it. So this filter, on a log manager (a ``logging.Logger``, whose filters
    see each record before its handlers: the console's and the instance's event log), replaces
    the event the record carries with one whose error has no stack."""

    def filter(self, record: logging.LogRecord) -> bool:
        event = getattr(record, "dagster_event", None)
        if event is None or event.event_type not in (DagsterEventType.STEP_FAILURE, DagsterEventType.RUN_FAILURE):
            return True
        data = event.event_specific_data
        error = getattr(data, "error", None)
        if error is not None and error.cls_name == FAILURE_CLASS and error.stack:
            record.dagster_event = event._replace(event_specific_data=data._replace(error=error._replace(stack=[])))
        return True
