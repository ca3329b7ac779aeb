"""Every problem a user can fix is a DedupError, and reaches them as its message alone."""

import pyarrow as pa
import pytest
from dagster import Failure

from dedup_assets.core.batches import BatchError
from dedup_assets.core.errors import DedupError, InconsistentTables
from dedup_assets.core.incremental.batch_order import BatchOrderError
from dedup_assets.core.lsh import PairBudgetExceeded
from dedup_assets.core.payloads import PayloadError
from dedup_assets.core.publish import ReleaseError
from dedup_assets.core.readers import InputError
from dedup_assets.core.settings import SettingsError
from dedup_assets.core.sketch import list_matrix
from dedup_assets.core.store import DuckDBUnavailable
from dedup_assets.core.verify import MemoryBudgetExceeded
from dedup_assets.launch.user_messages import user_errors
from dedup_assets.stored_tables.lineage import StaleUpstream

# each with the builtin base it had before DedupError, which callers may still catch
USER_ERRORS = {
    InputError: ValueError,
    SettingsError: ValueError,
    BatchError: ValueError,
    InconsistentTables: ValueError,
    PairBudgetExceeded: RuntimeError,
    MemoryBudgetExceeded: RuntimeError,
    StaleUpstream: RuntimeError,
    DuckDBUnavailable: RuntimeError,
    ReleaseError: RuntimeError,
    BatchOrderError: RuntimeError,
    PayloadError: RuntimeError,
}


@pytest.mark.parametrize("error", USER_ERRORS)
def test_a_user_error_becomes_a_failure_with_its_message_only(error):
    assert issubclass(error, USER_ERRORS[error])
    with pytest.raises(Failure) as raised, user_errors():
        raise error("Do this to fix it.")
    assert raised.value.description == "Do this to fix it."
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_any_other_error_keeps_its_traceback():
    with pytest.raises(KeyError), user_errors():
        raise KeyError("a bug")


def test_tables_that_disagree_say_what_to_materialize_again():
    ragged = pa.chunked_array([pa.array([[1, 2], [3]], type=pa.list_(pa.uint64()))])
    with pytest.raises(Failure, match="fingerprint lists of different lengths: re-materialize fingerprinted"), user_errors():
        list_matrix(ragged)
