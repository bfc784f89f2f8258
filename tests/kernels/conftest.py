"""Fixtures for the tests of tether.kernels: a real kernel per test module, prelude run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kernels.kernel_cells import DirectKernel, started_kernel


@pytest.fixture(scope="module")
def python_kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DirectKernel]:
    yield from started_kernel("python", tmp_path_factory)


@pytest.fixture(scope="module")
def deno_kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DirectKernel]:
    yield from started_kernel("javascript", tmp_path_factory)
