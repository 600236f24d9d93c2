"""Tiny torch models that reproduce the FP8-LM-head + MTP trap on CPU, shaped like SGLang's classes.

The names and attributes are the ones SGLang 0.5.23 uses, so the plugin's inspection code runs on them
unchanged: ``ParallelLMHead`` with ``.weight``, ``.quant_method`` and (quantized) ``.weight_scale``;
``FusedMoE`` layers whose ``quant_method.runner.runner_backend`` is a ``MoeRunnerBackend``; a draft class
named ``BailingMoeForCausalLMNextN`` whose ``set_embed_and_head`` is SGLang's (tensor sharing only).

The target is a recurrent LM (so the one-layer draft can imitate it closely without training): its
hidden state after token x is ``h' = tanh(W_e e(x) + W_h h) + moe(.)``. The draft's ``eh_proj`` holds
``[W_e | W_h]`` plus noise, like an MTP layer that learnt the target. The LM head is quantized to
``float8_e4m3fn`` with per-channel scales; a few "hot" tokens have large rows (as in real heads), the
rest small ones, so the scales matter.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0


_FLOAT_CACHE: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}


def _as_float(w: torch.Tensor) -> torch.Tensor:
    """``w.float()`` (the raw values, no scales), cached: the weights never change during a run, and the
    conversion would otherwise dominate the CPU time of the loop. The cache holds the tensor itself, so
    its id cannot be reused while the entry lives."""
    hit = _FLOAT_CACHE.get(id(w))
    if hit is None or hit[0] is not w:
        if len(_FLOAT_CACHE) > 8:
            _FLOAT_CACHE.clear()
        hit = _FLOAT_CACHE[id(w)] = (w, w.detach().float())
    return hit[1]


class MoeRunnerBackend(enum.Enum):
    HUMMING = "humming"
    FLASHINFER_MXFP4 = "flashinfer_mxfp4"


class MoeRunner:
    def __init__(self, runner_backend: MoeRunnerBackend) -> None:
        self.runner_backend = runner_backend


class Mxfp4HummingMoEMethod:
    def __init__(self) -> None:
        self.runner = MoeRunner(MoeRunnerBackend.HUMMING)


class Mxfp4FlashinferCutlassMoEMethod:
    def __init__(self) -> None:
        self.runner = MoeRunner(MoeRunnerBackend.FLASHINFER_MXFP4)


class UnquantizedEmbeddingMethod:
    """SGLang's plain head: ``LogitsProcessor`` multiplies by the raw weight (the FP32-head branch casts
    with ``weight.float()``), so FP8 codes are used without their scales."""

    def apply(self, layer: ParallelLMHead, x: torch.Tensor) -> torch.Tensor:
        return x.float() @ _as_float(layer.weight).T


class Fp8LinearMethod:
    """Online FP8 head, dynamic activation scheme: per-token activation scale, per-channel weight scale,
    the arithmetic of ``torch._scaled_mm`` emulated in float32 on CPU."""

    def apply(self, layer: ParallelLMHead, x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        x_scale = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12) / FP8_MAX
        xq = (x / x_scale).to(FP8)
        return (xq.float() @ _as_float(layer.weight).T) * x_scale * layer.weight_scale.T


class ParallelLMHead(nn.Module):
    def __init__(self, weight: torch.Tensor, quant_method: Any, weight_scale: torch.Tensor | None = None):
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.quant_method = quant_method
        if weight_scale is not None:
            self.weight_scale = nn.Parameter(weight_scale, requires_grad=False)


class VocabParallelEmbedding(nn.Module):
    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)


class FusedMoE(nn.Module):
    """Top-1 routed experts with a small residual effect."""

    def __init__(self, hidden: int, experts: int, gen: torch.Generator, method: Any) -> None:
        super().__init__()
        self.quant_method = method
        self.gate = nn.Parameter(
            torch.randn(experts, hidden, generator=gen) / hidden**0.5, requires_grad=False
        )
        self.w = nn.Parameter(0.1 * torch.randn(experts, hidden, hidden, generator=gen) / hidden**0.5, False)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        expert = int((self.gate @ h).argmax())
        return torch.tanh(self.w[expert] @ h)


class DecoderLayer(nn.Module):
    def __init__(self, mlp: FusedMoE) -> None:
        super().__init__()
        self.mlp = nn.Module()
        self.mlp.experts = mlp


def quantize_fp8_per_channel(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scale = w.abs().amax(dim=1, keepdim=True).clamp(min=1e-12) / FP8_MAX
    return (w / scale).to(FP8), scale.float()


class BailingMoeV3ForCausalLM(nn.Module):
    """The target: recurrent LM with MoE layers and an online-FP8 LM head."""

    def __init__(
        self,
        vocab: int,
        hidden: int,
        layers: int,
        seed: int,
        hot_tokens: int = 64,
        moe_method: type = Mxfp4HummingMoEMethod,
    ) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.model = nn.Module()
        self.model.word_embeddings = VocabParallelEmbedding(torch.randn(vocab, hidden, generator=gen))
        self.w_e = torch.randn(hidden, hidden, generator=gen) / hidden**0.5
        self.w_h = 1.5 * torch.randn(hidden, hidden, generator=gen) / hidden**0.5
        self.model.layers = nn.ModuleList(
            DecoderLayer(FusedMoE(hidden, 4, gen, moe_method())) for _ in range(layers)
        )
        # A real head: a few frequent tokens with large rows, a long tail of small ones.
        row_scale = torch.full((vocab, 1), 0.02)
        hot = torch.randperm(vocab, generator=gen)[:hot_tokens]
        row_scale[hot] = 1.0
        head = torch.randn(vocab, hidden, generator=gen) * row_scale
        codes, scale = quantize_fp8_per_channel(head)
        self.lm_head = ParallelLMHead(codes, Fp8LinearMethod(), weight_scale=scale)

    def step(self, token: int, h: torch.Tensor) -> torch.Tensor:
        x = self.model.word_embeddings.weight[token].float()
        h = torch.tanh(self.w_e @ x + self.w_h @ h)
        for layer in self.model.layers:
            h = h + layer.mlp.experts(h)
        return h

    def get_embed_and_head(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model.word_embeddings.weight, self.lm_head.weight


def make_nextn_class(with_share_method: bool = False) -> type[nn.Module]:
    """A fresh draft class each call (the remedy adds a method to the class, as in the server)."""

    class BailingMoeForCausalLMNextN(nn.Module):
        def __init__(self, target: BailingMoeV3ForCausalLM, noise: float, seed: int):
            super().__init__()
            gen = torch.Generator().manual_seed(seed)
            vocab, hidden = target.model.word_embeddings.weight.shape
            self.model = nn.Module()
            self.model.word_embeddings = VocabParallelEmbedding(torch.zeros(vocab, hidden))
            eh = torch.cat([target.w_e, target.w_h], dim=1)
            self.model.eh_proj = nn.Parameter(eh + noise * torch.randn(eh.shape, generator=gen), False)
            src = target.model.layers[-1].mlp.experts
            moe = FusedMoE(hidden, src.w.shape[0], gen, type(src.quant_method)())
            moe.gate.data.copy_(src.gate)
            moe.w.data.copy_(src.w + noise * torch.randn(src.w.shape, generator=gen))
            self.model.decoder = DecoderLayer(moe)
            # Never loaded from disk (rewrite_nextn_weight_name skips shared_head.head): BF16 until shared.
            self.lm_head = ParallelLMHead(
                torch.zeros(vocab, hidden, dtype=torch.bfloat16), UnquantizedEmbeddingMethod()
            )

        def set_embed_and_head(self, embed: torch.Tensor, head: torch.Tensor) -> None:
            """SGLang 0.5.23, bailing_moe_nextn.py:282 (minus the CUDA calls)."""
            del self.model.word_embeddings.weight
            del self.lm_head.weight
            self.model.word_embeddings.weight = embed
            self.lm_head.weight = head

        def step(self, token: int, h: torch.Tensor) -> torch.Tensor:
            x = self.model.word_embeddings.weight[token].float()
            d = torch.tanh(self.model.eh_proj @ torch.cat([x, h]))
            return d + self.model.decoder.mlp.experts(d)

    if with_share_method:

        def set_lm_head_from_target(self: Any, lm_head: Any) -> None:
            self.lm_head = lm_head

        BailingMoeForCausalLMNextN.set_lm_head_from_target = set_lm_head_from_target  # type: ignore[attr-defined]
    return BailingMoeForCausalLMNextN


def logits(lm_head: Any, h: torch.Tensor) -> torch.Tensor:
    """``LogitsProcessor._compute_lm_head``: the quant method's ``apply`` unless it is unquantized."""
    return lm_head.quant_method.apply(lm_head, h)


