"""The engine contract (tests/engine_contract.py) kept by the kernel engine on real kernels, by
runs and by a session's step: the same table the scripted engine keeps in
tests/unit/test_engine_contract.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine_contract import CASES, check, check_session, run_case, run_session_case
from notebook_executor._kernels.kernel_engine import KernelEngine

pytestmark = pytest.mark.kernel


@pytest.fixture(scope="module")
def engine() -> Iterator[KernelEngine]:
    engine = KernelEngine(warm_kernels=0)
    try:
        yield engine
    finally:
        engine.close()


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_kernel_engine_keeps_the_contract(
    name: str, engine: KernelEngine, tmp_path: Path
) -> None:
    case = CASES[name]
    check(case, run_case(engine, case, tmp_path, os.environ))


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_session_step_on_the_kernel_engine_keeps_the_contract(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    check_session(case, run_session_case(KernelEngine(warm_kernels=0), case, tmp_path))
