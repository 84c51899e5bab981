"""The public conformance suite over all four backends, in both of its forms."""

from __future__ import annotations

from pathlib import Path

import pytest

from universal_event.errors import ConflictError
from universal_event.stores import MemoryStore, Store
from universal_event.stores.sqlite import SqliteStore
from universal_event.testing import CHECKS, StoreConformance, run_check, run_store_conformance

from .conftest import StoreKit


@pytest.mark.parametrize("check", list(CHECKS))
def test_conformance(kit: StoreKit, check: str) -> None:
    run_check(check, kit.make, kit.reopen)


def test_run_store_conformance_runs_every_check() -> None:
    ran = run_store_conformance(MemoryStore, skip=frozenset({"large_event"}))
    assert ran == [name for name in CHECKS if name != "large_event"]


def test_conformance_catches_a_broken_store() -> None:
    """The suite can fail: a store that ignores expected_seq is caught."""

    class LenientStore(MemoryStore):
        """Swallows conflicts: the losing writer believes its events were stored."""

        def append(self, session_id, events, *, expected_seq):  # type: ignore[no-untyped-def]
            try:
                super().append(session_id, events, expected_seq=expected_seq)
            except ConflictError:
                pass

    with pytest.raises(AssertionError, match="'conflicts'"):
        run_check("conflicts", LenientStore)


class TestSqliteAsThirdPartyWould(StoreConformance):
    """The class form, as a third-party store author would use it (SQLite here)."""

    @pytest.fixture(autouse=True)
    def _directory(self, tmp_path: Path) -> None:
        self.directory = tmp_path
        self.made = 0

    def make_store(self) -> Store:
        self.made += 1
        return SqliteStore(self.directory / f"third-party-{self.made}.db")

    def reopen_store(self, store: Store) -> Store | None:
        assert isinstance(store, SqliteStore)
        store.close()
        return SqliteStore(store.path)
