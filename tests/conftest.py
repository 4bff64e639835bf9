"""Shared pytest setup: pt2q loaded, deterministic seeds, optional torchao reference."""

import warnings

import pytest
import torch

import torch.ao.quantization.fx._decomposed  # noqa: F401  (registers torch.ops.quantized_decomposed)

import pt2q  # noqa: F401  (registers torch.ops.pt2q)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def torchao_primitives():
    """torchao's quant_primitives module, or None when torchao is not installed."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torchao.quantization import quant_primitives
    except Exception:  # torchao missing, or its import failing on this torch
        return None
    return quant_primitives


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs CUDA")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
