"""pt2q.quantizer: the quantizer API of torchao.quantization.pt2e.quantizer (same names, fields,
defaults and checks) and pt2q's built-in quantizers."""

from pt2q.quantizer.composable_quantizer import ComposableQuantizer
from pt2q.quantizer.embedding_quantizer import EmbeddingQuantizer, get_embedding_operators_config
from pt2q.quantizer.quantizer import (
    Q_ANNOTATION_KEY,
    DerivedQuantizationSpec,
    EdgeOrNode,
    FixedQParamsQuantizationSpec,
    QuantizationAnnotation,
    QuantizationSpec,
    QuantizationSpecBase,
    Quantizer,
    SharedQuantizationSpec,
)
from pt2q.quantizer.utils import (
    OperatorConfig,
    OperatorPatternType,
    QuantizationConfig,
    annotate_input_qspec_map,
    annotate_output_qspec,
    get_bias_qspec,
    get_input_act_qspec,
    get_module_name_filter,
    get_output_act_qspec,
    get_weight_qspec,
    is_valid_annotation,
)
from pt2q.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer,
    get_default_x86_inductor_quantization_config,
)
from pt2q.quantizer.linear_quantizers import (
    Int4WeightOnlyQuantizer,
    Int8DynActInt4WeightQuantizer,
    Int8DynActInt8WeightQuantizer,
    Int8WeightOnlyQuantizer,
)
from pt2q.quantizer.mx_quantizer import BFP_FORMATS, MXQuantizationConfig, MXQuantizationSpec, MXQuantizer
from pt2q.quantizer.xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

__all__ = [
    "Int8WeightOnlyQuantizer", "Int4WeightOnlyQuantizer", "Int8DynActInt8WeightQuantizer",
    "Int8DynActInt4WeightQuantizer", "MXQuantizer", "MXQuantizationConfig", "MXQuantizationSpec", "BFP_FORMATS",
    "XNNPACKQuantizer", "get_symmetric_quantization_config", "X86InductorQuantizer",
    "get_default_x86_inductor_quantization_config", "EmbeddingQuantizer", "get_embedding_operators_config",
    "Quantizer", "ComposableQuantizer", "EdgeOrNode", "QuantizationSpec", "QuantizationSpecBase",
    "DerivedQuantizationSpec", "FixedQParamsQuantizationSpec", "SharedQuantizationSpec", "QuantizationAnnotation",
    "QuantizationConfig", "OperatorConfig", "OperatorPatternType", "annotate_input_qspec_map",
    "annotate_output_qspec", "get_module_name_filter", "is_valid_annotation", "get_input_act_qspec",
    "get_output_act_qspec", "get_weight_qspec", "get_bias_qspec", "Q_ANNOTATION_KEY",
]
