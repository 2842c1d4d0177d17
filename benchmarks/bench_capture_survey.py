"""Capture survey: graphs and graph breaks that dynamo's inductor gives on a fresh call of each
model, with the output (inference) or every gradient (training step) checked against eager.

Models: tiny transformers (GPT-2, BERT, T5, Llama, DistilBERT, RoBERTa; GPT-2 also with
`gradient_checkpointing_enable(use_reentrant=False)` in training), torchvision classifiers
(resnet18, mobilenet_v2, vit_b_16-shaped ViT with nn.MultiheadAttention, swin_t, convnext_tiny),
nn.LSTM/GRU, and weight_norm / spectral_norm parametrized linears. One line per model and mode:
`graphs`, `breaks`, `aot` (differentiated graphs), kernels compiled, and `ok` when the values
equal eager's (rtol 1e-4). Usage: `python benchmarks/bench_capture_survey.py [--only NAME ...]`.

`--time N` adds `eager / dynamo`: the steady step time of eager over dynamo's (higher is
faster), each the minimum over N calls after two warm-up calls, eager and dynamo called
alternately, timed as CPU time of this process (`time.process_time`) with torch on one thread
(`--threads`), so that other jobs on a shared machine move the ratio less than wall time would.
A training step is forward, loss and backward, gradients set to None before each.
"""

import argparse
import copy
import time
import warnings

import torch

import dynamo


def _hf():
    import transformers

    transformers.logging.set_verbosity_error()
    t = transformers
    return {
        "gpt2": lambda: t.GPT2LMHeadModel(t.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=32)),
        "gpt2-ckpt": lambda: t.GPT2LMHeadModel(t.GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=64, n_positions=32)),
        "bert": lambda: t.BertForSequenceClassification(t.BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64, vocab_size=64, max_position_embeddings=32)),
        "t5": lambda: t.T5ForConditionalGeneration(t.T5Config(num_layers=2, num_decoder_layers=2, num_heads=2, d_model=32, d_kv=16, d_ff=64, vocab_size=64)),
        "llama": lambda: t.LlamaForCausalLM(t.LlamaConfig(num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, hidden_size=32, intermediate_size=64, vocab_size=64, max_position_embeddings=32)),
        "distilbert": lambda: t.DistilBertForMaskedLM(t.DistilBertConfig(n_layers=2, n_heads=2, dim=32, hidden_dim=64, vocab_size=64, max_position_embeddings=32)),
        "roberta": lambda: t.RobertaForMaskedLM(t.RobertaConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64, vocab_size=64, max_position_embeddings=40)),
    }


def _vision():
    import torchvision

    tv = torchvision.models
    return {
        "resnet18": lambda: tv.resnet18(num_classes=10),
        "mobilenet_v2": lambda: tv.mobilenet_v2(num_classes=10),
        "vit (torchvision)": lambda: tv.VisionTransformer(image_size=32, patch_size=16, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=10),
        "swin_t": lambda: tv.swin_t(num_classes=10),
        "convnext_tiny": lambda: tv.convnext_tiny(num_classes=10),
    }


def _other():
    from torch.nn.utils import parametrizations as P

    return {
        "lstm": lambda: torch.nn.LSTM(8, 16, num_layers=2, batch_first=True),
        "gru": lambda: torch.nn.GRU(8, 16, num_layers=2, batch_first=True),
        "weight_norm": lambda: P.weight_norm(torch.nn.Linear(8, 8)),
        "spectral_norm": lambda: P.spectral_norm(torch.nn.Linear(8, 8)),
    }


def _inputs(name):
    ids = torch.randint(0, 64, (2, 8))
    if name in ("lstm", "gru"):
        return (torch.randn(2, 5, 8),), {}
    if name in ("weight_norm", "spectral_norm"):
        return (torch.randn(4, 8),), {}
    if name == "vit (torchvision)":
        return (torch.randn(2, 3, 32, 32),), {}
    if name in ("resnet18", "mobilenet_v2", "swin_t", "convnext_tiny"):
        return (torch.randn(2, 3, 64, 64),), {}
    kw = {"input_ids": ids, "labels": torch.tensor([0, 1]) if name == "bert" else ids}
    if name == "t5":
        kw["decoder_input_ids"] = ids
    return (), kw


def _loss(out):
    if hasattr(out, "loss") and out.loss is not None:
        return out.loss
    if isinstance(out, tuple):
        out = out[0]
    return out.float().square().mean()


def _first(out):
    if hasattr(out, "logits"):
        return out.logits
    return out[0] if isinstance(out, tuple) else out


def run(name, make, mode, timed=0):
    torch.manual_seed(0)
    model = make()
    if name == "gpt2-ckpt":
        if mode != "train":
            return None
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train(mode == "train")
    ref = copy.deepcopy(model)
    args, kwargs = _inputs(name)
    dynamo.reset()
    try:
        with torch.set_grad_enabled(mode == "train"):
            # The same generator state for both runs: dropout draws the same masks.
            torch.manual_seed(1)
            out = dynamo.optimize("inductor")(model)(*args, **kwargs)
            torch.manual_seed(1)
            want = ref(*args, **kwargs)
            if mode == "train":
                _loss(out).backward()
                _loss(want).backward()
                for (pn, p), q in zip(model.named_parameters(), ref.parameters()):
                    if q.grad is not None:
                        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=pn)
            else:
                torch.testing.assert_close(_first(out), _first(want), rtol=1e-4, atol=1e-5)
        ok = "ok"
    except Exception as e:  # noqa: BLE001 - reported, the survey goes on
        ok = f"{type(e).__name__}: {str(e)[:100]}"
    c = dynamo.counters()
    line = f"| {name} | {mode} | {c['graphs']} | {c['graph_breaks']} | {c['aot_graphs']} | {c['inductor_kernels_compiled']} | {ok} |"
    if timed and ok == "ok":
        line += f" {_steady_ratio(model, dynamo.optimize('inductor')(model), ref, args, kwargs, mode, timed):.2f} |"
    elif timed:
        line += " |"
    return line


def _steady_ratio(model, compiled, ref, args, kwargs, mode, calls):
    """Eager's steady step time over dynamo's (min CPU seconds of `calls` alternating calls)."""

    def step(fn, m):
        m.zero_grad(set_to_none=True)
        with torch.set_grad_enabled(mode == "train"):
            torch.manual_seed(1)
            out = fn(*args, **kwargs)
            if mode == "train":
                _loss(out).backward()

    best = {"eager": float("inf"), "dynamo": float("inf")}
    for k in range(calls + 2):
        for engine, fn, m in (("eager", ref, ref), ("dynamo", compiled, model)):
            t = time.process_time()
            step(fn, m)
            if k >= 2:
                best[engine] = min(best[engine], time.process_time() - t)
    return best["eager"] / best["dynamo"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--time", type=int, default=0, metavar="N", help="also time N steady steps (eager / dynamo)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads while timing (default 1)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    if args.time:
        torch.set_num_threads(args.threads)
    models = {**_hf(), **_vision(), **_other()}
    print(f"torch {torch.__version__}")
    extra = (" eager / dynamo |", " ---: |") if args.time else ("", "")
    print("| model | mode | graphs | breaks | aot graphs | kernels | vs eager |" + extra[0])
    print("| --- | --- | ---: | ---: | ---: | ---: | --- |" + extra[1])
    for name, make in models.items():
        if args.only and name not in args.only:
            continue
        for mode in ("eval", "train"):
            line = run(name, make, mode, args.time)
            if line:
                print(line, flush=True)


if __name__ == "__main__":
    main()
