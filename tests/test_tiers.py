"""The test tiers of tests/conftest.py: derived from fixtures and marks, and a unit test that reaches beyond its tier
fails instead of passing or skipping in the wrong one."""

from __future__ import annotations

import subprocess

import pytest

from tests import conftest


class FakeItem:
    def __init__(self, fixtures: list[str], marks: list[str]) -> None:
        self.nodeid = "tests/test_x.py::test_x"
        self.fixturenames = fixtures
        self.marks = list(marks)

    def get_closest_marker(self, name: str):
        return name if name in self.marks else None

    def add_marker(self, name: str) -> None:
        self.marks.append(name)


def test_tiers_come_from_fixtures_and_marks():
    items = [FakeItem(["tmp_path"], []), FakeItem(["java_nodes"], []), FakeItem(["spark", "tmp_path"], []),
             FakeItem([], ["processes"]), FakeItem(["java_codec"], ["slow"])]
    conftest.pytest_collection_modifyitems(None, items)
    assert [sorted(i.marks) for i in items] == [["unit"], ["interop"], ["spark"], ["processes"], ["interop", "slow"]]
    with pytest.raises(pytest.UsageError, match="not a mark to set"):
        conftest.pytest_collection_modifyitems(None, [FakeItem([], ["unit"])])


def test_this_test_is_a_unit_test(request):
    assert request.node.get_closest_marker("unit") is not None


def test_a_unit_test_that_starts_a_process_fails():
    with pytest.raises(pytest.fail.Exception, match="pytest.mark.processes"):
        subprocess.run(["true"], check=False)


def test_a_unit_test_that_needs_java_fails_even_where_java_is_installed():
    with pytest.raises(pytest.fail.Exception, match="pytest.mark.interop"):
        conftest.require_java()


def test_a_unit_test_fails_rather_than_skips_for_something_missing():
    with pytest.raises(pytest.fail.Exception, match="needs what is missing"):
        conftest.require("frobnicator is not installed")


@pytest.mark.processes
def test_a_processes_test_may_start_one():
    assert subprocess.run(["true"], check=False).returncode == 0
