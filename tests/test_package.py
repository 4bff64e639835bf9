"""The package loads its core, registers its ops and reports what it was built with."""

import pytest
import torch

import pt2q


def test_import_registers_ops():
    for name in ("choose_qparams_affine", "quantize_affine", "dequantize_affine", "fake_quantize_affine",
                 "fake_quantize_affine_cachemask", "pack_int4", "unpack_int4"):
        assert hasattr(torch.ops.pt2q, name)
    assert pt2q.__version__


def test_info_reports_isa_and_protobuf():
    assert pt2q._C.info.cpu_isa() in pt2q._C.info.available_cpu_isas()
    assert pt2q._C.info.protobuf_version().count(".") == 2


def test_file_header_round_trip_and_version_check():
    data = pt2q._C.info.encode_file_header("pt2q tests", "graph")
    assert pt2q._C.info.decode_file_header(data, "x.pt2q") == (pt2q._C.info.format_version(), "pt2q tests", "graph")
    with pytest.raises(RuntimeError, match="x.pt2q is not a pt2q file"):
        pt2q._C.info.decode_file_header(b"\xff\xff\xff", "x.pt2q")
