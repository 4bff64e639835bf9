"""Observers for the weight-only and dynamic schemes of the native linear ops: groupwise weights
(qparams per `group_size` consecutive input features of each output row) and per-token dynamic
int8 activations. Both convert to torch's quantized_decomposed ops (`*_per_channel_group`,
`*_per_token`), which `lower_to_native` turns into pt2q's native linears."""

from __future__ import annotations

import torch

from pt2q.observer import _EPS, PerChannelMinMaxObserver, PlaceholderObserver


class PerGroupMinMaxObserver(PerChannelMinMaxObserver):
    """Running min/max of each group of `group_size` consecutive values along the last axis of a
    2-d weight [N, K]. The groups are observed as the channels of a [N * K / group_size,
    group_size] view, so their qparams follow torch.ao's per-channel rule bit for bit;
    `calculate_qparams()` returns them as [N, K / group_size]."""

    def __init__(self, group_size: int = 128, dtype=torch.int8, qscheme=torch.per_channel_symmetric,
                 reduce_range=False, quant_min=None, quant_max=None, factory_kwargs=None, eps=_EPS,
                 is_dynamic=False, **kwargs):
        if not isinstance(group_size, int) or group_size < 2:
            raise ValueError(f"PerGroupMinMaxObserver: group_size must be an int >= 2, got {group_size!r}")
        kwargs.pop("ch_axis", None)
        self.group_size = group_size
        self.groups_per_row = 0  # K / group_size, known once a weight was seen
        super().__init__(ch_axis=0, dtype=dtype, qscheme=qscheme, reduce_range=reduce_range, quant_min=quant_min,
                         quant_max=quant_max, factory_kwargs=factory_kwargs, eps=eps, is_dynamic=is_dynamic,
                         **kwargs)

    def forward(self, x_orig):
        if not isinstance(x_orig, torch.Tensor) or x_orig.dim() != 2:
            raise ValueError(f"{self._where()}: PerGroupMinMaxObserver observes 2-d weights [out_features, "
                             f"in_features], got {tuple(getattr(x_orig, 'shape', ()))}")
        n, k = x_orig.shape
        if k % self.group_size:
            raise ValueError(f"{self._where()}: in_features {k} is not a multiple of group_size {self.group_size}")
        if self.groups_per_row and self.groups_per_row != k // self.group_size:
            raise ValueError(f"{self._where()}: saw a weight with {k // self.group_size} groups per row after one "
                             f"with {self.groups_per_row}")
        self.groups_per_row = k // self.group_size
        super().forward(x_orig.reshape(n * self.groups_per_row, self.group_size))
        return x_orig

    def calculate_qparams(self):
        scale, zp = super().calculate_qparams()
        if self.groups_per_row:
            scale, zp = scale.reshape(-1, self.groups_per_row), zp.reshape(-1, self.groups_per_row)
        return scale, zp

    def extra_repr(self):
        return f"group_size={self.group_size}, " + super().extra_repr()


class PerTokenDynamicObserver(PlaceholderObserver):
    """A dynamic int8 activation quantized per token (each row along the last axis) at run time,
    asymmetric in [-128, 127] by XNNPACK's rule: convert emits torch's
    choose_qparams_per_token_asymmetric -> quantize_per_token -> dequantize_per_token, which
    pt2q.linear_w8a8 / linear_w4a8 compute fused."""

    per_token = True

    def __init__(self, dtype=torch.int8, quant_min=-128, quant_max=127, qscheme=None, is_dynamic=True, eps=None,
                 **kwargs):
        if dtype != torch.int8 or quant_min != -128 or quant_max != 127 or not is_dynamic:
            raise ValueError("PerTokenDynamicObserver: per-token activations are dynamic int8 in [-128, 127], got "
                             f"dtype={dtype}, quant_min={quant_min}, quant_max={quant_max}, is_dynamic={is_dynamic}")
        super().__init__(dtype=dtype, quant_min=quant_min, quant_max=quant_max, qscheme=qscheme, eps=eps,
                         is_dynamic=True)
