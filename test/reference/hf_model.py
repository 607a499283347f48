"""An independent reference for imported Hugging Face checkpoints: GPT-2 and Llama-family (Llama, Qwen2, Mistral)
forward passes in plain PyTorch, written from the published architectures rather than taken from transformers.

    /usr/bin/python3 test/reference/hf_model.py MODEL_DIR... < tokens.json > logits.json

stdin: a JSON list, per folder, of token-id lists (one sequence each, all of one length); stdout: a JSON list, per
folder, per sequence, of per-position logit lists, computed in float32. Each folder holds config.json and
model.safetensors, or shards listed by model.safetensors.index.json (F32, F16 or BF16). Several folders in one call
share one start of PyTorch, which takes seconds.
"""

import json
import math
import os
import struct
import sys

import torch

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}


def read_safetensors(path):
    """The safetensors format: u64 little-endian header length, a JSON header, then raw little-endian tensors."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    start = 8 + n
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        raw = bytearray(data[start + a : start + b])  # a copy: writable and aligned
        dtype = DTYPES[info["dtype"]]
        if dtype == torch.bfloat16:
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16)
        else:
            t = torch.frombuffer(raw, dtype=dtype)
        tensors[name] = t.reshape(info["shape"]).to(torch.float32)
    return tensors


def read_folder(folder):
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        return read_safetensors(single)
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        weight_map = json.load(f)["weight_map"]
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        tensors.update(read_safetensors(os.path.join(folder, shard)))
    return tensors


def causal_attention(q, k, v):
    """q, k, v: [B, H, T, hd]; softmax(q k^T / sqrt(hd)) v over earlier and current positions."""
    T = q.shape[2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def split_heads(x, heads):
    B, T, width = x.shape
    return x.view(B, T, heads, width // heads).transpose(1, 2)


def merge_heads(x):
    B, H, T, hd = x.shape
    return x.transpose(1, 2).reshape(B, T, H * hd)


def gpt2_logits(cfg, w, ids):
    """GPT-2 (Radford et al. 2019): pre-LayerNorm blocks, learned positions, tanh-GELU MLP, output tied to wte."""
    w = {k[len("transformer.") :] if k.startswith("transformer.") else k: v for k, v in w.items()}
    C, H, eps = cfg["n_embd"], cfg["n_head"], cfg.get("layer_norm_epsilon", 1e-5)

    def ln(x, p):
        return torch.nn.functional.layer_norm(x, (C,), w[p + ".weight"], w[p + ".bias"], eps)

    def conv1d(x, p):  # Conv1D stores its weight [in, out]
        return x @ w[p + ".weight"] + w[p + ".bias"]

    def gelu(x):
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))

    T = ids.shape[1]
    x = w["wte.weight"][ids] + w["wpe.weight"][:T]
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        q, k, v = conv1d(ln(x, p + "ln_1"), p + "attn.c_attn").split(C, dim=-1)
        y = causal_attention(split_heads(q, H), split_heads(k, H), split_heads(v, H))
        x = x + conv1d(merge_heads(y), p + "attn.c_proj")
        x = x + conv1d(gelu(conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    head = w["wte.weight"] if cfg.get("tie_word_embeddings", True) else w["lm_head.weight"]
    return ln(x, "ln_f") @ head.T


def rope_inverse_frequencies(cfg, hd):
    """1 / theta^(2i / hd) in float32, then stretched as the config's rope_scaling says (linear, llama3)."""
    theta = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    s = cfg.get("rope_scaling") or {}
    kind = s.get("rope_type", s.get("type", "default"))
    if kind == "linear":
        inv = inv / s["factor"]
    elif kind == "llama3":
        factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
        old = s["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * inv / factor + smooth * inv
        inv = torch.where(wavelen > old / low, inv / factor, torch.where(wavelen < old / high, inv, smoothed))
    elif kind != "default":
        raise SystemExit(f"reference: rope type {kind} not implemented")
    return inv


def llama_logits(cfg, w, ids):
    """Llama (Touvron et al. 2023) and its kin: pre-RMSNorm blocks, rotary positions (rotate-half pairing),
    grouped-query attention, SwiGLU MLP; Qwen2 adds query/key/value biases."""
    C, H = cfg["hidden_size"], cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    hd = C // H
    eps = cfg.get("rms_norm_eps", 1e-6)
    qkv_bias = cfg["model_type"] == "qwen2" or (cfg["model_type"] == "llama" and cfg.get("attention_bias", False))
    o_bias = cfg["model_type"] == "llama" and cfg.get("attention_bias", False)
    mlp_bias = cfg["model_type"] == "llama" and cfg.get("mlp_bias", False)

    def rms(x, name):
        # Normalised in float32, then scaled by the gain.
        return w[name] * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))

    def linear(x, p, bias):  # nn.Linear stores its weight [out, in]
        y = x @ w[p + ".weight"].T
        return y + w[p + ".bias"] if bias else y

    T = ids.shape[1]
    angles = torch.arange(T).float()[:, None] * rope_inverse_frequencies(cfg, hd)[None, :]
    cos, sin = torch.cat([angles, angles], -1).cos(), torch.cat([angles, angles], -1).sin()

    def rotate(x):  # pairs (i, i + hd/2): x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1]
        x1, x2 = x[..., : hd // 2], x[..., hd // 2 :]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    x = w["model.embed_tokens.weight"][ids]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms(x, p + "input_layernorm.weight")
        q = rotate(split_heads(linear(h, p + "self_attn.q_proj", qkv_bias), H))
        k = rotate(split_heads(linear(h, p + "self_attn.k_proj", qkv_bias), KV))
        v = split_heads(linear(h, p + "self_attn.v_proj", qkv_bias), KV)
        # Query head j uses key/value head j // (H / KV).
        k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
        x = x + linear(merge_heads(causal_attention(q, k, v)), p + "self_attn.o_proj", o_bias)
        h = rms(x, p + "post_attention_layernorm.weight")
        gate = linear(h, p + "mlp.gate_proj", mlp_bias)
        x = x + linear(torch.nn.functional.silu(gate) * linear(h, p + "mlp.up_proj", mlp_bias), p + "mlp.down_proj", mlp_bias)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else w["lm_head.weight"]
    return rms(x, "model.norm.weight") @ head.T


def logits_of(folder, sequences):
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    weights = read_folder(folder)
    ids = torch.tensor(sequences, dtype=torch.int64)
    with torch.no_grad():
        if cfg["model_type"] == "gpt2":
            logits = gpt2_logits(cfg, weights, ids)
        elif cfg["model_type"] in ("llama", "qwen2", "mistral"):
            logits = llama_logits(cfg, weights, ids)
        else:
            raise SystemExit(f"reference: model_type {cfg['model_type']} not implemented")
    return logits.float().tolist()


def main():
    folders = sys.argv[1:]
    sequences = json.load(sys.stdin)
    if len(sequences) != len(folders):
        raise SystemExit(f"reference: {len(folders)} folders but {len(sequences)} lists of sequences")
    json.dump([logits_of(folder, s) for folder, s in zip(folders, sequences)], sys.stdout)


if __name__ == "__main__":
    main()