def eagle_init_lm_head(target: Any, draft: Any) -> None:
    """``EagleDraftWorker.init_lm_head`` for NEXTN: tensor sharing, then module sharing when possible."""
    embed, head = target.get_embed_and_head()
    draft.set_embed_and_head(embed, head)
    if getattr(draft, "hot_token_id", None) is None and hasattr(draft, "set_lm_head_from_target"):
        draft.set_lm_head_from_target(target.lm_head)


@dataclass
class SpecResult:
    accept_length: float  # mean tokens per verify round: 1 + accepted drafts / verify rounds
    verify_ct: int
    correct_drafts: int
    tokens: list[int]


def speculative_generate(
    target: BailingMoeV3ForCausalLM, draft: Any, prompt: list[int], max_new: int, steps: int = 3
) -> SpecResult:
    """Greedy EAGLE/NEXTN chain (topk 1, ``steps`` draft steps, steps+1 verified positions per round)."""
    hidden = target.w_e.shape[0]
    with torch.no_grad():
        h = torch.zeros(hidden)
        for tok in prompt:
            h = target.step(tok, h)
        nxt = int(logits(target.lm_head, h).argmax())
        out = [nxt]
        verify_ct = correct = 0
        while len(out) < max_new:
            # Draft: chain from the target's hidden state and the last committed token.
            proposals, d, tok = [], h, nxt
            for _ in range(steps):
                d = draft.step(tok, d)
                tok = int(logits(draft.lm_head, d).argmax())
                proposals.append(tok)
            # Verify the steps+1 positions [nxt, p1, .., p_steps] with the target; accept the matching prefix.
            inputs = [nxt, *proposals]
            g, hiddens, preds = h, [], []
            for tok in inputs:
                g = target.step(tok, g)
                hiddens.append(g)
                preds.append(int(logits(target.lm_head, g).argmax()))
            k = 0
            while k < steps and preds[k] == proposals[k]:
                k += 1
            verify_ct += 1
            correct += k
            out.extend([*proposals[:k], preds[k]])
            h, nxt = hiddens[k], preds[k]
        return SpecResult(1 + correct / verify_ct, verify_ct, correct, out)


def build(
    seed: int = 0,
    vocab: int = 32768,
    hidden: int = 64,
    layers: int = 2,
    noise: float = 0.003,
    with_share_method: bool = False,
) -> tuple[BailingMoeV3ForCausalLM, nn.Module]:
    target = BailingMoeV3ForCausalLM(vocab, hidden, layers, seed)
    draft = make_nextn_class(with_share_method)(target, noise, seed + 1)
    return target, draft
